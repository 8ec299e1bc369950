"""The shim on released headers as they are (tests.releases): fixtures of our own in the shape
of today's upstream kernels (tests/fixtures/metal_math/current) compiled against torch
2.13.0's and the newest release's c10/metal, with g++ and with clang."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pipeline.run import cxx
from tests.flows.math_helpers import FIXTURES
from tests.releases import NEWEST, OLDEST, release_tree

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

CURRENT = FIXTURES / "current"
BINARY = CURRENT / "BinaryKernel.metal"
KERNELS = ("maximum", "copysign", "div_floor", "eq", "lane_sum")


@pytest.fixture(params=["g++", "clang"])
def compiler(request: pytest.FixtureRequest) -> cxx.Compiler:
    if request.param == "clang":
        found: cxx.Compiler = request.getfixturevalue("host_clang")
        return found
    return cxx.find_compiler("g++")


def _builder(compiler: cxx.Compiler, version: str, cache: Path) -> cxx.Builder:
    return cxx.Builder(compiler, cxx.Headers(release_tree(version), version), CURRENT, cache)


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_current_shapes_compile_against_the_release_headers(
    tmp_path: Path, compiler: cxx.Compiler, version: str
) -> None:
    builder = _builder(compiler, version, tmp_path)
    builds = {b.kernel: b for b in builder.build_all([(BINARY, k) for k in KERNELS])}
    # address-space overloads, atomics and SIMD-group functions beside the functors compile
    for kernel in ("maximum", "copysign", "eq"):
        assert builds[kernel].built, (kernel, builds[kernel].error)
    # a functor reaching a SIMD-group function is not modelled: no object, no error
    lane = builds["lane_sum"]
    assert not lane.built and lane.error is None and lane.not_modelled == ("simd_sum",)
    driver = builder.driver()
    regs = cxx.list_registrations(driver, builds["eq"].library)
    assert [(r.input, r.result) for r in regs] == [
        ("float", "bool"),
        ("int", "bool"),
        ("float2", "bool"),
    ]


def test_a_functor_the_older_headers_cannot_build_hides_no_other(
    tmp_path: Path, compiler: cxx.Compiler
) -> None:
    """c10::metal::div_floor is not in 2.13.0's headers: div_floor fails at its own line,
    every other functor of the file is built with it set aside. The newest has it."""
    old = {b.kernel: b for b in _builder(compiler, OLDEST, tmp_path / "old").build_all(
        [(BINARY, k) for k in KERNELS]
    )}  # fmt: skip
    error = old["div_floor"].error
    assert error is not None and error.path.endswith("BinaryKernel.metal") and error.line == 38
    assert "div_floor" in error.message
    for kernel in ("maximum", "copysign", "eq"):
        assert old[kernel].built and "div_floor_functor" in old[kernel].set_aside
    new = _builder(compiler, NEWEST, tmp_path / "new").build(BINARY, "div_floor")
    assert new.built and "div_floor_functor" not in new.set_aside
    # clang refuses `template [[host_name(...)]]` instantiations: set aside as well
    expected = () if compiler.name == "g++" else ("INSTANTIATE_BESIDE",)
    assert new.set_aside == expected


def test_float8_of_the_newest_headers_rounds_as_torch(
    tmp_path: Path, compiler: cxx.Compiler
) -> None:
    builder = _builder(compiler, NEWEST, tmp_path)
    build = builder.build(CURRENT / "Float8Kernel.metal", "e4m3_round")
    assert build.built, build.error
    driver = builder.driver()
    regs = cxx.list_registrations(driver, build.library)
    values = [0.0, 1.0, -0.3, 0.1, 3.3, 448.0, 500.0, -1e-3, float("nan")]
    job = cxx.Job(regs[0].index, len(values), (struct.pack(f"<{len(values)}f", *values),))
    outcome = cxx.run_jobs(driver, build.library, regs, [job], tmp_path / "run")
    assert outcome.failure is None
    ours = struct.unpack(f"<{len(values)}f", outcome.results[0].output)
    import torch  # here, not at the top: collecting the module costs every xdist worker 1.5 s

    theirs = torch.tensor(values).to(torch.float8_e4m3fn).to(torch.float32).tolist()
    assert [str(x) for x in ours] == [str(x) for x in theirs]


def test_a_registration_the_older_headers_cannot_build_hides_not_its_functor(
    tmp_path: Path, compiler: cxx.Compiler
) -> None:
    """float8_e4m3fn is not in 2.13.0's headers: the registrations for it are set aside and
    the functor is built for its other types; one registered for float8 alone fails."""
    source = CURRENT / "Float8Eq.metal"
    builder = _builder(compiler, OLDEST, tmp_path / "old")
    same, only = builder.build_all([(source, "same"), (source, "same_e4m3")])
    assert same.built, same.error
    assert "REGISTER_FP8_SAME_OP" in same.set_aside
    regs = cxx.list_registrations(builder.driver(), same.library)
    assert [(r.input, r.result) for r in regs] == [("float", "bool"), ("int", "bool")]
    assert not only.built and only.error is not None
    new = _builder(compiler, NEWEST, tmp_path / "new")
    build = new.build(source, "same")
    assert build.built and "REGISTER_FP8_SAME_OP" not in build.set_aside
    inputs = {r.input for r in cxx.list_registrations(new.driver(), build.library)}
    assert "float8_e4m3fn" in inputs
