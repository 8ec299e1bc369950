"""check-kernel on kernel fixtures of our own in the shapes of upstream's softmax, reduction,
scan and index_select (tests/fixtures/metal_kernel), built with the real c10/metal headers of
the newest wheel: the right kernels pass with g++ and with clang, each planted bug is caught
(with one of them: the bugs are the kernels', not the compiler's). Each fixture is built once
per compiler and torch asked once per launch entry: the module shares one cache."""

from __future__ import annotations

import shutil
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.flows import kernel as flow
from pipeline.report.kernel import to_json
from pipeline.results.kernel import KernelFileReport, KernelStatus
from pipeline.run import cxx, kernel_build, kernel_run, kernel_unit, reference
from pipeline.run.kernel_build import GAVE_UP, NOT_ASKED, KernelBuilder
from pipeline.tree import host_launch, launch
from pipeline.tree.source import TreeSource
from tests.conftest import fetched
from tests.releases import NEWEST
from tests.test_machine_output import assert_valid

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_kernel"
KERNELS = "aten/src/ATen/native/mps/kernels"

pytestmark = pytest.mark.slow
SCHEDULE = kernel_run.Schedule.FORWARD


def _compiler(name: str) -> cxx.Compiler:
    try:
        return cxx.find_compiler(name)
    except ConfigError:
        pytest.skip(f"no {name}")


@pytest.fixture(scope="module", params=["g++", "clang++-19"])
def compiler(request: pytest.FixtureRequest) -> cxx.Compiler:
    """Both compilers: for what the compiler decides (that the right kernels build and pass)."""
    return _compiler(request.param)


@pytest.fixture(scope="module")
def one_compiler() -> cxx.Compiler:
    """One compiler, for what does not depend on it (each planted bug is caught)."""
    try:
        return cxx.find_compiler("clang++-19")
    except ConfigError:
        return _compiler("g++")


@pytest.fixture(scope="module")
def headers() -> cxx.Headers:
    release = fetched(NEWEST)
    return cxx.Headers(release.c10_include, f"torch {NEWEST}'s c10/metal")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: one cache (objects by content, torch's answers by entry) shared
    by every check, so each fixture builds once per compiler and torch runs once per entry."""
    return tmp_path_factory.mktemp("kernel")


def check(
    work: Path,
    compiler: cxx.Compiler,
    headers: cxx.Headers,
    name: str,
    edit: tuple[str, str] | None = None,
    kernels: tuple[str, ...] = (),
) -> KernelFileReport:
    """check-kernel of fixture ``name`` (with ``edit``, old -> new, planted in a tree of its
    own) with the module's cache under ``work``."""
    root = work / "tree"
    if edit is not None:
        root = work / f"tree-{name}-{abs(hash(edit))}"
    metal = root / KERNELS / f"{name}.metal"
    if not root.exists():
        shutil.copytree(FIXTURES, root)
    if edit is not None and edit[1] not in metal.read_text():  # planted once per edit
        text = metal.read_text()
        assert edit[0] in text, edit[0]
        metal.write_text(text.replace(edit[0], edit[1], 1))
    cache = work / "cache"
    builder = KernelBuilder(compiler, headers, root, cache / compiler.name)
    source = TreeSource(
        root=root, cache_dir=cache, python=sys.executable, opinfo_table=None,
        test_kinds=("output_match",),
    )  # fmt: skip

    def references(cases: list[flow.KernelCase]) -> dict[str, tuple[reference.KernelAnswer, ...]]:
        return reference.kernel_references(source, cases, cache / "references")

    spec_path = root / "specs" / f"{name}.yaml"
    return flow.check_file(
        metal, launch.read_spec(spec_path), spec_path, flow.KernelRunners(builder, references),
        root=root, scratch=work / "run" / compiler.name, kernels=kernels,
        launches=host_launch.read_launches(root),
    )  # fmt: skip


@pytest.fixture(scope="module")
def right(work: Path, headers: cxx.Headers) -> Callable[[cxx.Compiler, str], KernelFileReport]:
    """check-kernel of the unedited fixture ``name`` by a compiler, run once and shared."""
    done: dict[tuple[str, str], KernelFileReport] = {}

    def get(compiler: cxx.Compiler, name: str) -> KernelFileReport:
        key = (compiler.identity, name)
        if key not in done:
            done[key] = check(work, compiler, headers, name)
        return done[key]

    return get


def status(report: KernelFileReport) -> dict[str, KernelStatus]:
    return {k.kernel: k.status for k in report.kernels}


@pytest.mark.parametrize("name", ["SoftMax", "Reduction", "Scan", "Indexing"])
def test_right_kernels_pass(compiler, right, name):
    report = right(compiler, name)
    checked = [k for k in report.kernels if k.status is not KernelStatus.NO_LAUNCH_SPEC]
    assert checked, report
    for k in checked:
        assert k.status is KernelStatus.OK, (k.kernel, k.findings, k.detail)
        assert k.inputs >= 10


def test_a_second_check_asks_torch_nothing(work, one_compiler, headers, right, monkeypatch):
    first = right(one_compiler, "Reduction")

    def no_run(*args: object) -> dict:
        raise AssertionError(f"{args[1]} ran for {args[2]}")

    monkeypatch.setattr(reference, "run_script", no_run)
    again = check(work, one_compiler, headers, "Reduction")
    assert status(again) == status(first) and KernelStatus.OK in status(first).values()
    assert again.cached  # and its object came from the cache


def test_a_missing_barrier_is_a_race(work, one_compiler, headers):
    report = check(
        work, one_compiler, headers, "SoftMax",
        ("  shared[tid] = top;\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n",
         "  shared[tid] = top;\n\n"),
        kernels=("softmax_tree_float_int",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    assert all("a race: missing barrier?" in f.message for f in k.findings), k.findings
    assert "forward and reverse" in k.findings[0].message


def test_an_off_by_one_in_a_tree_reduction(work, one_compiler, headers):
    report = check(
        work, one_compiler, headers, "Reduction",
        ("for (uint s = tptg / 2; s > 0; s >>= 1)", "for (uint s = tptg / 2; s > 1; s >>= 1)"),
        kernels=("row_sum_float",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    assert any("elements differ from torch" in f.message for f in k.findings), k.findings


def test_a_wrong_simd_function_shows_with_large_magnitudes_only(work, one_compiler, headers):
    report = check(
        work, one_compiler, headers, "SoftMax",
        ("top = c10::metal::simd_max(top);", "top = simd_broadcast(top, 0);"),
        kernels=("softmax_rows_float_int",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    assert k.findings and all("large magnitudes" in f.input for f in k.findings), k.findings


def test_an_index_out_of_range_reports_upstreams_message(one_compiler, right):
    report = right(one_compiler, "Indexing")
    assert_valid("check-kernel --json", to_json(report))
    (k,) = [k for k in report.kernels if k.kernel == "index_select_rows_float_long"]
    assert k.status is KernelStatus.OK, k.findings
    (message,) = k.reported
    assert "index 3 is out of bounds for dimension 0 with size 3" in message
    assert "Indexing.metal" in message


def test_an_unchecked_index_faults_naming_the_buffer(work, one_compiler, headers):
    report = check(
        work, one_compiler, headers, "Indexing",
        ("  if (row < 0 || row >= args.rows) {", "  if (false) {"),
        kernels=("index_select_rows_float_long",),
    )  # fmt: skip
    (k,) = report.kernels
    assert k.status is KernelStatus.FAILED
    (finding,) = k.findings
    assert finding.input == "an index one past the end"
    assert "before buffer 0" in finding.message or "past the end of buffer 0" in finding.message


def test_a_kernel_that_does_not_compile_hides_no_other(work, compiler, headers):
    """Both compilers: what a compile error leaves of the file is the compiler's to say."""
    report = check(
        work, compiler, headers, "Reduction",
        ("  acc = c10::metal::threadgroup_max(partial, acc, tid, tptg);",
         "  acc = c10::metal::no_such_function(partial, acc, tid, tptg);"),
    )  # fmt: skip
    found = status(report)
    assert found["row_max_float"] is KernelStatus.COMPILE_ERROR
    assert found["row_sum_float"] is KernelStatus.OK
    assert found["row_sum_half"] is KernelStatus.OK


def test_a_check_of_some_kernels_compiles_only_those(work, one_compiler, headers):
    """A build for named kernels instantiates only them: a kernel not asked for, broken where
    only its instantiation shows it, neither fails the build nor is in the object."""
    edit = (
        "  acc = c10::metal::threadgroup_max(partial, acc, tid, tptg);",
        "  acc = c10::metal::threadgroup_max(partial, acc, tid, tptg).no_such_member;",
    )
    whole = status(check(work, one_compiler, headers, "Reduction", edit))
    assert whole["row_max_float"] is KernelStatus.COMPILE_ERROR
    assert whole["row_sum_float"] is KernelStatus.OK
    root = work / f"tree-Reduction-{abs(hash(edit))}"
    builder = KernelBuilder(one_compiler, headers, root, work / "only" / one_compiler.name)
    build = builder.build(root / KERNELS / "Reduction.metal", only=frozenset({"row_sum_float"}))
    assert build.library is not None and not build.set_aside, build.log
    built = {k.decl.host_name for k in build.kernels if k.built}
    assert built == {"row_sum_float"}
    assert all(k.error and k.error.message == NOT_ASKED for k in build.kernels if not k.built)
    assert set(kernel_run.list_object(builder.driver(), build.library).kernels) == built


TAIL = """#include <metal_stdlib>
using namespace metal;
template <typename T>
kernel void fill(device T* out [[buffer(0)]], constant T& v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  out[i] = v;
}
#define REGISTER_FILL(T) \\
  template [[host_name("fill_" #T)]] kernel void fill<T>(device T*, constant T&, uint);
REGISTER_FILL(float) REGISTER_FILL(int)
"""


def test_unnamed_instantiations_and_a_last_line_with_no_semicolon(tmp_path, one_compiler, headers):
    """A file ending in macro calls with no `;` (its parts cannot be read) still builds, and
    an instantiation's unnamed parameters take the primary template's attributes."""
    metal = tmp_path / "tree" / KERNELS / "Tail.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(TAIL)
    build = KernelBuilder(one_compiler, headers, tmp_path / "tree", tmp_path / "cache").build(metal)
    assert [k.decl.host_name for k in build.kernels if k.built] == ["fill_float", "fill_int"]
    assert [p.kind for p in build.kernels[0].decl.params] == ["buffer", "buffer", "attr"]


CHECKED = """#include <metal_stdlib>
using namespace metal;
template <typename T>
kernel void fill(device T* out [[buffer(0)]], constant T& v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  out[i] = v;
}
template <typename T>
kernel void first_lane(device float* out [[buffer(0)]], constant T& v [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  out[i] = v.x;  // right for a vector, an error for a scalar: found only when instantiated
}
template [[host_name("fill_float")]] kernel void fill<float>(device float*, constant float&, uint);
template [[host_name("fill_int")]] kernel void fill<int>(device int*, constant int&, uint);
#define FIRST_LANE(T) \\
  template [[host_name("first_lane_" #T)]] kernel void first_lane<T>( \\
      device float*, constant T&, uint);
FIRST_LANE(float2);
FIRST_LANE(float);
"""


def test_kernels_not_run_are_checked_not_generated(tmp_path, compiler, headers):
    """Both compilers: the object holds the kernels asked to run; every other kernel is
    compiled by the front end alone, each instantiation's errors found all the same; a
    second build of the same comes from the cache."""
    metal = tmp_path / "tree" / KERNELS / "Checked.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(CHECKED)
    builder = KernelBuilder(compiler, headers, tmp_path / "tree", tmp_path / "cache")
    build = builder.build(metal, run=frozenset({"fill_float"}))
    kernels = {k.decl.host_name: k for k in build.kernels}
    assert [n for n, k in kernels.items() if k.in_object] == ["fill_float"], build.log
    assert [n for n, k in kernels.items() if k.built] == ["fill_float", "fill_int",
                                                          "first_lane_float2"]  # fmt: skip
    error = kernels["first_lane_float"].error
    assert error is not None and error.line == 11, error
    assert build.library is not None
    assert set(kernel_run.list_object(builder.driver(), build.library).kernels) == {"fill_float"}
    again = builder.build(metal, run=frozenset({"fill_float"}))
    assert again.cached and again.kernels == build.kernels and again.library == build.library
    checked = builder.build(metal, run=frozenset())
    assert checked.library is None and not checked.cached
    assert [k.built for k in checked.kernels] == [k.built for k in build.kernels]


CLASS_IN_DEVICE = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct Pair {  // a class of the file's own, copied and assigned whole in device memory
  float a;
  float b;
  Pair() = default;
  Pair(float a_, float b_) : a(a_), b(b_) {}
};
kernel void swap_pairs(device Pair* p [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  Pair q = p[i];
  p[i] = Pair(q.b, q.a);
}
// c10's float8 through its own dynamic-cast store and load, as its castout kernels use it
kernel void float8_round_trip(device void* bytes [[buffer(0)]], device float* out [[buffer(1)]],
                              uint i [[thread_position_in_grid]]) {
  using c10::metal::ScalarType;
  c10::metal::store_at_offs<float>(bytes, i, ScalarType::Float8_e4m3fn, out[i]);
  out[i] = c10::metal::val_at_offs<float>(
      static_cast<device const void*>(bytes), i, ScalarType::Float8_e4m3fn);
}
"""


def test_class_types_in_device_memory(tmp_path, compiler, headers):
    """Both compilers: a class the shim does not define (the file's own, c10's float8) is
    read and written whole in device memory, with the values Metal gives."""
    metal = tmp_path / "tree" / KERNELS / "Classes.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(CLASS_IN_DEVICE)
    builder = KernelBuilder(compiler, headers, tmp_path / "tree", tmp_path / "cache")
    build = builder.build(metal)
    assert [k.decl.host_name for k in build.kernels if k.built] == [
        "swap_pairs", "float8_round_trip"
    ], [str(k.error) for k in build.kernels]  # fmt: skip
    listing = kernel_run.list_object(builder.driver(), build.library)

    def dispatch(name: str, slots: tuple[int, ...]) -> kernel_run.Dispatch:
        index = listing.kernels[name][0]
        return kernel_run.Dispatch(index, True, (2, 1, 1), (2, 1, 1), SCHEDULE, 0, slots)

    pairs = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    # 1.5 and -0.4 in e4m3fn are 1.5 and -0.40625 (0x3c and 0xad)
    values = struct.pack("<2f", 1.5, -0.4)
    outcome = kernel_run.run(builder.driver(), build.library, [
        kernel_run.Run((pairs,), (dispatch("swap_pairs", (0,)),)),
        kernel_run.Run((bytes(2), values), (dispatch("float8_round_trip", (0, 1)),)),
    ], tmp_path / "scratch")  # fmt: skip
    swapped, round_trip = outcome.results
    assert struct.unpack("<4f", swapped.buffers[0]) == (2.0, 1.0, 4.0, 3.0)
    assert round_trip.buffers[0] == bytes([0x3C, 0xAD])
    assert struct.unpack("<2f", round_trip.buffers[1]) == (1.5, -0.40625)


SIMDGROUP_MATRIX = """#include <metal_simdgroup_matrix>
#include <metal_stdlib>
using namespace metal;
kernel void scale(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] *= 2.0f;
}
kernel void tile(device float* x [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_matrix<float, 8, 8> m;
  simdgroup_load(m, x, 8);
}
"""


def test_a_file_with_simdgroup_matrices_checks_its_other_kernels(tmp_path, one_compiler, headers):
    """<metal_simdgroup_matrix> is one of Metal's headers (upstream's Convolution includes
    it): the file preprocesses, the kernel using a simdgroup matrix is not modelled, and the
    file's other kernels are checked as any other."""
    metal = tmp_path / "tree" / KERNELS / "Tiles.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(SIMDGROUP_MATRIX)
    builder = KernelBuilder(one_compiler, headers, tmp_path / "tree", tmp_path / "cache")
    build = builder.build(metal, run=frozenset())
    kernels = {k.decl.host_name: k for k in build.kernels}
    assert build.error is None and set(kernels) == {"scale", "tile"}, build.log
    assert kernels["scale"].built and not kernels["tile"].built
    assert kernels["tile"].not_modelled, kernels["tile"]


def test_a_build_whose_errors_cannot_be_placed_is_recorded(tmp_path, one_compiler, headers):
    """An error in a header of the file's own is no kernel's and no part of the file's:
    every kernel carries it, and the build is recorded, so the same check again asks no
    compiler; a changed header is a new build."""
    folder = tmp_path / "tree" / KERNELS
    folder.mkdir(parents=True)
    (folder / "Bad.h").write_text("int broken = ;\n")
    metal = folder / "Placed.metal"
    metal.write_text('#include "Bad.h"\n' + _FILL_KERNEL)
    builder = KernelBuilder(one_compiler, headers, tmp_path / "tree", tmp_path / "cache")
    first = builder.build(metal, run=frozenset())
    assert [k.built for k in first.kernels] == [False] and not first.cached, first.log
    again = builder.build(metal, run=frozenset())
    assert again.cached and again.kernels == first.kernels
    (folder / "Bad.h").write_text("int fixed = 1;\n")
    fixed = builder.build(metal, run=frozenset())
    assert not fixed.cached and [k.built for k in fixed.kernels] == [True], fixed.log


_FILL_KERNEL = """#include <metal_stdlib>
using namespace metal;
kernel void fill(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = 1.0f;
}
"""


SHARED_FAILURE = """#include <metal_stdlib>
using namespace metal;
struct first_lane_functor {
  template <typename T>
  float operator()(const T x) {
    return x.x;  // right for a vector, an error for a scalar: once per type, however reached
  }
};
template <typename T, typename F>
kernel void apply_dense(device float* out [[buffer(0)]], constant T* in [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  out[i] = F()(in[i]);
}
template <typename T, typename F>
kernel void apply_strided(device float* out [[buffer(0)]], constant T* in [[buffer(1)]],
                          constant uint& stride [[buffer(2)]],
                          uint i [[thread_position_in_grid]]) {
  out[i] = F()(in[i * stride]);
}
#define REGISTER_FIRST_LANE(T)                                                       \\
  template [[host_name("dense_" #T)]] kernel void apply_dense<T, first_lane_functor>( \\
      device float*, constant T*, uint);                                             \\
  template [[host_name("strided_" #T)]] kernel void                                  \\
  apply_strided<T, first_lane_functor>(device float*, constant T*, constant uint&, uint);
REGISTER_FIRST_LANE(float2);
REGISTER_FIRST_LANE(float);
REGISTER_FIRST_LANE(half2);
"""


def test_kernels_reaching_one_failing_specialization_fail_in_one_round(
    tmp_path, compiler, headers, monkeypatch
):
    """Both compilers: a failing specialization is reported once per compile, through the
    first kernel that reaches it; every kernel given the same template arguments carries
    its error from that round on, saying so, and the rest of the file builds in the next."""
    monkeypatch.setattr(cxx, "MAX_ATTEMPTS", 2)  # the failing round and the one that builds
    metal = tmp_path / "tree" / KERNELS / "Shared.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(SHARED_FAILURE)
    builder = KernelBuilder(compiler, headers, tmp_path / "tree", tmp_path / "cache")
    build = builder.build(metal, run=frozenset())
    kernels = {k.decl.host_name: k for k in build.kernels}
    assert [n for n, k in kernels.items() if k.built] == [
        "dense_float2", "strided_float2", "dense_half2", "strided_half2"
    ], build.log  # fmt: skip
    errors = [kernels[n].error for n in ("dense_float", "strided_float")]
    assert all(e is not None and e.line == 6 for e in errors), errors
    shared = [e.message for e in errors if e is not None and "the same failing spec" in e.message]
    assert len(shared) == 1 and "first_lane_functor" in shared[0], errors


def test_kernels_a_build_gave_up_before_are_not_known_to_compile(
    tmp_path, one_compiler, headers, monkeypatch
):
    """When the rounds run out while errors are still being placed, the kernels no error was
    placed on are not known to compile: none carries another kernel's error as its own."""
    monkeypatch.setattr(cxx, "MAX_ATTEMPTS", 1)
    metal = tmp_path / "tree" / KERNELS / "Shared.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(SHARED_FAILURE)
    builder = KernelBuilder(one_compiler, headers, tmp_path / "tree", tmp_path / "cache")
    build = builder.build(metal, run=frozenset())
    messages = {k.decl.host_name: k.error.message for k in build.kernels if k.error}
    assert set(messages) == {k.decl.host_name for k in build.kernels}, build.log
    unknown = {n for n, m in messages.items() if m == GAVE_UP}
    assert unknown == {"dense_float2", "strided_float2", "dense_half2", "strided_half2"}
    # check-kernel says so: unknown, neither a pass nor a failure
    checks = [flow._not_run(k, {}, metal) for k in build.kernels]
    statuses = {c.kernel: c.status for c in checks if c is not None}
    assert {n for n, s in statuses.items() if s is KernelStatus.UNKNOWN} == unknown
    assert not any(c.failed for c in checks if c is not None and c.kernel in unknown)


def test_a_retry_stops_once_it_cannot_build_more(tmp_path, one_compiler, headers):
    """The built-in bfloat's retry is kept only if it builds more kernels than the first
    build: it stops as soon as it has failed too many to, its undecided kernels unknown."""
    metal = tmp_path / "tree" / KERNELS / "Shared.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(SHARED_FAILURE)
    builder = KernelBuilder(one_compiler, headers, tmp_path / "tree", tmp_path / "cache")
    bounded = builder._build(metal, (), frozenset(), frozenset(), 4)
    assert bounded.built_count == 0, bounded.log
    assert sum(k.error is not None and k.error.message == GAVE_UP for k in bounded.kernels) == 4
    open_ended = builder._build(metal, (), frozenset(), frozenset(), 3)
    assert open_ended.built_count == 4, open_ended.log


def test_a_check_in_chunks_finds_what_one_unit_finds(tmp_path, compiler, headers, monkeypatch):
    """Both compilers: a file's kernels checked in chunks (here one kernel a chunk, two at
    once) fail and build as in one unit; each failing chunk alone is compiled again."""
    metal = tmp_path / "tree" / KERNELS / "Shared.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(SHARED_FAILURE)
    whole = KernelBuilder(compiler, headers, tmp_path / "tree", tmp_path / "one", jobs=1)
    one = whole.build(metal, run=frozenset())
    monkeypatch.setattr(kernel_build, "_CHUNK", 1)
    chunked = KernelBuilder(compiler, headers, tmp_path / "tree", tmp_path / "chunks", jobs=2)
    two = chunked.build(metal, run=frozenset())
    assert [k.built for k in two.kernels] == [k.built for k in one.kernels], two.log
    assert [k.decl.host_name for k in two.kernels if k.built] == [
        "dense_float2", "strided_float2", "dense_half2", "strided_half2"
    ]  # fmt: skip
    assert all(k.error.line == 6 for k in two.kernels if k.error is not None)
    # two chunks of three kernels, each a unit of its own
    assert sorted(p.name.split(".")[-2] for p in (tmp_path / "chunks").glob("*-check.*.ii")) == [
        "0", "1"
    ]  # fmt: skip


def test_a_chunk_is_its_unit_with_the_other_callers_blanked() -> None:
    """Only the callers after the unit's last #include are blanked, by their unit line; a
    header's lines past line 1000 are never touched, and every line number is kept."""
    unit = "/c/u-check.cpp"
    header = ['# 1 "/h/big.h"', *(f"int h{n};" for n in range(1200)), f'# 6 "{unit}" 2']
    header += ['# 1100 "/h/late.h" 1', "int late;", f'# 6 "{unit}" 2']
    callers = [f'# 1000 "{unit}"', "k0();", "m0;", "k1();", "m1;", "", "", "k3();", "m3;"]
    text = "\n".join(header + callers) + "\n"
    out = kernel_unit.blanked(text, unit, {1, 3})
    assert out.count("\n") == text.count("\n")
    assert "int h1100;" in out and "int late;" in out and "k0();" not in out and "m0;" not in out
    assert all(s in out for s in ("k1();", "m1;", "k3();", "m3;"))


def test_the_struct_probes_follow_the_table_of_a_file_of_many_kernels(tmp_path) -> None:
    """A file of more kernels than fit below line 9000 (BinaryKernel.metal has 5,911) has
    its struct probes after its table, where an error on one is read as the probe's."""
    from pipeline.run.kernel_decls import KernelDecl

    decls = [KernelDecl(f"k{i}", "k", None, (), 1, "1024") for i in range(5000)]
    probe = kernel_unit.Probe("Args", ("n",))
    lines = kernel_unit.translation_unit(tmp_path / "f.metal", decls, set(), [probe]).split("\n")
    table_end = lines.index("{nullptr, nullptr, 0, 0}};") + 1
    first = next(
        n for n, text in enumerate(lines, 1) if text.startswith("using mps_kernel_struct_0")
    )
    assert first > table_end and first == kernel_unit.probes_from(len(decls))
    base = tmp_path / "u"
    log = f"{base}.cpp:{first}:5: error: no member named 'n' in 'Args'\n"
    errors: dict[str, str] = {}
    assert kernel_unit.probe_failures(log, base, [probe], errors, len(decls))
    assert errors == {"Args": "no member named 'n' in 'Args'"}


def test_a_merged_retry_keeps_unknown_unknown_and_notes_the_other_compilers_error() -> None:
    """The bfloat compiler's build of the kernels the class failed: one it builds is taken,
    one with an error of its own keeps it with the other's beside it, and one the class's
    build gave up on stays unknown (its message is its status)."""
    from pipeline.errors import CompilerError
    from pipeline.run.kernel_decls import KernelDecl
    from pipeline.run.kernel_record import FileBuild, KernelBuild

    def decl(name: str) -> KernelDecl:
        return KernelDecl(name, "k", None, (), 1, "1024")

    def error(message: str) -> CompilerError:
        return CompilerError("k.metal", 1, None, message)

    first = FileBuild(Path("k.metal"), None, (
        KernelBuild(decl("built_by_other"), error=error("?: is ambiguous")),
        KernelBuild(decl("fails_both"), error=error("?: is ambiguous")),
        KernelBuild(decl("unknown"), error=error(GAVE_UP)),
        KernelBuild(decl("fine")),
    ), False, 1.0)  # fmt: skip
    alone = FileBuild(Path("k.metal"), None, (
        KernelBuild(decl("built_by_other")),
        KernelBuild(decl("fails_both"), error=error("no cast")),
        KernelBuild(decl("unknown"), error=error("no cast")),
        KernelBuild(decl("fine"), error=error(NOT_ASKED)),
    ), False, 1.0)  # fmt: skip
    merged = {k.decl.host_name: k for k in kernel_build._merged(first, alone, "clang").kernels}
    assert merged["built_by_other"].built and merged["fine"].built
    assert merged["fails_both"].error == error("?: is ambiguous (nor with clang: no cast)")
    assert merged["unknown"].error == error(GAVE_UP)
    assert kernel_build._merged(first, alone, "clang").retried == ("built_by_other",)


def test_a_check_precompiles_the_headers_its_file_includes_first() -> None:
    """With clang, a chunk is the unit's text after the headers the .metal file includes
    first (its first lines may be those includes: no run of its own comes before them), its
    line markers without include-stack flags; a file that includes no header first is
    checked whole."""
    metal, unit = "/k/F.metal", "/c/u-check.cpp"
    text = "\n".join([
        f'# 1 "{unit}"', "// generated", '# 1 "/s/mps_shim.h" 1', "int shim;",
        f'# 3 "{unit}" 2', f'# 1 "{metal}" 1', '# 1 "/h/c10.h" 1', "int c10;",
        f'# 2 "{metal}" 2', "using namespace metal;", "kernel void k() {}",
        f'# 4 "{unit}" 2', "void caller();",
    ]) + "\n"  # fmt: skip
    apart = kernel_unit.split_headers(text, metal)
    assert apart is not None
    headers, rest = apart
    assert headers.endswith("int c10;\n") and "using namespace" not in headers
    assert rest.startswith(f'# 2 "{metal}"\nusing namespace metal;')
    assert f'# 4 "{unit}"\nvoid caller();' in rest  # flags gone: it is the main file now
    plain = f'# 1 "{unit}"\n# 1 "{metal}" 1\nkernel void k() {{}}\n'
    assert kernel_unit.split_headers(plain, metal) is None
