"""Which functors check-math checks and against which reference (the sandbox's index)."""

from __future__ import annotations

from pipeline.guide import math as targets
from pipeline.tree.index import load_index


def test_targets_of_an_operator_and_their_references(sandbox_settings) -> None:
    index = load_index(sandbox_settings.tree)
    refs = sandbox_settings.math.references
    div = {t.kernel: t for t in targets.targets_for_op(index, "div", refs)}
    assert set(div) == {"div_true", "div_floor", "div_trunc"}
    assert div["div_floor"].reference == "div.floor_rounding"
    assert div["div_floor"].op == "div"
    assert div["div_floor"].file == "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    # the OpInfo's MPS dtypes: registered ones outside them are not checked
    assert "complex32" not in (div["div_true"].dtypes or ())
    (atan2,) = targets.targets_for_op(index, "arctan2", refs)  # an alias names the operator
    assert atan2.kernel == "atan2" and atan2.opinfo == ("atan2", "")


def test_targets_of_a_file_and_overrides(sandbox_settings) -> None:
    index = load_index(sandbox_settings.tree)
    unary = targets.targets_for_file(index, "UnaryKernel.metal", {"sinc": "none"})
    assert unary is not None
    by_kernel = {t.kernel: t for t in unary}
    assert set(by_kernel) == {"erfinv", "exp2", "sinc"}
    assert by_kernel["sinc"].reference is None  # "none": listed, never failed
    assert targets.targets_for_file(index, "Nope.metal", {}) is None
    every = targets.all_targets(index, {"erfinv": "torch.special.erfinv"})
    assert len(every) == 12
    erfinv = next(t for t in every if t.kernel == "erfinv")
    assert erfinv.fn == "special.erfinv" and erfinv.dtypes is None


def test_a_prs_affected_operators_give_their_functors_once(sandbox_settings) -> None:
    """pr-report's selection: several operators' functors, one target per functor; an
    operator the PR removed, or one without a functor, adds nothing."""
    import pytest

    from pipeline.errors import NothingToCheckError
    from pipeline.flows.math import select_targets

    index = load_index(sandbox_settings.tree)
    refs = sandbox_settings.math.references
    found = select_targets(index, refs, ops=("div", "atan2", "div", "no_such_op"))
    assert sorted(t.kernel for t in found) == ["atan2", "div_floor", "div_true", "div_trunc"]
    with pytest.raises(NothingToCheckError, match="none of no_such_op, logit has a registered"):
        select_targets(index, refs, ops=("no_such_op", "logit"))
