"""Kernel speed for the PR comment and the terminal: ratios per shape and dtype against main's
figure from the same device class; only what lies outside main's night-to-night spread is
flagged. And a run's own figures, with what it could not time, for the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pipeline.results.speed import (
    Judgement,
    Measurement,
    NotTimed,
    SpeedReport,
    UpstreamFigure,
    Verdict,
    path_pairs,
    worst_per_class,
)

if TYPE_CHECKING:
    from rich.console import Console

MARK = {Judgement.SLOWER: "🐢 slower", Judgement.NOISE: "within noise", Judgement.OK: "ok",
        Judgement.NO_BASELINE: "no baseline", Judgement.TOO_FEW: "too few runs"}  # fmt: skip
MAX_ROWS = 60


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e6:,.1f} µs"


def _ratio(v: Verdict) -> str:
    if v.ratio is None:
        return "–"
    text = f"{v.ratio:.2f}×"
    return f"**{text}**" if v.judgement is Judgement.SLOWER else text


def rows(verdicts: Sequence[Verdict]) -> list[tuple[str, ...]]:
    """The table's rows, flagged ones first, then by operator."""
    ordered = sorted(verdicts, key=lambda v: (v.judgement is not Judgement.SLOWER, v.key))
    return [
        (v.key[0], v.key[1], v.key[2], v.key[3], _ms(v.pr_median), _ms(v.main_median),
         _ratio(v), "–" if v.spread is None else f"{v.spread:.2f}×", MARK[v.judgement])
        for v in ordered
    ]  # fmt: skip


HEADER = ("operator", "dtype", "shape", "layout", "PR", "main", "ratio", "main spread", "")


def worst_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """The short "perf story": the worst ratio against main per shape class."""
    worst = worst_per_class(verdicts)
    if not worst:
        return []
    lines = ["| shape class | worst ratio | benchmark | |", "|---|---|---|---|"]
    for name, v in worst.items():
        op, dtype, shape, _ = v.key
        lines.append(f"| {name} | {_ratio(v)} | `{op}` {dtype} {shape} | {MARK[v.judgement]} |")
    return [*lines, ""]


def render_markdown(report: SpeedReport) -> str:
    """The PR comment's speed section: the worst ratio per shape class, then every
    benchmark, each against main's figures from the PR's device class (or why none)."""
    verdicts = report.verdicts
    slower = sum(v.judgement is Judgement.SLOWER for v in verdicts)
    where = f"On `{report.runner}` (device: {report.device})"
    if report.nights:
        said = (
            f"{where}, against main's median over its last {report.nights} nights from the "
            f"same device class ({report.device_class}): {slower} of {len(verdicts)} "
            f"benchmarks slower than {report.threshold:.2f}× and outside main's night-to-night "
            "spread."
        )
    else:  # never compared across classes: nothing is judged
        said = (
            f"{where}: no baseline for {report.device_class}: main's history holds no nightly "
            "figures from this device class, and figures from another are never compared."
        )
    lines = [
        "### Kernel speed against main",
        "",
        said,
        "",
        *worst_lines(verdicts),
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    table = rows(verdicts)
    lines += ["| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(r)) + " |"
              for r in table[:MAX_ROWS]]  # fmt: skip
    if len(table) > MAX_ROWS:
        lines.append(f"\n_…{len(table) - MAX_ROWS} more rows in speed.json_")
    return "\n".join(lines) + "\n"


FIGURES_HEADER = ("operator", "dtype", "shape", "layout", "median", "spread")
SPREAD_MEANING = (
    "median: per call, over the repeated blocks; spread: their interquartile range over the median"
)


def render_figures(measurements: Sequence[Measurement], device: str, console: Console) -> None:
    """``speed``'s figures, one row per benchmark in the order they were timed."""
    # imported here: the PR comment imports this module and never prints a table
    from rich.markup import escape
    from rich.table import Table

    ops = len({m.op for m in measurements})
    table = Table(
        title=f"Kernel speed on {device}: {len(measurements)} benchmarks of {ops} "
        f"operator{'s' if ops != 1 else ''}",
        title_justify="left",
    )
    for column in FIGURES_HEADER:
        table.add_column(column, justify="right" if column in ("median", "spread") else "left")
    for m in measurements:
        q25, q75 = m.quartiles()
        spread = f"{(q75 - q25) / m.median:.1%}"
        table.add_row(escape(m.op), m.dtype, m.shape, m.layout, _ms(m.median), spread)
    console.print(table)
    # a line of its own: as the table's caption it would wrap to the table's width
    console.print(SPREAD_MEANING, soft_wrap=True)


def render_paths(
    metal: Sequence[Measurement], forced: Mapping[str, Sequence[Measurement]]
) -> list[str]:
    """Markdown: each benchmark on its Metal path against the same build forced onto
    MPSGraph by the tree's switch (ratio < 1: the Metal kernel is faster)."""
    lines: list[str] = []
    for switch, graph in forced.items():
        pairs = path_pairs(metal, graph)
        if not pairs:
            continue
        lines += [
            f"#### Metal against MPSGraph (`{switch}=1`), same build",
            "",
            "| operator | dtype | shape | layout | Metal | MPSGraph | ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for m, g in pairs:
            lines.append(
                f"| `{m.op}` | {m.dtype} | {m.shape} | {m.layout} | {_ms(m.median)} | "
                f"{_ms(g.median)} | {m.median / g.median:.2f}× |"
            )
        lines.append("")
    return lines


def render_upstream(
    measurements: Sequence[Measurement], figures: Sequence[UpstreamFigure]
) -> list[str]:
    """Markdown: upstream's test/bench_mps_ops.py figures beside ours for the same layout."""
    if not figures:
        return []
    ours = {m.key: m for m in measurements}
    lines = [
        "#### Upstream's test/bench_mps_ops.py beside ours",
        "",
        "| operator | dtype | upstream | upstream median | ours | our median |",
        "|---|---|---|---|---|---|",
    ]
    for f in figures:
        if f.error:
            lines.append(f"| `{f.op}` | {f.dtype} | failed: {f.error} | – | – | – |")
            continue
        same = f.ours
        mine = ours.get((f.op, f.dtype, *same)) if same else None
        where = " ".join(same) if same else "–"
        lines.append(
            f"| `{f.op}` | {f.dtype} | {f.label} | {_ms(f.median)} | {where} | "
            f"{_ms(mine.median if mine else None)} |"
        )
    return [*lines, ""]


def not_timed_lines(errors: Sequence[NotTimed]) -> list[str]:
    """What could not be timed, one line per operator, dtype and error: a dtype the device
    lacks fails alike in every shape and layout, and is said once."""
    groups: dict[tuple[str, str, str], list[NotTimed]] = {}
    for e in errors:
        groups.setdefault((e.op, e.dtype, e.error), []).append(e)
    lines = []
    for (op, dtype, error), found in groups.items():
        one = found[0]
        where = f"{one.shape} {one.layout}" if len(found) == 1 else f"{len(found)} benchmarks"
        lines.append(f"{op} {dtype} ({where}): {error}")
    return lines
