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
    found = guide_math.target(index, "sq_gap", file, {})
    assert found.host is not None and found.bound == (("reduction", "0"),)
    t = replace(found, metal=fixture_root(tmp_path) / file)
    (sq_gap,) = run_flow(tmp_path, host_cxx, real_c10_include, [t]).functors
    assert sq_gap.reference == "aten.mse_loss.default, reduction=0"
    assert {d.dtype for d in sq_gap.dtypes} == {"float32", "float16"}
    for check in sq_gap.dtypes:
        assert check.status is Agreement.OK, check
        assert check.checked > 50
