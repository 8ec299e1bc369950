"""One error path: :func:`pipeline.errors.failure` gives the CLI and the doit tasks the same
exit status and line for the same exception; a bug is exit 70 everywhere."""

from __future__ import annotations

import errno

import pytest
from doit.exceptions import TaskError, TaskFailed

from pipeline import tasks
from pipeline.__main__ import main
from pipeline.commands import config as config_command
from pipeline.errors import (
    EXIT_CRASHED,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_WORK_LEFT,
    Failure,
    UnknownOperatorError,
    WorkLeftError,
    failure,
)


def test_each_kind_of_exception_has_one_status_and_line(capsys) -> None:
    assert failure(WorkLeftError("2 tests fail")) == Failure(EXIT_WORK_LEFT, "2 tests fail")
    assert failure(UnknownOperatorError("zz", [])).code == EXIT_INPUT
    full = OSError(errno.ENOSPC, "No space left on device", "/state/x.json")
    assert failure(full) == Failure(EXIT_INPUT, "/state/x.json: No space left on device")
    assert failure(BrokenPipeError()).code == EXIT_OK
    assert failure(KeyboardInterrupt(), where="build") == Failure(
        EXIT_INTERRUPTED,
        "interrupted during build: no file was left half-written",
    )
    assert capsys.readouterr().err == ""  # none of those is a bug: no traceback


def test_a_bug_is_exit_70_with_its_traceback_printed_first(capsys) -> None:
    try:
        1 / 0  # noqa: B018 - the bug
    except ZeroDivisionError as exc:
        crashed = failure(exc, where="the pass table")
    assert crashed.code == EXIT_CRASHED
    assert crashed.line.startswith(
        "crashed during the pass table: unexpected ZeroDivisionError, a bug in mps-pipeline "
        "(the traceback is above; please report it)"
    )
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "1 / 0" in err


def test_a_bug_in_a_command_is_exit_70_not_1(monkeypatch, capsys) -> None:
    def broken(*_args: object) -> int:
        return len([]) // 0

    monkeypatch.setattr(config_command, "run", broken)
    assert main(["config"]) == EXIT_CRASHED
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and "error: crashed: unexpected ZeroDivisionError" in err


def test_a_doit_action_gets_the_same_statuses(capsys) -> None:
    def raising(exc: BaseException):
        def fn(_console: object) -> None:
            raise exc

        return tasks.guarded(fn, "build")

    assert isinstance(raising(WorkLeftError("the build failed"))(), TaskFailed)  # doit: 1
    bad = raising(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x"))()
    assert isinstance(bad, TaskError) and bad.message == "/x: No such file or directory"
    for exc, code in ((RuntimeError("a bug"), EXIT_CRASHED), (KeyboardInterrupt(), 130)):
        with pytest.raises(SystemExit) as ended:
            raising(exc)()
        assert ended.value.code == code
    err = capsys.readouterr().err
    assert "crashed during build: unexpected RuntimeError" in err and "Traceback" in err
    assert "interrupted during build: no file was left half-written" in err
