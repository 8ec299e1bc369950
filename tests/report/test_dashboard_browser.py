"""The nightly dashboard in a real browser: headless Chromium on the page of a real nightly of
a demo checkout (three runners, three nights), read back against that night's summary.json.

The heatmap's cells are counted from what the page itself holds, read in the browser: the
page's own JSON data block when it has one (a drawing made from data), else the drawn cells'
tooltips. So the test holds however the cells are drawn (SVG shapes or a canvas).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from docsgen.browser import chromium, open_page
from docsgen.runs import RUNNERS, demo_nightlies
from tests.conftest import settings_env

pytestmark = pytest.mark.slow
IN_CI = os.environ.get("MPS_PIPELINE_CI") == "1"


def _need_browser() -> None:
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright (pip install playwright, never `playwright install`)")
    if chromium() is None:
        missing.append("chromium (apt-get install -y chromium)")
    if missing:
        message = "no " + " and no ".join(missing)
        if IN_CI:  # .ci/run installs both: a skip there would hide a broken dashboard
            pytest.fail(message + "; CI (MPS_PIPELINE_CI=1) must run it")
        pytest.skip(message)


# (operator row label, dtype) of every cell the page shows, read in the page.
CELLS_JS = r"""
() => {
  const labelOf = (row) => (row.name ?? row.stem ?? row.op ?? '') +
      (row.kind === 'output_grad_match' ? ' · grad' : '');
  for (const block of document.querySelectorAll('script[type="application/json"]')) {
    let data;
    try { data = JSON.parse(block.textContent); } catch (e) { continue; }
    const stack = [data];
    while (stack.length) {
      const value = stack.pop();
      if (!value || typeof value !== 'object') continue;
      if (Array.isArray(value.rows) && Array.isArray(value.dtypes) &&
          value.rows.every((r) => r && typeof r === 'object' && 'cells' in r)) {
        const cells = [];
        for (const row of value.rows) {
          if (Array.isArray(row.cells)) {
            row.cells.forEach((c, j) => { if (c !== null && c !== undefined)
              cells.push([labelOf(row), value.dtypes[j]]); });
          } else {
            for (const [dtype, c] of Object.entries(row.cells)) {
              if (c !== null && c !== undefined) cells.push([labelOf(row), dtype]);
            }
          }
        }
        return {source: 'data', cells};
      }
      for (const key of Object.keys(value)) stack.push(value[key]);
    }
  }
  const svg = [...document.querySelectorAll('svg')].find((s) =>
      (s.getAttribute('aria-label') || '').startsWith('operator by dtype'));
  if (!svg) return {source: 'none', cells: []};
  const cells = [];
  for (const title of svg.querySelectorAll('title')) {
    const head = title.textContent.split('\n')[0];
    const where = head.slice(0, head.lastIndexOf(': '));
    if (head.endsWith(': not tested')) continue;
    const cut = where.lastIndexOf(' ');
    cells.push([where.slice(0, cut), where.slice(cut + 1)]);
  }
  return {source: 'drawing', cells};
}
"""

CARDS_JS = r"""
() => [...document.querySelectorAll('.card')].map((card) => {
  const value = card.querySelector('b');
  return [card.textContent.slice((value ? value.textContent : '').length).trim(),
          value ? value.textContent.trim() : ''];
})
"""


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The dashboard of three real nightlies of a demo checkout, and its summary.json."""
    _need_browser()
    # the session's check-math cache (tests/conftest.py): the migration's torch answers and
    # objects for atan2 are the other tests' (by digest), not asked again in the demo's own
    dashboard = demo_nightlies(tmp_path_factory.mktemp("demo-nightly"), env=settings_env())
    return dashboard, json.loads((dashboard / "summary.json").read_text(encoding="utf-8"))


def _expected_cells(summary: dict[str, Any]) -> list[tuple[str, str]]:
    rows = summary["table"]["rows"]
    return [
        (row["name"] + (" · grad" if row["kind"] == "output_grad_match" else ""), dtype)
        for row in rows
        for dtype, cell in row["cells"].items()
        if cell is not None
    ]


def test_the_dashboard_renders_without_console_errors(nightly) -> None:
    dashboard, _ = nightly
    with open_page(dashboard / "index.html") as page:
        title = page.evaluate("() => document.title")
        headings = page.evaluate("() => [...document.querySelectorAll('h2')].length")
        errors = list(page.console_errors)
    assert "MPS nightly" in title
    assert headings >= 5
    assert errors == []


def test_the_heatmap_has_one_cell_per_operator_and_dtype_of_summary_json(nightly) -> None:
    dashboard, summary = nightly
    with open_page(dashboard / "index.html") as page:
        shown = page.evaluate(CELLS_JS)
    expected = _expected_cells(summary)
    assert shown["source"] in ("data", "drawing"), shown
    # the demo's 40 rows (output and grad) of up to 10 dtypes: far from empty
    assert len(expected) > 100
    got = [tuple(cell) for cell in shown["cells"]]
    assert len(got) == len(expected)
    assert Counter(dtype for _, dtype in got) == Counter(dtype for _, dtype in expected)
    assert sorted(got) == sorted(expected)


def test_the_cards_show_summary_json_numbers(nightly) -> None:
    dashboard, summary = nightly
    with open_page(dashboard / "index.html") as page:
        cards = dict(page.evaluate(CARDS_JS))
    assert cards["regressions"] == str(len(summary["regressions"]))
    assert cards["flaky tests"] == str(len(summary["flaky"]))
    assert cards["xfail removals"] == str(len(summary["proposals"]))
    assert cards["migration backlog"] == str(summary["backlog"]["total"])
    for runner in RUNNERS:
        assert cards[f"pass rate {runner}"] == f"{summary['pass_rate'][runner]:.1%}"
    # what the three nights made: atan2's integer xfails xpassed on every runner each night
    assert [p["key"] for p in summary["proposals"]] == ["atan2"]
    assert summary["regressions"] == [] and sorted(summary["pass_rate"]) == sorted(RUNNERS)
