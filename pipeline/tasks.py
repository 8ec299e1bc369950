"""doit tasks, derived from the stage table (:data:`pipeline.flows.migrate.STAGES`).

``dodo.py`` re-exports :data:`TASKS`. Variables come from the doit command line
(``doit migrate_op op=atan2 root=/path/to/pytorch force=1 dry_run=1 body="..."``; each is
also accepted as ``--op atan2``, which is how ``doit help TASK`` lists them).

Per-operator stages are doit subtasks (``edit:atan2``), so every operator has its own
up-to-date state. An action's error gets its exit status from
:func:`pipeline.errors.failure`, as the CLI's does: 1 (tests fail, work left) becomes
``TaskFailed`` (doit exits 1), 2 (bad input) ``TaskError`` (doit exits 2); Ctrl-C (130) and
a crash (70, its traceback printed first) end the run with that status.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from doit import get_var, task_params
from doit.exceptions import TaskError, TaskFailed

from pipeline.config import Settings
from pipeline.errors import EXIT_INPUT, EXIT_OK, EXIT_WORK_LEFT, Failure, PipelineError, failure
from pipeline.flows.migrate import BY_NAME, STAGES, VARIABLES, Request, Stage
from pipeline.options import OVERRIDABLE

if TYPE_CHECKING:
    from rich.console import Console


def var(name: str, opts: dict[str, str] | None = None) -> str | None:
    """A doit variable: ``name=value`` on the command line, else the task option ``--name``."""
    return get_var(name) or (opts or {}).get(name) or None


# The values a yes/no variable takes (README: `force=1`, `dry_run=1`). Anything else is
# refused: `dry_run=on` taken as "no" would edit the tree the user asked only to preview.
FLAG_VALUES = {"1": True, "0": False}
FLAGS = ("force", "dry_run")


def flag_value(name: str, value: str | None) -> bool:
    """``value`` of the yes/no variable ``name`` (None: not given, no); exit 2 on any other
    value than 1 or 0."""
    if value is None or value == "":
        return False
    if value not in FLAG_VALUES:
        print(f"error: {name}={value}: a yes/no variable takes 1 or 0 ({name}=1)", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)
    return FLAG_VALUES[value]


def flag(name: str, opts: dict[str, str] | None = None) -> bool:
    return flag_value(name, get_var(name) or (opts or {}).get(name))


def settings(opts: dict[str, str] | None = None) -> Settings:
    """Settings from doit variables (root=, python=, state_dir=..., config=FILE), the
    environment and config files; the tree made ready (the sandbox's copy created) before
    any task looks at it."""
    # Keyed on all that resolving reads: the variables, the directory (the checkout around
    # it is the default root) and the MPS_PIPELINE_* environment, so a chdir or a changed
    # variable in the same process never gets another tree's settings.
    return _settings(
        tuple((k, var(k, opts)) for k in OVERRIDABLE),
        var("config", opts),
        os.getcwd(),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("MPS_PIPELINE_"))),
    )


@cache
def _settings(
    overrides: tuple[tuple[str, str | None], ...],
    config: str | None,
    cwd: str,
    env: tuple[tuple[str, str], ...],
) -> Settings:
    from pipeline.workspace import load, prepare

    try:
        # load_settings, or what it resolved last time if nothing it looked at changed
        return prepare(
            load(
                dict(overrides),
                via="doit",
                config_path=Path(config) if config else None,
                cwd=Path(cwd),
            )
        )
    except PipelineError as exc:  # a bad root= or config: say so, no traceback from doit
        _exit(exc)


def _exit(exc: PipelineError) -> NoReturn:
    """End a doit run that cannot start (DOIT_CONFIG or the settings cannot be made) with
    ``exc``'s line and status: raised, doit would print a traceback and exit 3."""
    failed = failure(exc)
    print(f"error: {failed.line}", file=sys.stderr)
    raise SystemExit(failed.code) from None


# Variables of the tasks outside the chain's table.
OTHER_VARIABLES = ("pr", "base", "head")


def check_variables(argv: list[str]) -> None:
    """Refuse a ``name=value`` on the doit command line that no task reads: a mistyped
    ``dryrun=1`` would otherwise edit the tree."""
    known = {*VARIABLES, *OTHER_VARIABLES}
    for arg in argv:
        name, eq, value = arg.partition("=")
        if eq and name in FLAGS:
            flag_value(name, value)
        if eq and not arg.startswith("-") and name.isidentifier() and name not in known:
            import difflib  # only for a mistyped variable

            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {close[0]}=?)" if close else ""
            print(
                f"error: unknown variable {name}={hint}; known: {', '.join(sorted(known))}",
                file=sys.stderr,
            )
            raise SystemExit(EXIT_INPUT)


def doit_config(argv: list[str] | None = None, *, announce: bool = True) -> dict:
    """DOIT_CONFIG for a doit command line (``sys.argv`` when None): the sqlite3 backend
    (dbm/json lose results when two doit processes share it) in the tree's state dir.

    Checks the variables and, with ``announce``, says which tree the run works on.
    """
    from pipeline import workspace

    check_variables(sys.argv[1:] if argv is None else argv)
    resolved = settings()
    if announce:
        workspace.announce(resolved)
    state = resolved.state_dir
    state.mkdir(parents=True, exist_ok=True)
    _check_database(state / "doit.sqlite")
    from pipeline import state as state_layout
    from pipeline.report.doit_reporter import reporter_class

    return {
        "backend": "sqlite3",
        "dep_file": str(state / "doit.sqlite"),
        "verbosity": 2,
        "default_tasks": ["migrate_op"],
        # doit's markers, but failures in our words and the verdict on every run
        "reporter": reporter_class(
            lambda op: state_layout.op_files(resolved, op).summary, on_sandbox=resolved.is_sandbox
        ),
    }


def _check_database(path: Path) -> None:
    """Exit 2 naming doit's database when it is no SQLite file (doit would print its own
    traceback-like message and exit 3, a code this command keeps for bad doit command lines)."""
    if not path.exists():
        return
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            (result,) = db.execute("PRAGMA quick_check").fetchone()
        if result != "ok":
            raise sqlite3.DatabaseError(result)
    except sqlite3.DatabaseError as exc:
        _exit(
            PipelineError(
                f"{path}: doit's database is damaged ({exc}); delete it (the next run "
                "re-checks every task and re-runs what is not up to date)"
            )
        )


def run_doit(argv: list[str], *, announce: bool = True) -> int:
    """Run doit's command line ``argv`` (``migrate_op op=atan2``, ``help edit``, ``list``) on
    these tasks, in-process: doit from any directory, without a dodo.py there."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    # doit's `run` writes to the sys.stdout of when doit was imported (an option default):
    # in-process, that must be today's
    main = DoitMain(extra_config={"run": {"outfile": sys.stdout}})
    main.BIN_NAME = "mps-pipeline doit"  # doit's hints say `<BIN_NAME> help`, `... list`
    # doit sets its variables from the command line when it runs, but DOIT_CONFIG (the
    # settings, the database's place) is read first: it must see this command line's
    # variables, not those a previous run in this process left.
    main.process_args(argv)
    main.task_loader = ModuleTaskLoader(
        {**TASKS, "DOIT_CONFIG": doit_config(argv, announce=announce)}
    )
    try:
        return main.run(argv)
    finally:
        from pipeline.flows.hold import release_tree

        release_tree()  # the chain's tree lock (hold_tree), for the next run in this process


def _params(names: tuple[str, ...]) -> list[dict]:
    """doit task params for ``names``: what `doit help TASK` lists, one line each."""
    return [{"name": n, "long": n, "type": str, "default": "", "help": VARIABLES[n]} for n in names]


def guarded(
    fn: Callable[[Console], None], name: str, *, lazy: bool = False
) -> Callable[[], object]:
    """A doit action running ``fn(console)``: errors become doit's failures, no tracebacks.

    ``lazy``: the console is made on first use (see ``Stage.lazy_console``)."""

    def action() -> object:
        from pipeline.report.console import LazyTerminal, terminal

        console: Console = LazyTerminal() if lazy else terminal()  # type: ignore[assignment]
        try:
            fn(console)
        except (Exception, KeyboardInterrupt) as exc:
            return _doit_result(failure(exc, where=name))
        return None

    return action


def _doit_result(failed: Failure) -> object:
    """What a doit action returns for a failure (doit exits 1 for ``TaskFailed``, 2 for
    ``TaskError``); any other status ends the run with it, as the CLI would."""
    if failed.code == EXIT_OK:
        return None
    if failed.code == EXIT_WORK_LEFT:
        return TaskFailed(failed.line)
    if failed.code == EXIT_INPUT:
        return TaskError(failed.line)
    print(f"\n{failed.line}", file=sys.stderr)
    raise SystemExit(failed.code)


def _asked() -> set[str]:
    """The task names the user typed on the doit command line (``edit:atan2`` is ``edit``)."""
    return {a.split(":")[0] for a in sys.argv[1:]}


def _explicitly_requested(name: str) -> bool:
    """True when the user typed this task on the doit command line (not via a dependency)."""
    return name in _asked()


# the stages that run the build and the tests after the edit, directly or through a later one
_PAST_EDIT = frozenset({"build", "test_op", "table", "drop_xfails", "summary", "migrate_op"})


def _past_edit_requested() -> bool:
    """True unless the command line asks only for stages up to the edit (``--stage edit``)."""
    asked = _asked() & set(BY_NAME)
    return not asked or bool(asked & _PAST_EDIT)


def _failing(message: str) -> dict:
    return {"actions": [lambda: TaskError(message)], "uptodate": [False]}


def _task(stage: Stage) -> Callable[[], dict | Iterator[dict]]:
    """The doit task creator of one stage.

    A two-line function: doit reads every creator's source to order the tasks
    (``inspect.getsourcelines``, a tokenizer run over the whole body), so the body is
    :func:`_create`'s, which doit never reads."""

    def create(**opts: str) -> dict | Iterator[dict]:
        return _create(stage, opts)

    create.__name__ = f"task_{stage.name}"
    create.__doc__ = stage.doc
    # doit's creator params: parsed from `--op atan2` and listed by `doit help TASK`
    return task_params(_params(stage.all_variables))(create)


def _create(stage: Stage, opts: dict[str, str]) -> dict | Iterator[dict]:
    """The task (or subtasks) of one stage, for this doit command line."""
    op = var("op", opts)
    if stage.per_op and op is None:
        return _failing(f"{stage.name} needs an operator: doit {stage.name} op=atan2")
    if op is not None:
        from pipeline.state import op_files

        try:
            op_files(settings(opts), op)  # a name no folder can be made of: say so now
        except PipelineError as exc:
            return _failing(str(exc))
    request = Request(
        settings(opts),
        op or "",
        force=flag("force", opts),
        dry_run=flag("dry_run", opts),
        body=var("body", opts),
        host_body=var("host_body", opts),
        past_edit=_past_edit_requested(),
    )
    task = {
        "task_dep": [f"{dep}:{op}" if _per_op(dep) and op else dep for dep in stage.after(request)],
        "verbosity": 2,
        **_work(stage, request),
    }
    if not stage.per_op or op is None:  # a per-op stage without one failed above
        return task
    return _subtasks(stage, op, task)


def _work(stage: Stage, request: Request) -> dict[str, object]:
    """The actions, files and up-to-date rules of ``stage``'s task; a stage without an
    action only orders others."""
    if stage.action is None:
        return {"actions": None}
    action = stage.action

    def run(console: Console) -> None:
        from pipeline.flows.hold import hold_tree

        # until this doit run ends; a dry run recovers nothing (it writes nothing)
        hold_tree(request.settings, console, recover=not request.dry_run)
        action(request, console)

    return {
        "actions": [guarded(run, stage.name, lazy=stage.lazy_console)],
        "file_dep": [str(p) for p in stage.inputs(request)],
        "targets": [str(p) for p in stage.outputs(request)],
        "uptodate": _uptodate(stage, request),
    }


def _uptodate(stage: Stage, request: Request) -> list[object]:
    if stage.uptodate is None:
        return [False]
    if stage.rerun_when_asked and _explicitly_requested(stage.name):
        return [False]  # asked for: it runs, its rules unasked (the audit's hash)
    rules = stage.uptodate(request)
    return [True, *rules] if stage.rerun_when_asked else list(rules)


def _subtasks(stage: Stage, op: str, task: dict) -> Iterator[dict]:
    # One subtask per operator carries the work and its own up-to-date state.
    yield {"basename": stage.name, "name": None, "doc": stage.doc}
    yield {**task, "name": op}


def _per_op(name: str) -> bool:
    return BY_NAME[name].per_op


def task_backlog() -> dict:
    """Operators still on MPSGraph or without MPS, easiest first."""

    def run(console: Console) -> None:
        from pipeline.guide.backlog import backlog
        from pipeline.report.guide import render_backlog
        from pipeline.tree.index import load_index

        render_backlog(backlog(load_index(settings().tree)), console)

    return {"actions": [guarded(run, "backlog")], "uptodate": [False], "verbosity": 2}


def task_pr_report() -> dict:
    """pr=N: the PR's affected operators, built if needed and tested, in one PR comment."""
    pr = var("pr")
    if pr is None:
        return _failing("pr_report needs a PR number: doit pr_report pr=123")
    base, head, dry_run = var("base"), var("head"), flag("dry_run")

    def run(_console: Console) -> None:
        from pipeline.flows import pr as pr_report

        pr_report.report(settings(), pr_report.pr_number(pr), base=base, head=head, dry_run=dry_run)

    return {"actions": [guarded(run, "pr_report")], "uptodate": [False], "verbosity": 2}


def task_affected() -> dict:
    """base=REV [head=REV]: the operators and consistency tests a diff affects, and why."""
    base = var("base")
    if base is None:
        return _failing("affected needs a base: doit affected base=main")
    head = var("head")

    def run(console: Console) -> None:
        from pipeline.impact import diff_impact
        from pipeline.report.impact import render_text

        console.print(
            render_text(diff_impact(settings(), base, head)), markup=False, highlight=False
        )

    return {"actions": [guarded(run, "affected")], "uptodate": [False], "verbosity": 2}


# Every task dodo.py exports: the chain's stages, then the other commands.
TASKS: dict[str, Callable[[], dict | Iterator[dict]]] = {
    **{f"task_{s.name}": _task(s) for s in STAGES},
    "task_backlog": task_backlog,
    "task_pr_report": task_pr_report,
    "task_affected": task_affected,
}
