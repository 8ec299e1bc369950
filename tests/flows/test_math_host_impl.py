"""check-math on a loss element an MPS row's own function runs (issue 27): the operator
and its fixed reduction are read from tests/fixtures/upstream_host's PairLoss.mm, then the
functor is compared with torch's operator under them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.guide import math as guide_math
from pipeline.results.math import Agreement
from tests.flows.math_helpers import fixture_root, run_flow
from tests.tree.test_host_refs import _index


@pytest.mark.slow
def test_a_loss_element_is_checked_as_its_operator_under_the_host_s_reduction(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    index = _index(tmp_path / "host")
    file = "pair_loss.metal"
    metal = fixture_root(tmp_path) / file
    found = [guide_math.target(index, k, file, {}) for k in ("sq_gap", "soft_gap_clip")]
    assert found[0].host is not None and found[0].bound == (("reduction", "0"),)
    targets = [replace(t, metal=metal) for t in found]
    sq_gap, clip = run_flow(tmp_path, host_cxx, real_c10_include, targets).functors
    assert sq_gap.reference == "aten.mse_loss.default, reduction=0"
    assert {d.dtype for d in sq_gap.dtypes} == {"float32", "float16"}
    for check in sq_gap.dtypes:
        assert check.status is Agreement.OK, check
        assert check.checked > 50
    # no reference, and the reason is the host's, not the name's
    (f32,) = clip.dtypes
    assert f32.status is Agreement.NO_REFERENCE and f32.checked == 0
    assert f32.no_reference is not None and f32.no_reference.startswith("unknown: ")
    assert "writes `at::empty_like(input)`" in f32.no_reference


@pytest.mark.slow
def test_a_structured_backward_is_checked_with_its_operands_in_the_meta_s_order(
    tmp_path: Path, host_cxx, real_c10_include: Path
) -> None:
    index = _index(tmp_path / "host")
    file = "slope.metal"
    found = guide_math.target(index, "leaky_relu_backward", file, {})
    target = replace(found, metal=fixture_root(tmp_path) / file)
    (check,) = run_flow(tmp_path, host_cxx, real_c10_include, [target]).functors
    assert check.reference == (
        "aten.leaky_relu_backward.default, self_is_result=false, operands self, grad_output"
    )
    (f32,) = check.dtypes
    # with the schema's order (grad_output first) most values would differ
    assert f32.status is Agreement.OK, f32
    assert f32.checked > 1000
