"""The sandbox's test/test_mps.py: upstream test names, decorators from common_mps.py."""

from __future__ import annotations

import importlib.util
import itertools
import unittest
from pathlib import Path

import pytest

from pipeline.sandbox import backend
from tests.sandbox.edits import edit

_COUNTER = itertools.count()


def load_test_module(root: Path):
    """Import ``root/test/test_mps.py`` under a fresh name (it reads the tree at import)."""
    name = f"sandbox_test_mps_{next(_COUNTER)}"
    spec = importlib.util.spec_from_file_location(name, root / "test" / "test_mps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def instantiated(module) -> dict[str, object]:
    cls = module.TestConsistencyMPS
    return {n: getattr(cls, n) for n in dir(cls) if n.startswith("test_")}


def verdict(test) -> str | None:
    if getattr(test, "__unittest_skip__", False):
        return "skip"
    if getattr(test, "__unittest_expecting_failure__", False):
        return "xfail"
    return None


def run(module, *names: str) -> unittest.TestResult:
    suite = unittest.TestSuite(module.TestConsistencyMPS(n) for n in names)
    result = unittest.TestResult()
    suite.run(result)
    return result


@pytest.fixture
def module(sandbox_copy):
    return load_test_module(sandbox_copy)


def test_names_follow_upstream(module):
    names = set(instantiated(module))
    assert "test_output_match_atan2_mps_float32" in names
    assert "test_output_match_div_trunc_rounding_mps_int64" in names
    assert "test_output_grad_match_div_no_rounding_mode_mps_float16" in names
    assert "test_output_grad_match_atan2_mps_int64" not in names  # grad: float32/16 only
    assert "test_output_match_hypot_mps_int64" not in names  # not in the OpInfo's dtypes
    assert len([n for n in names if n.startswith("test_output_match_")]) == 136
    assert len([n for n in names if n.startswith("test_output_grad_match_")]) == 32
    assert len(names) == 168


def test_xfail_and_skip_lists_become_decorators(module):
    tests = instantiated(module)
    for dtype in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        assert verdict(tests[f"test_output_match_atan2_mps_{dtype}"]) == "xfail"
    assert verdict(tests["test_output_match_atan2_mps_float32"]) is None
    assert verdict(tests["test_output_match_hypot_mps_bfloat16"]) == "xfail"  # None = all
    assert verdict(tests["test_output_grad_match_hypot_mps_float32"]) == "xfail"
    assert verdict(tests["test_output_match_div_trunc_rounding_mps_float16"]) == "xfail"
    assert verdict(tests["test_output_match_div_floor_rounding_mps_float16"]) is None
    assert verdict(tests["test_output_match_logit_mps_bool"]) == "skip"
    assert verdict(tests["test_output_grad_match_logit_mps_float16"]) == "skip"  # OpInfo
    assert verdict(tests["test_output_match_logit_mps_float16"]) is None


def test_complex_dtypes_outside_supported_complex_ops_are_xfailed(module):
    tests = instantiated(module)
    assert verdict(tests["test_output_match_exp2_mps_complex64"]) == "xfail"
    assert verdict(tests["test_output_match_sinc_mps_complex64"]) is None
    assert verdict(tests["test_output_match_div_no_rounding_mode_mps_complex64"]) is None


def test_macos_list_applies_only_on_older_simulated_macos(sandbox_copy, monkeypatch):
    name = "test_output_match_maximum_mps_bfloat16"
    assert verdict(instantiated(load_test_module(sandbox_copy))[name]) is None
    monkeypatch.setenv(backend.MACOS_ENV, "14.2")
    assert verdict(instantiated(load_test_module(sandbox_copy))[name]) == "xfail"


def test_sparse_only_lists_are_ignored(sandbox_copy):
    path = "torch/testing/_internal/common_mps.py"
    edit(sandbox_copy, path, '"logspace": None,\n        }', '"copysign": None,\n        }')
    tests = instantiated(load_test_module(sandbox_copy))
    assert verdict(tests["test_output_match_copysign_mps_float32"]) is None


def test_unbuilt_tree_makes_every_test_error(module):
    result = run(module, "test_output_match_atan2_mps_float32", "test_output_match_atan2_mps_int64")
    assert result.testsRun == 0 or not result.wasSuccessful()
    assert result.errors
    assert "torch_cpu not built: run ninja -C build torch_cpu" in result.errors[0][1]
    assert not result.expectedFailures


def test_built_tree_passes_floats_and_xfails_integers(built_sandbox):
    module = load_test_module(built_sandbox)
    result = run(module, "test_output_match_atan2_mps_float32", "test_output_match_atan2_mps_int64")
    assert result.wasSuccessful()
    assert [t.id().rsplit(".", 1)[1] for t, _ in result.expectedFailures] == [
        "test_output_match_atan2_mps_int64"
    ]
    assert "MPS does not support atan2 op" in result.expectedFailures[0][1]


def test_whole_suite_is_green_on_the_pristine_tree(built_sandbox):
    module = load_test_module(built_sandbox)
    result = run(module, *sorted(instantiated(module)))
    assert result.wasSuccessful(), result.failures + result.errors
    assert not result.unexpectedSuccesses
    assert result.testsRun == 168
    assert len(result.expectedFailures) == 27
    assert len(result.skipped) == 2
