"""A functor's operator read through the host code (issue 27): the host kernel function
that runs it, the stub that function is registered for, the shared implementation calling
the stub and the yaml row naming that implementation; the scalars the host passes or fixes
go to the schema arguments the stub's call names. A condition the tool cannot read, or a
tree without native/*.cpp, is unknown, never a guess."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.guide import math as guide_math
from pipeline.tree import host_refs, sources
from pipeline.tree.host_choice import KernelLaunch
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.source import TreeSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
YAML = "aten/src/ATen/native/native_functions.yaml"
TABLE = "torch/testing/_internal/opinfo_table.yaml"
METAL = "aten/src/ATen/native/mps/kernels/HostNamed.metal"
UNARY_MM = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
# polygamma's kernel as upstream shapes it: trigamma under order == 1, returning before
POLYGAMMA = """static void polygamma_kernel_mps(TensorIteratorBase& iter, const int64_t order) {
  if (order == 1) {
    lib.exec_unary_kernel(iter, "trigamma");
    return;
  }
  lib.exec_unary_kernel(iter, "polygamma", Scalar(order), ScalarType::Int);
}"""


def _tree(tmp_path: Path, *, sources: bool = True) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "upstream", root)
    shutil.copytree(FIXTURES / "upstream_host" / "aten", root / "aten", dirs_exist_ok=True)
    if not sources:
        for cpp in (root / "aten/src/ATen/native").glob("*.cpp"):
            cpp.unlink()
    rows = (FIXTURES / "upstream_host" / "native_functions_rows.yaml").read_text()
    yaml = root / YAML
    yaml.write_text(yaml.read_text() + rows)
    mm = root / UNARY_MM
    text = mm.read_text()
    start = text.index("static void polygamma_kernel_mps")
    end = text.index("}\n", start) + 1
    mm.write_text(text[:start] + POLYGAMMA + text[end:])
    return root


def _index(tmp_path: Path, **kw: bool) -> TreeIndex:
    root = _tree(tmp_path, **kw)
    return load_index(TreeSource(root, tmp_path / "cache", "python", root / TABLE))


def test_a_functor_named_unlike_its_operator_is_found_through_the_host(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ref = host_refs.resolve(index, "make_complex")
    assert ref is not None and ref.unknown is None
    assert ref.op == "complex" and ref.alpha is None and ref.bound == ()
    assert ref.via.startswith("complex_stub -> complex_out")
    t = guide_math.target(index, "make_complex", METAL, {})
    assert t.reference == "aten.complex" and guide_math.aten_names(t, False) == ("complex",)


def test_the_scalar_the_host_passes_goes_to_the_argument_the_stub_call_names(
    tmp_path: Path,
) -> None:
    ref = host_refs.resolve(_index(tmp_path), "huber")
    assert ref is not None and ref.unknown is None
    assert (ref.op, ref.alpha, ref.bound) == ("huber_loss", "delta", ())


def test_a_condition_fixing_a_scalar_binds_it(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ref = host_refs.resolve(index, "trigamma")
    assert ref is not None and ref.unknown is None
    assert (ref.op, ref.alpha, ref.bound) == ("polygamma", None, (("n", "1"),))
    t = guide_math.target(index, "trigamma", METAL, {})
    assert t.bound == (("n", "1"),) and t.reference == "aten.polygamma"
    # the launch after the returning branch runs where order != 1 and passes order on: its
    # alpha is n, never 1 there
    (stub,) = [s for f in index.host.files for s in f.stubs if s.stub == "polygamma_stub"]
    launch = stub.launches[1]
    assert (launch.kernel, launch.alpha, launch.unread, launch.avoid) == (
        "polygamma",
        1,
        None,
        ("1",),
    )
    poly = host_refs.resolve(index, "polygamma")
    assert poly is not None and (poly.op, poly.alpha, poly.avoid) == ("polygamma", "n", ("1",))


def test_a_condition_the_tool_cannot_read_is_unknown(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ref = host_refs.resolve(index, "smooth_l1")
    assert ref is not None and ref.op is None
    assert ref.unknown is not None and "`beta > 0`" in ref.unknown
    t = guide_math.target(index, "smooth_l1", METAL, {})
    # the name may still find a torch function; if not, the host's unknown is the reason
    assert t.host == ref and t.fn == "smooth_l1"


@pytest.mark.parametrize("kernel", ["make_complex", "huber"])
def test_without_native_sources_the_operator_is_unknown(tmp_path: Path, kernel: str) -> None:
    ref = host_refs.resolve(_index(tmp_path, sources=False), kernel)
    assert ref is not None and ref.op is None
    assert ref.unknown is not None and "no native/*.cpp" in ref.unknown


def test_a_kernel_no_host_function_runs_has_no_host_reference(tmp_path: Path) -> None:
    assert host_refs.resolve(_index(tmp_path), "lane_twist") is None


def test_a_stub_one_of_several_an_implementation_chooses_between_is_unknown(
    tmp_path: Path,
) -> None:
    # margin_out_mode calls the floor or the trunc stub by its rounding mode: resolving the
    # floor kernel to plain `margin` would check it against the wrong operator
    ref = host_refs.resolve(_index(tmp_path), "margin_floor")
    assert ref is not None and ref.op is None
    assert ref.unknown is not None and "also calls margin_trunc_stub" in ref.unknown


def _launch(index: TreeIndex, stub: str, kernel: str) -> KernelLaunch:
    (found,) = [s for f in index.host.files for s in f.stubs if s.stub == stub]
    return next(la for la in found.launches if la.kernel == kernel)


def test_a_pin_beside_a_type_test_of_its_parameter_binds_it(tmp_path: Path) -> None:
    # `!exp_scalar.isComplex() && exp_scalar.to<float>() == 2.0`: the type test restricts,
    # the pin fixes the exponent; named as the schema names it (the .cpp says `exp`)
    ref = host_refs.resolve(_index(tmp_path), "sqr")
    assert ref is not None and ref.unknown is None
    assert (ref.op, ref.alpha, ref.bound, ref.avoid) == ("pow", None, (("exponent", "2.0"),), ())


def test_where_a_pin_did_not_hold_its_literal_is_avoided_on_the_alpha(tmp_path: Path) -> None:
    # pow_scalar's two launches pass the exponent on, after sqr's pin (2) and, for the
    # second, reciprocal's (-1): one reference, avoiding both
    index = _index(tmp_path)
    first = _launch(index, "pow_tensor_scalar_stub", "pow_scalar")
    assert (first.alpha, first.unread, first.avoid) == (1, None, ("2.0",))
    ref = host_refs.resolve(index, "pow_scalar")
    assert ref is not None and ref.unknown is None
    assert (ref.op, ref.alpha, ref.bound) == ("pow", "exponent", ())
    assert set(ref.avoid) == {"2.0", "-1.0"}
    t = guide_math.target(index, "pow_scalar", METAL, {})
    assert t.reference == "aten.pow" and t.alpha_argument == "exponent"
    assert set(t.avoid) == {"2.0", "-1.0"}


def test_a_pin_on_a_parameter_the_launch_does_not_pass_on_is_unknown(tmp_path: Path) -> None:
    index = _index(tmp_path)
    zero = _launch(index, "pow_mode_stub", "pow_mode_zero")
    assert zero.fixed == ((2, "0"),) and zero.unread is None
    # mode != 0 says nothing of the exponent the functor gets
    assert _launch(index, "pow_mode_stub", "pow_mode").unread == "not (mode == 0)"
    big = _launch(index, "pow_mode_stub", "pow_mode_big")
    assert big.unread == "exp_scalar.to<float>() > 2.0 && mode == 1"
    ref = host_refs.resolve(index, "pow_mode")
    assert ref is not None and ref.op is None
    assert ref.unknown is not None and "`not (mode == 0)`" in ref.unknown


def test_a_structured_operator_s_operands_go_in_its_meta_s_order(tmp_path: Path) -> None:
    # the meta builds the iterator from (self_or_result, grad_output): the kernel's first
    # operand is self; is_result is only checked there and never reaches the stub
    ref = host_refs.resolve(_index(tmp_path), "leaky_relu_backward")
    assert ref is not None and ref.unknown is None, ref
    assert ref.op == "leaky_relu_backward"
    assert ref.operands == ("self", "grad_output")
    assert ref.alpha == "negative_slope"
    assert ref.bound == (("self_is_result", "false"),)


def test_a_flag_that_reaches_the_iterator_is_left_free(tmp_path: Path) -> None:
    # flip chooses an operand: its value changes what the kernel computes, so it is not
    # passed, and the operands (an expression) are not read either
    ref = host_refs.resolve(_index(tmp_path), "ramp_backward")
    assert ref is not None and ref.op == "ramp_backward", ref
    assert ref.operands == () and ref.bound == ()


def test_an_operator_s_own_kernel_takes_the_host_s_reference(tmp_path: Path) -> None:
    index = _index(tmp_path)
    found = guide_math.target(index, "leaky_relu_backward", METAL, {})
    assert found.reference == "aten.leaky_relu_backward"
    assert found.operands == ("self", "grad_output")
    assert found.bound == (("self_is_result", "false"),)
    # without the shared implementation it is the operator's name alone, as before
    bare = guide_math.target(
        _index(tmp_path / "bare", sources=False), "leaky_relu_backward", METAL, {}
    )
    assert bare.host is None and bare.fn == "leaky_relu_backward" and bare.operands == ()


def test_meta_functions_are_read_with_the_iterator_they_build() -> None:
    text = (FIXTURES / "upstream_host" / "aten/src/ATen/native/Activation.cpp").read_text()
    found = {i.name: i for i in sources.parse(text, "Activation.cpp").implementations}
    meta = found["meta::leaky_relu_backward"]
    assert meta.params == ("grad_output", "self_or_result", "negval", "is_result")
    assert meta.inputs == ("self_or_result", "grad_output")
    assert "is_result" not in meta.used  # read by the check alone
    assert found["meta::ramp_backward"].inputs == ("flip ? self : grad_output", "grad_output")
    assert found["leaky_relu_backward_out"].inputs is None  # it builds no iterator
