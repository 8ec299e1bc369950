"""Speed against the path replaced: each migrated or backlog operator's micro-benchmark on a
runner, and a PR's figures against main's from the nightly history of the same device class.

The nightly runs :func:`measure` on every Mac and hands ``speed.json`` to the aggregation
with the JUnit reports (``<results>/<runner>/speed.json``), which records it
(:func:`pipeline.results.speed.record_night`). A PR job runs the same benchmark on the PR's
build and :func:`judge` compares (``speed.threshold``, ``speed.min_nights``). Where the tree
has a switch forcing an operator's MPSGraph path, :func:`measure` times that path too, in the
same build; where the checkout's ``test/bench_mps_ops.py`` covers an operator, upstream's
figures come with ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pipeline.config import Settings
from pipeline.dtypes import COMPLEX, MPS_TEST_DTYPES
from pipeline.errors import DeviceRefusedError, PipelineError
from pipeline.guide.backlog import backlog
from pipeline.results import history
from pipeline.results import speed as speeds
from pipeline.results.device import Device, refuse_timings
from pipeline.run import upstream_bench
from pipeline.run.device import probe as device_probe
from pipeline.run.speed import (
    MAX_RUN_TIME,
    MIN_RUN_TIME,
    SHAPES,
    BenchOp,
    SpeedRequest,
    SpeedResult,
    run,
)
from pipeline.tree.index import OperatorRecord, TreeIndex, load_index
from pipeline.tree.switches import graph_switches

# the Tensor parameters before the keyword-only marker of a schema: what the call takes
_TENSOR_PARAM = re.compile(r"(?:^|,)\s*Tensor(?:\([^)]*\))?\??\s+\w+")
# a reduction's ``dim`` parameter: ``int dim``, ``int[1]? dim``, ``int[]? dim``
_DIM_PARAM = re.compile(r"(?:^|,)\s*int(?:\[\d*\])?\??\s+dim\b")


def arity(record: OperatorRecord) -> int:
    """How many tensors the operator's functional overloads take at most (``atan2(Tensor
    self, Tensor other)``: 2; ``lt.Scalar`` and ``lt.Tensor``: 2); out= and in-place ones
    are not looked at."""
    counts = [len(_TENSOR_PARAM.findall(params)) for params in _functional_signatures(record)]
    return max([1, *counts])


def _functional_signatures(record: OperatorRecord) -> list[str]:
    """The parameter lists (before ``*``) of the operator's functional overloads."""
    return [
        params
        for o in record.overloads
        if not o.func.partition(".")[0].endswith("_") and "out" not in o.func.partition(".")[2]
        for signature in [o.schema.partition(" -> ")[0]]
        for params in [signature[signature.find("(") + 1 : -1].split("*")[0]]
    ]


def is_reduction(record: OperatorRecord) -> bool:
    """Whether a functional overload takes ``dim`` positionally (sum, amax, mean...)."""
    return any(_DIM_PARAM.search(params) for params in _functional_signatures(record))


def bench_op(record: OperatorRecord) -> BenchOp:
    """What the benchmark times for one operator: the OpInfo's callable and MPS dtypes."""
    dtypes = [
        d for d in record.opinfo_dtypes
        if d in MPS_TEST_DTYPES and (d not in COMPLEX or record.complex_supported)
    ] or list(record.registered_dtypes) or ["float32"]  # fmt: skip
    call = record.opinfos[0].name if record.opinfos else record.op
    return BenchOp(record.op, call, arity(record), tuple(dtypes), is_reduction(record))


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
    min_run_time: float = MIN_RUN_TIME,
    repeats: int = 5,
    max_run_time: float = MAX_RUN_TIME,
    probe: Callable[[str], Device] = device_probe,
) -> SpeedResult:
    """Write and run the benchmark for ``names`` in ``folder`` (default
    ``<state_dir>/speed``) with the configured interpreter. On ``mps``, a VM's paravirtual
    GPU (``probe``: what the Mac's commands say) is refused before anything is timed."""
    machine = probe(settings.python) if device == "mps" else None
    if why := refuse_timings(machine):
        raise DeviceRefusedError(f"speed: {why}; time the kernels on a Mac")
    ops = operators(load_index(settings.tree), names)
    folder = folder or settings.state_dir / "speed"
    request = SpeedRequest(
        settings.python, ops, folder, device, dict(shapes), min_run_time, repeats, max_run_time
    )
    result = run(request)
    forced: dict[str, tuple[speeds.Measurement, ...]] = {}
    # the same build, the same runner: each switch in a process of its own
    for switch in graph_switches(settings.root):
        covered = tuple(op for op in ops if switch.covers(op.op))
        if covered:
            again = replace(
                request,
                ops=covered,
                folder=folder / switch.variable.lower(),
                env={switch.variable: "1"},
            )
            forced[switch.variable] = run(again).measurements
    try:
        upstream = upstream_bench.run(settings.python, settings.root, ops, folder, device)
        said = ""
    except PipelineError as exc:  # upstream's file is the tree's: ours stand without it
        upstream, said = (), str(exc)
    return replace(result, machine=machine, forced=forced, upstream=upstream, upstream_error=said)


def judge(
    settings: Settings,
    measured: Sequence[speeds.Measurement],
    history_at: history.HistoryLocation | Path,
    runner: str,
    machine: Device | None,
) -> speeds.SpeedReport:
    """``measured`` (the PR's build, on ``runner``, timed on ``machine``: None for the CPU
    or an unknown device) against main's nightly figures from the same device class."""
    report = speeds.SpeedReport(runner, tuple(measured), settings.review.speed_threshold, 0, (),
                                machine=machine)  # fmt: skip
    main: dict[speeds.Key, list[float]] = {}
    if machine is not None:
        db = history.reader(history.HistoryLocation.of(history_at))
        try:
            main = speeds.nightly_medians(db, machine.device_class, last_n=7)
        finally:
            db.close()
    review = settings.review
    verdicts = speeds.compare(
        measured, main, threshold=review.speed_threshold, min_nights=review.speed_min_nights
    )
    nights = max((len(v) for v in main.values()), default=0)
    return replace(report, nights=nights, verdicts=verdicts)
