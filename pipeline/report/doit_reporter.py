"""What a doit run of the chain says to a person (DOIT_CONFIG's ``reporter``).

doit's own progress markers stay, since they are short and scripts read them: ``.  STAGE``
(the stage ran) and ``-- STAGE`` (up to date: nothing to do); :data:`MARKERS` says so once,
for ``--help`` and the README. What changes is the rest of doit's words:

- a failure is one line on stderr, in our words, with what to do next: ``failed: the build:
  ...`` (work left, exit 1) or ``error: audit atan2: ...`` (bad input, exit 2), never
  ``TaskFailed - taskid:build``; a bug in a stage (a traceback) says it is one, keeps the
  traceback and makes the run exit 70, as :func:`pipeline.errors.failure` says a crash does;
- every run that reaches an operator's summary ends with its verdict and the path of
  ``summary.md``, so a no-op run (every stage ``--``) still answers; on the bundled sandbox
  the verdict's line says so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from doit.exceptions import BaseFail, TaskFailed, UnmetDependency
from doit.reporter import ConsoleReporter

from pipeline.errors import EXIT_CRASHED
from pipeline.report.summary import closing

MARKERS = "`.  STAGE`: the stage ran; `-- STAGE`: it was up to date, nothing to do"

# what a stage is, as a person says it
STAGE_WORDS = {
    "audit": "the checklist",
    "edit": "the edits",
    "check_math": "the math check",  # main's stage between edit and build (issue 17)
    "build": "the build",
    "test_op": "the tests",
    "table": "the pass table",
    "drop_xfails": "dropping the xfails",
    "summary": "the summary",
}
# what to do when a stage leaves work (exit 1), unless its message says it already
NEXT_STEP = {
    "build": "fix that error, then run the same command again (only what changed is rebuilt)",
    "edit": "write the pieces listed above (or pass body= / host_body=), then run again",
    "drop_xfails": "the xfails were kept; look at the failing tests in that report",
    "summary": "fix what summary.md lists, then run the same command again",
}
SUMMARY_STAGE = "summary"
# said in the verdict's own line when the run worked on the bundled sandbox: someone who
# meant to stand in their checkout must not read a green verdict as being about it
ON_SANDBOX = "on the bundled sandbox, not a checkout of yours"


def task_words(name: str) -> str:
    """``build`` -> "the build"; ``audit:atan2`` -> "the checklist of atan2"."""
    stage, _, op = name.partition(":")
    words = STAGE_WORDS.get(stage, stage)
    return f"{words} of {op}" if op else words


def one_line(message: str) -> str:
    """A message of several lines (``build failed: ...\\nfull log: ...``) as one."""
    text = "; ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    return text.removeprefix("ERROR: ")  # doit's own shouting


def failure_line(name: str, fail: BaseFail) -> str:
    """The one line a failed task gets."""
    stage = name.partition(":")[0]
    message = one_line(fail.message or "")
    if isinstance(fail, UnmetDependency):
        return f"skipped: {task_words(name)}, because a stage it needs did not finish"
    if fail.traceback:  # an exception we did not raise on purpose
        last = one_line(fail.traceback[-1] if fail.traceback else message)
        return (
            f"error: {task_words(name)} crashed, a bug in mps-pipeline: {last}; "
            "please report it with the traceback below"
        )
    if isinstance(fail, TaskFailed):
        hint = NEXT_STEP.get(stage)
        done = hint is None or "run again" in message or "re-run" in message
        return f"failed: {task_words(name)}: {message}" + ("" if done else f"; {hint}")
    return f"error: {task_words(name)}: {message}"


def verdict(summary_md: Path) -> str | None:
    """The closing paragraph of a summary.md (its verdict and next step), as one line."""
    try:
        text = summary_md.read_text(encoding="utf-8")
    except OSError:
        return None
    return closing(text)[1]


def verdict_line(op: str, said: str, *, on_sandbox: bool = False) -> str:
    """``verdict: atan2: ...``, or ``verdict (on the bundled sandbox, ...): atan2: ...``."""
    where = f" ({ON_SANDBOX})" if on_sandbox else ""
    return f"verdict{where}: {op}: {said}"


def reporter_class(
    summary_of: Callable[[str], Path], err: TextIO | None = None, *, on_sandbox: bool = False
) -> type[ConsoleReporter]:
    """A doit reporter class whose verdicts read ``summary_of(op)`` (summary.md's path).

    ``err`` is where failures go (default: sys.stderr when they happen); ``on_sandbox``:
    the run works on the bundled sandbox, which each verdict line says.
    """

    class Reporter(ConsoleReporter):
        desc = "mps-pipeline: doit's markers, failures in one line, the verdict at the end"

        def __init__(self, outstream: TextIO, options: dict[str, Any]) -> None:
            super().__init__(outstream, options)
            self.summaries: list[str] = []
            self.crashed = False  # an exception doit caught outside our guarded actions

        def _err(self, text: str) -> None:
            stream = err or sys.stderr
            self.outstream.flush()  # keep it after the progress lines it follows
            stream.write(text)
            stream.flush()

        def _reached_summary(self, task: Any) -> None:
            stage, _, op = task.name.partition(":")
            if stage == SUMMARY_STAGE and op and op not in self.summaries:
                self.summaries.append(op)

        def add_success(self, task: Any) -> None:
            self._reached_summary(task)

        def skip_uptodate(self, task: Any) -> None:
            super().skip_uptodate(task)
            self._reached_summary(task)

        def add_failure(self, task: Any, fail: BaseFail) -> None:
            if not fail.report:
                return
            self.failures.append({"task": task, "exception": fail})
            self._err(failure_line(task.name, fail) + "\n")
            if fail.traceback:
                self._err("".join(fail.traceback))
                self.crashed = True

        def cleanup_error(self, exception: BaseFail) -> None:
            self._err(f"error: cleaning up after the run: {one_line(exception.get_msg())}\n")

        def complete_run(self) -> None:
            for message in self.runtime_errors:  # doit's own: a task it cannot find, a cycle
                self._err(f"error: doit: {one_line(message)}\n")
            if self.crashed:  # a bug is exit 70 in doit as in the CLI, never doit's 2
                raise SystemExit(EXIT_CRASHED)
            if self.failures or self.runtime_errors:
                return
            for op in self.summaries:
                path = summary_of(op)
                said = verdict(path)
                if said is not None:
                    line = verdict_line(op, said, on_sandbox=on_sandbox)
                    self.write(f"{line}\nsummary: {path}\n")

    return Reporter
