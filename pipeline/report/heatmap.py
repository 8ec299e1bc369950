"""The dashboard's operator × dtype heatmap of the latest nightly: inline SVG, or canvases
drawn from a data block when the table is too large for SVG (:mod:`heatmap_canvas`).

Each kind of cell is told apart by more than a shade, and the legend shows each one:

- a tested cell is filled with its outcome's color; a skip is its light gray crossed by
  dark diagonal lines (a hatch), so it never reads as a cell that no test ran;
- a cell that no runner tested is white with a gray border ("not tested");
- a cell whose runners disagree is split into one stripe per runner, in runner order, left
  to right, with a dark line between stripes and a dark outline around the whole cell,
  so it stands out whatever its colors are;
- a dark dot marks a flaky result; hovering shows each runner's outcome and message.

Both drawings take these from :data:`PALETTE`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.report import heatmap_canvas
from pipeline.report.heatmap_canvas import CELL, GAP, TOP, Palette
from pipeline.report.svg import clip, empty, escape, svg
from pipeline.results.junit import DISPLAY_ORDER, Outcome
from pipeline.results.table import Cell, DtypeTable, Row

OUTCOME_COLORS: dict[Outcome, str] = {
    Outcome.PASS: "#2da44e",
    Outcome.XPASS: "#0969da",
    Outcome.XFAIL: "#afb8c1",
    Outcome.SKIP: "#eaeef2",
    Outcome.FAIL: "#cf222e",
    Outcome.ERROR: "#82071e",
}
OUTCOME_ORDER = tuple(o.value for o in DISPLAY_ORDER)
NOT_RUN = "#ffffff"
PALETTE = Palette(
    colors=OUTCOME_COLORS,
    outcomes=DISPLAY_ORDER,
    not_run=NOT_RUN,
    edge="#8c959f",
    hatched=(Outcome.SKIP,),
    hatch="#57606a",
    ink="#1f2328",
)
_HATCH_ID = "hatch-"  # + the outcome: its SVG pattern's id
_LABEL_CHARS = 44


def cell_title(name: str, cell: Cell) -> str:
    """The tooltip of a cell that is not plain: its outcome, then each runner's."""
    lines = [f"{name} {cell.dtype}: {cell.outcome.value}" + (" (flaky)" if cell.flaky else "")]
    for r in cell.results:
        line = f"{r.runner}: {r.outcome.value}" + (" (flaky)" if r.flaky else "")
        if r.message:
            line += f" — {clip(r.message)}"
        lines.append(line)
    return "\n".join(lines)


def label(row: Row) -> str:
    """A table row's label: the operator, `` · grad`` for its gradient test."""
    return row.name + (" · grad" if row.kind == "output_grad_match" else "")


# ------------------------------------------------------------------------------ SVG


def _fill(outcome: Outcome | None) -> str:
    """The SVG fill of ``outcome`` (None: a runner that did not run it)."""
    if outcome is None:
        return PALETTE.not_run
    if outcome in PALETTE.hatched:
        return f"url(#{_HATCH_ID}{outcome.value})"
    return PALETTE.colors[outcome]


def _defs() -> str:
    """The hatch patterns: a hatched outcome's color crossed by diagonal lines."""
    tiles = "".join(
        f'<pattern id="{_HATCH_ID}{o.value}" width="4" height="4" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="4" height="4" fill="{PALETTE.colors[o]}"/>'
        f'<rect width="1.5" height="4" fill="{PALETTE.hatch}"/></pattern>'
        for o in PALETTE.hatched
    )
    return f"<defs>{tiles}</defs>"


def _box(x: float, y: float, fill: str, width: float = CELL, *, stroke: str = "",
         title: str = "") -> str:  # fmt: skip
    """A rectangle of the grid's height, its tooltip ``title`` (text, escaped here)."""
    rect = f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{CELL}" fill="{fill}"'
    rect += f' stroke="{stroke}"' if stroke else ""
    return f"{rect}><title>{escape(title)}</title></rect>" if title else f"{rect}/>"


def _split(x: float, y: float, outcomes: Sequence[Outcome | None]) -> list[str]:
    """A cell whose runners disagree: a stripe per runner (None: it did not run the test),
    a dark line between stripes and a dark outline."""
    width = CELL / len(outcomes)
    parts = [_box(x + k * width, y, _fill(o), width) for k, o in enumerate(outcomes)]
    parts += [
        f'<line x1="{x + k * width:.1f}" y1="{y:.1f}" x2="{x + k * width:.1f}" '
        f'y2="{y + CELL:.1f}" stroke="{PALETTE.ink}"/>'
        for k in range(1, len(outcomes))
    ]
    parts.append(
        f'<rect x="{x + 0.5:.1f}" y="{y + 0.5:.1f}" width="{CELL - 1}" height="{CELL - 1}" '
        f'fill="none" stroke="{PALETTE.ink}"/>'
    )
    return parts


def _cell(x: float, y: float, name: str, dtype: str, row: Row, table: DtypeTable) -> str:
    """The grid's cell of ``row`` and ``dtype``: not tested, plain (every runner of the
    table, one outcome, nothing else to tell) or one with a tooltip of its runners'."""
    cell = row.cell(dtype)
    if cell is None:
        tip = f"{name} {dtype}: not tested"
        return _box(x, y, PALETTE.not_run, stroke=PALETTE.edge, title=tip)
    if table.plain(cell):
        tip = f"{name} {dtype}: {cell.outcome.value} on every runner"
        return _box(x, y, _fill(cell.outcome), title=tip)
    parts = [f"<title>{escape(cell_title(name, cell))}</title>"]
    if cell.mixed and len(table.runners) > 1:
        found = [cell.for_runner(r) for r in table.runners]
        parts += _split(x, y, [r.outcome if r else None for r in found])
    else:
        parts.append(_box(x, y, _fill(cell.outcome)))
    if cell.flaky:
        parts.append(
            f'<circle cx="{x + CELL / 2:.1f}" cy="{y + CELL / 2:.1f}" r="3" fill="{PALETTE.ink}"/>'
        )
    return f"<g>{''.join(parts)}</g>"


def _legend(y: float, runners: Sequence[str]) -> tuple[list[str], float]:
    """The legend under the grid (its baseline at ``y``), and how wide it is."""
    body, x = [], 8.0
    swatches = [(o.value, _fill(o)) for o in PALETTE.outcomes]
    swatches.append(("not tested", PALETTE.not_run))
    for name, fill in swatches:
        body.append(
            f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" fill="{fill}" '
            f'stroke="{PALETTE.edge}"/><text x="{x + 16:.1f}" y="{y:.1f}">{escape(name)}</text>'
        )
        x += 24 + 7 * len(name)
    body.append(
        f'<circle cx="{x + 6:.1f}" cy="{y - 4:.1f}" r="3" fill="{PALETTE.ink}"/>'
        f'<text x="{x + 14:.1f}" y="{y:.1f}">flaky</text>'
    )
    width = x + 60
    if len(runners) > 1:
        note = f"runners disagree: one stripe per runner, left to right: {', '.join(runners)}"
        body += _split(8, y + 8, [Outcome.PASS, Outcome.FAIL])
        body.append(f'<text x="{12 + CELL:.1f}" y="{y + 20:.1f}">{escape(note)}</text>')
        width = max(width, 24 + CELL + 6.2 * len(note))
    return body, width


def heatmap(table: DtypeTable) -> str:
    """Operator × dtype outcomes of one nightly: an SVG grid."""
    rows, dtypes, runners = table.rows, table.dtypes, table.runners
    if not rows or not dtypes:
        return empty("no consistency test results")
    names = [label(row) for row in rows]
    left = min(300, 12 + 6.5 * max(len(name) for name in names))
    step = CELL + GAP
    body = [_defs()]
    for j, dtype in enumerate(dtypes):
        cx = left + j * step + CELL / 2 + 4
        body.append(
            f'<text transform="translate({cx:.1f},{TOP - 6}) rotate(-50)">{escape(dtype)}</text>'
        )
    for i, (row, name) in enumerate(zip(rows, names, strict=True)):
        y = TOP + i * step
        body.append(
            f'<text x="{left - 6:.1f}" y="{y + CELL - 4}" text-anchor="end">'
            f"{escape(clip(name, _LABEL_CHARS))}</text>"
        )
        for j, dtype in enumerate(dtypes):
            body.append(_cell(left + j * step, y, name, dtype, row, table))
    legend, legend_width = _legend(TOP + len(rows) * step + 18, runners)
    width = max(left + len(dtypes) * step + 20, legend_width)
    height = TOP + len(rows) * step + 64
    return svg(width, height, "operator by dtype outcomes of the latest nightly", body + legend)


# --------------------------------------------------------------------------- canvases


def _swatch(background: str, border: str = PALETTE.edge, inner: str = "") -> str:
    return (
        f'<span style="display:inline-flex;vertical-align:middle;width:12px;height:12px;'
        f'background:{background};border:1px solid {border};margin:0 4px 0 10px">{inner}</span>'
    )


def _html_legend(runners: Sequence[str]) -> str:
    """The canvases' legend, in HTML: the same entries as the SVG's."""
    items = []
    for outcome in PALETTE.outcomes:
        color = PALETTE.colors[outcome]
        if outcome in PALETTE.hatched:
            color = f"repeating-linear-gradient(45deg,{color} 0 2px,{PALETTE.hatch} 2px 3.5px)"
        items.append(_swatch(color) + escape(outcome.value))
    items.append(_swatch(PALETTE.not_run) + "not tested")
    items.append(" · dot: flaky")
    if len(runners) > 1:
        halves = (
            f'<span style="flex:1;background:{PALETTE.colors[Outcome.PASS]};'
            f'border-right:1px solid {PALETTE.ink}"></span>'
            f'<span style="flex:1;background:{PALETTE.colors[Outcome.FAIL]}"></span>'
        )
        note = f"runners disagree: one stripe per runner, left to right: {', '.join(runners)}"
        items.append(" · " + _swatch("none", PALETTE.ink, halves) + escape(note))
    return f'<p class="caption">{"".join(items)}</p>'


def large_heatmap(table: DtypeTable) -> str:
    """The heatmap of a table too large for SVG: a data block drawn on canvases by the one
    script the page's policy allows (:mod:`pipeline.report.heatmap_canvas`)."""
    names = [label(row) for row in table.rows]
    shown = [clip(name, _LABEL_CHARS) for name in names]
    data = heatmap_canvas.heatmap_data(table, names, shown, PALETTE, cell_title)
    return heatmap_canvas.canvas_heatmap(data, _html_legend(table.runners))
