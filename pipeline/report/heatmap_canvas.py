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
from typing import Any

# Above this many cells the dashboard draws the heatmap here, not as SVG.
SVG_MAX_CELLS = 4_000
ROWS_PER_CANVAS = 1_000
CELL, GAP, TOP = 16, 2, 64  # a cell's side, the gap between cells, the dtypes' header


@dataclass(frozen=True)
class Palette:
    """How the heatmap tells its cells apart (both drawings: SVG and these canvases)."""

    colors: Mapping[str, str]  # outcome -> its fill
    outcomes: Sequence[str]  # every outcome, in display order
    not_run: str  # the fill of a cell, or a stripe, that no test ran
    edge: str  # the border of an untested cell and of the legend's swatches
    hatched: Sequence[str]  # outcomes whose fill is crossed by diagonal lines (skip)
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


def cell_count(table: Mapping[str, Any]) -> int:
    """How many cells (tested or not) the heatmap of ``table`` has."""
    return len(table.get("rows", [])) * len(table.get("dtypes", []))


def heatmap_data(
    table: Mapping[str, Any],
    labels: Sequence[str],
    palette: Palette,
    title: Callable[[str, str, Mapping[str, Any]], str],
) -> dict[str, Any]:
    """The data block's document (see the module docstring) for ``table`` (``DtypeTable``'s
    dict, compact or not) with the dashboard's row ``labels``, ``palette`` and cell
    ``title``s."""
    dtypes, runners = list(table.get("dtypes", [])), list(table["runners"])
    index = {outcome: str(i) for i, outcome in enumerate(palette.outcomes)}
    grid: list[str] = []
    details: dict[str, dict[str, Any]] = {}
    for r, (row, label) in enumerate(zip(table["rows"], labels, strict=True)):
        line = []
        for c, dtype in enumerate(dtypes):
            cell = row["cells"].get(dtype)
            if cell is None:
                line.append(".")
                continue
            if isinstance(cell, str):  # a plain cell: every runner, this outcome
                line.append(index[cell])
                continue
            line.append(index[cell["outcome"]])
            extra: dict[str, Any] = {"title": title(label, dtype, cell)}
            if cell.get("mixed") and len(runners) > 1:
                found = cell.get("runners", {})
                extra["stripes"] = [
                    int(index[found[k]["outcome"]]) if k in found else -1 for k in runners
                ]
            if cell.get("flaky"):
                extra["flaky"] = True
            details[f"{r}:{c}"] = extra
        grid.append("".join(line))
    left = min(300, 12 + 6.5 * max((len(label) for label in labels), default=0))
    return {
        "dtypes": dtypes,
        "runners": runners,
        "outcomes": list(palette.outcomes),
        "colors": dict(palette.colors),
        "not_run": palette.not_run,
        "edge": palette.edge,
        "hatched": [int(index[o]) for o in palette.hatched],
        "hatch": palette.hatch,
        "ink": palette.ink,
        "rows": list(labels),
        "grid": grid,
        "details": details,
        "layout": {
            "cell": CELL,
            "gap": GAP,
            "left": round(left, 1),
            "top": TOP,
            "rows_per_canvas": ROWS_PER_CANVAS,
        },  # fmt: skip
    }


def canvas_heatmap(data: Mapping[str, Any], legend: str) -> str:
    """The data block, the canvases' container, ``legend`` (markup) and the script."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return (
        f'<pre hidden id="heatmap-data">{html.escape(text, quote=False)}</pre>'
        f'<div id="heatmap"></div>{legend}<script>{SCRIPT}</script>'
    )
