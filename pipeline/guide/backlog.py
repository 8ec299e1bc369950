"""The migration backlog: operators still on MPSGraph or without MPS, easiest wins first.

``to_json`` is the ``backlog --json`` document; its schema (``SCHEMA_VERSION``) is
documented in docs/machine-output.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from pipeline.fields import read
from pipeline.guide.exec_paths import ExecPath, counts_to_json, operator_paths
from pipeline.guide.workflow import Workflow, of_record
from pipeline.tree.index import NO_OPINFO, TreeIndex
from pipeline.tree.native_yaml import PENDING_KINDS

SCHEMA_VERSION = 1  # of the backlog --json document

# `atan2_out_mps`, `logit_mps`, `add_mps_`: the operator an MPSGraph-era name belongs to
_LEGACY_SUFFIX = re.compile(r"_?(?:_out)?_mps(?:_out)?_?$")


@dataclass(frozen=True)
class BacklogItem:
    op: str
    workflow: Workflow  # MIGRATE (MPSGraph -> Metal) or ADD (no MPS yet)
    overloads: int  # overloads whose dispatch must change
    mps_kernels: tuple[str, ...]  # the *_mps functions still dispatched to
    xfail_dtypes: int  # dtypes xfailed/skipped across all lists (None counts as all tested)
    has_functor: bool
    has_opinfo: bool  # False: none found, so its tests and xfails are unknown
    # overloads per path MPS takes today (pipeline.guide.exec_paths)
    paths: tuple[tuple[ExecPath, int], ...] = ()

    @property
    def effort(self) -> tuple[int, int, int, int, str]:
        """Smaller is easier: a functor to reuse, few overloads, few xfails; xfails that are
        unknown (no OpInfo found) come after any known count."""
        known = 0 if self.has_opinfo else 1
        return (0 if self.has_functor else 1, self.overloads, known, self.xfail_dtypes, self.op)

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "workflow": self.workflow.value,
            "mps_kernels": list(self.mps_kernels),
            "paths": counts_to_json(dict(self.paths)),
        }

    @classmethod
    def from_json(cls, data: object, doc: str, where: str) -> BacklogItem:
        """:meth:`to_dict` read back, every key checked."""
        found = read(_Written, data, doc, where)
        return cls(
            op=found.op,
            workflow=found.workflow,
            overloads=found.overloads,
            mps_kernels=found.mps_kernels,
            xfail_dtypes=found.xfail_dtypes,
            has_functor=found.has_functor,
            has_opinfo=found.has_opinfo,
            paths=tuple(found.paths.items()),
        )


@dataclass(frozen=True)
class _Written:
    """:meth:`BacklogItem.to_dict` as written: its paths' counts keyed by the path (its value)."""

    op: str
    workflow: Workflow
    overloads: int
    mps_kernels: tuple[str, ...]
    xfail_dtypes: int
    has_functor: bool
    has_opinfo: bool
    paths: dict[ExecPath, int]


def paths_cell(paths: tuple[tuple[ExecPath, int], ...]) -> str:
    """An item's overloads by path, as the tables show them: ``mpsgraph 2, metal 1``."""
    return ", ".join(f"{p} {n}" for p, n in paths if n)


def xfail_cell(xfail_dtypes: int, has_opinfo: bool) -> str:
    """An item's xfailed dtypes as the tables show them: the count, or, with no OpInfo
    found, that they are unknown (the count holds only entries keyed by its own name)."""
    return str(xfail_dtypes) if has_opinfo else f"? {NO_OPINFO}"


def to_json(items: Sequence[BacklogItem], warnings: Sequence[str] = ()) -> dict:
    """The ``backlog --json`` document (docs/machine-output.md, "backlog --json");
    ``warnings`` are the tree index's."""
    return {
        "schema": SCHEMA_VERSION,
        "items": [item.to_dict() for item in items],
        "warnings": list(warnings),
    }


def backlog(index: TreeIndex) -> tuple[BacklogItem, ...]:
    """Every operator whose workflow is not done; ``add`` ones only when an OpInfo tests them.

    Candidates are found cheaply (a pending yaml row, a stub, MPSGraph code or an include in
    a host file); the workflow rule itself is :func:`pipeline.guide.workflow.of_record`, as in
    audit.
    """
    entries = index.entries_by_operator()
    candidates = {op for op, es in entries.items() if {e.mps_kind for e in es} & PENDING_KINDS}
    # MPSGraph code that no yaml row names any more: stubs with an MPSGraph body, leftover
    # implementations and includes (a half-done migration)
    candidates |= {s.stub.removesuffix("_stub") for f in index.host.files for s in f.stubs}
    candidates |= {i.op for f in index.host.files if f.holds_mpsgraph for i in f.includes}
    candidates |= {
        _LEGACY_SUFFIX.sub("", impl.name) for f in index.host.files for impl in f.implementations
    }
    candidates &= set(entries)
    paths = {p.op: p.counts() for p in operator_paths(index, sorted(candidates)).operators}
    items = []
    for op in sorted(candidates):
        record = index.record(op, find_references=False)
        flow = of_record(record)
        has_opinfo = bool(record.opinfos)
        if flow is Workflow.DONE or (flow is Workflow.ADD and not has_opinfo):
            continue
        xfail_dtypes = sum(
            len(e.dtypes) if e.dtypes is not None else max(len(record.opinfo_dtypes), 1)
            for e in record.xfails
        )
        items.append(
            BacklogItem(
                op=op,
                workflow=flow,
                overloads=len(record.pending_overloads),
                mps_kernels=record.old_names,
                xfail_dtypes=xfail_dtypes,
                has_functor=bool(record.functors),
                has_opinfo=has_opinfo,
                paths=tuple(paths[op].items()),
            )
        )
    return tuple(sorted(items, key=lambda i: i.effort))
