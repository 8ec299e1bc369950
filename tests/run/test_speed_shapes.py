"""The shapes maintainers ask for (skinny, transposed, a reduction's every dimension), timed
for real on the CPU, and the PR comment's "perf story" from recorded verdicts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.flows.speed import is_reduction
from pipeline.report.speed import render_markdown
from pipeline.results.speed import Judgement, SpeedReport, Verdict, shape_class, worst_per_class
from pipeline.run.speed import BenchOp, SpeedRequest, run
from tests.results.test_device import recorded
from tests.test_machine_output import assert_valid

SHAPES = {"small": (64,), "medium": (16, 32), "skinny-column": (256, 1), "skinny-row": (1, 256)}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_skinny_transposed_and_every_reduced_dimension_are_timed(tmp_path: Path) -> None:
    ops = (
        BenchOp("exp2", "exp2", 1, ("float32",)),
        BenchOp("sum", "sum", 1, ("float32",), reduction=True),
    )
    result = run(SpeedRequest(sys.executable, ops, tmp_path, "cpu", SHAPES, 0.001, 3))
    assert result.errors == ()
    keys = {m.key[1:] for m in result.measurements if m.op == "exp2"}
    assert ("float32", "medium", "transposed") in keys
    assert ("float32", "skinny-row", "transposed") in keys
    assert ("float32", "small", "transposed") not in keys  # a 1-D tensor has no transpose
    assert len(keys) == 3 * 3 + 2  # three 2-D shapes in three layouts, the 1-D one in two
    sums = {m.key[2:] for m in result.measurements if m.op == "sum"}
    assert {("skinny-column/dim=0", "transposed"), ("skinny-column/dim=1", "strided")} <= sums
    assert ("small/dim=0", "contiguous") in sums and ("small", "contiguous") not in sums
    assert all(len(m.times) >= 3 for m in result.measurements)
    assert_valid("speed.json", json.loads(result.path.read_text()))  # the documented schema


def overload(func: str, schema: str) -> SimpleNamespace:
    return SimpleNamespace(func=func, schema=schema)


def test_a_reduction_is_a_functional_overload_taking_dim() -> None:
    sum_ = SimpleNamespace(
        overloads=[
            overload("sum", "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
            overload(
                "sum.dim_IntList",
                "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False) -> Tensor",
            ),
        ]
    )
    atan2 = SimpleNamespace(
        overloads=[overload("atan2", "atan2(Tensor self, Tensor other) -> Tensor")]
    )
    assert is_reduction(sum_) and not is_reduction(atan2)


def verdict(shape: str, layout: str, ratio: float | None, judgement: Judgement) -> Verdict:
    main = None if ratio is None else 1e-5
    return Verdict("sum", "float32", shape, layout, 2e-5, main, ratio, 1.05, judgement)


RECORDED = (
    verdict("large/dim=0", "contiguous", 1.02, Judgement.OK),
    verdict("large/dim=1", "contiguous", 1.3, Judgement.SLOWER),
    verdict("skinny-column/dim=0", "transposed", 1.15, Judgement.NOISE),
    verdict("skinny-column/dim=1", "transposed", 0.9, Judgement.OK),
    verdict("small/dim=0", "strided", None, Judgement.NO_BASELINE),
)


def test_the_perf_story_is_the_worst_ratio_per_shape_class_and_the_device() -> None:
    worst = worst_per_class(RECORDED)
    assert list(worst) == ["large contiguous", "skinny-column transposed"]
    assert worst["large contiguous"].ratio == 1.3
    assert shape_class(RECORDED[2].key) == "skinny-column transposed"
    report = SpeedReport("macos-m2-15", (), 1.1, 7, RECORDED, "Apple M2 (apple8), bare metal",
                         recorded("m2_mini"))  # fmt: skip
    text = render_markdown(report)
    assert "On `macos-m2-15` (device: Apple M2 (apple8), bare metal)" in text
    assert "| large contiguous | **1.30×** | `sum` float32 large/dim=1 | 🐢 slower |" in text
    assert "| skinny-column transposed | 1.15× | `sum` float32 skinny-column/dim=0 |" in text
    assert text.index("| shape class |") < text.index("| operator |")
