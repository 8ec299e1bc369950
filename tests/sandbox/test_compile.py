"""The sandbox compiler: the artifact it builds, and the errors a real build would give."""

from __future__ import annotations

import json

import pytest

from pipeline.sandbox import compile
from tests.sandbox.edits import (
    BINARY_KERNEL,
    BINARY_METAL,
    BINARY_OPS,
    BINARY_OPS_H,
    UNARY_OPS,
    YAML,
    add_atan2_stub,
    edit,
    fold_atan2_yaml,
    line_of,
    remove_atan2_impl,
)


def test_pristine_tree_builds_without_diagnostics(sandbox_copy):
    result = compile.build(sandbox_copy)
    assert result.diagnostics == ()
    ops = result.artifact["operators"]
    assert result.artifact["format"] == compile.ARTIFACT_FORMAT
    summary = {op: rec["mps"] for op, rec in ops.items()}
    assert summary["atan2"] == "mpsgraph"
    assert summary["lt"] == "mpsgraph" and summary["fmod"] == "mpsgraph"
    assert summary["trunc"] == "mpsgraph" and summary["ceil"] == "mpsgraph"
    assert summary["copysign"] == "native" and summary["div"] == "native"
    assert summary["erfinv"] == "native" and summary["sinc"] == "native"
    assert summary["hypot"] is None and summary["xlogy"] is None
    assert summary["arctan2"] == "composite"


def test_artifact_records_how_each_overload_is_served(sandbox_copy):
    ops = compile.build(sandbox_copy).artifact["operators"]
    atan2 = ops["atan2"]["overloads"]["atan2"]
    assert atan2["via"] == "atan2.out" and atan2["kernel"] == "atan2_out_mps"
    assert atan2["at"].startswith(BINARY_OPS + ":")
    assert ops["xlogy"]["overloads"]["xlogy.Tensor"] == {
        "via": "xlogy.OutTensor",
        "mps": None,
        "overload": "xlogy.OutTensor",
    }
    copysign = ops["copysign"]["overloads"]["copysign.Tensor"]["stubs"]["copysign_stub"]
    assert copysign["native"] and copysign["kernel_name"] == "copysign"
    assert ["int64", "float32"] in copysign["pairs"] and ["float32", "float32"] in copysign["pairs"]
    mode = ops["div"]["overloads"]["div.Tensor_mode"]["stubs"]
    assert set(mode) == {"div_true_stub", "div_trunc_stub", "div_floor_stub"}
    trunc = ops["trunc"]["overloads"]["trunc"]["stubs"]["trunc_stub"]
    assert trunc == {
        "native": False,
        "function": "mps_trunc_kernel",
        "macro": "REGISTER_MPS_UNARY_STUB",
        "at": f"{UNARY_OPS}:{line_of(sandbox_copy, UNARY_OPS, 'REGISTER_MPS_UNARY_STUB(trunc')[0]}",
    }
    assert "complex64" in ops["sinc"]["native_dtypes"]
    assert "complex64" not in ops["div"]["native_dtypes"]  # div_trunc has no complex kernel


def test_migrated_atan2_is_native_for_every_registered_dtype(sandbox_copy):
    fold_atan2_yaml(sandbox_copy)
    remove_atan2_impl(sandbox_copy)
    add_atan2_stub(sandbox_copy)
    result = compile.build(sandbox_copy)
    assert result.diagnostics == ()
    atan2 = result.artifact["operators"]["atan2"]
    assert atan2["mps"] == "native"
    assert atan2["native_dtypes"] == [
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
    ]


def test_unknown_kernel_name_is_a_compile_error_at_the_string(sandbox_copy, tmp_path, capsys):
    add_atan2_stub(sandbox_copy, name="atan3")
    fold_atan2_yaml(sandbox_copy)
    remove_atan2_impl(sandbox_copy)
    out = tmp_path / "lib" / "torch_cpu.mpsim.json"
    out.parent.mkdir()
    out.write_text("old")
    status = compile.main(["--root", str(sandbox_copy), "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 1
    assert out.read_text() == "old"  # a failed compile leaves the old library
    line, col = line_of(sandbox_copy, BINARY_KERNEL, '"atan3"')
    expected = (
        f"{BINARY_KERNEL}:{line}:{col + 1}: error: no Metal kernel named 'atan3' is registered"
    )
    assert err.splitlines()[0] == expected
    assert err.splitlines()[-1] == "1 error generated."


def test_kernel_name_from_a_macro_argument_is_located_at_the_call(sandbox_copy):
    edit(
        sandbox_copy,
        "aten/src/ATen/native/mps/operations/UnaryKernel.mm",
        "REGISTER_UNARY_TI_DISPATCH(sinc);",
        "REGISTER_UNARY_TI_DISPATCH(sinc);\nREGISTER_UNARY_TI_DISPATCH(ceil);",
    )
    edit(sandbox_copy, UNARY_OPS, "REGISTER_MPS_UNARY_STUB(ceil, ceil);\n", "")
    (error,) = compile.build(sandbox_copy).errors
    line, col = line_of(sandbox_copy, "aten/src/ATen/native/mps/operations/UnaryKernel.mm", "ceil")
    assert (error.line, error.col) == (line, col)
    assert error.message == "no Metal kernel named 'ceil' is registered"


def test_exec_kind_must_match_the_registration_arity(sandbox_copy):
    edit(
        sandbox_copy,
        BINARY_KERNEL,
        'exec_binary_kernel(iter, "maximum")',
        'exec_unary_kernel(iter, "maximum")',
    )
    (error,) = compile.build(sandbox_copy).errors
    assert "no Metal kernel named 'maximum' is registered for exec_unary_kernel" in error.message
    assert "registered as binary" in error.message


def test_mps_kernel_without_implementation_is_an_undefined_symbol(sandbox_copy):
    remove_atan2_impl(sandbox_copy)
    (error,) = compile.build(sandbox_copy).errors
    line, col = line_of(sandbox_copy, YAML, "atan2_out_mps")
    assert (error.path, error.line, error.col) == (YAML, line, col)
    assert error.message.startswith("undefined symbol: at::native::atan2_out_mps")
    assert str(error).startswith(f"{YAML}:{line}:{col}: error: undefined symbol")


def test_stale_structured_impl_does_not_compile(sandbox_copy):
    fold_atan2_yaml(sandbox_copy)
    add_atan2_stub(sandbox_copy)
    (error,) = compile.build(sandbox_copy).errors
    line, col = line_of(sandbox_copy, BINARY_OPS, "atan2_out_mps")
    assert (error.path, error.line, error.col) == (BINARY_OPS, line, col)
    assert "structured_atan2_out_mps" in error.message


def test_stale_macro_generated_structured_impl_does_not_compile(sandbox_copy):
    edit(
        sandbox_copy,
        YAML,
        "    CPU, CUDA: lt_Scalar_out\n    MPS: lt_scalar_out_mps\n",
        "    CPU, CUDA, MPS: lt_Scalar_out\n",
    )
    errors = compile.build(sandbox_copy).errors
    assert [e.message.split(":")[0] for e in errors] == [
        "unknown type name 'structured_lt_scalar_out_mps'"
    ]


def test_stub_without_mps_dispatch_is_a_warning(sandbox_copy):
    add_atan2_stub(sandbox_copy)
    result = compile.build(sandbox_copy)
    assert result.errors == ()
    (warning,) = result.diagnostics
    assert warning.severity == "warning" and warning.path == BINARY_KERNEL
    assert "atan2_stub is registered for MPS but is unreachable" in warning.message
    assert "atan2_out" in warning.message
    assert result.artifact["warnings"] == [str(warning)]
    assert result.artifact["operators"]["atan2"]["mps"] == "mpsgraph"


def test_shared_dispatch_without_mps_stub_warns_and_fails_at_runtime(sandbox_copy):
    edit(sandbox_copy, YAML, "CPU, CUDA, XPU: hypot_out", "CPU, CUDA, XPU, MPS: hypot_out")
    result = compile.build(sandbox_copy)
    (warning,) = result.diagnostics
    assert warning.severity == "warning" and warning.path == YAML
    assert "no .mm file registers hypot_stub" in warning.message
    record = result.artifact["operators"]["hypot"]
    assert record["mps"] == "partial"
    assert record["overloads"]["hypot"]["mps"] == "missing_stub"


def test_registration_without_functor_does_not_compile(sandbox_copy):
    edit(
        sandbox_copy,
        BINARY_METAL,
        "REGISTER_FLOAT_BINARY_OP(hypot);",
        "REGISTER_FLOAT_BINARY_OP(hypot);\nREGISTER_FLOAT_BINARY_OP(xlogy);",
    )
    (error,) = compile.build(sandbox_copy).errors
    assert error.path == BINARY_METAL
    assert error.message == (
        "use of undeclared identifier 'xlogy_functor' (in expansion of REGISTER_FLOAT_BINARY_OP)"
    )


def test_kernel_function_must_take_the_declared_iterator(sandbox_copy):
    # div_trunc_stub is declared binary_fn: void(*)(TensorIterator&)
    edit(
        sandbox_copy,
        BINARY_KERNEL,
        "div_trunc_mps_kernel(TensorIterator& iter)",
        "div_trunc_mps_kernel(TensorIteratorBase& iter)",
    )
    (error,) = compile.build(sandbox_copy).errors
    line, col = line_of(sandbox_copy, BINARY_KERNEL, "&div_trunc_mps_kernel")
    assert (error.path, error.line, error.col) == (BINARY_KERNEL, line, col + 1)
    declared, _ = line_of(sandbox_copy, BINARY_OPS_H, "div_trunc_stub")
    assert error.message == (
        "cannot register 'div_trunc_mps_kernel' for div_trunc_stub: it takes "
        f"'TensorIteratorBase&', but div_trunc_stub is declared at {BINARY_OPS_H}:{declared} "
        "as binary_fn, taking (TensorIterator&)"
    )


def test_changing_the_declared_type_breaks_the_registered_kernels(sandbox_copy):
    edit(
        sandbox_copy,
        BINARY_OPS_H,
        "using structured_binary_fn = void (*)(TensorIteratorBase&);",
        "using structured_binary_fn = void (*)(at::TensorIterator&);",
    )
    errors = compile.build(sandbox_copy).errors
    assert sorted(e.message.split("'")[1] for e in errors) == [
        "copysign_mps_kernel",
        "div_floor_mps_kernel",
        "div_true_mps_kernel",
        "maximum_mps_kernel",
    ]
    # a qualified spelling of the same type is the same type
    edit(sandbox_copy, BINARY_OPS_H, "(at::TensorIterator&)", "(at::TensorIteratorBase&)")
    assert compile.build(sandbox_copy).errors == ()


def test_stub_registered_twice_is_a_duplicate_symbol(sandbox_copy):
    edit(
        sandbox_copy,
        BINARY_KERNEL,
        "REGISTER_DISPATCH(maximum_stub, &maximum_mps_kernel);",
        "REGISTER_DISPATCH(maximum_stub, &maximum_mps_kernel);\n"
        "REGISTER_DISPATCH(maximum_stub, &copysign_mps_kernel);",
    )
    (error,) = compile.build(sandbox_copy).errors
    assert error.message.startswith("duplicate symbol: maximum_stub is already registered")


def test_malformed_yaml_is_reported_with_its_line(sandbox_copy):
    edit(sandbox_copy, YAML, "- func: hypot(Tensor self", "- func: [hypot(Tensor self")
    result = compile.build(sandbox_copy)
    (error,) = result.errors
    assert error.path == YAML and error.line > 1 and result.artifact is None
    assert result.inputs  # ninja still learns what to watch


@pytest.mark.parametrize("rel", [BINARY_METAL, BINARY_OPS, BINARY_OPS_H, YAML])
def test_a_file_that_is_not_utf8_is_a_compile_error_at_its_byte(sandbox_copy, rel):
    # the pipeline's readers skip such a kernel file with a warning; a compiler stops there
    path = sandbox_copy / rel
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:4], b"  caf\xe9\n", *lines[4:]]))
    result = compile.build(sandbox_copy)
    (error,) = result.errors
    assert (error.path, error.line, error.col) == (rel, 5, 6) and result.artifact is None
    assert error.message == "not UTF-8: byte 0xe9 at line 5, column 6; re-save the file as UTF-8"


def test_depfile_lists_every_input_relative_to_the_cwd(sandbox_copy, monkeypatch):
    build = sandbox_copy / "build"
    build.mkdir(exist_ok=True)
    monkeypatch.chdir(build)
    status = compile.main(
        ["--root", "..", "--out", "lib/torch_cpu.mpsim.json", "--depfile", "lib/x.d"]
    )
    assert status == 0
    text = (build / "lib" / "x.d").read_text()
    target, _, deps = text.partition(":")
    assert target == "lib/torch_cpu.mpsim.json"
    listed = {d.strip() for d in deps.replace("\\\n", " ").split()}
    assert {
        f"../{YAML}",
        f"../{BINARY_METAL}",
        "../aten/src/ATen/native/mps/kernels/UnaryKernel.metal",
        f"../{BINARY_KERNEL}",
        f"../{BINARY_OPS}",
        f"../{UNARY_OPS}",
        "../aten/src/ATen/native/mps/operations/UnaryKernel.mm",
        "../aten/src/ATen/native/BinaryOps.cpp",
        "../aten/src/ATen/native/UnaryOps.cpp",
        f"../{BINARY_OPS_H}",
        "../aten/src/ATen/native/UnaryOps.h",
        "../aten/src/ATen/native/mps/kernels",
        "../aten/src/ATen/native/mps/operations",
    } <= listed
    assert not any("test/" in d or "torch/" in d for d in listed)
    artifact = json.loads((build / "lib" / "torch_cpu.mpsim.json").read_text())
    assert artifact["target"] == "torch_cpu"


def test_depfile_escapes_spaces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a dir").mkdir()
    compile.write_depfile(tmp_path / "out.d", "out.json", [tmp_path / "a dir" / "f$.mm"])
    assert (tmp_path / "out.d").read_text() == "out.json: \\\n  a\\ dir/f$$.mm\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "TORCH_IMPL_FUNC(div_out_mode) (\n  const Tensor& self\n) {\n"
            "  if (a) {\n    div_true_stub(device_type(), *this);\n  } else {\n"
            "    div_floor_stub(device_type(), *this);\n  }\n}\n",
            {"div_out_mode": ("div_true_stub", "div_floor_stub")},
        ),
        (
            "DEFINE_DISPATCH(logit_stub);\n"
            "Tensor& logit_out(const Tensor& self, Tensor& result) {\n"
            "  logit_stub(iter.device_type(), iter);\n  return result;\n}\n"
            "Tensor logit(const Tensor& self);\n",
            {"logit_out": ("logit_stub",)},
        ),
    ],
)
def test_parse_cpp_finds_kernels_and_the_stubs_they_call(text, expected):
    found = {name: k.stubs for name, k in compile.parse_cpp(text, "x.cpp").items()}
    assert found == expected
