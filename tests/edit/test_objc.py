"""Host edits: removing MPSGraph implementations and includes, adding native stubs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.edit import objc as edit
from pipeline.errors import EditVerificationError
from pipeline.tree import objc

FIXTURES = Path(__file__).parent.parent / "fixtures" / "objc"
OPS = "aten/src/ATen/native/mps/operations"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture
def ops_text() -> str:
    return fixture("BinaryOps.mm")


# --- remove_implementation ------------------------------------------------------------


def test_remove_torch_impl_func_block_and_one_blank_line(ops_text):
    result = edit.remove_implementation(ops_text, f"{OPS}/BinaryOps.mm", "atan2_out_mps")
    assert result.summary == "remove TORCH_IMPL_FUNC atan2_out_mps (8 lines)"
    assert "atan2_out_mps" not in result.after
    assert "\n\n\n" not in result.after
    assert result.after.count("\n") == ops_text.count("\n") - 9
    # what surrounded it now touches with a single blank line between
    assert "minimum, Tensor);\n\nTORCH_IMPL_FUNC(logaddexp_out_mps)\n" in result.after
    parsed = objc.parse(result.after, f"{OPS}/BinaryOps.mm")
    assert [i.name for i in parsed.implementations] == [
        "eq_tensor_out_mps",
        "minimum_out_mps",
        "logaddexp_out_mps",
        "floor_divide_out_mps",
        "floor_divide_mps",
        "floor_divide_mps_",
        "fmod_mps_out",
    ]


def test_remove_implementation_with_signature_on_the_next_line(ops_text):
    result = edit.remove_implementation(ops_text, "BinaryOps.mm", "logaddexp_out_mps")
    assert "logaddexp_op_block" not in result.after
    assert result.after.count("\n") == ops_text.count("\n") - 13


def test_remove_macro_generated_implementation_line(ops_text):
    result = edit.remove_implementation(ops_text, "BinaryOps.mm", "minimum_out_mps")
    assert result.summary == "remove macro minimum_out_mps (1 line)"
    removed = [line for line in ops_text.splitlines() if line not in result.after.splitlines()]
    assert removed == ["CREATE_MPS_STRUCTURED_BINARY_OP_FUNC(minimum_out_mps, minimum, Tensor);"]
    # the macro's #define stays: other lines may use it
    assert "#define CREATE_MPS_STRUCTURED_BINARY_OP_FUNC" in result.after


def test_remove_last_definition_takes_the_blank_line_before_the_closing_brace(ops_text):
    result = edit.remove_implementation(ops_text, "BinaryOps.mm", "fmod_mps_out")
    assert result.after.endswith(
        "  return floor_divide_out_mps(self, other, self);\n}\n} // namespace at::native\n"
    )


def test_remove_first_definition_after_an_opening_brace():
    text = (
        "namespace at::native {\n\nTensor& a_mps(Tensor& t) {\n  return t;\n}\n\n"
        "Tensor& b_mps(Tensor& t) {\n  return t;\n}\n} // namespace at::native\n"
    )
    result = edit.remove_implementation(text, "x.mm", "a_mps")
    assert result.after == (
        "namespace at::native {\n\nTensor& b_mps(Tensor& t) {\n  return t;\n}\n"
        "} // namespace at::native\n"
    )


def test_remove_absent_implementation_is_an_unchanged_edit(ops_text):
    result = edit.remove_implementation(ops_text, "BinaryOps.mm", "hypot_out_mps")
    assert not result.changed and "nothing to remove" in result.summary


def test_remove_refuses_while_the_function_is_still_used(ops_text):
    with pytest.raises(EditVerificationError, match=r"BinaryOps.mm:\d+: floor_divide_out_mps is"):
        edit.remove_implementation(ops_text, "BinaryOps.mm", "floor_divide_out_mps")
    result = edit.remove_implementation(
        ops_text, "BinaryOps.mm", "floor_divide_out_mps", also_removing=["floor_divide_mps_"]
    )
    step2 = edit.remove_implementation(result.after, "BinaryOps.mm", "floor_divide_mps_")
    names = [i.name for i in objc.parse(step2.after, "BinaryOps.mm").implementations]
    assert "floor_divide_out_mps" not in names and "floor_divide_mps_" not in names
    assert "floor_divide_mps" in names


def test_remove_refuses_a_definition_sharing_lines_with_other_code():
    text = "namespace at::native {\nTensor& a_mps(Tensor& t) { return t; } int x = 1;\n}\n"
    with pytest.raises(EditVerificationError, match="shares its lines"):
        edit.remove_implementation(text, "x.mm", "a_mps")
    text = "namespace at::native {\nTensor& a_mps(Tensor& t) { return t; } }\n"
    with pytest.raises(EditVerificationError, match="shares its lines"):
        edit.remove_implementation(text, "x.mm", "a_mps")


# --- includes -------------------------------------------------------------------------


def test_include_still_needed_tracks_remaining_declarations(ops_text):
    assert edit.include_still_needed(ops_text, "atan2")
    after = edit.remove_implementation(ops_text, "BinaryOps.mm", "atan2_out_mps").after
    assert not edit.include_still_needed(after, "atan2")
    assert edit.include_still_needed(ops_text, "eq")  # the macro line names eq_tensor_out_mps
    assert edit.include_still_needed(ops_text, "fmod")  # fmod_mps_out
    assert not edit.include_still_needed(ops_text, "pow")
    # a file-local kernel function is not declared by the header
    assert not edit.include_still_needed(fixture("BinaryKernel.mm"), "polar")
    assert edit.include_still_needed("void f() { at::native::polar_out(a, b, c); }", "polar")
    assert edit.include_still_needed("struct structured_polar_out_mps;", "polar")
    assert not edit.include_still_needed('// polar_out_mps is gone\nauto s = "polar_mps";', "polar")


def test_remove_include_when_unused(ops_text):
    after = edit.remove_implementation(ops_text, "BinaryOps.mm", "atan2_out_mps").after
    result = edit.remove_include(after, "BinaryOps.mm", "atan2")
    assert result.summary == "remove #include <ATen/ops/atan2_native.h>"
    removed = [line for line in after.splitlines() if line not in result.after.splitlines()]
    assert removed == ["#include <ATen/ops/atan2_native.h>"]
    ops = [i.op for i in objc.parse(result.after, "BinaryOps.mm").includes]
    assert ops == ["eq", "floor_divide", "fmod", "logaddexp", "minimum"]


def test_remove_include_refuses_while_needed_and_is_idempotent(ops_text):
    with pytest.raises(EditVerificationError, match="still needed"):
        edit.remove_include(ops_text, "BinaryOps.mm", "atan2")
    assert not edit.remove_include(ops_text, "BinaryOps.mm", "hypot").changed


# --- add_stub -------------------------------------------------------------------------


def test_add_stub_follows_the_file_layout_and_habits():
    text = fixture("BinaryKernel.mm")
    result = edit.add_stub(
        text, "BinaryKernel.mm", "atan2_stub", "atan2_mps_kernel", "binary", "atan2"
    )
    assert result.summary == (
        "add atan2_mps_kernel and REGISTER_DISPATCH for atan2_stub (exec_binary_kernel 'atan2')"
    )
    assert (
        '  lib.exec_binary_kernel(iter, "div_true");\n}\n\n'
        "static void atan2_mps_kernel(TensorIteratorBase& iter) {\n"
        '  lib.exec_binary_kernel(iter, "atan2");\n}\n\n'
        "REGISTER_DISPATCH(hypot_stub, &hypot_mps_kernel)\n"
    ) in result.after
    # after the last REGISTER_* line, with '&' and without ';' like most of them
    assert result.after.endswith(
        "REGISTER_MPS_DISPATCH(div_true_stub, &div_true_mps_kernel)\n"
        "REGISTER_DISPATCH(atan2_stub, &atan2_mps_kernel)\n"
        "} // namespace at::native\n"
    )
    (stub,) = objc.parse(result.after, "BinaryKernel.mm").stubs[-1:]
    assert (stub.stub, stub.native, stub.exec_kind, stub.kernel_name) == (
        "atan2_stub",
        True,
        "binary",
        "atan2",
    )


def test_add_stub_copies_semicolons_and_param_type():
    text = fixture("UnaryKernel.mm")
    result = edit.add_stub(
        text, "UnaryKernel.mm", "tan_stub", "tan_mps_kernel", "unary", "tan", "TensorIterator &"
    )
    assert "static void tan_mps_kernel(TensorIterator& iter) {\n" in result.after
    assert "REGISTER_DISPATCH(pow_tensor_scalar_stub, &pow_scalar_kernel);\n" in result.after
    assert result.after.endswith(
        "REGISTER_DISPATCH(tan_stub, &tan_mps_kernel);\n} // namespace at::native\n"
    )
    fn = [
        f
        for f in objc.parse(result.after, "UnaryKernel.mm").functions
        if f.name == "tan_mps_kernel"
    ]
    assert fn[0].param_type == "TensorIterator&"


def test_add_stub_never_duplicates_a_registration():
    text = fixture("BinaryKernel.mm")
    again = edit.add_stub(
        text, "BinaryKernel.mm", "hypot_stub", "hypot_mps_kernel", "binary", "hypot"
    )
    assert not again.changed and "already registered" in again.summary
    # registered by a local macro counts too
    unary = fixture("UnaryKernel.mm")
    assert not edit.add_stub(unary, "UnaryKernel.mm", "exp_stub", "exp_k", "unary", "exp").changed
    first = edit.add_stub(
        text, "BinaryKernel.mm", "atan2_stub", "atan2_mps_kernel", "binary", "atan2"
    )
    second = edit.add_stub(
        first.after, "BinaryKernel.mm", "atan2_stub", "atan2_mps_kernel", "binary", "atan2"
    )
    assert not second.changed


def test_add_stub_reuses_an_unregistered_function_running_the_same_kernel():
    text = (
        "namespace at::native {\nstatic auto& lib = getLib();\n\n"
        'static void k(TensorIteratorBase& iter) {\n  lib.exec_binary_kernel(iter, "atan2");\n}\n'
        "} // namespace at::native\n"
    )
    result = edit.add_stub(text, "x.mm", "atan2_stub", "k", "binary", "atan2")
    assert result.after.count("static void k(") == 1
    assert "}\n\nREGISTER_DISPATCH(atan2_stub, &k)\n} // namespace at::native\n" in result.after


def test_add_stub_into_an_empty_native_namespace():
    text = (
        "namespace at::native {\nstatic auto& lib = getLib();\nnamespace mps {\nvoid h() {}\n}\n"
        "} // namespace at::native\n"
    )
    result = edit.add_stub(text, "x.mm", "sinc_stub", "sinc_mps_kernel", "unary", "sinc")
    assert result.after.endswith(
        "}\n\nstatic void sinc_mps_kernel(TensorIteratorBase& iter) {\n"
        '  lib.exec_unary_kernel(iter, "sinc");\n}\n\n'
        "REGISTER_DISPATCH(sinc_stub, &sinc_mps_kernel)\n} // namespace at::native\n"
    )


def test_add_stub_refusals():
    text = fixture("BinaryKernel.mm")
    with pytest.raises(EditVerificationError, match="already exists and runs"):
        edit.add_stub(text, "BinaryKernel.mm", "new_stub", "hypot_mps_kernel", "binary", "atan2")
    with pytest.raises(EditVerificationError, match="already used"):
        edit.add_stub(text, "BinaryKernel.mm", "new_stub", "binary_op_kernel", "binary", "atan2")
    no_lib = "namespace at::native {\nvoid f();\n}\n"
    with pytest.raises(EditVerificationError, match="no Metal shader library"):
        edit.add_stub(no_lib, "x.mm", "a_stub", "a_kernel", "binary", "a")
    with pytest.raises(EditVerificationError, match="no `namespace at::native"):
        edit.add_stub("static auto& lib = x;\n", "x.mm", "a_stub", "a_kernel", "binary", "a")
    for args in (
        ("a-stub", "f", "binary", "a", "TensorIteratorBase&"),
        ("a_stub", "f", "Binary", "a", "TensorIteratorBase&"),
        ("a_stub", "f", "binary", "a", "TensorIteratorBase"),
        ("a_stub", "f", "binary", '"a"', "TensorIteratorBase&"),
    ):
        with pytest.raises(ValueError):
            edit.add_stub(text, "BinaryKernel.mm", *args)


def test_add_stub_verifies_by_reparsing(monkeypatch):
    text = fixture("BinaryKernel.mm")
    monkeypatch.setattr(
        edit, "_registration_line", lambda lines, direct, stub, fn: f"REGISTER_DISPATCH({stub})\n"
    )
    with pytest.raises(EditVerificationError, match="nothing was written"):
        edit.add_stub(text, "BinaryKernel.mm", "atan2_stub", "atan2_mps_kernel", "binary", "atan2")
