"""Speed against the path replaced: each migrated or backlog operator's micro-benchmark on a
runner, and a PR's figures against main's from the nightly history of the same runner class.

The nightly runs :func:`measure` on every Mac and hands ``speed.json`` to the aggregation
with the JUnit reports (``<results>/<runner>/speed.json``), which records it
(:func:`pipeline.results.speed.record_night`). A PR job runs the same benchmark on the PR's
build and :func:`judge` compares (``speed.threshold``, ``speed.min_nights``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Settings
from pipeline.dtypes import COMPLEX, MPS_TEST_DTYPES
from pipeline.guide.backlog import backlog
from pipeline.results import history
from pipeline.results import speed as speeds
from pipeline.run.speed import SHAPES, BenchOp, SpeedRequest, SpeedResult, run
from pipeline.tree.index import OperatorRecord, TreeIndex, load_index

# the Tensor parameters before the keyword-only marker of a schema: what the call takes
_TENSOR_PARAM = re.compile(r"(?:^|,)\s*Tensor(?:\([^)]*\))?\??\s+\w+")


@dataclass(frozen=True)
class SpeedReport:
    runner: str
    nights: int  # main's nights of figures on that runner the verdicts rest on
    verdicts: tuple[speeds.Verdict, ...]
    threshold: float

    @property
    def slower(self) -> tuple[speeds.Verdict, ...]:
        return tuple(v for v in self.verdicts if v.judgement is speeds.Judgement.SLOWER)


def arity(record: OperatorRecord) -> int:
    """How many tensors the operator's functional overloads take at most (``atan2(Tensor
    self, Tensor other)``: 2; ``lt.Scalar`` and ``lt.Tensor``: 2); out= and in-place ones
    are not looked at."""
    counts = [
        len(_TENSOR_PARAM.findall(params))
        for o in record.overloads
        if not o.func.partition(".")[0].endswith("_") and "out" not in o.func.partition(".")[2]
        for signature in [o.schema.partition(" -> ")[0]]
        for params in [signature[signature.find("(") + 1 : -1].split("*")[0]]
    ]
    return max([1, *counts])


def bench_op(record: OperatorRecord) -> BenchOp:
    """What the benchmark times for one operator: the OpInfo's callable and MPS dtypes."""
    dtypes = [
        d for d in record.opinfo_dtypes
        if d in MPS_TEST_DTYPES and (d not in COMPLEX or record.complex_supported)
    ] or list(record.registered_dtypes) or ["float32"]  # fmt: skip
    call = record.opinfos[0].name if record.opinfos else record.op
    return BenchOp(record.op, call, arity(record), tuple(dtypes))


def operators(index: TreeIndex, names: Sequence[str] = ()) -> tuple[BenchOp, ...]:
    """``names`` (default: every backlog operator and every one with a Metal functor)."""
    if names:
        ops = [index.resolve(n) for n in names]
    else:
        ops = [item.op for item in backlog(index)]
        ops += sorted(
            op for op in index.entries_by_operator()
            if op not in ops and index.kernels.functor(op) is not None
        )  # fmt: skip
    return tuple(bench_op(index.record(op, find_references=False)) for op in dict.fromkeys(ops))


def measure(
    settings: Settings,
    names: Sequence[str] = (),
    *,
    device: str = "mps",
    folder: Path | None = None,
    shapes: Mapping[str, tuple[int, ...]] = SHAPES,
    min_run_time: float = 0.2,
    repeats: int = 5,
) -> SpeedResult:
    """Write and run the benchmark for ``names`` in ``folder`` (default
    ``<state_dir>/speed``) with the configured interpreter."""
    ops = operators(load_index(settings.tree), names)
    folder = folder or settings.state_dir / "speed"
    return run(
        SpeedRequest(settings.python, ops, folder, device, dict(shapes), min_run_time, repeats)
    )


def judge(
    settings: Settings,
    measured: Sequence[speeds.Measurement],
    history_at: history.HistoryLocation | Path,
    runner: str,
) -> SpeedReport:
    """``measured`` (the PR's build) against main's nightly figures on ``runner``."""
    db = history.reader(history.HistoryLocation.of(history_at))
    try:
        main = speeds.nightly_medians(db, runner, last_n=7)
    finally:
        db.close()
    review = settings.review
    verdicts = speeds.compare(
        measured, main, threshold=review.speed_threshold, min_nights=review.speed_min_nights
    )
    nights = max((len(v) for v in main.values()), default=0)
    return SpeedReport(runner, nights, verdicts, review.speed_threshold)
