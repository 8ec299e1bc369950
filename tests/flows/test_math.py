"""check-math's flow end to end: real g++/clang++, the wheel's c10/metal headers, torch on CPU.

Each deliberately wrong functor of tests/fixtures/metal_math/wrong/ must be caught, and the
right ones must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.results.math import Agreement, Kind, Known
from tests.flows.math_helpers import by_dtype, run_flow, target

pytestmark = pytest.mark.realdata


@pytest.mark.slow
def test_right_functors_match_torch(tmp_path: Path, host_cxx, real_c10_include: Path) -> None:
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [target(tmp_path, "right.metal", "atan2"), target(tmp_path, "right.metal", "maximum")],
    )
    assert not report.failed
    atan2, maximum = report.functors
    checks = by_dtype(atan2)
    assert set(checks) == {"float32", "float16", "bfloat16", "int32", "int64"}
    for check in atan2.dtypes + maximum.dtypes:
        assert check.status is Agreement.OK, check
        assert check.checked > 100 and check.matched == check.checked
    # integer inputs go to float, as registered and as torch gives
    assert checks["int32"].output == checks["int32"].torch_dtype == "float32"


@pytest.mark.slow
def test_swapped_arguments_are_caught(tmp_path: Path, host_cxx, real_c10_include: Path) -> None:
    report = run_flow(
        tmp_path, host_cxx, real_c10_include, [target(tmp_path, "wrong/swapped.metal", "atan2")]
    )
    assert report.failed
    f32 = by_dtype(report.functors[0])["float32"]
    assert f32.status is Agreement.MISMATCH
    assert f32.precision > 100
    example = next(c for c in f32.counterexamples if c.kind is Kind.PRECISION)
    a, b = (float(x) for x in example.inputs)
    import math

    assert float(example.kernel) == pytest.approx(math.atan2(b, a), rel=1e-5, abs=1e-6)
    assert float(example.torch) == pytest.approx(math.atan2(a, b), rel=1e-5, abs=1e-6)


@pytest.mark.slow
def test_max_without_nan_propagation_is_caught(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [target(tmp_path, "wrong/nan_max.metal", "maximum")],
    )
    checks = by_dtype(report.functors[0])
    for dtype in ("float32", "float16"):
        check = checks[dtype]
        assert check.status is Agreement.MISMATCH
        # caught as NaN handling, not as a precision miss
        assert check.special > 0 and check.precision == 0
        assert all(c.kind is Kind.SPECIAL for c in check.counterexamples)
        assert all("nan" in c.inputs for c in check.counterexamples)
        assert all(c.torch == "nan" and c.kernel != "nan" for c in check.counterexamples)
    assert checks["int32"].status is Agreement.OK


@pytest.mark.slow
def test_integral_overload_returning_t_is_caught(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [target(tmp_path, "wrong/int_returns_t.metal", "atan2")],
    )
    checks = by_dtype(report.functors[0])
    assert checks["float32"].status is Agreement.OK
    int32 = checks["int32"]
    assert int32.status is Agreement.MISMATCH
    assert int32.findings == ("registered int32 -> int32, but torch gives float32",)
    int64 = checks["int64"]
    assert int64.status is Agreement.MISMATCH
    assert "the functor returns int64" in int64.findings[0]


@pytest.mark.slow
def test_known_deviation_is_reported_not_failed(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    known = (Known("maximum", "float32", "reviewed: fixture"), Known("maximum", "float16", "x"))
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [target(tmp_path, "wrong/nan_max.metal", "maximum")],
        known,
    )
    checks = by_dtype(report.functors[0])
    assert checks["float32"].status is Agreement.KNOWN
    assert checks["float32"].known == "reviewed: fixture"
    assert not report.failed


@pytest.mark.slow
def test_no_torch_counterpart_is_listed_not_failed(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [target(tmp_path, "alpha.metal", "lane_twist")],
    )
    assert not report.failed
    (check,) = report.functors[0].dtypes
    assert check.status is Agreement.NO_REFERENCE
    assert check.no_reference == "no OpInfo, torch function or aten operator of that name"


@pytest.mark.slow
def test_alpha_kernel_is_checked_with_its_alpha(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    """hardshrink's cut-off goes to aten.hardshrink's lambd, once per alpha value."""
    report = run_flow(
        tmp_path, host_cxx, real_c10_include, [target(tmp_path, "alpha.metal", "hardshrink")]
    )
    assert not report.failed
    (functor,) = report.functors
    assert functor.reference == "aten.hardshrink.default"
    for check in functor.dtypes:
        assert check.status is Agreement.OK, check
        # every input once per alpha value (0.5, 2.0, -1.5)
        assert check.checked == 3 * (check.edge + check.samples) > 100


@pytest.mark.slow
def test_dropped_alpha_is_caught(tmp_path: Path, host_cxx, real_c10_include: Path) -> None:
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [target(tmp_path, "wrong/alpha_dropped.metal", "add_alpha")],
    )
    assert report.failed
    assert report.functors[0].reference == "aten.add.Tensor"
    f32 = by_dtype(report.functors[0])["float32"]
    assert f32.status is Agreement.MISMATCH and f32.precision > 1000
    example = f32.counterexamples[0]
    a, b, alpha = example.inputs
    scale = float(alpha.removeprefix("alpha="))
    assert scale != 1.0
    assert float(example.kernel) == pytest.approx(float(a) + float(b))
    assert float(example.torch) == pytest.approx(float(a) + scale * float(b))


@pytest.mark.slow
def test_backward_is_checked_through_aten(tmp_path: Path, host_cxx, real_c10_include: Path) -> None:
    """No OpInfo and no torch.silu_backward: aten.silu_backward(grad_output, self) is it."""
    report = run_flow(
        tmp_path, host_cxx, real_c10_include, [target(tmp_path, "alpha.metal", "silu_backward")]
    )
    assert not report.failed
    assert report.functors[0].reference == "aten.silu_backward.default"
    for check in report.functors[0].dtypes:
        assert check.status is Agreement.OK, check
        assert check.checked > 1000


@pytest.mark.slow
def test_ambiguous_schema_stays_without_reference(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    """pow.Scalar and pow.Tensor_Scalar both take one tensor and one number: which one
    pow_scalar is cannot be told from the schemas, so none is used."""
    report = run_flow(
        tmp_path, host_cxx, real_c10_include, [target(tmp_path, "alpha.metal", "pow_scalar")]
    )
    assert not report.failed
    (check,) = report.functors[0].dtypes
    assert check.status is Agreement.NO_REFERENCE
    assert check.no_reference is not None and check.no_reference.startswith("ambiguous")
    assert "aten.pow.Scalar" in check.no_reference


@pytest.mark.slow  # a file's parts set aside and rebuilt, round after round
def test_a_broken_functor_leaves_the_others_of_its_file_checked(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    """oops_functor does not compile: it fails, at its own line, and fine_functor of the
    same file is still built (oops set aside) and checked against torch."""
    report = run_flow(
        tmp_path,
        host_cxx,
        real_c10_include,
        [
            target(tmp_path, "broken.metal", "fine", fn="clone"),
            target(tmp_path, "broken.metal", "oops"),
        ],
    )
    assert report.failed
    fine, oops = report.functors
    error = oops.compile_error
    assert error is not None and error.startswith("broken.metal:15: ")
    assert "undeclared_thing" in error
    assert fine.compile_error is None and fine.set_aside == ("oops_functor",)
    assert {d.status for d in fine.dtypes} == {Agreement.OK}
    assert not fine.failed


@pytest.mark.slow
def test_current_shapes_check_against_the_newest_headers(tmp_path: Path, host_cxx) -> None:
    """tests/fixtures/metal_math/current against the newest release's c10/metal: functors
    are checked against torch; one reaching a SIMD-group function is "not modelled", with
    no result, and fails nothing."""
    from tests.releases import NEWEST, release_tree

    file = "current/BinaryKernel.metal"
    report = run_flow(
        tmp_path,
        host_cxx,
        release_tree(NEWEST),
        [
            target(tmp_path, file, "maximum"),
            target(tmp_path, file, "eq"),
            target(tmp_path, file, "lane_sum", fn="sum"),
        ],
    )
    maximum, eq, lane_sum = report.functors
    assert {d.dtype: d.status for d in maximum.dtypes} == {
        "float32": Agreement.OK, "float16": Agreement.OK, "bfloat16": Agreement.OK,
        "int32": Agreement.OK,
    }  # fmt: skip
    assert {d.dtype: d.status for d in eq.dtypes} == {
        "float32": Agreement.OK, "int32": Agreement.OK, "complex64": Agreement.OK
    }  # fmt: skip
    assert lane_sum.not_modelled == ("simd_sum",) and lane_sum.dtypes == ()
    assert lane_sum.compile_error is None and not lane_sum.failed
    assert not report.failed and report.counts()["not modelled"] == 1


@pytest.mark.slow
def test_host_resolved_operators_are_checked_with_the_host_s_scalars(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    """Functors named like no operator, checked against the operator the host code runs
    them for (tests/tree/test_host_refs.py reads these from the tree): huber's alpha on
    huber_loss's delta (reduction None), trigamma as polygamma with n=1, make_complex as
    complex."""
    from pipeline.guide.math import Target
    from pipeline.tree.host_refs import HostReference
    from tests.flows.math_helpers import fixture_root

    root = fixture_root(tmp_path)
    file = "host_named.metal"
    refs = [
        HostReference("huber", "huber_loss", "huber_stub", alpha="delta"),
        HostReference("trigamma", "polygamma", "polygamma_stub", bound=(("n", "1"),)),
        HostReference("make_complex", "complex", "complex_stub"),
    ]
    targets = [Target(r.kernel, root / file, file, r.op, None, None, None, r) for r in refs]
    report = run_flow(tmp_path, host_cxx, real_c10_include, targets)
    huber, trigamma, make_complex = report.functors
    assert huber.reference == "aten.huber_loss.default"
    assert trigamma.reference == "aten.polygamma.default, n=1"
    assert make_complex.reference == "aten.complex.default"
    for functor in (huber, make_complex):
        for check in functor.dtypes:
            assert check.status is Agreement.OK, check
            assert check.checked > 50
    # c10's polygamma is inf at its poles where torch's CPU kernel gives a huge finite
    # number: a real difference, found at the non-positive integers alone
    (t32,) = trigamma.dtypes
    assert t32.matched > 30
    for example in t32.counterexamples:
        (x,) = example.inputs
        assert float(x) <= 0 and float(x).is_integer() and example.kernel == "inf"
    # every input once per alpha value (0.5, 2.0, -1.5); torch refuses a negative delta
    (f32,) = huber.dtypes
    assert f32.checked == 2 * f32.edge and f32.refused == f32.edge


@pytest.mark.slow
def test_host_pinned_exponents_are_bound_or_left_out(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    """sqr as pow with the exponent the host pins (2, an int: an int32 tensor stays int32),
    pow_scalar as pow with its alpha on the exponent, 2 left out of the values it runs
    with: the host sends 2 to sqr, and this fixture's pow_scalar is wrong there alone."""
    from pipeline.guide.math import Target
    from pipeline.tree.host_refs import HostReference
    from tests.flows.math_helpers import fixture_root

    root = fixture_root(tmp_path)
    file = "host_named.metal"
    refs = [
        HostReference("sqr", "pow", "pow_tensor_scalar_stub", bound=(("exponent", "2.0"),)),
        HostReference("pow_scalar", "pow", "pow_tensor_scalar_stub", "exponent", avoid=("2.0",)),
    ]
    targets = [Target(r.kernel, root / file, file, r.op, None, None, None, r) for r in refs]
    sqr, pow_scalar = run_flow(tmp_path, host_cxx, real_c10_include, targets).functors
    assert sqr.reference == "aten.pow.Tensor_Scalar, exponent=2.0"
    checks = by_dtype(sqr)
    assert checks["int32"].torch_dtype == "int32"
    # every input once per alpha value left (0.5, -1.5); the functor's zeros at 2 unseen
    # (what differs is the toy's pow(-inf, 0.5): inf, where torch gives nan)
    (f32,) = pow_scalar.dtypes
    assert f32.checked + f32.refused == 2 * f32.edge
    assert f32.matched >= f32.checked - 2
    assert all(e.inputs[-1] != "alpha=2.0" for e in f32.counterexamples)
    for check in sqr.dtypes:
        assert check.status is Agreement.OK, check
