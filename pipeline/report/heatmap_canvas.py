"""The operator × dtype heatmap of a large nightly: a compact data block, drawn on canvases.

As inline SVG a cell is an element of a few hundred bytes (its title, its coordinates): at
100,000 results a night the page was about 15 MB. Here the page carries the table once,
as JSON in a hidden ``<pre id="heatmap-data">`` (HTML-escaped text, never markup), one
character per cell, and a fixed script draws it on ``<canvas>`` elements, one per
``rows_per_canvas`` rows (browsers cap a canvas's height). The Content-Security-Policy
allows that one script by its hash and nothing else, so a message in the data cannot run.

The data block, for a browser test to read back (``JSON.parse(pre.textContent)``)::

    {"dtypes": [...], "runners": [...], "outcomes": ["pass", "xpass", ...],
     "colors": {"pass": "#2da44e", ...}, "not_run": "#ffffff", "edge": "#8c959f",
     "hatched": [3], "hatch": "#57606a", "ink": "#1f2328",  -- see Palette
     "rows": ["atan2", "atan2 · grad", ...],            -- one label per table row
     "grid": ["00.3", ...],                             -- per row, one character per dtype:
                                                        -- the index of its outcome in
                                                        -- "outcomes", "." when not tested
     "details": {"ROW:COL": {"stripes": [0, 2], "flaky": true, "title": "..."}},
     "layout": {"cell": 16, "gap": 2, "left": 120, "top": 64, "rows_per_canvas": 1000}}

Every tested (row, dtype) of summary.json's table is a character other than "."; its cell
is drawn at x = left + col × (cell + gap), y = top + row × (cell + gap) on the canvas whose
``data-first-row`` holds the first row it draws (``top`` only on the first canvas, 0 on
the others; each canvas has ``data-top``). A plain cell is filled with its outcome's color,
and hatched (lines of ``hatch``) when its outcome's index is in ``hatched``; an untested
cell is outlined in ``edge``; a cell whose runners disagree has one stripe per runner
(``stripes``: outcome indexes in runner order, -1 where a runner did not run it), lines of
``ink`` between them and around the cell; a flaky one has an ``ink`` dot in its middle.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from pipeline.results.junit import Outcome
from pipeline.results.table import Cell, DtypeTable

# Above this many cells the dashboard draws the heatmap here, not as SVG.
SVG_MAX_CELLS = 4_000
ROWS_PER_CANVAS = 1_000
CELL, GAP, TOP = 16, 2, 64  # a cell's side, the gap between cells, the dtypes' header


@dataclass(frozen=True)
class Palette:
    """How the heatmap tells its cells apart (both drawings: SVG and these canvases)."""

    colors: Mapping[Outcome, str]  # every outcome's fill
    outcomes: Sequence[Outcome]  # every outcome, in display order
    not_run: str  # the fill of a cell, or a stripe, that no test ran
    edge: str  # the border of an untested cell and of the legend's swatches
    hatched: Sequence[Outcome]  # outcomes whose fill is crossed by diagonal lines (skip)
    hatch: str  # those lines' color
    ink: str  # a split cell's dividers and outline, the flaky dot


SCRIPT = """(function () {
  var pre = document.getElementById("heatmap-data"), box = document.getElementById("heatmap");
  if (!pre || !box) return;
  var d = JSON.parse(pre.textContent), L = d.layout, C = L.cell, S = L.cell + L.gap;
  var colors = d.outcomes.map(function (o) { return d.colors[o]; }), hatched = {};
  d.hatched.forEach(function (o) { hatched[o] = true; });
  function paint(g, o, x, y, w) {
    g.fillStyle = o < 0 ? d.not_run : colors[o]; g.fillRect(x, y, w, C);
    if (!hatched[o]) return;
    g.save(); g.beginPath(); g.rect(x, y, w, C); g.clip();
    g.strokeStyle = d.hatch; g.lineWidth = 1.5; g.beginPath();
    for (var k = -C; k < w; k += 4) { g.moveTo(x + k, y + C); g.lineTo(x + k + C, y); }
    g.stroke(); g.restore();
  }
  function split(g, stripes, x, y) {
    var n = stripes.length, w = C / n;
    stripes.forEach(function (o, k) { paint(g, o, x + k * w, y, w); });
    g.strokeStyle = d.ink; g.lineWidth = 1; g.beginPath();
    for (var k = 1; k < n; k++) { g.moveTo(x + k * w, y); g.lineTo(x + k * w, y + C); }
    g.stroke(); g.strokeRect(x + 0.5, y + 0.5, C - 1, C - 1);
  }
  function draw(first) {
    var rows = d.rows.slice(first, first + L.rows_per_canvas), top = first ? 0 : L.top;
    var cv = document.createElement("canvas");
    cv.width = L.left + d.dtypes.length * S + 20;
    cv.height = top + rows.length * S + 4;
    cv.dataset.firstRow = String(first);
    cv.dataset.top = String(top);
    var g = cv.getContext("2d");
    g.font = "11px ui-sans-serif,system-ui,sans-serif";
    g.fillStyle = "#1f2328";
    if (top) d.dtypes.forEach(function (t, j) {
      g.save(); g.translate(L.left + j * S + C / 2 + 4, top - 6); g.rotate(-50 * Math.PI / 180);
      g.fillText(t, 0, 0); g.restore();
    });
    rows.forEach(function (label, i) {
      var y = top + i * S, line = d.grid[first + i];
      g.fillStyle = "#1f2328"; g.textAlign = "right"; g.fillText(label, L.left - 6, y + C - 4);
      for (var j = 0; j < line.length; j++) {
        var ch = line.charAt(j), x = L.left + j * S, det = d.details[(first + i) + ":" + j];
        if (ch === ".") {
          g.strokeStyle = d.edge; g.lineWidth = 1;
          g.strokeRect(x + 0.5, y + 0.5, C - 1, C - 1); continue;
        }
        if (det && det.stripes) split(g, det.stripes, x, y); else paint(g, +ch, x, y, C);
        if (det && det.flaky) {
          g.fillStyle = d.ink; g.beginPath();
          g.arc(x + C / 2, y + C / 2, 3, 0, 2 * Math.PI); g.fill();
        }
      }
    });
    cv.addEventListener("mousemove", function (e) {
      var r = cv.getBoundingClientRect();
      var j = Math.floor((e.clientX - r.left - L.left) / S);
      var i = Math.floor((e.clientY - r.top - top) / S);
      var line = d.grid[first + i], tip = "";
      if (i >= 0 && i < rows.length && j >= 0 && j < d.dtypes.length) {
        var det = d.details[(first + i) + ":" + j], ch = line.charAt(j);
        tip = det ? det.title : rows[i] + " " + d.dtypes[j] + ": " +
          (ch === "." ? "not tested" : d.outcomes[+ch] + " on every runner");
      }
      cv.title = tip;
    });
    box.appendChild(cv);
  }
  for (var first = 0; first < d.rows.length; first += L.rows_per_canvas) draw(first);
})();"""
# what the page's Content-Security-Policy names in script-src: this script and no other
SCRIPT_SOURCE = f"'sha256-{base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()}'"


def cell_count(table: DtypeTable) -> int:
    """How many cells (tested or not) the heatmap of ``table`` has."""
    return len(table.rows) * len(table.dtypes)


class LayoutJson(TypedDict):
    cell: int
    gap: int
    left: float
    top: int
    rows_per_canvas: int


class CellDetailJson(TypedDict):
    title: str
    stripes: NotRequired[list[int]]  # only a cell whose runners disagree
    flaky: NotRequired[bool]  # only true


class CanvasJson(TypedDict):
    """The data block the page's script draws from."""

    dtypes: list[str]
    runners: list[str]
    outcomes: list[str]
    colors: dict[str, str]
    not_run: str
    edge: str
    hatched: list[int]  # indexes into outcomes
    hatch: str
    ink: str
    rows: list[str]
    grid: list[str]
    details: dict[str, CellDetailJson]  # by "row:column"
    layout: LayoutJson


@dataclass(frozen=True)
class CanvasData:
    """The data block (see the module docstring): made here, written by :meth:`to_json`."""

    table: DtypeTable
    palette: Palette
    rows: Sequence[str]  # one label per table row, as drawn
    grid: Sequence[str]
    details: Mapping[tuple[int, int], CellDetail]
    left: float

    def to_json(self) -> CanvasJson:
        index = {outcome: i for i, outcome in enumerate(self.palette.outcomes)}
        return {
            "dtypes": list(self.table.dtypes),
            "runners": list(self.table.runners),
            "outcomes": [o.value for o in self.palette.outcomes],
            "colors": {o.value: color for o, color in self.palette.colors.items()},
            "not_run": self.palette.not_run,
            "edge": self.palette.edge,
            "hatched": [index[o] for o in self.palette.hatched],
            "hatch": self.palette.hatch,
            "ink": self.palette.ink,
            "rows": list(self.rows),
            "grid": list(self.grid),
            "details": {f"{r}:{c}": d.to_json() for (r, c), d in self.details.items()},
            "layout": {
                "cell": CELL,
                "gap": GAP,
                "left": round(self.left, 1),
                "top": TOP,
                "rows_per_canvas": ROWS_PER_CANVAS,
            },  # fmt: skip
        }


@dataclass(frozen=True)
class CellDetail:
    """What a cell that is not plain draws beyond its outcome's fill."""

    title: str
    stripes: tuple[int, ...] | None  # a cell whose runners disagree: see the docstring
    flaky: bool

    def to_json(self) -> CellDetailJson:
        found: CellDetailJson = {"title": self.title}
        if self.stripes is not None:
            found["stripes"] = list(self.stripes)
        if self.flaky:
            found["flaky"] = True
        return found


def heatmap_data(
    table: DtypeTable,
    labels: Sequence[str],
    shown: Sequence[str],
    palette: Palette,
    title: Callable[[str, Cell], str],
) -> CanvasData:
    """The data block for ``table``: ``labels`` name its rows in the cells' ``title``s,
    ``shown`` are the labels as drawn."""
    index = {outcome: i for i, outcome in enumerate(palette.outcomes)}
    grid: list[str] = []
    details: dict[tuple[int, int], CellDetail] = {}
    for r, (row, label) in enumerate(zip(table.rows, labels, strict=True)):
        line = []
        for c, dtype in enumerate(table.dtypes):
            cell = row.cell(dtype)
            if cell is None:
                line.append(".")
                continue
            line.append(str(index[cell.outcome]))
            if table.plain(cell):
                continue
            stripes = None
            if cell.mixed and len(table.runners) > 1:
                stripes = tuple(
                    -1 if (found := cell.for_runner(k)) is None else index[found.outcome]
                    for k in table.runners
                )
            details[r, c] = CellDetail(title(label, cell), stripes, cell.flaky)
        grid.append("".join(line))
    left = min(300, 12 + 6.5 * max((len(label) for label in labels), default=0))
    return CanvasData(table, palette, shown, grid, details, left)


def canvas_heatmap(data: CanvasData, legend: str) -> str:
    """The data block, the canvases' container, ``legend`` (markup) and the script."""
    text = json.dumps(data.to_json(), separators=(",", ":"), ensure_ascii=False)
    return (
        f'<pre hidden id="heatmap-data">{html.escape(text, quote=False)}</pre>'
        f'<div id="heatmap"></div>{legend}<script>{SCRIPT}</script>'
    )
