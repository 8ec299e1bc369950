"""The doit reporter on real doit runs (in-process DoitMain over a module of tasks): what a
person reads when a stage fails, crashes, or was up to date."""

from __future__ import annotations

import io
from pathlib import Path

from doit.cmd_base import ModuleTaskLoader
from doit.doit_cmd import DoitMain
from doit.exceptions import TaskError, TaskFailed

from pipeline.report.doit_reporter import MARKERS, failure_line, one_line, reporter_class, verdict


def _run(
    tasks: dict, tmp_path: Path, summaries: dict[str, Path], *argv: str, on_sandbox: bool = False
):
    out, err = io.StringIO(), io.StringIO()
    config = {
        "backend": "sqlite3",
        "dep_file": str(tmp_path / "doit.sqlite"),
        "verbosity": 2,
        "reporter": reporter_class(summaries.__getitem__, err=err, on_sandbox=on_sandbox),
    }
    main = DoitMain(
        ModuleTaskLoader({**tasks, "DOIT_CONFIG": config}), extra_config={"run": {"outfile": out}}
    )
    try:
        code = main.run(list(argv))
    except SystemExit as exc:  # how the reporter makes a crash exit 70
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def _summary_task(path: Path, text: str, *, fail: object = None):
    def write() -> object:
        path.write_text(text)
        return fail

    def task_summary():
        yield {"basename": "summary", "name": None}
        yield {"name": "atan2", "actions": [write], "targets": [str(path)], "uptodate": [True]}

    return task_summary


def test_a_run_and_a_no_op_run_end_with_the_verdict_and_the_path(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    text = "# atan2\n\n- tests: pass 9\n\nEvery checklist item passes.\nNext: review it.\n"
    tasks = {"task_summary": _summary_task(summary, text)}
    for marker in (".  summary:atan2", "-- summary:atan2"):  # ran, then up to date
        code, out, err = _run(tasks, tmp_path, {"atan2": summary}, "summary")
        assert (code, err) == (0, "")
        assert out == (
            f"{marker}\nverdict: atan2: Every checklist item passes. Next: review it.\n"
            f"summary: {summary}\n"
        )


def test_on_the_bundled_sandbox_the_verdict_line_itself_says_so(tmp_path: Path) -> None:
    # issue 28: someone who meant to stand in their checkout must not read a green verdict
    # about the sandbox as being about it; the one stderr line of the run is not enough
    summary = tmp_path / "summary.md"
    text = "# atan2\n\nEvery checklist item passes.\nNext: review it.\n"
    tasks = {"task_summary": _summary_task(summary, text)}
    for _ in range(2):  # ran, then up to date
        code, out, _ = _run(tasks, tmp_path, {"atan2": summary}, "summary", on_sandbox=True)
        assert code == 0
        assert out.splitlines()[1] == (
            "verdict (on the bundled sandbox, not a checkout of yours): atan2: Every "
            "checklist item passes. Next: review it."
        )


def test_a_failed_stage_is_one_line_on_stderr_with_what_to_do(tmp_path: Path) -> None:
    def task_build():
        message = "build failed: K.mm:3: error: x (building lib)\nfull log: /s/logs/build.log"
        return {"actions": [lambda: TaskFailed(message)], "uptodate": [False]}

    code, out, err = _run({"task_build": task_build}, tmp_path, {}, "build")
    assert code == 1
    assert out == ".  build\n"
    assert err == (
        "failed: the build: build failed: K.mm:3: error: x (building lib); full log: "
        "/s/logs/build.log; fix that error, then run the same command again (only what "
        "changed is rebuilt)\n"
    )


def test_an_input_error_names_the_stage_and_operator(tmp_path: Path) -> None:
    def task_audit():
        yield {"basename": "audit", "name": None}
        yield {"name": "zz", "actions": [lambda: TaskError("unknown operator 'zz'")]}

    code, out, err = _run({"task_audit": task_audit}, tmp_path, {}, "audit")
    assert code == 2 and out == ".  audit:zz\n"
    assert err == "error: the checklist of zz: unknown operator 'zz'\n"
    assert "taskid" not in out + err


def test_a_crash_says_it_is_a_bug_and_keeps_the_traceback(tmp_path: Path) -> None:
    def broken() -> None:
        raise RuntimeError("index out of step")

    def task_table():
        return {"actions": [broken], "uptodate": [False]}

    code, _, err = _run({"task_table": task_table}, tmp_path, {}, "table")
    assert code == 70  # a bug, as in the CLI: never doit's 2 ("bad input")
    first, *rest = err.splitlines()
    assert first == (
        "error: the pass table crashed, a bug in mps-pipeline: RuntimeError: index out of "
        "step; please report it with the traceback below"
    )
    assert "Traceback (most recent call last):" in rest and "in broken" in err


def test_a_missing_input_file_is_one_line(tmp_path: Path) -> None:
    def task_table():
        return {"actions": [lambda: None], "file_dep": [str(tmp_path / "junit.xml")]}

    code, out, err = _run({"task_table": task_table}, tmp_path, {}, "table")
    assert code == 2 and out == ""
    assert err == (
        "error: the pass table: Task 'table' checking dependencies: Dependent file "
        f"'{tmp_path / 'junit.xml'}' does not exist.\n"
    )


def test_doits_own_run_errors_are_one_line_each_and_no_verdict_follows() -> None:
    err = io.StringIO()
    out = io.StringIO()
    reporter = reporter_class(lambda op: Path("unused"), err=err)(out, {})
    reporter.runtime_error("Cyclic/recursive dependencies for task b:\n[b -> c -> b]")
    reporter.complete_run()
    assert err.getvalue() == (
        "error: doit: Cyclic/recursive dependencies for task b:; [b -> c -> b]\n"
    )
    assert out.getvalue() == ""


def test_helpers() -> None:
    assert one_line("a\n\n  b  \n") == "a; b"
    assert failure_line("edit:exp2", TaskFailed("exp2: write it; then run again")) == (
        "failed: the edits of exp2: exp2: write it; then run again"
    )
    assert "`.  STAGE`" in MARKERS and "`-- STAGE`" in MARKERS
    assert verdict(Path("/nonexistent/summary.md")) is None
