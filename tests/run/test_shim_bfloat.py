"""Metal's bfloat on the host (cxx.py's module doc): the shim's class, and clang's built-in
``__bf16`` for what the class cannot build (``c ? bfloat : float``), on fixtures of our own
in upstream's shapes (tests/fixtures/metal_math/bfloat: angle's; metal_kernel_bfloat:
GridSampler's and HistogramKernel's) with the real c10/metal."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from pipeline.run import cxx, cxx_bfloat
from pipeline.run.kernel_build import KernelBuilder
from tests.flows.math_helpers import FIXTURES
from tests.run.test_kernel import SHARED_FAILURE

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

METAL = FIXTURES / "bfloat" / "conditional.metal"
KERNEL_FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_kernel_bfloat"
PI_BFLOAT = 0x4049  # pi rounded to bfloat: 3.140625


@pytest.fixture(scope="module")
def gxx() -> cxx.Compiler:
    try:
        return cxx.find_compiler("g++")
    except cxx.NoCompilerError:
        pytest.skip("no g++ on PATH")


@pytest.fixture(scope="module")
def builtin(tmp_path_factory: pytest.TempPathFactory) -> cxx.Compiler:
    found = cxx_bfloat.find_bfloat_compiler("clang++-19", tmp_path_factory.mktemp("probe"))
    if found is None:
        pytest.skip("no clang++-19 with a built-in bfloat (apt-get install clang-19)")
    return found


def _bits(values: list[float]) -> bytes:
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def _run(builder: cxx.Builder, build: cxx.FunctorBuild, dtype: str, block: bytes) -> bytes:
    regs = cxx.list_registrations(builder.driver(), build.library)
    reg = next(r for r in regs if r.input == dtype)
    job = cxx.Job(reg.index, len(block) // reg.in_size, (block,))
    outcome = cxx.run_jobs(
        builder.driver(), build.library, regs, [job], builder.cache_dir / "scratch"
    )
    assert outcome.failure is None and not any(outcome.results[0].status)
    return outcome.results[0].output


def test_the_probe_finds_clangs_bfloat_and_not_gxx_12s(
    tmp_path: Path, gxx: cxx.Compiler, builtin: cxx.Compiler
) -> None:
    assert builtin.native_bfloat and "-DMPS_SHIM_NATIVE_BFLOAT=1" in builtin.bfloat_flags
    assert builtin.label.endswith("(bfloat: built-in __bf16)")
    assert gxx.label.endswith("(bfloat: the shim's class)")
    if gxx.identity.startswith("g++") and " 12." in gxx.identity:
        assert (
            cxx_bfloat.find_bfloat_compiler("g++", tmp_path) is None
        )  # no arithmetic __bf16 before 13
        assert cxx_bfloat.find_bfloat_compiler("g++", tmp_path) is None  # the kept verdict


def test_the_probes_verdict_is_kept_and_a_damaged_one_probed_again(tmp_path: Path) -> None:
    found = cxx_bfloat.find_bfloat_compiler("clang++-19", tmp_path)
    if found is None:
        pytest.skip("no clang++-19 with a built-in bfloat (apt-get install clang-19)")
    (kept,) = tmp_path.glob("bfloat-probe-*.json")
    assert cxx_bfloat.find_bfloat_compiler("clang++-19", tmp_path) == found  # read, not probed
    kept.write_text('{"libs": [1]}')  # not a verdict: probed again, and rewritten
    assert cxx_bfloat.find_bfloat_compiler("clang++-19", tmp_path) == found
    assert kept.read_text() == json.dumps(list(found.bfloat_libs))


def test_what_the_class_cannot_build_is_built_with_the_builtin_bfloat(
    tmp_path: Path, gxx: cxx.Compiler, builtin: cxx.Compiler, real_c10_include: Path
) -> None:
    headers = cxx.Headers(real_c10_include, "wheel")
    alone = cxx.Builder(gxx, headers, FIXTURES, tmp_path / "class").build(METAL, "half_turn")
    assert alone.error is not None and alone.error.line == 12 and alone.built_with is None
    builder = cxx.Builder(gxx, headers, FIXTURES, tmp_path / "both", bfloat=builtin)
    build = builder.build(METAL, "half_turn")
    assert build.built and build.built_with == builtin.label
    out = _run(builder, build, "bfloat", _bits([math.nan, -2.0, -0.0, 0.0, 1.5]))
    got = struct.unpack("<5H", out)
    assert got[0] & 0x7FFF > 0x7F80  # NaN stays NaN
    assert got[1:] == (PI_BFLOAT, 0, 0, 0)
    # what the class builds is built with the class, as before
    cubic = builder.build(METAL, "cubic")
    assert cubic.built and cubic.built_with is None


def test_the_builtin_bfloat_rounds_every_operation_as_the_class(
    tmp_path: Path, gxx: cxx.Compiler, builtin: cxx.Compiler, real_c10_include: Path
) -> None:
    """x * x * x - x / 3 + 1 on every bfloat: the same bits from both models, and torch's
    bfloat16 (each operation rounded) where it is not NaN; rounding once differs."""
    headers = cxx.Headers(real_c10_include, "wheel")
    every = struct.pack("<65536H", *range(65536))
    outputs = []
    for compiler in (gxx, builtin):
        builder = cxx.Builder(compiler, headers, FIXTURES, tmp_path / compiler.name)
        build = builder.build(METAL, "cubic")
        assert build.built, build.error
        outputs.append(_run(builder, build, "bfloat", every))
    assert outputs[0] == outputs[1]
    import torch  # here, not at the top: collecting the module costs every xdist worker 1.5 s

    x = torch.frombuffer(bytearray(every), dtype=torch.bfloat16)
    per_op = x * x * x - x / 3 + 1
    xf = x.float()
    once = (xf * xf * xf - xf / 3 + 1).bfloat16()
    got = torch.frombuffer(bytearray(outputs[1]), dtype=torch.bfloat16)
    nan = per_op.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), per_op[~nan].view(torch.int16))
    assert (got[~nan].view(torch.int16) != once[~nan].view(torch.int16)).any()


def test_check_kernel_keeps_the_build_that_compiles_more(
    tmp_path: Path, gxx: cxx.Compiler, builtin: cxx.Compiler, real_c10_include: Path
) -> None:
    root = KERNEL_FIXTURES
    metal = root / "aten/src/ATen/native/mps/kernels/Conditional.metal"
    headers = cxx.Headers(real_c10_include, "wheel")
    alone = KernelBuilder(gxx, headers, root, tmp_path / "class").build(metal)
    # the class fails the template itself, which every instantiation shares
    bfloat = next(k for k in alone.kernels if k.decl.host_name == "clamp_or_count_bfloat")
    assert alone.built_count == 0 and bfloat.error is not None and bfloat.error.line == 14
    assert alone.built_with is None
    both = KernelBuilder(gxx, headers, root, tmp_path / "both", builtin).build(metal)
    assert both.built_count == 3 and both.built_with == builtin.label


def test_a_check_builds_alone_with_the_builtin_bfloat_what_the_class_does_not(
    tmp_path: Path, gxx: cxx.Compiler, builtin: cxx.Compiler, real_c10_include: Path
) -> None:
    """A check none of whose failing kernels is to run builds those alone again with the
    built-in bfloat, and keeps the rest as the class built them; one neither compiler
    builds keeps the class's error, the other's beside it."""
    headers = cxx.Headers(real_c10_include, "wheel")
    metal = KERNEL_FIXTURES / "aten/src/ATen/native/mps/kernels/Conditional.metal"
    builder = KernelBuilder(gxx, headers, KERNEL_FIXTURES, tmp_path / "c", builtin)
    both = builder.build(metal, run=frozenset())
    assert both.built_count == 3 and both.built_with is None, both.log
    assert set(both.retried) == {"clamp_or_count_float", "clamp_or_count_half",
                                 "clamp_or_count_bfloat"}  # fmt: skip
    root = tmp_path / "tree"
    shared = root / "aten/src/ATen/native/mps/kernels/Shared.metal"
    shared.parent.mkdir(parents=True)
    shared.write_text(SHARED_FAILURE)
    neither = KernelBuilder(gxx, headers, root, tmp_path / "s", builtin).build(
        shared, run=frozenset()
    )
    assert neither.built_count == 4 and neither.retried == ()
    errors = [k.error.message for k in neither.kernels if k.error is not None]
    assert len(errors) == 2 and all(f"(nor with {builtin.label}: " in e for e in errors)


ONE_REPORT = """#include <metal_stdlib>
using namespace metal;
template <typename T>
float first_lane(const T x) {
  return x.x;  // a vector's first lane; for a scalar an error, reported once a unit
}
template <typename T>
kernel void dense(device float* out [[buffer(0)]], constant T* in [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  out[i] = first_lane(in[i]);
}
template <typename T>
kernel void strided(device float* out [[buffer(0)]], constant T* in [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  out[i] = first_lane(in[2 * i]);
}
template [[host_name("dense_float")]] kernel void dense<float>(
    device float*, constant float*, uint);
template [[host_name("strided_float")]] kernel void strided<float>(
    device float*, constant float*, uint);
template [[host_name("dense_float2")]] kernel void dense<float2>(
    device float*, constant float2*, uint);
"""


def test_a_cached_check_reads_the_retries_it_was_built_with(
    tmp_path: Path, gxx: cxx.Compiler, builtin: cxx.Compiler, real_c10_include: Path
) -> None:
    """A kernel failing in the first round is built alone beside the next, one failing later
    after it: a second check reads both builds from the cache, as they were made."""
    root = tmp_path / "tree"
    metal = root / "aten/src/ATen/native/mps/kernels/OneReport.metal"
    metal.parent.mkdir(parents=True)
    metal.write_text(ONE_REPORT)
    headers = cxx.Headers(real_c10_include, "wheel")
    builder = KernelBuilder(gxx, headers, root, tmp_path / "c", builtin)
    cold = builder.build(metal, run=frozenset())
    assert [k.built for k in cold.kernels] == [False, False, True], cold.log
    assert cold.first_round == ("dense_float",)  # strided_float failed in the next round
    again = builder.build(metal, run=frozenset())
    assert again.cached and again.kernels == cold.kernels
