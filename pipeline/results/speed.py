"""Kernel speed: micro-benchmark results, kept per runner in the nightly history, and a PR's
figures judged against main's (pytorch#187827: a correct but slower kernel passes CI).

A measurement is one (operator, dtype, shape, layout) with its repeated timings (seconds
per call, one per ``torch.utils.benchmark`` block). ``speed.json`` (written by
:mod:`pipeline.run.speed`) holds a runner's measurements; the nightly stores each night's
medians and quartiles in the history's ``speed`` table.

A PR's figure is never failed on noise. It is compared with main's only from the same
device class (:class:`pipeline.results.device.DeviceClass`: chip, GPU cores, macOS major,
bare metal; each run's device is in the history's ``run_devices``), never across classes,
and never for a device whose class is unknown (``--device cpu``, no device record, a VM:
"no baseline for" it); only when main has at least ``min_nights`` nights of figures from
that class and the PR at least ``MIN_REPEATS`` measurements; and it is flagged only when
the ratio of medians exceeds the threshold **and** the PR's lower quartile lies above the
slowest of main's nightly medians: outside the night-to-night spread the history shows.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import cast

from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import dump, schema_of
from pipeline.fields import read as read_model
from pipeline.results.device import Device, DeviceClass
from pipeline.results.history import DEVICE_COLUMNS, device_of
from pipeline.results.history_db import HistoryDB

SPEED_JSON = "speed.json"  # in a runner's results folder, beside its JUnit reports
SCHEMA_VERSION = 1  # of speed.json
MIN_REPEATS = 3
Key = tuple[str, str, str, str]  # op, dtype, shape, layout


@dataclass(frozen=True)
class Measurement:
    op: str
    dtype: str
    shape: str  # "small" ... "skinny-row", a reduction's with "/dim=N" (pipeline.run.speed)
    layout: str  # "contiguous" | "strided" | "transposed"
    times: tuple[float, ...]  # seconds per call, one per repeated block

    @property
    def key(self) -> Key:
        return (self.op, self.dtype, self.shape, self.layout)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def quartiles(self) -> tuple[float, float]:
        if len(self.times) < 2:
            return self.times[0], self.times[0]
        q = statistics.quantiles(self.times, n=4, method="inclusive")
        return q[0], q[2]


class Judgement(str, Enum):
    SLOWER = "slower"  # over the threshold and outside main's night-to-night spread
    NOISE = "within noise"  # over the threshold, inside the spread
    OK = "ok"
    NO_BASELINE = "no baseline"  # too few nights of main from this device class
    TOO_FEW = "too few measurements"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Verdict:
    """One measurement against main's figures: results.json's ``speed.verdicts[]``."""

    op: str
    dtype: str
    shape: str
    layout: str
    pr_median: float
    main_median: float | None
    ratio: float | None
    spread: float | None  # main's slowest nightly median over its median
    judgement: Judgement

    @property
    def key(self) -> Key:
        return (self.op, self.dtype, self.shape, self.layout)


@dataclass(frozen=True)
class SpeedReport:
    """A PR's kernel speed: its measurements on ``runner`` and each one's verdict against
    main's figures of the same device class (results.json's ``speed``). ``nights``: main's
    nights compared with (0: no history here, or none from this device class: every
    verdict "no baseline")."""

    runner: str
    measurements: tuple[Measurement, ...]
    threshold: float
    nights: int
    verdicts: tuple[Verdict, ...]
    # the device the measurements come from (Device.label(), or "DEVICE (unknown)")
    device: str = "unknown"
    # the Mac's device record the figures were timed on, whose class picks main's figures
    # (None: timed on the CPU, or not known)
    machine: Device | None = None

    def __post_init__(self) -> None:
        for m in self.measurements:
            if not m.times or min(m.times) <= 0:
                raise ValueError(f"measurements: {'/'.join(m.key)} has no positive timings")

    @property
    def device_class(self) -> str:
        """The class main's figures were taken from, said as the comment says it."""
        if self.machine is None:
            return "an unknown device class (no device record: not timed on a Mac's GPU)"
        return str(self.machine.device_class)

    @property
    def slower(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.judgement is Judgement.SLOWER)

    def to_dict(self) -> dict[str, object]:
        return cast(dict[str, object], dump(self))


@dataclass(frozen=True)
class NotTimed:
    """A benchmark the device could not run (an operator or dtype it lacks), and why."""

    op: str
    dtype: str
    shape: str
    layout: str
    error: str  # "TypeError: ..."


@dataclass(frozen=True)
class _Row:
    """One row of speed.json's ``results``: a figure, or why the device has none."""

    op: str
    dtype: str
    shape: str
    layout: str
    elements: int | None = None  # for readers: the input's size
    error: str | None = None
    times: tuple[float, ...] | None = None

    def measured(self, doc: str, where: str) -> Measurement | NotTimed:
        """The measurement; NotTimed for an operator the device cannot run in that dtype
        (its ``error``: no figure)."""
        if self.error:
            return NotTimed(self.op, self.dtype, self.shape, self.layout, self.error)
        if not self.times:
            raise DocumentError(doc, f"{where}.times", "must be a list of numbers")
        if min(self.times) <= 0:
            raise DocumentError(doc, f"{where}.times", "has no positive timings")
        return Measurement(self.op, self.dtype, self.shape, self.layout, self.times)


@dataclass(frozen=True)
class _SpeedJson:
    """speed.json, as pipeline.run.speed writes it; ``torch`` and ``env`` are for readers:
    what timed it, under which switches."""

    schema: int
    device: str | None = None
    torch: str | None = None
    env: dict[str, object] | None = None
    results: tuple[_Row, ...] | None = None


def parse(data: object, where: str) -> tuple[str, tuple[Measurement, ...]]:
    """(device, measurements) of a ``speed.json`` document, every key checked; PipelineError
    naming ``where``."""
    device, measured = parse_rows(data, where)
    return device, tuple(m for m in measured if isinstance(m, Measurement))


def parse_rows(data: object, where: str) -> tuple[str, tuple[Measurement | NotTimed, ...]]:
    """:func:`parse`, with the benchmarks the device could not run among the measurements."""
    if schema_of(data) != SCHEMA_VERSION:
        raise PipelineError(f"{where}: not a speed.json of schema {SCHEMA_VERSION}")
    doc = read_model(_SpeedJson, data, where)
    rows = doc.results or ()
    return doc.device or "", tuple(r.measured(where, f"results[{i}]") for i, r in enumerate(rows))


def read(path: Path) -> tuple[str, tuple[Measurement, ...]]:
    device, rows = read_rows(path)
    return device, tuple(m for m in rows if isinstance(m, Measurement))


def read_rows(path: Path) -> tuple[str, tuple[Measurement | NotTimed, ...]]:
    """:func:`parse_rows` of the ``speed.json`` at ``path``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PipelineError(f"{path}: cannot read it as JSON ({exc})") from None
    return parse_rows(data, str(path))


def _has_table(db: HistoryDB) -> bool:
    return bool(db.columns("speed"))


def record(db: HistoryDB, run_id: int, measurements: Iterable[Measurement]) -> int:
    """Store a run's measurements (in the caller's transaction); how many."""
    rows = [(run_id, *m.key, m.median, *m.quartiles(), len(m.times)) for m in measurements]
    db.executemany(
        "INSERT INTO speed (run_id, op, dtype, shape, layout, median, q25, q75, repeats) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, op, dtype, shape, layout) "
        "DO UPDATE SET median = excluded.median, q25 = excluded.q25, q75 = excluded.q75, "
        "repeats = excluded.repeats",
        rows,
    )
    return len(rows)


def record_night(
    db: HistoryDB,
    runs: Mapping[str, int],
    results: Path,
    refused: Mapping[str, str] | None = None,
) -> list[str]:
    """Store ``<results>/<runner>/speed.json`` of each run (runner -> run id) that has one,
    in the caller's transaction (the nightly's, committed once its history check has
    passed: a ``with db`` here committed the night before); the warnings for those that
    cannot be read (a night's tests still count). A runner in ``refused`` (runner -> why:
    a VM's GPU) has its figures left out, with the reason as a warning."""
    warnings = []
    for runner, run_id in runs.items():
        path = results / runner / SPEED_JSON
        if not path.is_file():
            continue
        if refused and runner in refused:
            warnings.append(f"speed: {runner}: {refused[runner]}; no figures recorded")
            continue
        try:
            _, measurements = read(path)
        except PipelineError as exc:
            warnings.append(f"speed: {exc}; no figures recorded for {runner}")
            continue
        record(db, run_id, measurements)
    return warnings


def nightly_medians(
    db: HistoryDB, device_class: DeviceClass, last_n: int
) -> dict[Key, list[float]]:
    """Each benchmark's median over main's last ``last_n`` runs with figures from a device of
    ``device_class`` (whichever runner), oldest first. An unknown class has none; so has a
    history without the speed or run_devices table (read-only, older)."""
    if not device_class.known or not _has_table(db) or not db.columns("run_devices"):
        return {}
    # the chip and the cores narrow it on the server; the class is the device's own rule
    candidates = db.execute(
        f"SELECT r.id, {', '.join(f'd.{c}' for c in DEVICE_COLUMNS)} FROM runs AS r "
        "JOIN run_devices AS d ON d.run_id = r.id "
        "WHERE d.chip = ? AND d.gpu_cores = ? AND EXISTS ("
        "  SELECT 1 FROM speed AS s WHERE s.run_id = r.id"
        ") ORDER BY r.started DESC, r.id",
        (device_class.chip, device_class.gpu_cores),
    ).fetchall()
    runs = [
        run for run, *row in candidates
        if device_of(row, f"history run {run}'s device").device_class == device_class
    ][:last_n]  # fmt: skip
    if not runs:
        return {}
    rows = db.execute(
        "SELECT s.op, s.dtype, s.shape, s.layout, s.median FROM speed AS s "
        f"JOIN runs AS r ON r.id = s.run_id WHERE r.id IN ({', '.join('?' * len(runs))}) "
        "ORDER BY r.started, r.id",
        runs,
    )
    out: dict[Key, list[float]] = {}
    for op, dtype, shape, layout, median in rows:
        out.setdefault((op, dtype, shape, layout), []).append(median)
    return out


# upstream's (test/bench_mps_ops.py) labels for the layouts our benchmark also times, at its
# 1024×1024 size
SAME_AS_UPSTREAM = {
    "dense": ("large", "contiguous"),
    "dense-dense": ("large", "contiguous"),
    "transposed": ("large", "transposed"),
    "transp-transp": ("large", "transposed"),
    "strided": ("large", "strided"),
}


@dataclass(frozen=True)
class UpstreamFigure:
    """One of upstream's figures: operator, dtype, its layout label, median seconds per
    call and interquartile range (None: it failed, ``error`` says why)."""

    op: str
    dtype: str
    label: str
    median: float | None
    iqr: float | None
    error: str = ""

    @property
    def ours(self) -> tuple[str, str] | None:
        """Our (shape, layout) timing the same thing, if any."""
        return SAME_AS_UPSTREAM.get(self.label)


def shape_class(key: Key) -> str:
    """A benchmark's shape class: its shape without a reduction's dimension, and its
    layout (``skinny-column transposed``)."""
    _, _, shape, layout = key
    return f"{shape.split('/')[0]} {layout}"


def worst_per_class(verdicts: Iterable[Verdict]) -> dict[str, Verdict]:
    """The highest ratio against main in each shape class (those with a baseline), in the
    order the classes first appear."""
    worst: dict[str, Verdict] = {}
    for v in verdicts:
        if v.ratio is None:
            continue
        found = worst.get(shape_class(v.key))
        if found is None or (found.ratio is not None and v.ratio > found.ratio):
            worst[shape_class(v.key)] = v
    return worst


def path_pairs(
    metal: Iterable[Measurement], forced: Iterable[Measurement]
) -> list[tuple[Measurement, Measurement]]:
    """(Metal path, forced MPSGraph path) for each benchmark timed both ways."""
    graph = {m.key: m for m in forced}
    return [(m, graph[m.key]) for m in metal if m.key in graph]


def compare(
    measured: Sequence[Measurement],
    main: Mapping[Key, Sequence[float]],
    *,
    threshold: float,
    min_nights: int,
) -> tuple[Verdict, ...]:
    """Each PR measurement judged against main's nightly medians from the same device
    class."""
    out = []
    for m in measured:
        nights = list(main.get(m.key, ()))
        if len(nights) < min_nights:
            out.append(Verdict(*m.key, m.median, None, None, None, Judgement.NO_BASELINE))
            continue
        base = statistics.median(nights)
        ratio = m.median / base
        spread = max(nights) / base
        if len(m.times) < MIN_REPEATS:
            judgement = Judgement.TOO_FEW
        elif ratio <= threshold:
            judgement = Judgement.OK
        elif m.quartiles()[0] > max(nights):
            judgement = Judgement.SLOWER
        else:
            judgement = Judgement.NOISE
        out.append(Verdict(*m.key, m.median, base, ratio, spread, judgement))
    return tuple(out)
