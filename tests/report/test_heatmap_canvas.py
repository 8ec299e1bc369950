"""pipeline/report/heatmap_canvas.py: a large heatmap, a data block drawn by one allowed script."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
import subprocess

import pytest

from pipeline.dtypes import MPS_TEST_DTYPES
from pipeline.report import dashboard, heatmap, heatmap_canvas
from pipeline.results.junit import Outcome
from pipeline.results.table import merge_runs
from tests.report.test_dashboard import EVIL, case, model

RUNNERS = ("macos-m1-14", "macos-m2-15", "macos-m2-26")
OUTCOMES = (Outcome.PASS, Outcome.XFAIL, Outcome.FAIL, Outcome.SKIP, Outcome.XPASS)


def large_table() -> dict:
    """600 operators × 8 dtypes on three runners (over SVG_MAX_CELLS): plain cells of every
    outcome, one untested dtype per tenth operator, runners disagreeing (one with an evil
    message), flaky results."""
    dtypes = MPS_TEST_DTYPES[:8]
    runs: dict[str, list] = {runner: [] for runner in RUNNERS}
    for op in range(600):
        for d, dtype in enumerate(dtypes):
            if op % 10 == 0 and d == 7:
                continue  # not tested anywhere
            outcome = OUTCOMES[(op + d) % len(OUTCOMES)]
            for k, runner in enumerate(RUNNERS):
                got, message = outcome, ""
                if op % 7 == 0 and d == 1 and k == 2:
                    got, message = Outcome.FAIL, EVIL  # the runners disagree
                runs[runner].append(case(f"op{op}", dtype, got, message, flaky=op % 11 == 0))
    table = merge_runs(runs, {})
    assert heatmap_canvas.cell_count(table) > heatmap_canvas.SVG_MAX_CELLS
    return table.to_dict()


def data_block(page: str) -> dict:
    (text,) = re.findall(r'<pre hidden id="heatmap-data">(.*?)</pre>', page, re.S)
    return json.loads(html.unescape(text))


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_a_large_heatmap_is_a_data_block_and_the_one_script_the_policy_allows():
    table = large_table()
    page = dashboard.render_html(model(table=table, runners=list(RUNNERS)))
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert scripts == [heatmap_canvas.SCRIPT]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    (policy,) = re.findall(r'Content-Security-Policy" content="([^"]*)"', page)
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert "<script>alert" not in page and page.count("<svg") == 2  # pass rate, backlog
    data = data_block(page)
    assert data["runners"] == list(RUNNERS) and data["dtypes"] == table["dtypes"]
    # one character per (row, dtype): its outcome, or "." exactly where the table has none
    assert len(data["grid"]) == len(table["rows"])
    for r, row in enumerate(table["rows"]):
        for c, dtype in enumerate(table["dtypes"]):
            cell = row["cells"].get(dtype)
            char = data["grid"][r][c]
            if cell is None:
                assert char == "."
            else:
                outcome = cell if isinstance(cell, str) else cell["outcome"]
                assert data["outcomes"][int(char)] == outcome
    mixed = [d for d in data["details"].values() if "stripes" in d]
    assert mixed and all(len(d["stripes"]) == 3 for d in mixed)
    assert any(EVIL in d["title"] for d in mixed)  # readable back, never markup on the page
    assert any(d.get("flaky") for d in data["details"].values())
    # the legend: a hatched skip, not tested, and a split cell with its runners in order
    (legend,) = re.findall(r'<div id="heatmap"></div><p class="caption">(.*?)</p>', page, re.S)
    skip, hatch = heatmap.OUTCOME_COLORS[Outcome.SKIP], heatmap.PALETTE.hatch
    assert f"repeating-linear-gradient(45deg,{skip} 0 2px,{hatch} 2px 3.5px)" in legend
    assert "not tested" in legend and "dot: flaky" in legend
    assert f"runners disagree: one stripe per runner, left to right: {', '.join(RUNNERS)}" in (
        legend
    )


def test_a_small_heatmap_stays_svg_without_a_script():
    page = dashboard.render_html(model())
    assert "<script" not in page and 'id="heatmap-data"' not in page
    assert "script-src" not in page


# A page of our own for the script, in node: the document and canvas it uses, recording
# every rectangle filled with its color, and every stroke: an outline ("rect") or the lines
# of one path ("lines", where: the clip's corner, else the first line's start; how many).
_HARNESS = """
const pre = {textContent: require("fs").readFileSync(process.argv[2], "utf8")};
const canvases = [];
const box = {appendChild: (c) => canvases.push(c)};
global.document = {
  getElementById: (id) => id === "heatmap-data" ? pre : id === "heatmap" ? box : null,
  createElement: () => {
    const fills = [], strokes = [];
    let path = [], clip = null;
    const g = {fillStyle: "", strokeStyle: "", font: "", textAlign: "", lineWidth: 1,
      fillRect(x, y, w, h) { fills.push([this.fillStyle, x, y, w, h]); },
      strokeRect(x, y) { strokes.push([this.strokeStyle, "rect", x, y, 1]); },
      beginPath() { path = []; }, moveTo(x, y) { path.push([x, y]); }, lineTo() {},
      rect(x, y) { clip = [x, y]; }, clip() {},
      stroke() { const at = clip || path[0]; strokes.push([this.strokeStyle, "lines", at[0],
        at[1], path.length]); },
      fillText() {}, save() {}, restore() { clip = null; }, translate() {}, rotate() {},
      arc() {}, fill() { fills.push([this.fillStyle, "dot"]); }};
    return {dataset: {}, getContext: () => g, addEventListener() {}, fills, strokes};
  },
};
eval(require("fs").readFileSync(process.argv[3], "utf8"));
console.log(JSON.stringify(canvases.map(c => ({first: +c.dataset.firstRow, top: +c.dataset.top,
  width: c.width, height: c.height, fills: c.fills, strokes: c.strokes}))));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_script_draws_every_tested_cell_in_its_outcomes_color(tmp_path):
    table = large_table()
    page = dashboard.render_html(model(table=table, runners=list(RUNNERS)))
    data = data_block(page)
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    (tmp_path / "heatmap.js").write_text(script)
    (tmp_path / "harness.js").write_text(_HARNESS)
    block = re.findall(r'<pre hidden id="heatmap-data">(.*?)</pre>', page, re.S)[0]
    (tmp_path / "data.json").write_text(html.unescape(block))  # as the browser decodes it
    proc = subprocess.run(
        ["node", *(str(tmp_path / f) for f in ("harness.js", "data.json", "heatmap.js"))],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    canvases = json.loads(proc.stdout)
    layout = data["layout"]
    step = layout["cell"] + layout["gap"]
    assert [c["first"] for c in canvases] == list(range(0, len(data["rows"]), 1000))
    drawn: dict[tuple[int, int], list[str]] = {}
    stroked: dict[tuple[int, int], list[tuple]] = {}
    for canvas in canvases:

        def at(x: float, y: float, top: int = canvas["top"], first: int = canvas["first"]):
            return first + int((y - top) // step), int((x - layout["left"]) // step)

        for fill in canvas["fills"]:
            if fill[1] != "dot":
                drawn.setdefault(at(fill[1], fill[2]), []).append(fill[0])
        for color, kind, x, y, lines in canvas["strokes"]:
            stroked.setdefault(at(x, y), []).append((color, kind, lines))
    colors = [data["colors"][o] for o in data["outcomes"]]
    hatch = (data["hatch"], "lines", 8)  # a cell's diagonals; a stripe's are fewer
    split = [(data["ink"], "lines", len(RUNNERS) - 1), (data["ink"], "rect", 1)]
    skip = data["outcomes"].index("skip")
    assert data["hatched"] == [skip]
    seen = set()
    for r, line in enumerate(data["grid"]):
        for c, char in enumerate(line):
            detail = data["details"].get(f"{r}:{c}", {})
            strokes = stroked.get((r, c), [])
            if char == ".":  # not tested: outlined, never filled
                assert (r, c) not in drawn and strokes == [(data["edge"], "rect", 1)]
            elif "stripes" in detail:
                assert drawn[(r, c)] == [colors[o] for o in detail["stripes"]]
                # each skip stripe hatched, then a line between stripes and the outline
                hatched = [s for s in strokes if s[0] == data["hatch"]]
                assert len(hatched) == detail["stripes"].count(skip)
                assert strokes[len(hatched) :] == split
            else:
                assert drawn[(r, c)] == [colors[int(char)]]
                assert strokes == ([hatch] if int(char) == skip else [])
            seen.add("split" if "stripes" in detail else char)
    assert {".", str(skip), "split"} <= seen  # each kind was drawn and checked
