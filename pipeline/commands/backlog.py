"""`backlog`: operators still on MPSGraph or without MPS, easiest wins first."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from pipeline.config import Settings
from pipeline.report.console import terminal
from pipeline.tree.index import TreeIndex, load_index


@dataclass(frozen=True)
class BacklogItem:
    op: str
    workflow: str  # "migrate" (MPSGraph -> Metal) or "add" (no MPS yet)
    overloads: int  # overloads whose dispatch must change
    mps_kernels: tuple[str, ...]  # the *_mps functions still dispatched to
    xfail_dtypes: int  # dtypes xfailed/skipped across all lists (None counts as all tested)
    has_functor: bool
    has_opinfo: bool

    @property
    def effort(self) -> tuple[int, int, int, str]:
        """Smaller is easier: a functor to reuse, few overloads, few xfails."""
        return (0 if self.has_functor else 1, self.overloads, self.xfail_dtypes, self.op)


def backlog(index: TreeIndex) -> tuple[BacklogItem, ...]:
    """Every operator dispatched to an MPS-specific function, or without MPS but with an OpInfo."""
    items = []
    for op, entries in index.entries_by_operator().items():
        kinds = {e.mps_kind for e in entries}
        has_opinfo = bool(index.opinfos_for(op))
        if "mps_specific" in kinds:
            workflow = "migrate"
        elif "none" in kinds and has_opinfo:
            workflow = "add"
        else:
            continue
        record = index.record(op, find_references=False)
        xfail_dtypes = sum(
            len(e.dtypes) if e.dtypes is not None else max(len(record.opinfo_dtypes), 1)
            for e in record.xfails
        )
        items.append(
            BacklogItem(
                op=op,
                workflow=workflow,
                overloads=len(record.pending_overloads),
                mps_kernels=record.old_names,
                xfail_dtypes=xfail_dtypes,
                has_functor=bool(record.functors),
                has_opinfo=has_opinfo,
            )
        )
    return tuple(sorted(items, key=lambda i: i.effort))


def render(items: tuple[BacklogItem, ...], console: Console) -> None:
    table = Table(title=f"MPS migration backlog: {len(items)} operators, easiest first")
    for col in ("operator", "workflow", "overloads", "xfail dtypes", "functor", "MPS kernels"):
        table.add_column(col)
    for i in items:
        table.add_row(
            i.op,
            i.workflow,
            str(i.overloads),
            str(i.xfail_dtypes),
            "✓" if i.has_functor else "",
            ", ".join(i.mps_kernels),
        )
    console.print(table)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace, settings: Settings) -> int:
    items = backlog(load_index(settings))
    if args.json:
        print(
            json.dumps(
                [{**i.__dict__, "mps_kernels": list(i.mps_kernels)} for i in items], indent=2
            )
        )
    else:
        render(items, terminal())
    return 0
