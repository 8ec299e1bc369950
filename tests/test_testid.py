"""pipeline/testid.py: the one spelling of a consistency-test id, made and read back."""

from __future__ import annotations

import pytest

from pipeline.dtypes import TEST_KINDS
from pipeline.results.junit import parse_test_id
from pipeline.testid import TestId, kind_selector, node_of, parse_parts, selector


@pytest.mark.parametrize("kind", TEST_KINDS)
@pytest.mark.parametrize(
    "stem", ["atan2", "nn_functional_pad_constant", "op7_variant-1", "a_mps_b", "x_mps"]
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "complex64", "bool"])
def test_round_trip(kind: str, stem: str, dtype: str) -> None:
    test = TestId(kind, stem, dtype)
    assert TestId.parse(str(test)) == test
    assert parse_parts(str(test)) == parse_test_id(str(test)) == (kind, stem, dtype)
    assert str(test).startswith(selector(kind, stem)) and str(test).startswith(kind_selector(kind))
    assert test.node == f"TestConsistencyMPS::{test}"


@pytest.mark.parametrize(
    "name",
    [
        "test_output_match_atan2_mps_float99",  # no such dtype
        "test_output_match__mps_float32",  # no stem
        "test_output_match_atan2_float32",  # no device
        "test_compare_cpu_atan2_mps_float32",  # not a consistency kind
        "test_output_match",
        "",
    ],
)
def test_other_tests_are_none(name: str) -> None:
    assert TestId.parse(name) is None and parse_parts(name) is None


def test_node_of_junit_classnames() -> None:
    name = "test_output_match_atan2_mps_int32"
    assert node_of("test_mps.TestConsistencyMPS", name) == f"TestConsistencyMPS::{name}"
    assert node_of("TestConsistencyMPS", name) == f"TestConsistencyMPS::{name}"


def test_pytest_does_not_collect_the_value_type() -> None:
    assert TestId.__test__ is False
