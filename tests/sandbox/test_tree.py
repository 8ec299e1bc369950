"""The bundled tree: every reader reads it cleanly, and it holds each case the workflows need."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.tree import common_mps, metal, native_yaml, objc
from pipeline.tree.opinfo import load_table

TREE = sandbox.TREE
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")
FLOATS = ("float32", "float16", "bfloat16")


@pytest.fixture(scope="module")
def yaml_model() -> native_yaml.NativeFunctions:
    return native_yaml.read(TREE)


@pytest.fixture(scope="module")
def kernels() -> metal.MetalKernels:
    return metal.read(TREE)


@pytest.fixture(scope="module")
def host() -> objc.HostFiles:
    return objc.read(TREE)


@pytest.fixture(scope="module")
def lists() -> common_mps.CommonMps:
    return common_mps.read(TREE)


@pytest.fixture(scope="module")
def opinfos():
    return load_table(TREE / sandbox.OPINFO_TABLE)


def _entries(model: native_yaml.NativeFunctions, op: str) -> dict[str, native_yaml.NativeFunction]:
    return {e.full_name: e for e in model.operators()[op]}


def _input_dtypes(kernels: metal.MetalKernels, name: str) -> set[str]:
    return {r.input for r in kernels.registrations_for(name)}


def test_every_reader_reads_the_tree_cleanly(yaml_model, kernels, host, lists, opinfos):
    # The tree deliberately holds no construct the readers cannot interpret.
    assert yaml_model.warnings == () and len(yaml_model.entries) == 72
    assert kernels.warnings == ()
    assert {Path(f.path).name for f in kernels.files} == {
        "BinaryKernel.metal",
        "UnaryKernel.metal",
    }
    for file in kernels.files:
        assert file.unrecognised == () and file.warnings == ()
    assert host.warnings == ()
    assert len(host.files) == 4
    for file in host.files:
        assert file.unrecognised == () and file.warnings == ()
    assert lists.warnings == () and lists.unrecognised == ()
    assert len(opinfos) == 16


def test_the_tree_has_at_least_a_dozen_operators_each_with_an_opinfo(yaml_model, opinfos):
    operators = yaml_model.operators()
    tested = {o.aten_name for o in opinfos}
    assert len(tested) >= 12
    assert tested <= set(operators)
    aliases = {a for o in opinfos for a in o.aliases}
    assert {"arctan2", "less", "fix", "divide"} <= aliases & set(operators)


def test_torchgen_reads_the_same_mps_kernels(yaml_model):
    torchgen_gen = pytest.importorskip("torchgen.gen")
    from torchgen.model import DispatchKey

    tags = Path(torchgen_gen.__file__).parent / "packaged" / "ATen" / "native" / "tags.yaml"
    parsed = torchgen_gen.parse_native_yaml(
        str(TREE / native_yaml.PATTERNS[0]), str(tags), skip_native_fns_gen=True
    )
    torchgen_mps = {
        str(name): metadata.kernel
        for name, metadata in parsed.backend_indices[DispatchKey.MPS].index.items()
    }
    ours = {
        e.full_name: e.kernel_for("MPS")
        for e in yaml_model.entries
        if e.kernel_for("MPS") is not None
    }
    assert ours == torchgen_mps


def test_atan2_is_on_mpsgraph_with_its_functor_already_registered(yaml_model, kernels, host):
    entries = _entries(yaml_model, "atan2")
    out = entries["atan2.out"]
    assert out.structured and out.structured_inherits == "TensorIteratorBase"
    assert out.mps_kind == "mps_specific" and out.kernel_for("MPS") == "atan2_out_mps"
    assert out.kernel_for("CPU") == "atan2_out"
    assert entries["atan2"].structured_delegate == "atan2.out"
    assert entries["atan2_"].structured_delegate == "atan2.out"
    assert "arctan2" in yaml_model.operators()

    assert kernels.functor("atan2") is not None
    written = {r.written_macro for r in kernels.registrations_for("atan2")}
    assert written == {"REGISTER_FLOAT_BINARY_OP", "REGISTER_INT2FLOAT_BINARY_OP"}
    assert _input_dtypes(kernels, "atan2") == set(FLOATS + INT_DTYPES)

    impl = host.implementation("atan2_out_mps")
    assert impl is not None and impl.kind == "TORCH_IMPL_FUNC"
    assert host.stubs_for("atan2_stub") == ()
    includes = {i.op for f in host.files for i in f.includes if f.path.endswith("BinaryOps.mm")}
    assert "atan2" in includes


def test_atan2_integer_xfails_are_the_ones_migration_removes(lists):
    (entry,) = [e for e in lists.for_key("atan2")]
    assert entry.list == "UNIMPLEMENTED_XFAILLIST"
    assert set(entry.dtypes) == set(INT_DTYPES)
    assert entry.comment_span is not None


def test_hypot_needs_only_mps_support_its_functor_exists(yaml_model, kernels, host):
    out = _entries(yaml_model, "hypot")["hypot.out"]
    assert out.mps_kind == "none"
    assert out.dispatch[0].keys == ("CPU", "CUDA", "XPU")
    assert kernels.functor("hypot") is not None
    assert _input_dtypes(kernels, "hypot") == set(FLOATS)
    assert host.stubs_for("hypot_stub") == ()


def test_xlogy_has_no_mps_and_no_functor_and_sits_in_several_lists(yaml_model, kernels, lists):
    entries = _entries(yaml_model, "xlogy")
    assert entries["xlogy.OutTensor"].mps_kind == "none"
    assert entries["xlogy.Tensor"].structured_delegate == "xlogy.OutTensor"
    assert kernels.functor("xlogy") is None and kernels.registrations_for("xlogy") == ()
    found = {(e.list, e.function): e.dtypes for e in lists.for_key("xlogy")}
    assert found == {
        ("UNIMPLEMENTED_XFAILLIST", "mps_ops_modifier"): None,
        ("UNDEFINED_XFAILLIST", "mps_ops_modifier"): ("bool",),
        ("XFAILLIST_GRAD", "mps_ops_grad_modifier"): None,
    }


def test_copysign_is_already_native(yaml_model, kernels, host):
    out = _entries(yaml_model, "copysign")["copysign.out"]
    assert out.mps_kind == "shared" and out.dispatch[0].keys == ("CPU", "CUDA", "MPS")
    (stub,) = host.stubs_for("copysign_stub")
    assert stub.native and stub.kernel_name == "copysign" and stub.exec_kind == "binary"
    assert _input_dtypes(kernels, "copysign") == set(FLOATS + INT_DTYPES)


def test_lt_has_tensor_and_scalar_overloads_with_macro_generated_mpsgraph(
    yaml_model, kernels, host
):
    entries = _entries(yaml_model, "lt")
    assert entries["lt.Scalar_out"].kernel_for("MPS") == "lt_scalar_out_mps"
    assert entries["lt.Tensor_out"].kernel_for("MPS") == "lt_tensor_out_mps"
    for name in ("lt_scalar_out_mps", "lt_tensor_out_mps"):
        impl = host.implementation(name)
        assert impl.kind == "macro" and impl.macro == "CREATE_MPS_STRUCTURED_BOOLEAN_OP_FUNC"
    functor = kernels.functor("lt")
    assert functor.macro == "DEFINE_BINARY_COMPARISON_FUNCTOR"
    assert {r.output for r in kernels.registrations_for("lt")} == {"bool"}


def test_div_is_native_through_functors_not_named_after_it(opinfos, kernels, host):
    keys = {o.key for o in opinfos if o.name == "div"}
    assert keys == {"divno_rounding_mode", "divtrunc_rounding", "divfloor_rounding"}
    for functor in ("div_true", "div_trunc", "div_floor"):
        (stub,) = host.stubs_for(f"{functor}_stub")
        assert stub.native and stub.kernel_name == functor
    assert "complex64" in _input_dtypes(kernels, "div_true")
    assert {s.function for s in host.stubs_for("div_trunc_stub")} == {"div_trunc_mps_kernel"}


def test_unary_stubs_behind_local_macros(host, kernels):
    (erfinv,) = host.stubs_for("erfinv_stub")
    assert erfinv.macro == "REGISTER_UNARY_TI_DISPATCH" and erfinv.native
    assert erfinv.kernel_name == "erfinv" and erfinv.exec_kind == "unary"
    assert kernels.functor("erfinv").macro == "DEFINE_UNARY_FLOATING_FUNCTOR"
    # INSTANTIATE_UNARY_KERNELS2(OUT, IN) swaps the order: int inputs produce float
    assert ("int64", "float32") in {
        (r.input, r.output) for r in kernels.registrations_for("erfinv")
    }
    (trunc,) = host.stubs_for("trunc_stub")
    assert trunc.macro == "REGISTER_MPS_UNARY_STUB" and not trunc.native
    assert trunc.kernel_name is None


def test_mpsgraph_only_names_and_plain_functions(host, yaml_model):
    assert host.implementation("fmod_mps_out").kind == "TORCH_IMPL_FUNC"
    assert host.implementation("logit_mps").kind == "function"
    assert host.implementation("logit_out_mps").kind == "function"
    assert _entries(yaml_model, "logit")["logit_"].mps_kind == "none"
    exp2 = _entries(yaml_model, "exp2")["exp2.out"]
    assert exp2.mps_kind == "mps_specific"


def test_per_operator_includes_are_sorted(host):
    for file in host.files:
        ops = [i.op for i in file.includes]
        assert ops == sorted(ops), file.path


def test_complex_support_and_macos_lists(lists):
    complex_ok = {s.key for s in lists.sets if s.list == "SUPPORTED_COMPLEX_OPS"}
    assert {"sinc", "divno_rounding_mode"} <= complex_ok and "exp2" not in complex_ok
    macos = [e for e in lists.entries if e.list.startswith("MACOS_BEFORE_")]
    assert [(e.key, e.dtypes) for e in macos] == [("maximum", ("bfloat16",))]
    skips = {e.key for e in lists.entries if e.list == "SKIPLIST"}
    assert "logit" in skips


def test_opinfo_table_is_exported_relative_to_the_tree():
    assert sandbox.OPINFO_TABLE == "torch/testing/_internal/opinfo_table.yaml"
    assert not Path(sandbox.OPINFO_TABLE).is_absolute()
    assert (TREE / sandbox.OPINFO_TABLE).is_file()


def test_the_bundled_tree_has_no_build_output():
    assert not (TREE / "build").exists()
    assert not list(TREE.rglob("__pycache__"))
