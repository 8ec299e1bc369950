"""run/reference: torch's answers for check-math, asked of the interpreter case by case and
kept by case, so that what was asked once never starts Python again."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.run import reference
from pipeline.run.reference import Case
from pipeline.tree.source import TreeSource

pytestmark = pytest.mark.realdata  # the reference is torch on CPU

HYPOT = Case("hypot/float32", "float32", 2, None, "hypot")
EXP2 = Case("exp2/float16", "float16", 1, None, "exp2")


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_answers_are_kept_per_case_and_a_kept_case_starts_no_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = TreeSource(tmp_path / "tree", tmp_path / "cache", sys.executable, None)
    cache = tmp_path / "math"
    first = reference.references(source, [HYPOT], cache)
    assert set(first) == {"hypot/float32"} and first["hypot/float32"].n > 0
    (kept,) = cache.glob("reference-*.json")
    stamp = kept.stat().st_mtime_ns

    both = reference.references(source, [EXP2, HYPOT], cache)
    assert list(both) == ["exp2/float16", "hypot/float32"]  # in the order asked
    assert both["hypot/float32"] == first["hypot/float32"]
    assert len(list(cache.glob("reference-*.json"))) == 2 and kept.stat().st_mtime_ns == stamp

    # every case kept: the script does not run
    def no_run(*args: object) -> dict:
        raise AssertionError(f"{args[1]} ran for {args[2]}")

    monkeypatch.setattr(reference, "run_script", no_run)
    renamed = replace(HYPOT, id="other/float32")  # the id is not part of the answer
    again = reference.references(source, [renamed, EXP2], cache)
    assert again == {"other/float32": first["hypot/float32"], "exp2/float16": both["exp2/float16"]}


@pytest.mark.slow  # op_db's import, twice
def test_a_damaged_kept_answer_is_asked_again(tmp_path: Path) -> None:
    source = TreeSource(tmp_path / "tree", tmp_path / "cache", sys.executable, None)
    cache = tmp_path / "math"
    first = reference.references(source, [EXP2, HYPOT], cache)
    one, other = cache.glob("reference-*.json")
    one.write_text('{"n": 3, "inp')  # a writer killed mid-file (write_atomic never leaves one)
    other.write_text('{"n": 3}')  # JSON, but no answer: never trusted, never an error
    assert reference.references(source, [EXP2, HYPOT], cache) == first  # seeded: the same


@pytest.mark.slow  # op_db's import
def test_an_input_torch_dies_on_is_set_aside_and_one_it_refuses_is_named(tmp_path: Path) -> None:
    """div trunc on int64: INT_MIN / -1 traps in torch's CPU kernel (SIGFPE), x / 0 raises."""
    import struct

    source = TreeSource(tmp_path / "tree", tmp_path / "cache", sys.executable, None)
    case = Case("div_trunc/int64", "int64", 2, ("div", "trunc_rounding"), None)
    answer = reference.references(source, [case], tmp_path / "math")[case.id]
    a, b = (struct.unpack(f"<{answer.n}q", x) for x in answer.inputs)
    errors = answer.errors
    died = [i for i, why in errors.items() if "dies" in why]
    assert died and all((a[i], b[i]) == (-(2**63), -1) for i in died)
    refused = [i for i, why in errors.items() if "ZeroDivisionError" in why]
    assert refused and all(b[i] == 0 for i in refused)
    assert set(died) | set(refused) == set(errors)  # every other input has its reference


def _ask(tmp_path: Path, case: Case) -> reference.TorchAnswer:
    source = TreeSource(tmp_path / "tree", tmp_path / "cache", sys.executable, None)
    return reference.references(source, [case], tmp_path / "math")[case.id]


@pytest.mark.slow  # a torch process
def test_alpha_values_the_host_sends_elsewhere_are_left_out(tmp_path: Path) -> None:
    pow_scalar = Case(
        "pow_scalar/float32", "float32", 1, None, None, "float32", ("pow",),
        alpha_arg="exponent", avoid=("2.0", "-1.0"),
    )  # fmt: skip
    answer = _ask(tmp_path, pow_scalar)
    assert answer.no_reference is None and answer.alpha_shown == ("0.5", "-1.5")
    assert answer.n == 2 * answer.block
    every = _ask(tmp_path, replace(pow_scalar, avoid=("0.5", "2.0", "-1.5")))
    assert every.reference is None and every.no_reference is not None
    assert "every alpha value" in every.no_reference


@pytest.mark.slow  # a torch process
def test_an_argument_no_operand_fills_is_named(tmp_path: Path) -> None:
    # leaky_relu_backward's self_is_result: required, a bool, no operand of the kernel
    case = Case(
        "leaky_relu_backward/float32", "float32", 2, None, None, "float32",
        ("leaky_relu_backward",),
    )  # fmt: skip
    answer = _ask(tmp_path, case)
    assert answer.no_reference is not None
    assert "leaky_relu_backward.default needs self_is_result (bool)" in answer.no_reference
