"""The one declaration of the migrate chain: each stage's name, action, inputs, outputs and
up-to-date rule. The doit tasks, the CLI's ``--stage`` choices and dodo.py's exports are all
derived from :data:`STAGES`.

doit imports this on every start-up: it imports only the light modules (settings, state
layout, paths); a stage's action imports :mod:`pipeline.flows.stages` when it really runs.
What a run was asked to do is a :class:`pipeline.flows.request.Request`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pipeline import state
from pipeline.flows.request import Request
from pipeline.options import OPTIONS, SETTINGS_OPTIONS
from pipeline.tree import files, paths

if TYPE_CHECKING:
    from rich.console import Console

# The variables the chain's tasks read (`doit migrate_op op=atan2 force=1`), one line each:
# `doit help TASK` lists those of TASK. Written once, in the option table.
VARIABLES: dict[str, str] = {name: o.doit_help() for name, o in OPTIONS.items() if o.doit}


def _stages() -> ModuleType:
    from pipeline.flows import stages  # the heavy part: only when a stage runs

    return stages


def _audit() -> ModuleType:
    from pipeline.flows import audit  # `doit audit` runs every time: it imports only this

    return audit


def _records() -> ModuleType:
    from pipeline.flows import records  # the edit's record: only when its rule is asked

    return records


def _none(_: Request) -> list:
    return []


def _math() -> ModuleType:
    from pipeline.flows import math  # compilers and torch: only when the stage runs

    return math


@dataclass(frozen=True)
class Stage:
    """One stage of the chain. ``per_op`` stages are one doit task per operator
    (``edit:atan2``), so one operator's record never answers for another's."""

    name: str
    doc: str
    action: Callable[[Request, Console], None] | None
    per_op: bool = True
    # stage names this one runs after (doit task_dep), given the request
    after: Callable[[Request], tuple[str, ...]] = lambda _: ()
    inputs: Callable[[Request], list[Path]] = _none  # doit file_dep
    outputs: Callable[[Request], list[Path]] = _none  # doit targets
    # doit uptodate entries, besides file_dep; None: always run
    uptodate: Callable[[Request], list[Any]] | None = _none
    # also run when the user named the task on the command line, even if up to date
    rerun_when_asked: bool = False
    # the action may print nothing through rich (a warm audit replays its saved output):
    # its console is made on first use, so that rich is not imported for nothing
    lazy_console: bool = False
    # the variables of this stage beyond op= and the settings every stage takes
    variables: tuple[str, ...] = ()

    @property
    def all_variables(self) -> tuple[str, ...]:
        """Every variable the stage's task reads: what `doit help TASK` lists."""
        return ("op", *SETTINGS_OPTIONS, *self.variables)


def _op(request: Request) -> state.OpFiles:
    return state.op_files(request.settings, request.op)


def _test_inputs(request: Request) -> list[Path]:
    s = request.settings
    test_file = s.root / s.test_file
    tests = [test_file] if test_file.is_file() else []
    return [state.build_stamp(s), *tests, *state.opinfo_inputs(s)]


def _test_uptodate(request: Request) -> list[Any]:
    from doit.tools import config_changed

    return [
        config_changed(state.test_settings(request.settings)),
        # common_mps.py by content of *this operator's* entries, not by file hash:
        # dropping another operator's xfails must not re-run these tests.
        lambda: state.expectations_current(request.settings, request.op),
    ]


def _math_settings_changed(request: Request) -> Any:
    from doit.tools import config_changed

    s = request.settings
    return config_changed({"math": repr(s.math), "python": s.python})


def _build_after(request: Request) -> tuple[str, ...]:
    # check_math after edit (doit runs task_dep in order): a functor that disagrees with
    # torch stops the chain before ninja
    return () if request.dry_run or not request.op else ("edit", "check_math")


STAGES: tuple[Stage, ...] = (
    Stage(
        "audit",
        "The metal-kernel guide's checklist for op=NAME (always printed when asked for).",
        lambda r, c: _audit().audit(r, c),
        outputs=lambda r: [_op(r).audit],
        # By content digest rather than file_dep: the edit and drop stages re-record the
        # audit after they write, so the chain's own edits do not make it stale.
        uptodate=lambda r: [lambda: state.audit_current(r.settings, r.op)],
        rerun_when_asked=True,
        lazy_console=True,
    ),
    Stage(
        "edit",
        "Fold op=NAME's dispatch, remove its MPSGraph code, register its stub: all or nothing.",
        lambda r, c: _stages().edit(r, c),
        after=lambda _: ("audit",),
        outputs=lambda r: [_op(r).edit],
        # Up to date when the plan for this operator is empty, re-computed from the tree.
        uptodate=lambda r: [lambda: _records().edit_current(r.settings, r.op, r.body, r.host_body)],
        variables=("force", "body", "host_body"),
    ),
    Stage(
        "preview",
        "Every diff op=NAME's edit would make and what is left to write by hand; writes nothing.",
        lambda r, c: _stages().preview(r, c),
        uptodate=None,
        variables=("body", "host_body"),
    ),
    Stage(
        "check_math",
        "Compile op=NAME's Metal functors (or, without one, its whole kernels: check-kernel)"
        " on the host and compare them with torch on CPU.",
        lambda r, c: _math().stage(r, c),
        # in the chain, the functors as the edit left them (body= may have written one);
        # `doit check_math` alone checks the tree as it is
        after=lambda r: ("edit",) if r.past_edit and not r.dry_run else (),
        # what the functors are compiled from: the kernels and the checkout's c10/metal
        # (and, for check-kernel, the host code launching them and the launch specs)
        inputs=lambda r: (
            files(
                r.settings.root,
                (paths.KERNELS_METAL, "c10/metal/*.h", f"{paths.MPS_DIR}/operations/*.mm"),
            )
            + sorted(r.settings.kernel_specs.glob("*.yaml"))
        ),
        outputs=lambda r: [_op(r).math_json],
        uptodate=lambda r: [_math_settings_changed(r)],
    ),
    Stage(
        "build",
        "`ninja -C build torch_cpu`, only when a build input (.metal, .mm, .h, yaml) changed.",
        lambda r, c: _stages().build(r, c),
        per_op=False,
        after=_build_after,
        inputs=lambda r: state.build_inputs(r.settings),
        outputs=lambda r: [state.build_stamp(r.settings)],
    ),
    Stage(
        "test_op",
        "Run op=NAME's consistency tests (JUnit) after a rebuild, or when what they expect"
        " or how they run changed.",
        lambda r, c: _stages().test(r, c),
        after=lambda _: ("build",),
        inputs=_test_inputs,
        outputs=lambda r: [_op(r).junit],
        uptodate=_test_uptodate,
    ),
    Stage(
        "table",
        "Per-dtype pass table of op=NAME from its JUnit results (terminal, Markdown, JSON).",
        lambda r, c: _stages().table(r, c),
        after=lambda _: ("test_op",),
        inputs=lambda r: [_op(r).junit],
        outputs=lambda r: [_op(r).table_json, _op(r).table_md],
        rerun_when_asked=True,
    ),
    Stage(
        "drop_xfails",
        "Remove op=NAME's xfail entries that now pass, verified by a re-run of its tests.",
        lambda r, c: _stages().drop_xfails(r, c),
        after=lambda _: ("table",),
        inputs=lambda r: [_op(r).table_json] + files(r.settings.root, (paths.COMMON_MPS,)),
        outputs=lambda r: [_op(r).xfails],
        variables=("force",),
    ),
    Stage(
        "summary",
        "What changed, what is still missing, the next command; exit 1 unless op=NAME is done.",
        lambda r, c: _stages().summary(r, c),
        after=lambda _: ("edit", "drop_xfails"),
        # the recorded audit too: the checklist the summary reports (a file of the tree that
        # went missing or unreadable changes it without any other input changing)
        inputs=lambda r: (
            [_op(r).edit, _op(r).table_json, _op(r).xfails, _op(r).audit, _op(r).math_json]
            + [state.build_stamp(r.settings)]
        ),
        outputs=lambda r: [_op(r).summary],
    ),
    Stage(
        "migrate_op",
        "The whole guide for op=NAME: edit, build, test, table, drop xfails, summary.",
        None,
        after=lambda r: ("preview",) if r.dry_run else ("summary",),
        variables=("force", "dry_run", "body", "host_body"),
    ),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
BY_NAME: dict[str, Stage] = {s.name: s for s in STAGES}
