"""The host (.mm) reader: kernel functions, stubs, MPSGraph implementations, includes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ParseError
from pipeline.tree import objc
from pipeline.tree.span import Span

FIXTURES = Path(__file__).parent.parent / "fixtures" / "objc"
OPS = "aten/src/ATen/native/mps/operations"


def load(name: str) -> objc.ObjcFile:
    return objc.parse((FIXTURES / name).read_text(), f"{OPS}/{name}")


@pytest.fixture(scope="module")
def binary_kernel() -> objc.ObjcFile:
    return load("BinaryKernel.mm")


@pytest.fixture(scope="module")
def binary_ops() -> objc.ObjcFile:
    return load("BinaryOps.mm")


@pytest.fixture(scope="module")
def unary_kernel() -> objc.ObjcFile:
    return load("UnaryKernel.mm")


@pytest.fixture(scope="module")
def unary_ops() -> objc.ObjcFile:
    return load("UnaryOps.mm")


def parse(text: str) -> objc.ObjcFile:
    return objc.parse(text, "x.mm")


# --- native Metal side ----------------------------------------------------------------


def test_kernel_functions(binary_kernel):
    got = [
        (f.name, f.param_type, f.exec_kind, f.kernel_name, f.span.start, f.span.end)
        for f in binary_kernel.functions
    ]
    assert got == [
        ("hypot_mps_kernel", "TensorIteratorBase&", "binary", "hypot", 39, 41),
        ("copysign_mps_kernel", "TensorIteratorBase&", "binary", "copysign", 43, 45),
        ("fmax_mps_kernel", "TensorIteratorBase&", "binary", "fmax", 47, 53),
        ("polar_mps_kernel", "TensorIterator&", "binary", "polar", 55, 57),
        ("lerp_scalar_mps_kernel", "at::TensorIteratorBase&", "binary", "lerp_alpha", 59, 61),
        ("div_true_mps_kernel", "TensorIteratorBase&", "binary", "div_true", 63, 66),
    ]


def test_register_dispatch_with_and_without_ampersand_and_semicolon(binary_kernel):
    got = [(s.stub, s.function, s.macro, s.native, s.span.start) for s in binary_kernel.stubs]
    assert got == [
        ("hypot_stub", "hypot_mps_kernel", "REGISTER_DISPATCH", True, 68),
        ("copysign_stub", "copysign_mps_kernel", "REGISTER_DISPATCH", True, 69),
        ("fmax_stub", "fmax_mps_kernel", "REGISTER_DISPATCH", True, 70),
        ("polar_stub", "polar_mps_kernel", "REGISTER_DISPATCH", True, 71),
        ("lerp_kernel_scalar_weight", "lerp_scalar_mps_kernel", "REGISTER_DISPATCH", True, 72),
        ("div_true_stub", "div_true_mps_kernel", "REGISTER_MPS_DISPATCH", True, 73),
    ]
    polar = binary_kernel.stubs[3]
    assert (polar.exec_kind, polar.kernel_name) == ("binary", "polar")
    assert binary_kernel.unrecognised == () and binary_kernel.warnings == ()


def test_helper_in_namespace_mps_is_neither_kernel_nor_implementation(binary_kernel):
    names = {f.name for f in binary_kernel.functions} | {
        i.name for i in binary_kernel.implementations
    }
    assert "binary_op_kernel" not in names
    assert binary_kernel.implementations == ()


def test_local_macro_registering_a_native_kernel(unary_kernel):
    macro_stubs = [s for s in unary_kernel.stubs if s.macro == "REGISTER_UNARY_TI_DISPATCH"]
    assert [
        (s.stub, s.function, s.native, s.exec_kind, s.kernel_name, s.span) for s in macro_stubs
    ] == [
        ("exp_stub", "exp_kernel_mps", True, "unary", "exp", Span(f"{OPS}/UnaryKernel.mm", 35, 35)),
        (
            "erfc_stub",
            "erfc_kernel_mps",
            True,
            "unary",
            "erfc",
            Span(f"{OPS}/UnaryKernel.mm", 36, 36),
        ),
        (
            "sigmoid_stub",
            "sigmoid_kernel_mps",
            True,
            "unary",
            "sigmoid",
            Span(f"{OPS}/UnaryKernel.mm", 37, 37),
        ),
    ]


def test_kernel_with_extra_arguments_and_several_exec_calls(unary_kernel):
    by_stub = {s.stub: s for s in unary_kernel.stubs}
    assert by_stub["round_places_stub"].kernel_name == "round_places"
    assert by_stub["round_places_stub"].function == "round_places_kernel"  # no '&'
    # the first exec call names the kernel
    assert by_stub["pow_tensor_scalar_stub"].kernel_name == "sqr"


def test_local_macro_registering_an_mpsgraph_stub_is_not_native(unary_ops):
    got = [(s.stub, s.function, s.macro, s.native, s.exec_kind) for s in unary_ops.stubs]
    assert got == [
        ("acosh_stub", "mps_acosh_kernel", "REGISTER_MPS_UNARY_STUB", False, None),
        ("trunc_stub", "mps_trunc_kernel", "REGISTER_MPS_UNARY_STUB", False, None),
    ]


def test_raw_string_shader_source_is_not_host_code(unary_ops):
    assert "halve_stub" not in {s.stub for s in unary_ops.stubs}
    (u,) = unary_ops.unrecognised
    assert u.text == "REGISTER_MPS_UNARY_WITHOUT_DEFINE(frac, frac);"
    assert u.span.start == 105 and "not defined in this file" in u.reason


# --- MPSGraph implementations ---------------------------------------------------------


def test_implementations_of_every_kind(binary_ops):
    got = [(i.name, i.kind, i.macro, i.span.start, i.span.end) for i in binary_ops.implementations]
    assert got == [
        ("eq_tensor_out_mps", "macro", "CREATE_MPS_STRUCTURED_BOOLEAN_OP_FUNC", 101, 101),
        ("minimum_out_mps", "macro", "CREATE_MPS_STRUCTURED_BINARY_OP_FUNC", 104, 104),
        ("atan2_out_mps", "TORCH_IMPL_FUNC", None, 106, 113),
        ("logaddexp_out_mps", "TORCH_IMPL_FUNC", None, 115, 126),  # signature on next line
        ("floor_divide_out_mps", "function", None, 128, 131),
        ("floor_divide_mps", "function", None, 133, 137),
        ("floor_divide_mps_", "function", None, 139, 141),
        ("fmod_mps_out", "TORCH_IMPL_FUNC", None, 143, 146),
    ]
    assert binary_ops.functions == () and binary_ops.stubs == ()
    assert binary_ops.unrecognised == () and binary_ops.warnings == ()


def test_helpers_structs_and_static_functions_are_not_implementations(unary_ops):
    assert [(i.name, i.kind) for i in unary_ops.implementations] == [
        ("signbit_out_mps", "TORCH_IMPL_FUNC"),
        ("logit_out_mps", "function"),
        ("logit_mps", "function"),
        ("neg_out_mps", "function"),
    ]
    # wrapped_input_mps lives in namespace mps; logit_mps_impl is static


def test_implementation_names_accepted():
    for name in ("_mps_convolution", "mps_linear_backward", "add_mps_", "x_out_mps", "y_mps_out"):
        assert objc.MPS_NAME.match(name), name
    for name in ("add_out", "mpsx", "helper"):
        assert not objc.MPS_NAME.match(name), name


def test_macro_implementation_without_a_define_uses_the_first_argument():
    f = parse("namespace at::native {\nCREATE_FROM_HEADER(sub_out_mps, subtract, Tensor);\n}\n")
    assert [(i.name, i.kind, i.macro) for i in f.implementations] == [
        ("sub_out_mps", "macro", "CREATE_FROM_HEADER")
    ]


# --- includes -------------------------------------------------------------------------


def test_per_operator_native_includes_only(binary_ops, binary_kernel):
    assert [(i.op, i.span.start) for i in binary_ops.includes] == [
        ("atan2", 12),
        ("eq", 13),
        ("floor_divide", 14),
        ("fmod", 15),
        ("logaddexp", 16),
        ("minimum", 17),
    ]
    assert [i.op for i in binary_kernel.includes] == ["copysign", "polar"]


# --- unusual but legal forms ----------------------------------------------------------


def test_dispatch_forms_from_other_trees():
    f = parse(
        "namespace at::native {\n"
        "namespace {\n"
        "template <bool offsets>\nTensor seg_mps(const Tensor& x) { return x; }\n"
        "} // namespace\n"
        "REGISTER_MPS_DISPATCH(seg_lengths_stub, &seg_mps<false>)\n"
        "REGISTER_MPS_DISPATCH(call_avg, &snap::call_avg_mps);\n"
        "REGISTER_DISPATCH(lambda_stub, [](TensorIteratorBase& it) {});\n"
        "REGISTER_DISPATCH(one_arg_stub);\n"
        "}\n"
    )
    assert [(s.stub, s.function, s.native) for s in f.stubs] == [
        ("seg_lengths_stub", "seg_mps<false>", False),
        ("call_avg", "snap::call_avg_mps", False),
    ]
    reasons = [(u.span.start, u.reason) for u in f.unrecognised]
    assert reasons[0][0] == 8 and "cannot tell which function" in reasons[0][1]
    assert reasons[1][0] == 9 and "takes 2 arguments" in reasons[1][1]


def test_nested_namespaces_and_double_closing_brace():
    f = parse(
        "namespace at {\nnamespace native {\n"
        'static void k(TensorIteratorBase& iter) { lib.exec_ternary_kernel(iter, "fma"); }\n'
        "REGISTER_DISPATCH(fma_stub, &k)\n"
        "}}\n"
    )
    (s,) = f.stubs
    assert (s.native, s.exec_kind, s.kernel_name) == (True, "ternary", "fma")


def test_kernel_name_not_a_literal_and_registration_of_unknown_function():
    f = parse(
        "static void k(TensorIteratorBase& iter) { lib.exec_binary_kernel(iter, name); }\n"
        "REGISTER_DISPATCH(a_stub, &k)\nREGISTER_DISPATCH(b_stub, &elsewhere)\n"
    )
    assert [(s.stub, s.native, s.exec_kind, s.kernel_name) for s in f.stubs] == [
        ("a_stub", True, "binary", None),
        ("b_stub", False, None, None),
    ]


def test_duplicate_stub_registration_warns():
    f = parse("REGISTER_DISPATCH(a_stub, &k)\nREGISTER_DISPATCH(a_stub, &k)\n")
    assert len(f.warnings) == 1 and "x.mm:2" in f.warnings[0]


def test_unexpandable_registration_macro_is_unrecognised():
    f = parse(
        "#define REGISTER_TWO(A, B) REGISTER_DISPATCH(A##_stub, B)\n"
        "#define REGISTER_NOTHING(A) static int A = 0;\n"
        "REGISTER_TWO(x);\nREGISTER_NOTHING(y);\n"
    )
    assert f.stubs == ()
    first, second = f.unrecognised
    assert first.span.start == 3 and "takes 2 argument(s), 1 given" in first.reason
    assert second.span.start == 4 and "expands to no REGISTER_DISPATCH" in second.reason


def test_objc_blocks_message_sends_and_strings_in_a_block_body():
    text = (
        "TORCH_IMPL_FUNC(x_out_mps)\n"
        "(const Tensor& self,\n const Tensor& out) {\n"
        '  auto k = @"{" + std::string("}}");\n'
        "  char c = '}';\n"
        "  auto b = ^MPSGraphTensor*(MPSGraph* g, MPSGraphTensor* t) {\n"
        "    return [g identityWithTensor:t name:@[ @1 ].count ? nil : nil];\n"
        "  };\n"
        "  /* } */ // {\n"
        "}\n"
        "Tensor after_mps(const Tensor& t) { return t; }\n"
    )
    f = parse(text)
    assert [(i.name, i.span.start, i.span.end) for i in f.implementations] == [
        ("x_out_mps", 1, 10),
        ("after_mps", 11, 11),
    ]


def test_declarations_are_not_definitions():
    f = parse("Tensor& proto_out_mps(const Tensor& self, Tensor& out);\n")
    assert f.implementations == ()


def test_unbalanced_file_raises_parse_error():
    with pytest.raises(ParseError) as err:
        parse("namespace at::native {\nTORCH_IMPL_FUNC(x_mps)(const Tensor& t) {\n")
    assert err.value.line == 2


# --- read() ---------------------------------------------------------------------------


def test_read_tree_and_lookups(tmp_path):
    ops = tmp_path / OPS
    ops.mkdir(parents=True)
    for name in ("BinaryKernel.mm", "BinaryOps.mm", "UnaryKernel.mm", "UnaryOps.mm"):
        (ops / name).write_text((FIXTURES / name).read_text())
    host = objc.read(tmp_path)
    assert len(host.files) == 4
    (exp,) = host.stubs_for("exp_stub")
    assert exp.native and exp.span.path == f"{OPS}/UnaryKernel.mm"
    assert host.implementation("atan2_out_mps").span.start == 106
    assert host.implementation("nope_mps") is None
    assert host.warnings == ()


def test_read_missing_directory_is_a_warning(tmp_path):
    host = objc.read(tmp_path)
    assert host.files == () and "no file matches" in host.warnings[0]
