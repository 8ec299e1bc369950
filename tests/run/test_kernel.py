"""check-kernel on kernel fixtures of our own in the shapes of upstream's softmax, reduction,
scan and index_select (tests/fixtures/metal_kernel), built with the real c10/metal headers of
the newest wheel, with g++ and clang: the right kernels pass, each planted bug is caught."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.flows import kernel as flow
from pipeline.report.kernel import to_json
from pipeline.results.kernel import KernelFileReport, KernelStatus
from pipeline.run import cxx, reference
from pipeline.run.kernel_build import KernelBuilder
from pipeline.tree import host_launch, launch
from pipeline.tree.source import TreeSource
from tests.conftest import fetched
from tests.releases import NEWEST
from tests.test_machine_output import assert_valid

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_kernel"
KERNELS = "aten/src/ATen/native/mps/kernels"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["g++", "clang++-19"])
def compiler(request: pytest.FixtureRequest) -> cxx.Compiler:
    try:
        return cxx.find_compiler(request.param)
    except ConfigError:
        pytest.skip(f"no {request.param}")


@pytest.fixture(scope="module")
def headers() -> cxx.Headers:
    release = fetched(NEWEST)
    return cxx.Headers(release.c10_include, f"torch {NEWEST}'s c10/metal")


def check(
    tmp: Path,
    compiler: cxx.Compiler,
    headers: cxx.Headers,
    name: str,
    edit: tuple[str, str] | None = None,
    kernels: tuple[str, ...] = (),
) -> KernelFileReport:
    """check-kernel of fixture ``name`` (with ``edit``, old -> new, planted) in a tree of
    its own under ``tmp``."""
    root = tmp / "tree"
    if not root.exists():
        shutil.copytree(FIXTURES, root)
    metal = root / KERNELS / f"{name}.metal"
    if edit is not None:
        text = metal.read_text()
        assert edit[0] in text, edit[0]
        metal.write_text(text.replace(edit[0], edit[1], 1))
    builder = KernelBuilder(compiler, headers, root, tmp / "cache")
    source = TreeSource(
        root=root, cache_dir=tmp / "cache", python=sys.executable, opinfo_table=None,
        test_kinds=("output_match",),
    )  # fmt: skip

    def references(cases: list[dict]) -> dict:
        return reference.cached(source, flow.SCRIPT, cases, tmp / "cache" / "kernel", {})

    spec_path = root / "specs" / f"{name}.yaml"
    return flow.check_file(
        metal, launch.read_spec(spec_path), spec_path, flow.KernelRunners(builder, references),
        root=root, scratch=tmp / "run", kernels=kernels,
        launches=host_launch.read_launches(root),
    )  # fmt: skip


def status(report: KernelFileReport) -> dict[str, KernelStatus]:
    return {k.kernel: k.status for k in report.kernels}


@pytest.mark.parametrize("name", ["SoftMax", "Reduction", "Scan", "Indexing"])
def test_right_kernels_pass(tmp_path, compiler, headers, name):
    report = check(tmp_path, compiler, headers, name)
    checked = [k for k in report.kernels if k.status is not KernelStatus.NO_LAUNCH_SPEC]
    assert checked, report
    for k in checked:
        assert k.status is KernelStatus.OK, (k.kernel, k.findings, k.detail)
        assert k.inputs >= 10


def test_a_second_check_asks_torch_nothing(tmp_path, compiler, headers, monkeypatch):
    first = check(tmp_path, compiler, headers, "Reduction")

    def no_run(*args: object) -> dict:
        raise AssertionError(f"{args[1]} ran for {args[2]}")

    monkeypatch.setattr(reference, "run_script", no_run)
    again = check(tmp_path, compiler, headers, "Reduction")
    assert status(again) == status(first) and KernelStatus.OK in status(first).values()


def test_a_missing_barrier_is_a_race(tmp_path, compiler, headers):
    report = check(
        tmp_path, compiler, headers, "SoftMax",
        ("  shared[tid] = top;\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n",
         "  shared[tid] = top;\n\n"),
        kernels=("softmax_tree_float_int",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    assert all("a race: missing barrier?" in f.message for f in k.findings), k.findings
    assert "forward and reverse" in k.findings[0].message


def test_an_off_by_one_in_a_tree_reduction(tmp_path, compiler, headers):
    report = check(
        tmp_path, compiler, headers, "Reduction",
        ("for (uint s = tptg / 2; s > 0; s >>= 1)", "for (uint s = tptg / 2; s > 1; s >>= 1)"),
        kernels=("row_sum_float",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    assert any("elements differ from torch" in f.message for f in k.findings), k.findings


def test_a_wrong_simd_function_shows_with_large_magnitudes_only(tmp_path, compiler, headers):
    report = check(
        tmp_path, compiler, headers, "SoftMax",
        ("top = c10::metal::simd_max(top);", "top = simd_broadcast(top, 0);"),
        kernels=("softmax_rows_float_int",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    assert k.findings and all("large magnitudes" in f.input for f in k.findings), k.findings


def test_an_index_out_of_range_reports_upstreams_message(tmp_path, compiler, headers):
    report = check(
        tmp_path, compiler, headers, "Indexing", kernels=("index_select_rows_float_long",)
    )
    assert_valid("check-kernel --json", to_json(report))
    (k,) = report.kernels
    assert k.status is KernelStatus.OK, k.findings
    (message,) = k.reported
    assert "index 3 is out of bounds for dimension 0 with size 3" in message
    assert "Indexing.metal" in message


def test_an_unchecked_index_faults_naming_the_buffer(tmp_path, compiler, headers):
    report = check(
        tmp_path, compiler, headers, "Indexing",
        ("  if (row < 0 || row >= args.rows) {", "  if (false) {"),
        kernels=("index_select_rows_float_long",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    (finding,) = k.findings
    assert finding.input == "an index one past the end"
    assert "before buffer 0" in finding.message or "past the end of buffer 0" in finding.message


def test_a_kernel_that_does_not_compile_hides_no_other(tmp_path, compiler, headers):
    report = check(
        tmp_path, compiler, headers, "Reduction",
        ("  acc = c10::metal::threadgroup_max(partial, acc, tid, tptg);",
         "  acc = c10::metal::no_such_function(partial, acc, tid, tptg);"),
    )  # fmt: skip
    found = status(report)
    assert found["row_max_float"] is KernelStatus.COMPILE_ERROR
    assert found["row_sum_float"] is KernelStatus.OK
    assert found["row_sum_half"] is KernelStatus.OK
