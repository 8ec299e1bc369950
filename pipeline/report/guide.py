"""The guide's results for a terminal: the checklist and the backlog."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.guide.backlog import paths_cell, xfail_cell
from pipeline.guide.checklist import Status
from pipeline.guide.workflow import of_record

if TYPE_CHECKING:
    from pipeline.guide.backlog import BacklogItem
    from pipeline.guide.checklist import CheckItem
    from pipeline.guide.exec_paths import PathsReport
    from pipeline.tree.index import OperatorRecord

# ?: could not be judged, because what it rests on could not be read
MARKS = {
    Status.PASS: "[green]✓[/green]",
    Status.FAIL: "[red]✗[/red]",
    Status.UNKNOWN: "[yellow]?[/yellow]",
}


def render_checklist(
    record: OperatorRecord, items: Sequence[CheckItem], console: Console, *, before: bool = False
) -> None:
    """The checklist for humans: ✓/✗/? per item, evidence and file:line underneath.

    ``before``: this is the tree before the chain's edits (the migrate chain's audit stage),
    and the count says so: its figure is not the result of the run."""
    console.print(
        f"[bold]{record.op}[/bold]  workflow: [cyan]{of_record(record)}[/cyan]  "
        f"overloads: {len(record.overloads)} ({len(record.pending_overloads)} to change)  "
        f"consistency tests: {len(record.tests) if record.opinfos else 'unknown'}",
        highlight=False,
    )
    for item in items:
        mark = MARKS[item.status]
        console.print(f" {mark} {item.title}", highlight=False)
        for d in item.details:
            where = f"  [dim]{d.span}[/dim]" if d.span else ""
            console.print(f"     {escape(d.text)}{where}", highlight=False, soft_wrap=True)
    done = sum(i.ok for i in items)
    unknown = sum(i.status is Status.UNKNOWN for i in items)
    console.print(
        ("before: " if before else "")
        + f"{done}/{len(items)} checks pass"
        + (f", {unknown} unknown" if unknown else ""),
        highlight=False,
    )


def render_warnings(warnings: Iterable[str], console: Console) -> None:
    """The tree index's warnings (a file that could not be read, a missing folder), one a line."""
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)


def render_backlog(items: Sequence[BacklogItem], console: Console) -> None:
    """The backlog as a table, easiest first."""
    table = Table(title=f"MPS migration backlog: {len(items)} operators, easiest first")
    unknown = sum(not i.has_opinfo for i in items)
    if unknown:
        table.caption = f"{unknown} without an OpInfo found: their tests and xfails are unknown"
    # "overloads to change", as audit's header line says it: not every overload of the operator
    for col in (
        "operator",
        "workflow",
        "overloads to change",
        "xfail dtypes",
        "functor",
        "paths",
        "MPS kernels",
    ):
        table.add_column(col)
    for i in items:
        table.add_row(
            i.op,
            str(i.workflow),
            str(i.overloads),
            xfail_cell(i.xfail_dtypes, i.has_opinfo),
            "✓" if i.has_functor else "",
            paths_cell(i.paths),
            ", ".join(i.mps_kernels),
        )
    console.print(table)


def render_paths(report: PathsReport, console: Console, *, detail: bool) -> None:
    """Overloads per path; with ``detail`` every overload with why and where, else one row
    per operator; then the flags, each with its file:line."""
    counts = report.counts()
    total = sum(counts.values()) or 1
    console.print(
        "overloads by path: "
        + ", ".join(f"{p} {n} ({100 * n / total:.0f}%)" for p, n in counts.items()),
        highlight=False,
    )
    if detail:
        for op in report.operators:
            console.print(f"[bold]{op.op}[/bold]", highlight=False)
            for o in op.overloads:
                where = f"  [dim]{o.evidence or o.entry}[/dim]"
                console.print(f"  {o.func}: [cyan]{o.path}[/cyan]{where}", highlight=False)
                console.print(f"     {escape(o.via)}", highlight=False, soft_wrap=True)
    else:
        table = Table(title=f"MPS paths of {len(report.operators)} operators")
        for col in ("operator", *(p.value for p in counts)):
            table.add_column(col)
        for op in report.operators:
            per = {p: sum(o.path is p for o in op.overloads) for p in counts}
            table.add_row(op.op, *(str(n or "") for n in per.values()))
        console.print(table)
    for f in report.flags:
        console.print(
            f"[yellow]{f.kind}[/yellow] {escape(f.text)}  [dim]{f.span}[/dim]",
            highlight=False,
            soft_wrap=True,
        )
