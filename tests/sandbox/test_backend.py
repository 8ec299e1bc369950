"""The simulated MPS device: what works follows what was built, plus the documented gaps."""

from __future__ import annotations

import pytest

from pipeline.dtypes import MPS_TEST_DTYPES
from pipeline.sandbox import backend
from tests.sandbox.conftest import compile_in_process
from tests.sandbox.edits import (
    add_atan2_stub,
    add_hypot_dispatch,
    add_hypot_stub,
    fold_atan2_yaml,
    remove_atan2_impl,
)

INTS = ("int64", "int32", "int16", "int8", "uint8", "bool")
FLOATS = ("float32", "float16", "bfloat16")


def works(root, op, *dtypes, **kw) -> dict[str, bool]:
    return {d: backend.supports(op, d, root=root, **kw) for d in dtypes}


def test_unbuilt_tree_raises_not_built(sandbox_copy):
    with pytest.raises(backend.NotBuiltError, match="torch_cpu not built: run ninja -C build"):
        backend.check("atan2", "float32", root=sandbox_copy)
    with pytest.raises(backend.NotBuiltError):
        backend.supports("atan2", "float32", root=sandbox_copy)


def test_corrupt_artifact_is_not_built(sandbox_copy):
    path = backend.artifact_path(sandbox_copy)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(backend.NotBuiltError, match="unreadable"):
        backend.load_artifact(sandbox_copy)


def test_mpsgraph_atan2_fails_for_integers_only(built_sandbox):
    assert works(built_sandbox, "atan2", *FLOATS) == dict.fromkeys(FLOATS, True)
    assert works(built_sandbox, "atan2", *INTS) == dict.fromkeys(INTS, False)
    with pytest.raises(
        RuntimeError, match=r"MPS does not support atan2 op with integer input \(int64\)"
    ):
        backend.check("atan2", "int64", root=built_sandbox)


def test_migration_makes_every_registered_dtype_work(built_sandbox):
    fold_atan2_yaml(built_sandbox)
    remove_atan2_impl(built_sandbox)
    add_atan2_stub(built_sandbox)
    assert not compile_in_process(built_sandbox).errors
    assert all(works(built_sandbox, "atan2", *FLOATS, *INTS).values())


def test_missing_operator_raises_the_pytorch_error(built_sandbox):
    with pytest.raises(NotImplementedError) as info:
        backend.check("xlogy", "float32", root=built_sandbox)
    message = str(info.value)
    assert message.startswith(
        "The operator 'aten::xlogy.OutTensor' is not currently implemented for the MPS device."
    )
    assert "PYTORCH_ENABLE_MPS_FALLBACK=1" in message
    assert not backend.supports("hypot", "float32", root=built_sandbox)
    with pytest.raises(NotImplementedError, match="'aten::no_such_op'"):
        backend.check("no_such_op", "float32", root=built_sandbox)


def test_native_kernels_work_for_registered_input_dtypes(built_sandbox):
    assert all(works(built_sandbox, "copysign", *FLOATS, *INTS).values())
    # hypot's functor has float registrations only; add MPS support and ints still fail
    add_hypot_dispatch(built_sandbox)
    add_hypot_stub(built_sandbox)
    assert not compile_in_process(built_sandbox).diagnostics
    assert works(built_sandbox, "hypot", "float32", "float16", "int32") == {
        "float32": True,
        "float16": True,
        "int32": False,
    }
    with pytest.raises(RuntimeError, match="function state object for: hypot_dense_int_int"):
        backend.check("hypot", "int32", root=built_sandbox)


def test_stub_reached_without_mps_registration_fails_at_runtime(built_sandbox):
    add_hypot_dispatch(built_sandbox)
    compile_in_process(built_sandbox)
    with pytest.raises(RuntimeError, match="hypot_stub: DispatchStub: missing kernel for mps"):
        backend.check("hypot", "float32", root=built_sandbox)


def test_complex_follows_registrations_and_mpsgraph_rejects_it(built_sandbox):
    assert backend.supports("sinc", "complex64", root=built_sandbox)
    with pytest.raises(TypeError, match="Trying to convert ComplexFloat to the MPS backend"):
        backend.check("exp2", "complex64", root=built_sandbox)


def test_variants_reach_their_own_stub(built_sandbox):
    root = built_sandbox
    assert backend.supports("div", "complex64", root=root, key="divno_rounding_mode")
    assert not backend.supports("div", "complex64", root=root, key="divtrunc_rounding")
    assert backend.supports("div", "int64", root=root, key="divfloor_rounding")
    assert backend.supports("div", "bool", root=root, key="divno_rounding_mode")


def test_numerical_gaps_are_per_opinfo_key(built_sandbox):
    with pytest.raises(AssertionError, match="Tensor-likes are not close!"):
        backend.check("div", "float16", root=built_sandbox, key="divtrunc_rounding")
    assert backend.supports("div", "float16", root=built_sandbox, key="divfloor_rounding")
    assert not backend.supports("fmod", "float16", root=built_sandbox)  # MPSGraph precision
    assert backend.supports("fmod", "float32", root=built_sandbox)


def test_macos_version_gap(built_sandbox, monkeypatch):
    assert backend.supports("maximum", "bfloat16", root=built_sandbox)
    monkeypatch.setenv(backend.MACOS_ENV, "14.2")
    assert backend.macos_version() == (14, 2)
    assert not backend.supports("maximum", "bfloat16", root=built_sandbox)
    assert backend.supports("maximum", "float16", root=built_sandbox)
    monkeypatch.setenv(backend.MACOS_ENV, "fourteen")
    with pytest.raises(ValueError, match="MPS_SIM_MACOS_VERSION"):
        backend.macos_version()


def test_gradient_gaps_only_affect_grad_tests(built_sandbox):
    assert backend.supports("logit", "float16", root=built_sandbox)
    assert not backend.supports("logit", "float16", root=built_sandbox, kind="output_grad_match")
    with pytest.raises(ValueError, match="unknown test kind"):
        backend.check("logit", "float16", root=built_sandbox, kind="output_gradmatch")


def test_build_dir_is_configurable(built_sandbox, monkeypatch):
    monkeypatch.setenv(backend.BUILD_DIR_ENV, "other-build")
    with pytest.raises(backend.NotBuiltError):
        backend.load_artifact(built_sandbox)


def test_every_gap_names_known_dtypes_and_keys():
    gaps = backend.load_gaps()
    for section in ("numerics", "backward"):
        for dtypes in gaps[section].values():
            assert set(dtypes) <= set(MPS_TEST_DTYPES)
    for gap in gaps["mpsgraph"].values():
        assert set(gap["dtypes"]) <= set(MPS_TEST_DTYPES)
    for gap in gaps["macos"]:
        assert set(gap["dtypes"]) <= set(MPS_TEST_DTYPES)
        backend._version(gap["before"])
    for variant in gaps["variants"].values():
        assert set(variant) == {"overloads", "stubs"}
