"""pipeline/run/progress.py: streaming real processes into a log; the progress displays."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.run.progress import progress_display, stream, strip_ansi
from tests.run.procs import gone


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_stream_writes_log_and_lines(tmp_path: Path) -> None:
    seen: list[str] = []
    log = tmp_path / "sub" / "run.log"
    code = (
        "import os, sys; print('one'); print('two', file=sys.stderr); "
        "print(os.environ['PROBE']); sys.stdout.write('no newline')"
    )
    outcome = stream(
        python(code),
        cwd=tmp_path,
        log_path=log,
        timeout=30,
        on_line=seen.append,
        env={"PROBE": "env-ok", "PYTHONUNBUFFERED": "1"},
    )
    assert outcome.returncode == 0 and not outcome.timed_out
    assert sorted(seen) == sorted(["one", "two", "env-ok", "no newline"])
    text = log.read_text()
    assert text.startswith(f"$ {sys.executable} -c ")
    assert text.endswith("no newline")


def test_stream_appends_and_reports_exit_code(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    stream(python("print('first')"), cwd=tmp_path, log_path=log, timeout=None, on_line=print)
    outcome = stream(
        python("import sys; print('second'); sys.exit(3)"),
        cwd=tmp_path,
        log_path=log,
        timeout=None,
        on_line=lambda line: None,
        append=True,
    )
    assert outcome.returncode == 3
    lines = log.read_text().splitlines()
    assert lines[1] == "first" and lines[-1] == "second" and len(lines) == 4


def test_stream_keeps_undecodable_bytes(tmp_path: Path) -> None:
    seen: list[str] = []
    code = "import sys; sys.stdout.buffer.write(b'caf\\xe9 error\\n')"
    stream(python(code), cwd=tmp_path, log_path=tmp_path / "l", timeout=30, on_line=seen.append)
    assert seen == ["caf\ufffd error"]
    assert (tmp_path / "l").read_bytes().endswith(b"caf\xe9 error\n")


@pytest.mark.slow
def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # The child starts a grandchild that would outlive a plain kill of the child.
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print(p.pid, flush=True); time.sleep(60)"
    )
    seen: list[str] = []
    started = time.monotonic()
    outcome = stream(
        python(code), cwd=tmp_path, log_path=tmp_path / "l", timeout=1.0, on_line=seen.append
    )
    assert time.monotonic() - started < 10
    assert outcome.timed_out and outcome.returncode < 0
    assert gone(int(seen[0]))


def test_exception_in_callback_stops_the_process(tmp_path: Path) -> None:
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    pids: list[int] = []

    def on_line(line: str) -> None:
        pids.append(int(line))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stream(python(code), cwd=tmp_path, log_path=tmp_path / "l", timeout=30, on_line=on_line)
    assert gone(pids[0])


def test_missing_executable_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        stream(
            ("no-such-tool-4711",),
            cwd=tmp_path,
            log_path=tmp_path / "l",
            timeout=5,
            on_line=print,
        )


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[1;31merror:\x1b[0m x") == "error: x"
    assert strip_ansi("plain") == "plain"


def test_disabled_display_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_display("build", False) as bar:
        for i in range(1, 11):
            bar.update(i, 10, "step")
    assert capsys.readouterr() == ("", "")


def test_plain_lines_once_per_tenth() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    with progress_display("tests", True, console=console) as bar:
        bar.update(0, None, "collecting")  # total unknown: nothing to say yet
        for i in range(1, 201):
            bar.update(i, 200, "pass 3")
    lines = out.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[0] == "tests:  10% (20/200) pass 3"
    assert lines[-1] == "tests: 100% (200/200) pass 3"


def test_rich_bar_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with progress_display("build", True, console=console) as bar:
        bar.update(7, 9, "Building [OBJCXX] " + "x" * 200)  # brackets are not markup
    text = strip_ansi(out.getvalue())
    assert "build" in text and "7/9" in text and "Building [OBJCXX]" in text
    assert "x" * 200 not in text
