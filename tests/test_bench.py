"""The benchmark code runs and measures what it says (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bench.__main__ as bench
from pipeline.tree import native_yaml
from tests.conftest import oldest_only


@pytest.fixture
def ctx(tmp_path: Path) -> bench.Context:
    work = tmp_path / "work"
    work.mkdir()
    return bench.make_context(work, tmp_path / "cache", quick=True)


@pytest.mark.slow
def test_quick_junit_run_prints_figures_and_writes_json(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "junit"] + ["--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "parse_report, 100,000 testcases, median of 1" in proc.stdout
    assert "cases/s" in proc.stdout and "goal: < 1 s" in proc.stdout
    data = json.loads((cache / "bench.json").read_text())
    assert data["quick"] is True and data["failures"] == {}
    (result,) = data["results"]
    assert result["name"] == "junit" and result["data"]["cases"] == 100_000
    assert len(result["data"]["parse_s"]) == 1


def test_junit_parses_every_case(ctx: bench.Context) -> None:
    result = bench.bench_junit(ctx, n_cases=500)
    headline = result.figures[0]
    assert headline.unit == "s" and headline.goal == "< 1 s" and headline.headline
    assert result.data["cases"] == 500
    assert result.figures[1].value == pytest.approx(500 / headline.value)


def test_shards_plans_every_recorded_test(ctx: bench.Context) -> None:
    result = bench.bench_shards(ctx, n_tests=400, nights=2)
    headline = result.figures[0]
    assert headline.unit == "s" and headline.headline and headline.label.startswith("plan 400")
    assert result.data["tests"] == 400 and result.data["ratio"] <= 1.05
    assert result.data["count_ratio"] >= result.data["ratio"]


def test_sandbox_selection_misses_no_operator(ctx: bench.Context) -> None:
    result = bench.bench_selection(ctx, real=False)
    rows = result.data["sandbox"]
    # every operator with MPS rows and functors gets a dispatch and a functor change
    assert {r["change"] for r in rows} == {"dispatch", "functor"}
    ops = {r["operator"] for r in rows}
    assert {"atan2", "div"} <= ops
    assert len(rows) == 2 * len(ops)
    assert not [r for r in rows if r["missed"] or r["full_sweep"]]
    assert all(0 < r["selected"] < r["total"] for r in rows)
    figures = {f.label.strip(): f.value for f in result.figures}
    assert figures["sandbox: changed operators missed"] == 0


def test_changed_file_reports_diff_ranges() -> None:
    change = bench.changed_file("f", "a\nb\nc\nd\n", "a\nB\nc\nnew\nd\n")
    assert change.old_ranges == ((2, 2),)
    assert change.new_ranges == ((2, 2), (4, 4))
    assert change.old_text.startswith("a") and change.new_text.endswith("d\n")


IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |       libcst._nodes
import time:       900 |       9000 |     libcst
import time:       500 |      10000 |   pipeline.edit.xfails
import time:       200 |        200 |     tiny
import time:      1000 |       3000 |   pipeline.tree.index
import time:       100 |        200 |   pipeline.nothing
import time:       300 |      14000 | pipeline.tasks
import time:       300 |       9999 | unrelated
"""


def test_import_costs_children_and_dominant_chain() -> None:
    costs = bench.import_costs(IMPORTTIME, "pipeline.tasks")
    assert costs == {
        "pipeline.tasks": 0.014,
        "pipeline.edit.xfails": 0.010,
        "pipeline.tree.index": 0.003,
        "pipeline.edit.xfails > libcst": 0.009,
    }
    assert bench.import_costs(IMPORTTIME, "absent") == {}


@pytest.mark.slow
def test_doit_floor_and_round_robin(ctx: bench.Context) -> None:
    floor = bench.doit_floor(ctx)  # its first run happens here: the task is then up to date
    assert (ctx.work / "floor" / "doit.sqlite").is_file()
    calls: list[str] = []
    samples = bench.round_robin({"floor": floor, "noop": lambda: calls.append("noop")}, 2)
    assert {k: len(v) for k, v in samples.items()} == {"floor": 2, "noop": 2}
    assert calls == ["noop", "noop"] and all(t > 0 for t in samples["floor"])


@pytest.mark.slow
@pytest.mark.realdata
@oldest_only  # bench.real_tree copies the installed wheel's files
def test_real_yaml_cases_fold_one_entry_each(ctx: bench.Context, real_native_yaml: Path) -> None:
    root = bench.real_tree(ctx)
    assert (root / bench.NATIVE_YAML).read_bytes() == real_native_yaml.read_bytes()
    cases = bench.real_yaml_cases(root)
    assert [op for op, _, _ in cases] == list(bench.REAL_FOLDS)
    before = native_yaml.parse((root / bench.NATIVE_YAML).read_text(), bench.NATIVE_YAML)
    for op, entry, (change,) in cases:
        after = native_yaml.parse(change.new_text, bench.NATIVE_YAML)
        old = {e.full_name: e.dispatch for e in before.entries}
        changed = [
            e
            for e in after.entries
            if [r.text for r in e.dispatch] != [r.text for r in old[e.full_name]]
        ]
        assert [e.full_name for e in changed] == [entry]
        assert changed[0].operator == op and changed[0].mps_kind == "shared"


@pytest.mark.slow
def test_fleet_ingests_a_generated_night_and_measures_it(ctx: bench.Context) -> None:
    result = bench.bench_fleet(ctx, n_tests=800, nights=4, shards_per_runner=2)
    figures = {f.label.strip(): f for f in result.figures}
    child = result.data["child"]
    assert child["regressions"] > 0 and child["peak_rss_mb"] > 0
    assert set(child["ratios"]) == set(bench.FLEET_RUNNERS)
    assert figures["summary.json"].value > 0 and figures["summary.json"].goal == "<= 5 MB"
    assert "find_regressions" in child["phases_s"] and "check" in child["phases_s"]
    assert result.data["db_mb"] > 0 and result.data["nights"] == 4


@pytest.mark.slow
@pytest.mark.realdata  # a git history of the wheel's native_functions.yaml
def test_suspects_analyses_each_commit_once(ctx: bench.Context) -> None:
    result = bench.bench_suspects(ctx, n_commits=5)
    found = result.data["found"]
    assert result.data["commits"] == 5 and len(result.data["operators"]) == bench.SUSPECT_OPS
    # the docs commits stop after their diff; the .mm, .metal and yaml ones are analysed
    assert 0 < found["analysed"] <= 5
    # the helper functions added to the kernel and host files make suspects
    assert sum(found[op] for op in result.data["operators"]) > 0
    assert result.figures[0].unit == "s" and result.figures[0].headline


def test_math_generated_file_registers_every_functor() -> None:
    from bench import math as math_bench
    from pipeline.tree import metal

    parsed = metal.parse(math_bench.generated_file(6), "Generated.metal")
    assert [f.name for f in parsed.functors] == [f"f{i}" for i in range(6)]
    assert len(parsed.registrations) == 24 and not parsed.unrecognised
    assert "math" in bench.BENCHMARKS and bench.RUNNERS["math"] is bench.bench_math


_FILL = """#include <metal_stdlib>
using namespace metal;
kernel void fill(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = %s;
}
"""


@pytest.mark.slow
def test_kernel_upstream_share_counts_whole_files_and_leaves_matmul_out(tmp_path: Path) -> None:
    from bench import kernel as kernel_bench
    from bench.math import wheel_build

    kernels = tmp_path / "upstream" / kernel_bench.KERNELS
    kernels.mkdir(parents=True)
    (kernels / "Fill.metal").write_text(_FILL % "1.0f")
    (kernels / "Broken.metal").write_text(_FILL % "no_such_function(i)")
    (kernels / "Gemm.metal").write_text(_FILL % "no_such_function(i)")  # left out
    compiler, headers = wheel_build()
    ok, total, failed, times, one = kernel_bench._upstream_share(
        compiler, headers, tmp_path / "upstream", tmp_path / "work"
    )
    assert (ok, total) == (1, 2) and set(times) == {"Fill", "Broken"}
    # the compiler ran cold; the second build of a file that compiled read its record
    assert times["Fill"].cpu > 0 and times["Fill"].cached < times["Fill"].wall
    assert one == {"Fill": "fill"}  # a kernel per file that built one, for its own build
    assert len(failed) == 1 and failed[0].startswith("Broken.metal: 0/1 kernels;")
    assert "no_such_function" in failed[0]


@pytest.mark.slow
def test_review_checks_a_thousand_line_diff(ctx: bench.Context) -> None:
    result = bench.bench_review(ctx)
    assert result.data["lines"] >= 1000
    # every added functor has one bare max and one fast:: call
    assert result.data["findings"]["bare-minmax"] == result.data["findings"]["fast-math"] > 30
    assert result.figures[0].unit == "s" and result.figures[0].headline


@pytest.mark.slow
def test_tracker_counts_its_requests_first_and_unchanged(ctx: bench.Context) -> None:
    result = bench.bench_tracker(ctx)
    # 2 search pages, 200 file lists, the issue and its PATCH; then the pages and the issue
    assert result.data["first"] == 204 and result.data["unchanged"] == 3
    assert result.figures[0].label.startswith("tracker, 300 operators × 200 open PRs")


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@pytest.mark.realdata  # the newest release's native_functions.yaml (tests/releases.py)
def test_paths_counts_every_overload_of_the_newest_yaml(ctx: bench.Context) -> None:
    from tests.conftest import fetched
    from tests.releases import NEWEST

    fetched(NEWEST)  # skips (fails in CI) when its files cannot be fetched
    result = bench.bench_paths(ctx)
    entries = native_yaml.read(ctx.work / f"paths-{NEWEST}").entries
    assert sum(result.data["counts"].values()) == len(entries)
    assert result.data["counts"]["metal"] and result.data["counts"]["mpsgraph"]
    assert result.data["in_process_s"] and result.data["process_s"]


def test_code_figures_count_what_they_name(tmp_path: Path) -> None:
    from bench.code import measure

    package = tmp_path / "pipeline"
    (package / "commands").mkdir(parents=True)
    (package / "sandbox").mkdir()
    (package / "errors.py").write_text("class PipelineError(Exception):\n    exit_code = 2\n")
    (package / "sandbox" / "x.py").write_text("d = {}\nd['ignored']\n")
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (package / "commands" / "a.py").write_text(
        "from typing import Any, Mapping\n"
        "from pipeline.errors import PipelineError\n"
        "_NULL = type(None)\n_EXPR = (str, int)\n"
        "class Mine(PipelineError):\n    pass\n"
        "class Deeper(Mine):\n    pass\n"
        "def f(d: dict[str, Any], m: Mapping[str, Any]) -> int:\n"
        "    d['a'] = m['b']\n    d.get('c')\n    d.pop(0)\n    m.pop('e', str, type(None))\n"
        "    m.pop('f', int, _NULL)\n    m.pop('g', *_EXPR)\n    m.pop('h', d)\n"
        "    try:\n        return 0\n    except Mine:\n        return 1\n"
        "def g(p) -> None:\n    p.add_argument('--json')\n" + long_body
    )
    figures = measure(package)
    # d['a'], m['b'], d.get('c'), m.pop('h', d) and the checked pops of e, f (a named
    # type) and g (a spread tuple of types); not d.pop(0)
    assert figures.string_key_lookups == 7 and figures.edge_reads == 3
    assert figures.str_any_mappings == 2
    assert figures.exit_code_mappers == ("pipeline/commands/a.py", "pipeline/errors.py")
    assert figures.errors_outside_errors_py == (
        "pipeline/commands/a.py:Deeper",
        "pipeline/commands/a.py:Mine",
    )
    assert figures.long_functions == ("pipeline/commands/a.py:g (82)",)
    assert figures.json_flag_declarations == 1
