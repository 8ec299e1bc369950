"""The static nightly dashboard: inline SVG charts, escaped text, the files it writes."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from pipeline.errors import PipelineError
from pipeline.report import dashboard, heatmap
from pipeline.report.nightly_summary import NightlySummary, RunCounts
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import DtypeTable, merge_runs

SVG = "{http://www.w3.org/2000/svg}"
DIFF = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,1 @@\n-    torch.int64,  # <script>\n     torch.int32,\n"
EVIL = "mismatch <script>alert('pwn')</script> & \"quotes\""


def case(stem: str, dtype: str, outcome: Outcome, message: str = "", flaky: bool = False):
    name = f"test_output_match_{stem}_mps_{dtype}"
    return CaseResult("TestConsistencyMPS", name, "output_match", stem, dtype, outcome, flaky,
                      1, message, 0.1, "r.xml")  # fmt: skip


def table():
    """atan2: float32 fails on one runner with an evil message; int64 flaky."""
    runs = {
        "macos-m1-14": [
            case("atan2", "float32", Outcome.FAIL, EVIL),
            case("atan2", "int64", Outcome.XPASS, flaky=True),
        ],
        "macos-m2-15": [
            case("atan2", "float32", Outcome.PASS),
            case("atan2", "int64", Outcome.XPASS),
        ],
    }
    return merge_runs(runs, {"atan2": "atan2 <b>"})


def counts(**found: int) -> dict[str, int]:
    """Tests per outcome, every outcome (as summary.json spells them)."""
    return {o.value: found.get(o.value, 0) for o in Outcome}


PATHS = {"metal": 0, "mpsgraph": 1, "composite": 0, "none": 0, "unknown": 0}


def summary(**overrides):
    """A summary.json document; ``missing_runners`` follows ``runners``."""
    data = {
        "schema": 2,
        "started": "2026-03-02T03:17:00.000000Z",
        "commit": "0123456789abcdef",
        "source": "https://example.invalid/run/1?a=<x>",
        "runners": ["macos-m1-14", "macos-m2-15"],
        "required_runners": ["macos-m1-14", "macos-m2-15", "macos-m2-26"],
        "missing_runners": ["macos-m2-26"],
        "min_passes": 3,
        "counts": {"macos-m1-14": counts(**{"pass": 1, "fail": 1}), "macos-m2-15": counts(xpass=2)},
        "pass_rate": {"macos-m1-14": 0.5, "macos-m2-15": 1.0},
        "table": table().to_dict(),
        "shards": {},
        "devices": {},
        "proposals": [
            {
                "list": "UNIMPLEMENTED_XFAILLIST",
                "function": "mps_ops_modifier",
                "key": "atan2",
                "action": "drop_dtypes",
                "old_dtypes": ["int64", "int32"],
                "new_dtypes": ["int32"],
                "dropped": ["int64"],
                "reason": "int64: xpassed <everywhere>",
            }
        ],  # fmt: skip
        "proposal_note": "",
        "judged_nightlies": [],
        "candidates": [
            {"list": "ON_MPS_XFAILLIST", "function": "f", "key": "fmod", "streaks": {"float16": 2}}
        ],
        "diff": DIFF,
        "not_judged": [],
        "regressions": [
            {
                "runner": "macos-m1-14",
                "classname": "T",
                "name": "test_output_match_atan2_mps_float32",
                "stem": "atan2",
                "dtype": "float32",
                "before": "pass",
                "after": "fail",
                "flaky": False,
                "message": EVIL,
                "previous": "2026-03-01T03:17:00.000000Z",
                "previous_commit": "",
                "suspects": [],
                "suspects_note": "",
            }
        ],  # fmt: skip
        "flaky": [
            {
                "runner": "macos-m1-14",
                "classname": "T",
                "name": "test_output_match_atan2_mps_int64",
                "stem": "atan2",
                "dtype": "int64",
                "reasons": ["attempts disagreed tonight"],
                "outcomes": ["xpass"],
            }
        ],  # fmt: skip
        "backlog": {
            "error": None,
            "counts": {"migrate": 1},
            "total": 1,
            "items": [
                {
                    "op": "atan2",
                    "workflow": "migrate",
                    "overloads": 1,
                    "mps_kernels": ["atan2_out_mps"],
                    "xfail_dtypes": 6,
                    "has_functor": True,
                    "has_opinfo": True,
                    "paths": PATHS,
                }
            ],  # fmt: skip
        },
        "paths": [],
        "history": [
            {
                "started": f"2026-03-0{d}T03:17:00.000000Z",
                "runner": r,
                "pass_rate": rate,
                "counts": counts(**{"pass": round(100 * rate), "fail": 100 - round(100 * rate)}),
            }
            for d, rates in ((1, (0.9, 0.95)), (2, (0.5, 1.0)))
            for r, rate in zip(("macos-m1-14", "macos-m2-15"), rates, strict=True)
        ],  # fmt: skip
        "reports": {"total": 2, "skipped": []},
        "warnings": ["a <warning>"],
    }
    data.update(overrides)
    if "missing_runners" not in overrides:
        data["missing_runners"] = [r for r in data["required_runners"] if r not in data["runners"]]
    return data


def model(**overrides) -> NightlySummary:
    """:func:`summary`, read as summary.json is."""
    return NightlySummary.from_json(summary(**overrides))


def parse_svg(text: str) -> ET.Element:
    root = ET.fromstring(text)  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg"
    return root


def test_page_has_svg_charts_and_escapes_every_message():
    html = dashboard.render_html(model())
    assert html.count("<svg") == 3  # pass rate, heatmap, backlog
    assert "<script" not in html
    assert (
        "mismatch &lt;script&gt;alert(&#x27;pwn&#x27;)&lt;/script&gt; &amp; &quot;quotes&quot;"
        in html
    )
    assert "atan2 &lt;b&gt;" in html and "atan2 <b>" not in html
    assert "&lt;everywhere&gt;" in html and "a &lt;warning&gt;" in html
    assert "?a=&lt;x&gt;" in html
    assert "default-src 'none'" in html  # no script could run even if one slipped through
    assert "macos-m2-26: no results" in html
    assert '<span class="del">-    torch.int64,  # &lt;script&gt;</span>' in html
    assert "fmod" in html and "float16 2/3" in html


def test_every_chart_is_well_formed_svg():
    data = model()
    for svg in (
        dashboard.pass_rate_chart(data.history),
        heatmap.heatmap(data.table),
        dashboard.bar_chart(data.backlog.counts, dashboard.WORKFLOW_LABELS),
    ):
        parse_svg(svg)


def test_heatmap_cells_stripes_and_tooltips():
    root = parse_svg(heatmap.heatmap(table()))
    cells = root.findall(f"{SVG}g")
    assert len(cells) == 2
    by_title = {g.find(f"{SVG}title").text.split("\n")[0]: g for g in cells}
    mixed = by_title["atan2 <b> float32: fail"]
    # runners disagree: one stripe per runner, in runner order (fail, pass), a dark line
    # between them and a dark outline around the cell
    rects = mixed.findall(f"{SVG}rect")
    assert [r.get("fill") for r in rects] == [
        heatmap.OUTCOME_COLORS[Outcome.FAIL], heatmap.OUTCOME_COLORS[Outcome.PASS], "none"
    ]  # fmt: skip
    assert rects[-1].get("stroke") == heatmap.PALETTE.ink
    (divider,) = mixed.findall(f"{SVG}line")
    assert divider.get("stroke") == heatmap.PALETTE.ink
    assert float(divider.get("x1")) == float(rects[1].get("x")) == float(divider.get("x2"))
    assert EVIL in mixed.find(f"{SVG}title").text  # unescaped back by the XML parser
    flaky = by_title["atan2 <b> int64: xpass (flaky)"]
    xpass = heatmap.OUTCOME_COLORS[Outcome.XPASS]
    assert [r.get("fill") for r in flaky.findall(f"{SVG}rect")] == [xpass]
    assert flaky.find(f"{SVG}circle") is not None  # the flaky dot
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "float32" in labels and "int64" in labels and "atan2 <b>" in labels


def _cell_rect(root: ET.Element, title: str) -> ET.Element:
    """The (first) rectangle of the heatmap cell whose tooltip starts with ``title``."""
    parent = {child: node for node in root.iter() for child in node}
    found = next(parent[t] for t in root.iter(f"{SVG}title") if t.text.split("\n")[0] == title)
    return found if found.tag == f"{SVG}rect" else found.find(f"{SVG}rect")


def test_a_skip_is_hatched_an_untested_cell_outlined_and_the_legend_shows_both():
    runs = {
        r: [case("atan2", "float32", Outcome.SKIP), case("atan2", "float16", Outcome.PASS),
            case("fmod", "float32", Outcome.SKIP)]
        for r in ("macos-m1-14", "macos-m2-15")
    }  # fmt: skip
    for compact in (False, True):
        # as summary.json spells the table, a plain cell its outcome alone, or not
        read = DtypeTable.read(merge_runs(runs).to_dict(compact=compact), "t", "")
        root = parse_svg(heatmap.heatmap(read))
        skip = _cell_rect(root, "atan2 float32: skip on every runner")
        untested = _cell_rect(root, "fmod float16: not tested")
        # a skip: its light gray crossed by dark lines, a pattern the SVG defines
        pattern = root.find(f".//{SVG}pattern[@id='hatch-skip']")
        assert skip.get("fill") == "url(#hatch-skip)" and pattern is not None
        tile = [r.get("fill") for r in pattern.findall(f"{SVG}rect")]
        assert tile == [heatmap.OUTCOME_COLORS[Outcome.SKIP], heatmap.PALETTE.hatch]
        # not tested: white, outlined, nothing like a skip
        assert untested.get("fill") == heatmap.NOT_RUN
        assert untested.get("stroke") == heatmap.PALETTE.edge
        legend = [t.text for t in root.iter(f"{SVG}text")]
        assert {"skip", "not tested", "flaky"} <= set(legend)
        assert "runners disagree: one stripe per runner, left to right: macos-m1-14, " \
            "macos-m2-15" in legend  # fmt: skip
        # the legend's skip swatch is the hatch too, and its split cell is drawn as one
        swatch = [r for r in root.findall(f"{SVG}rect") if r.get("width") == "12"]
        assert "url(#hatch-skip)" in {r.get("fill") for r in swatch}
        assert len(root.findall(f"{SVG}line")) == 1  # the legend's split: one divider


def test_pass_rate_chart_has_a_line_and_points_per_runner_and_breaks_on_gaps():
    history = [
        RunCounts(f"2026-03-0{day}T03:17:00Z", runner, counts(**{"pass": ok, "fail": 100 - ok}))
        for runner, day, ok in (("a", 1, 90), ("a", 3, 80), ("b", 1, 95), ("b", 2, 97),
                                    ("b", 3, 100))
    ]  # fmt: skip
    history.insert(1, RunCounts("2026-03-02T03:17:00Z", "a", counts(skip=3)))  # none ran
    root = parse_svg(dashboard.pass_rate_chart(history))
    paths = [p.get("d") for p in root.iter(f"{SVG}path")]
    assert len(paths) == 2
    assert paths[0].count("M") == 2 and "L" not in paths[0]  # a's line breaks at the gap
    assert paths[1].count("M") == 1 and paths[1].count("L") == 2
    tips = [t.text for t in root.iter(f"{SVG}title")]
    assert "a 2026-03-01T03:17: 90.0% (pass 90, fail 10)" in tips and len(tips) == 5
    assert "03-02" in [t.text for t in root.iter(f"{SVG}text")]


def test_empty_inputs_draw_a_message():
    assert "no nightly history yet" in dashboard.pass_rate_chart([])
    assert "no consistency test results" in heatmap.heatmap(DtypeTable((), (), ()))
    html = dashboard.render_html(
        model(
            proposals=[], diff="", candidates=[], regressions=[], flaky=[], history=[],
            proposal_note="nothing xpassed", warnings=[],
            backlog={"error": "no torch <here>", "counts": {}, "total": 0, "items": []},
        )
    )  # fmt: skip
    assert "Unavailable: no torch &lt;here&gt;" in html
    assert "nothing xpassed." in html and "xfail-removals.diff" not in html


def test_write_dashboard_writes_the_files_and_drops_a_stale_diff(tmp_path):
    out = tmp_path / "dash"
    written = dashboard.write_dashboard(out, model(), "# md\n")
    assert [p.name for p in written] == ["index.html", "summary.md", "summary.json", dashboard.DIFF]
    assert json.loads((out / "summary.json").read_text())["commit"] == "0123456789abcdef"
    assert (out / dashboard.DIFF).read_text().startswith("--- a/x.py")
    dashboard.write_dashboard(out, model(diff=""), "# md\n")
    assert not (out / dashboard.DIFF).exists()


@pytest.mark.parametrize("rate", [0.0, 0.42, 1.0])
def test_pass_rate_axis_covers_the_lowest_point(rate):
    worked = round(100 * rate)
    history = [
        RunCounts("2026-03-01T03:17:00Z", "a", counts(**{"pass": worked, "fail": 100 - worked}))
    ]
    root = parse_svg(dashboard.pass_rate_chart(history))
    (point,) = root.iter(f"{SVG}circle")
    assert 0 <= float(point.get("cy")) <= float(root.get("height"))


def test_a_move_names_the_list_it_goes_to():
    move = {
        "list": "ON_MPS_XFAILLIST",
        "function": "mps_ops_modifier",
        "key": "maximum",
        "action": "move",
        "old_dtypes": ["bfloat16"],
        "new_dtypes": [],
        "dropped": ["bfloat16"],
        "to_list": "MACOS_BEFORE_15_0_XFAILLIST",
        "reason": "bfloat16: xfail on macos-m1-14 (macOS 14.0) and xpass on macos-m2-15",
    }
    html = dashboard.render_html(model(proposals=[move]))
    assert "<td>move → MACOS_BEFORE_15_0_XFAILLIST</td>" in html
    assert "xfail on macos-m1-14 (macOS 14.0) and xpass on macos-m2-15" in html
    assert dashboard.action_text(model().proposals[0]) == "drop_dtypes"


def test_a_regression_lists_its_suspects_escaped_and_cut():
    suspects = [
        {
            "commit": f"{n:x}" * 40,
            "title": f"suspect {n} <b>{EVIL}</b>",
            "kind": "own" if n == 1 else "shared",
            "reasons": [f"BinaryKernel.metal:{n} functor <atan2_functor> changed"],
        }
        for n in range(1, dashboard.MAX_SUSPECTS + 3)
    ]
    (regression,) = summary()["regressions"]
    regression.update(suspects=suspects, suspects_note="a <note>", previous_commit="")
    html = dashboard.render_html(model(regressions=[regression]))
    row = html[html.index("<td>test_output_match_atan2_mps_float32</td>") :].split("</tr>")[0]
    assert "<script" not in row and "suspect 1 &lt;b&gt;mismatch &lt;script&gt;" in row
    assert row.index("<code>111111111111</code> <b>own</b>") < row.index("<b>shared</b>")
    assert "functor &lt;atan2_functor&gt; changed" in row
    assert row.count("<li>") == dashboard.MAX_SUSPECTS and "…and 2 more suspects" in row
    assert "a &lt;note&gt;" in row
    # a summary.json written before suspects existed still draws
    assert "<td>–</td>" in dashboard.render_html(model())  # no suspects


def test_plain_cells_and_the_shard_balance_of_a_schema_2_summary():
    runs = {
        r: [case("atan2", "float16", Outcome.PASS), case("atan2", "float32", Outcome.FAIL, "x")]
        for r in ("macos-m1-14", "macos-m2-15")
    }
    table = merge_runs(runs).to_dict(compact=True)
    assert table["rows"][0]["cells"]["float16"] == "pass"  # plain: just the outcome
    assert table["rows"][0]["cells"]["float32"]["runners"]["macos-m1-14"]["message"] == "x"
    evil = "m1<script>"
    shards = {
        evil: {
            "reports": [
                {"report": f"{evil}/shard-1.xml", "shard": 1, "seconds": 90.0,
                 "measured": "suite", "tests": 10},
                {"report": f"{evil}/x.xml", "shard": None, "seconds": 30.0,
                 "measured": "cases", "tests": 5},
            ],
            "total_seconds": 120.0, "max_seconds": 90.0, "mean_seconds": 60.0, "ratio": 1.5,
        }
    }  # fmt: skip
    page = dashboard.render_html(model(table=table, shards=shards))
    assert "atan2 float16: pass on every runner" in page
    assert "<h2>Shard balance</h2>" in page and "1.50×" in page
    assert "1 min 30 s" in page and "30.0 s (sum of its tests)" in page
    assert "m1&lt;script&gt;/x.xml" in page and "<script>" not in page
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        parse_svg(svg)


def test_a_summary_without_shard_times_says_so():
    assert "No shard times (no report was read)" in dashboard.render_html(model())


def test_a_summary_is_read_with_every_key_checked():
    # read and written again: the same document, its table compact
    again = NightlySummary.from_json(summary()).to_json()
    assert again == {**summary(), "table": model().table.to_dict(compact=True)}
    with pytest.raises(PipelineError, match="schema 1; this version reads 2"):
        NightlySummary.from_json(summary(schema=1))
    with pytest.raises(PipelineError, match="unknown key"):
        NightlySummary.from_json({**summary(), "extra": 1})
    broken = summary()
    broken["regressions"][0]["after"] = "melted"
    with pytest.raises(PipelineError, match=r"regressions\[0\]\.after is 'melted'"):
        NightlySummary.from_json(broken)
    with pytest.raises(PipelineError, match="missing_runners"):
        NightlySummary.from_json(summary(missing_runners=[]))


def test_a_backlog_item_without_an_opinfo_says_its_xfails_are_unknown():
    # issue 27: never a bare 0 for xfails no OpInfo was found to key
    from pipeline.guide.backlog import BacklogItem
    from pipeline.guide.claims import Claim, ClaimState
    from pipeline.guide.workflow import Workflow
    from pipeline.report import tracker
    from pipeline.report.nightly import render_summary_markdown
    from pipeline.tree.index import NO_OPINFO

    item = BacklogItem("special_airy_ai", Workflow.MIGRATE, 1, ("special_airy_ai_out_mps",), 0,
                       False, False)  # fmt: skip
    data = summary()
    data["backlog"]["items"] = [item.to_dict()]
    html = dashboard.render_html(NightlySummary.from_json(data))
    assert f"<td>? {NO_OPINFO}</td>" in html
    markdown = render_summary_markdown(NightlySummary.from_json({**data, "warnings": []}))
    line = next(x for x in markdown.splitlines() if x.startswith("- special\\_airy\\_ai:"))
    assert line.endswith(f"; {NO_OPINFO}")
    section = tracker.render_section([Claim(item.op, ClaimState.UNCLAIMED, (), item)], [])
    assert f"| 1 | `special_airy_ai` | migrate | 1 | ? {NO_OPINFO} | unclaimed |" in section


def test_shards_without_times_have_an_unknown_balance_never_a_number():
    untimed = {
        "macos-m1-14": {
            "reports": [{"report": f"macos-m1-14/shard-{i}.xml", "shard": i, "seconds": 0.0,
                         "measured": "suite", "tests": 4} for i in (1, 2)],
            "total_seconds": 0.0, "max_seconds": 0.0, "mean_seconds": 0.0, "ratio": None,
        }
    }  # fmt: skip
    html = dashboard.shard_balance(model(shards=untimed).shards)
    assert "<td>unknown (no times)</td>" in html and "×" not in html
