"""Smoke test: the project's readers on tests/fixtures/upstream, a mini tree written in
the shape of the current upstream PyTorch files (see its README for what each file
imitates and which cases it covers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.tree import dispatch, metal, native_yaml, objc

ROOT = Path(__file__).parent.parent / "fixtures" / "upstream"
INTS = ("bool", "uint8", "int8", "int16", "int32", "int64")


@pytest.fixture(scope="module")
def kernels() -> metal.MetalKernels:
    return metal.read(ROOT)


@pytest.fixture(scope="module")
def host() -> objc.HostFiles:
    return objc.read(ROOT)


@pytest.fixture(scope="module")
def decls() -> dispatch.DispatchDecls:
    return dispatch.read(ROOT)


@pytest.fixture(scope="module")
def yaml_() -> native_yaml.NativeFunctions:
    return native_yaml.read(ROOT)


def pairs(kernels: metal.MetalKernels, name: str) -> set[tuple[str, str]]:
    return {(r.input, r.output) for r in kernels.registrations_for(name)}


def test_nothing_unrecognised(kernels, host, decls):
    assert kernels.warnings == () and host.warnings == () and decls.warnings == ()
    for f in (*kernels.files, *host.files, *decls.files):
        assert f.unrecognised == (), f.path


# (b) INSTANTIATE_UNARY_KERNELS2(OUT, IN) and the complex VEC2 macro
def test_unary_instantiation_macro(kernels):
    got = pairs(kernels, "exp")
    assert {(i, "float32") for i in INTS} <= got
    assert {("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16")} <= got
    assert {("complex64", "complex64"), ("complex32", "complex32")} <= got
    assert pairs(kernels, "sigmoid") == {(i, "float32") for i in INTS} | {
        ("float32", "float32"),
        ("float16", "float16"),
        ("bfloat16", "bfloat16"),
    }
    assert ("int32", "int32") in pairs(kernels, "neg")
    assert {r.written_macro for r in kernels.registrations_for("sin")} == {
        "INSTANTIATE_UNARY_KERNELS2",
        "INSTANTIATE_UNARY_KERNELS_VEC2",
    }
    assert kernels.functor("erfcx").macro == "DEFINE_UNARY_FLOATING_FUNCTOR"


# (c)/(d) int -> float binary ops, kernel names that are not the aten name
def test_binary_convenience_macros(kernels):
    for name in ("atan2", "copysign", "div_true"):
        assert {(i, "float32") for i in ("bool", "uint8", "int8", "int16", "int32", "int64")} <= (
            pairs(kernels, name)
        )
        assert kernels.functor(name) is not None
    assert kernels.functor("div") is None
    assert {r.core_macro for r in kernels.registrations_for("div_true")} == {
        "REGISTER_OPMATH_BINARY_OP",
        "REGISTER_BINARY_OP",
    }


# today's eq/ne: every real and integer type, the complex ones and float8 (torch 2.15's
# c10/metal/float8.h), each also in its `_strided_castout_` form
def test_comparison_registrations_with_complex_and_float8(kernels):
    inputs = {"float32", "float16", "int64", "bool", "complex64", "complex32", "float8_e4m3fn"}
    assert pairs(kernels, "eq") == {(i, "bool") for i in inputs}
    by_macro = {(r.input, r.core_macro) for r in kernels.registrations_for("eq")}
    assert {
        (i, m) for i in inputs for m in ("REGISTER_BINARY_OP", "REGISTER_BINARY_CASTOUT_OP")
    } == (by_macro)
    assert {r.written_macro for r in kernels.registrations_for("eq")} == {
        "REGISTER_COMPARISON_OP", "REGISTER_COMPLEX_EQ_OP", "REGISTER_FP8_EQ_OP",
    }  # fmt: skip
    assert kernels.functor("eq") is not None


def test_alpha_ops(kernels):
    assert ("bool", "float32") in pairs(kernels, "polygamma")
    assert {r.core_macro for r in kernels.registrations_for("hardshrink")} == {
        "REGISTER_UNARY_ALPHA_OP"
    }


# (a) MPSGraph behind a stub; (b) native one-line macro
def test_unary_stubs(host):
    (acosh,) = host.stubs_for("acosh_stub")
    assert (acosh.macro, acosh.native, acosh.kernel_name) == (
        "REGISTER_MPS_UNARY_STUB",
        False,
        None,
    )
    (exp,) = host.stubs_for("exp_stub")
    assert (exp.macro, exp.native, exp.kernel_name, exp.function) == (
        "REGISTER_UNARY_TI_DISPATCH",
        True,
        "exp",
        "exp_kernel_mps",
    )
    (erfcx,) = host.stubs_for("special_erfcx_stub")
    assert (erfcx.native, erfcx.kernel_name) == (True, "erfcx")
    assert host.stubs_for("logit_stub") == ()


# (d) div_true kernel for the div operator; (e) scalar-taking activation kernels
def test_native_stubs_kernel_names(host):
    assert host.stubs_for("div_true_stub")[0].kernel_name == "div_true"
    assert host.stubs_for("atan2_stub")[0].kernel_name == "atan2"
    (hardshrink,) = host.stubs_for("hardshrink_stub")
    assert (hardshrink.native, hardshrink.exec_kind, hardshrink.kernel_name) == (
        True,
        "unary",
        "hardshrink",
    )
    assert host.stubs_for("softshrink_stub") == ()


# (f)/(g) what BinaryOps.mm and UnaryOps.mm still implement with MPSGraph
def test_mpsgraph_implementations(host):
    minimum = host.implementation("minimum_out_mps")
    assert (minimum.kind, minimum.macro) == ("macro", "CREATE_MPS_STRUCTURED_BINARY_OP_FUNC")
    assert (
        host.implementation("logical_and_out_mps").macro == "CREATE_MPS_BINARY_COMPARISON_OP_FUNC"
    )
    assert host.implementation("logaddexp_out_mps").kind == "TORCH_IMPL_FUNC"
    assert host.stubs_for("logaddexp_stub")[0].native  # half-done: both exist
    assert (
        host.implementation("atanh_out_mps").macro == "CREATE_MPS_STRUCTURED_UNARY_TORCH_IMPL_FUNC"
    )
    assert host.implementation("logit_out_mps").kind == "function"
    includes = {i.op for f in host.files for i in f.includes}
    assert includes == {
        "atanh",
        "logit",
        "logaddexp",
        "logical_and",
        "minimum",
        # issue 18's families
        "conj_physical",
        "frac",
        "hardswish",
        "hardswish_backward",
        "mish",
        "linalg_inv_ex",
        "_copy_from",
    }


# (e) stub types: aliases, inline pointer types, multi-line declarations
def test_dispatch_declarations(decls):
    assert decls.stub("logit_stub").params == ("TensorIteratorBase&", "const Scalar&")
    assert decls.stub("hardshrink_stub").params == ("TensorIteratorBase&", "const c10::Scalar&")
    assert decls.stub("softshrink_stub").fn_type == "softshrink_fn"
    assert decls.stub("polygamma_stub").params == ("TensorIteratorBase&", "const int64_t")
    nan = decls.stub("nan_to_num_stub")
    assert nan.params == ("TensorIteratorBase&", *["std::optional<double>"] * 3)
    assert (nan.span.start, nan.span.end) == (41, 47)
    assert decls.stub("hardswish_stub").iterator_param == "TensorIterator&"
    assert decls.stub("exp_stub").iterator_param == "TensorIteratorBase&"
    assert decls.stub("add_clamp_stub").params[0] == "TensorIterator&"


def test_native_yaml(yaml_):
    by_name = {e.full_name: e for e in yaml_.entries}
    assert by_name["acosh.out"].mps_kind == "shared"  # though its MPS kernel is MPSGraph
    assert by_name["atanh.out"].kernel_for("MPS") == "atanh_out_mps"
    assert by_name["atan2.out"].mps_kind == "shared"
    assert by_name["atan2"].structured_delegate == "atan2.out"
    assert by_name["arctan2"].mps_kind == "composite"
    assert by_name["div.out"].dispatch[0].keys == ("CPU", "CUDA", "MPS", "MTIA")
    assert by_name["logaddexp.out"].kernel_for("MPS") == "logaddexp_out"
    assert by_name["minimum.out"].mps_kind == "mps_specific"
    assert by_name["logit"].kernel_for("MPS") == "logit_mps"
    assert by_name["logit_"].mps_kind == "none"
    assert by_name["softshrink.out"].mps_kind == "none"
    assert [e.full_name for e in yaml_.operators()["exp"]] == ["exp", "exp_", "exp.out"]
