"""doit tasks: the stages of ``pipeline.commands.migrate`` with real file dependencies.

``dodo.py`` re-exports this module. Variables come from the doit command line
(``doit migrate_op op=atan2 root=/path/to/pytorch force=1 dry_run=1 body="..."``).

The chain is edit → build → test_op → table → drop_xfails → summary (``migrate_op``).
Each stage's file_dep lists exactly the inputs that can change its result, so a change to
Python test files never reaches ``build``, and a second run with nothing changed is a no-op.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from doit import get_var
from doit.exceptions import TaskFailed

from pipeline import state
from pipeline.config import OVERRIDABLE, Settings, load_settings
from pipeline.errors import PipelineError
from pipeline.tree import files, paths

if TYPE_CHECKING:
    from rich.console import Console


@cache
def settings() -> Settings:
    """Settings from doit variables (root=, python=, state_dir=...), the env and configs/."""
    try:
        return load_settings({k: get_var(k) for k in OVERRIDABLE})
    except PipelineError as exc:  # a bad root= or config: say so, no traceback from doit
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc


def doit_config(state_dir: Path | None = None) -> dict:
    """DOIT_CONFIG: sqlite3 backend (dbm/json lose results when two doit processes share it)."""
    state = state_dir or settings().state_dir
    state.mkdir(parents=True, exist_ok=True)
    return {
        "backend": "sqlite3",
        "dep_file": str(state / "doit.sqlite"),
        "verbosity": 2,
        "default_tasks": ["migrate_op"],
    }


def _flag(name: str) -> bool:
    return (get_var(name) or "0").lower() in ("1", "true", "yes")


def _opinfo_files() -> list[str]:
    table = settings().opinfo_table
    return [str(table)] if table is not None and table.is_file() else []


def _guard(
    fn: Callable[[ModuleType, Console], object], module: str = "pipeline.commands.migrate"
) -> Callable[[], object]:
    """A doit action running ``fn(module, console)``; a PipelineError becomes TaskFailed.

    The stage's module is imported only when the stage really runs: an up-to-date `doit`
    run never pays for libcst, the runners and the renderers.
    """

    def action() -> object:
        from pipeline.report.console import terminal

        try:
            fn(importlib.import_module(module), terminal())
        except PipelineError as exc:
            return TaskFailed(str(exc))
        return None

    return action


def _explicitly_requested(name: str) -> bool:
    """True when the user typed this task on the doit command line (not via a dependency)."""
    return name in (a.split(":")[0] for a in sys.argv[1:])


def _op() -> str | None:
    return get_var("op")


def _needs(message: str) -> dict:
    """A task that fails with ``message``: a doit variable it needs was not given."""
    return {"actions": [lambda: TaskFailed(message)], "uptodate": [False]}


def _need_op(name: str) -> dict:
    return _needs(f"{name} needs an operator: doit {name} op=atan2")


def task_audit() -> dict:
    """The metal-kernel guide's checklist for op=NAME (always printed when asked for)."""
    op = _op()
    if op is None:
        return _need_op("audit")
    s = settings()
    digest = state.op_dir(s, op) / "audit.digest"
    return {
        "actions": [_guard(lambda m, c: m.record_audit(s, op, c), "pipeline.commands.audit")],
        "targets": [str(state.op_dir(s, op) / "audit.json")],
        # By content digest rather than file_dep: the edit and drop_xfails stages re-record
        # the audit after they write, so the chain's own edits do not make it stale.
        "uptodate": [
            not _explicitly_requested("audit"),
            lambda: digest.is_file() and digest.read_text() == state.inputs_digest(s),
        ],
        "verbosity": 2,
    }


def task_backlog() -> dict:
    """Operators still on MPSGraph or without MPS, easiest first."""
    s = settings()

    def action() -> None:
        # imported here, as in _guard: only this task needs them
        from pipeline.commands import backlog
        from pipeline.report.console import terminal
        from pipeline.tree.index import load_index

        backlog.render(backlog.backlog(load_index(s)), terminal())

    return {"actions": [action], "uptodate": [False], "verbosity": 2}


def task_edit() -> dict:
    """Fold op=NAME's dispatch, remove its MPSGraph code, register its stub (after audit)."""
    op = _op()
    if op is None:
        return _need_op("edit")
    s = settings()
    force, body = _flag("force"), get_var("body")
    return {
        "actions": [_guard(lambda m, c: m.stage_edit(s, op, c, force=force, body=body))],
        "file_dep": [str(p) for p in state.edit_inputs(s)],
        "task_dep": ["audit"],
        "targets": [str(state.op_dir(s, op) / "edit.json")],
        "verbosity": 2,
    }


def task_preview() -> dict:
    """The checklist and unified diffs of every edit op=NAME would get; writes nothing."""
    op = _op()
    if op is None:
        return _need_op("preview")
    s = settings()
    body = get_var("body")

    def stage(migrate: ModuleType, console: Console) -> None:
        migrate.audit.record_audit(s, op, console)
        migrate.stage_edit(s, op, console, dry_run=True, body=body)

    return {"actions": [_guard(stage)], "uptodate": [False], "verbosity": 2}


def task_build() -> dict:
    """`ninja -C build torch_cpu`, only when a build input (.metal, .mm, .h, yaml) changed."""
    s = settings()
    task = {
        "actions": [_guard(lambda m, c: m.stage_build(s, c))],
        "file_dep": [str(p) for p in state.build_inputs(s)],
        "targets": [str(state.build_stamp(s))],
        "verbosity": 2,
    }
    op = _op()
    if op is not None and not _flag("dry_run"):
        task["task_dep"] = ["edit"]
    return task


def task_test_op() -> dict:
    """Run op=NAME's consistency tests (JUnit), when the build or its expectations changed."""
    op = _op()
    if op is None:
        return _need_op("test_op")
    s = settings()
    test_file = s.root / s.test_file
    return {
        "actions": [_guard(lambda m, c: m.stage_test(s, op, c))],
        "file_dep": [str(state.build_stamp(s))]
        + ([str(test_file)] if test_file.is_file() else [])
        + _opinfo_files(),
        "targets": [str(state.op_dir(s, op) / "junit.xml")],
        # common_mps.py is tracked by content of *this operator's* entries, not by file hash:
        # dropping another operator's xfails must not re-run these tests.
        "uptodate": [lambda: state.expectations_current(s, op)],
        "verbosity": 2,
    }


def task_table() -> dict:
    """Per-dtype pass table of op=NAME from its JUnit results (terminal, Markdown, JSON)."""
    op = _op()
    if op is None:
        return _need_op("table")
    s = settings()
    d = state.op_dir(s, op)
    return {
        "actions": [_guard(lambda m, c: m.stage_table(s, op, c))],
        "file_dep": [str(d / "junit.xml")],
        "targets": [str(d / "table.json"), str(d / "table.md")],
        "uptodate": [not _explicitly_requested("table")],
        "verbosity": 2,
    }


def task_drop_xfails() -> dict:
    """Remove op=NAME's xfail entries that now pass, verified by a re-run of its tests."""
    op = _op()
    if op is None:
        return _need_op("drop_xfails")
    s = settings()
    d = state.op_dir(s, op)
    force = _flag("force")
    return {
        "actions": [_guard(lambda m, c: m.stage_drop(s, op, c, force=force))],
        "file_dep": [str(d / "table.json")] + [str(p) for p in files(s.root, (paths.COMMON_MPS,))],
        "targets": [str(d / "xfails.json")],
        "verbosity": 2,
    }


def task_summary() -> dict:
    """What changed, what the checklist still lacks, and the next command to run."""
    op = _op()
    if op is None:
        return _need_op("summary")
    s = settings()
    d = state.op_dir(s, op)
    return {
        "actions": [_guard(lambda m, c: m.stage_summary(s, op, c))],
        "file_dep": [str(d / n) for n in ("edit.json", "table.json", "xfails.json")]
        + [str(state.build_stamp(s))],
        "targets": [str(d / "summary.md")],
        "verbosity": 2,
    }


def task_migrate_op() -> Iterator[dict] | dict:
    """The whole guide for op=NAME: edit, build, test, table, drop xfails, summary."""
    if _op() is None:
        return _need_op("migrate_op")
    deps = ["preview"] if _flag("dry_run") else ["summary"]
    return {"actions": None, "task_dep": deps}


def task_pr_report() -> dict:
    """pr=N: the PR's affected operators, built if needed and tested, in one PR comment."""
    pr = get_var("pr")
    if pr is None:
        return _needs("pr_report needs a PR number: doit pr_report pr=123")
    s = settings()
    base, head, dry_run = get_var("base"), get_var("head"), _flag("dry_run")

    def stage(pr_report: ModuleType, _console: Console) -> None:
        pr_report.report(s, pr_report.pr_number(pr), base=base, head=head, dry_run=dry_run)

    return {
        "actions": [_guard(stage, "pipeline.report.pr")],
        "uptodate": [False],
        "verbosity": 2,
    }


def task_affected() -> dict:
    """base=REV [head=REV]: the operators and consistency tests a diff affects, and why."""
    base = get_var("base")
    if base is None:
        return _needs("affected needs a base: doit affected base=main")
    s = settings()
    head = get_var("head")

    def stage(impact: ModuleType, console: Console) -> None:
        from pipeline.report.impact import render_text

        console.print(render_text(impact.diff_impact(s, base, head)), markup=False, highlight=False)

    return {
        "actions": [_guard(stage, "pipeline.impact")],
        "uptodate": [False],
        "verbosity": 2,
    }
