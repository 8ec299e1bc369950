"""Kernels an MPS row's own function launches by name (issue 27): through helpers defined
in the host files, with the name in a local or chosen by a flag, under conditions that fix
the operator's scalars. Only a launch writing the operator's output from its operands has
a reference; the rest is unknown, saying why (tests/fixtures/upstream_host/PairLoss.mm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.guide import math as guide_math
from pipeline.tree import host_cond, host_refs
from pipeline.tree.cpp import lex
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.source import TreeSource
from tests.tree.test_host_refs import TABLE, _index, _tree

PAIR_MM = "aten/src/ATen/native/mps/operations/PairLoss.mm"
# the ternary helper the fixture calls, defined: the operands are then what stops it
TRIPLE = """
namespace at::native::mps {
void triple_op_kernel(const std::string func_name,
                      const Tensor& first,
                      const Tensor& second,
                      const Tensor& third,
                      const Tensor& result) {
  auto iter = TensorIteratorConfig().add_output(result).add_input(first).add_input(second)
                  .add_input(third).build();
  lib.exec_ternary_kernel(iter, func_name);
}
} // namespace at::native::mps
"""


def _load(tmp_path: Path, root: Path) -> TreeIndex:
    return load_index(TreeSource(root, tmp_path / "cache", "python", root / TABLE))


def test_a_launch_under_a_fixed_reduction_is_the_operator_with_it(tmp_path: Path) -> None:
    index = _index(tmp_path)
    ref = host_refs.resolve(index, "sq_gap")
    assert ref is not None and ref.unknown is None
    # Reduction::None's value is read from the tree's Reduction.h, not known to the tool
    assert (ref.op, ref.alpha, ref.bound) == ("mse_loss", None, (("reduction", "0"),))
    assert ref.via.startswith("mse_loss_out_mps -> pair_op_kernel (PairLoss.mm:")
    t = guide_math.target(index, "sq_gap", Path("pair_loss.metal"), {})
    assert t.reference == "aten.mse_loss" and t.bound == (("reduction", "0"),)


def test_a_shared_helper_s_flag_and_missing_grad_choose_the_kernel(tmp_path: Path) -> None:
    # huber_loss_out_mps passes soft=true and no grad: of gap_native's four launches only
    # the forward one of "soft_gap" runs, with the operator's delta as the functor's alpha
    ref = host_refs.resolve(_index(tmp_path), "soft_gap")
    assert ref is not None and ref.unknown is None
    assert (ref.op, ref.alpha, ref.bound) == ("huber_loss", "delta", (("reduction", "0"),))
    assert ref.via.startswith("huber_loss_out_mps -> gap_native -> pair_op_kernel")


def test_a_launch_into_a_temporary_the_host_multiplies_afterwards_is_unknown(
    tmp_path: Path,
) -> None:
    ref = host_refs.resolve(_index(tmp_path), "soft_gap_clip")
    assert ref is not None and ref.op is None and ref.unknown is not None
    assert "writes `at::empty_like(input)`, not huber_loss_backward.out's output" in ref.unknown


def test_a_condition_over_a_scalar_the_tool_cannot_read_is_unknown(tmp_path: Path) -> None:
    index = _index(tmp_path)
    for kernel in ("wide_gap", "hard_gap"):
        ref = host_refs.resolve(index, kernel)
        assert ref is not None and ref.op is None and ref.unknown is not None
        assert "`beta>0.5`" in ref.unknown, ref.unknown


def test_a_helper_no_host_file_defines_is_unknown(tmp_path: Path) -> None:
    ref = host_refs.resolve(_index(tmp_path), "sq_gap_backward2")
    assert ref is not None and ref.op is None and ref.unknown is not None
    assert "through triple_op_kernel, which no host file of the tree defines" in ref.unknown


def test_operands_the_host_reorders_or_scales_are_no_reference(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    mm = root / PAIR_MM
    mm.write_text(mm.read_text() + TRIPLE)
    index = _load(tmp_path, root)
    for kernel in ("sq_gap_backward2", "sq_gap_backward_scaled"):
        ref = host_refs.resolve(index, kernel)
        assert ref is not None and ref.op is None and ref.unknown is not None
        # the name was read through the local assigned under `reduction == Mean`
        assert "operands (input, target, " in ref.unknown, ref.unknown
        assert "are not mse_loss_backward.grad_input's tensors (grad_output, self, target)" in (
            ref.unknown
        )


def test_an_operand_the_host_computes_first_is_no_reference(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    mm = root / PAIR_MM
    launch = 'pair_op_kernel("sq_gap", input, target, output_, std::nullopt)'
    mm.write_text(mm.read_text().replace(launch, launch.replace("input,", "at::abs(input),")))
    ref = host_refs.resolve(_load(tmp_path, root), "sq_gap")
    assert ref is not None and ref.op is None and ref.unknown is not None
    assert "operands (at::abs(input), target) are not mse_loss.out's tensors (self, target)" in (
        ref.unknown
    )


def test_a_function_that_cannot_be_read_leaves_a_kernel_unknown_saying_where(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path)
    mm = root / PAIR_MM
    # a parenthesis never closed: the walk cannot tell where the condition ends
    old = "  if (reduction == Reduction::None) {"
    text = mm.read_text().replace(old, old.replace("(", "((", 1))
    mm.write_text(text)
    ref = host_refs.resolve(_load(tmp_path, root), "lane_twist")
    assert ref is not None and ref.op is None and ref.unknown is not None
    assert ref.unknown.startswith("mse_loss_out_mps (PairLoss.mm:") and "could not be read" in (
        ref.unknown
    )
    # a kernel another function launches is still found
    assert host_refs.resolve(_load(tmp_path, root), "soft_gap").op == "huber_loss"


def test_an_enum_the_tree_does_not_define_leaves_the_value_unknown(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "aten/src/ATen/core/Reduction.h").unlink()
    index = _load(tmp_path, root)
    ref = host_refs.resolve(index, "sq_gap")
    assert ref is not None and ref.op is None and ref.unknown is not None
    assert "reduction == Reduction::None, whose value the tree's headers do not give" in (
        ref.unknown
    )


@pytest.mark.parametrize(
    ("cond", "runs", "fixed", "unread"),
    [
        ("@r == Reduction::None", True, (("r", "Reduction::None"),), None),
        ("!(!false && @r != at::Reduction::None)", True, (("r", "Reduction::None"),), None),
        ("@r != Reduction::Mean", True, (), "r is not Reduction::Mean: no one value fixes it"),
        ("(%x).numel() == 0 || @n == 2", True, (), None),
        ("(std::nullopt).has_value() && @n == 2", False, (), None),
        ("@n > 1", True, (), "@n > 1"),
    ],
)
def test_deciding_which_scalar_values_a_condition_runs_for(
    cond: str, runs: bool, fixed: tuple[tuple[str, str], ...], unread: str | None
) -> None:
    d = host_cond.decide(host_cond.parse(cond))
    assert (d.runs, d.fixed, d.unread) == (runs, fixed, unread)


def test_the_path_to_a_statement_reads_else_chains_and_skips_lambdas_returns() -> None:
    text = """void f() {
  auto g = [&](int t) { return t; };
  if ((%x).numel() == 0) {
    return;
  } else if (@b == 2) {
    first();
  } else {
    second();
  }
}"""
    src = lex(text, "f.mm")
    lo, hi = text.index("{") + 1, text.rindex("}")
    first = host_cond.decide(host_cond.reach(src, lo, hi, text.index("first")))
    assert (first.runs, first.fixed, first.unread) == (True, (("b", "2.0"),), None)
    second = host_cond.decide(host_cond.reach(src, lo, hi, text.index("second")))
    assert second.unread == "b is not 2.0: no one value fixes it"
    after = text.index("}\n}")
    assert host_cond.decide(host_cond.reach(src, lo, hi, after)).runs
