"""Shards of the nightly sweep balanced by duration, stable from night to night.

Pure functions over test ids (``TestConsistencyMPS::test_output_match_atan2_mps_float32``),
their durations and the previous night's plan; the ``shards`` command
(:mod:`pipeline.commands.shards`) reads those from the tree and the history.

**Estimates** (:func:`estimate`). A test weighs the median of its recorded seconds over the
last ``nightly.shard_nights`` nightlies, every runner's runs together (a median shrugs off
one slow night or one slow Mac). A test without any gets the median of its operator's
tests (same stem, both kinds), else the median of all tests. Without a single recorded
duration above 0 s (no history, or reports that carry no times: every ``time="0"``) every
test weighs 1: the plan spreads the tests by count, equal counts, and says that its
balance in time is unknown.

**Plan** (:func:`plan`). Without a previous plan: greedy LPT, longest processing time
first (the heaviest test to the lightest shard; ties broken by test id, then by the lower
shard index), which is deterministic. With one, stability comes first: every test stays
in its previous shard, new tests are placed by LPT onto those loads, vanished tests are
dropped, and only while the slowest shard is above ``target`` × the mean are tests moved
from the slowest shard to the fastest, each time the biggest test that fits the gap
without overshooting the mean (the fewest moves that restore balance), else the smallest
that still narrows the gap. If that cannot reach ``target`` and a fresh LPT plan does
(or beats it by more than the tolerance), the fresh plan is taken, its shards numbered to
match the previous plan's as far as their tests overlap (:class:`Stability` counts what
moved either way). A test of 0 s is never moved: it changes no shard's time.
"""

from __future__ import annotations

import bisect
import heapq
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import dump, read
from pipeline.results.junit import parse_test_id
from pipeline.testid import node_of

SCHEMA = 1  # of the plan document (shards --json, the --out file)
TARGET = 1.05  # the slowest shard may take this times the mean shard
_LAST = "\uffff"  # sorts after every test id


test_id = node_of  # a history row's (classname, name) as a plan's test id


def operator(test: str) -> str | None:
    """The stem (``atan2``) of a consistency test id, None for any other test."""
    parsed = parse_test_id(test.rpartition("::")[2])
    return parsed[1] if parsed else None


# ------------------------------------------------------------------------------ estimates


@dataclass(frozen=True)
class Estimates:
    """The seconds each test of the suite is expected to take, and where they came from."""

    seconds: dict[str, float]  # test id -> estimate, in suite order
    measured: int  # tests with durations of their own
    by_operator: int  # tests given their operator's median
    by_all: int  # tests given the median of all tests
    timed: bool  # False: no duration above 0 s; every test weighs 1 (a plan by count)
    recorded: int = 0  # tests with recorded durations (in the suite or no longer)


def medians(samples: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Test id -> the median of its samples (tests without samples left out)."""
    return {test: max(0.0, statistics.median(values)) for test, values in samples.items() if values}


def estimate(suite: Sequence[str], measured: Mapping[str, float]) -> Estimates:
    """Each test of ``suite``: its own median (``measured``, which may hold tests no longer
    in the suite: they still count for their operator), else its operator's, else all's.
    When that gives every test 0 s, nothing is known of their times: a plan by count."""
    by_count = Estimates(dict.fromkeys(suite, 1.0), 0, 0, len(suite), False, len(measured))
    if not measured:
        return by_count
    by_stem: dict[str | None, list[float]] = {}
    for test, taken in measured.items():
        by_stem.setdefault(operator(test), []).append(taken)
    stem_median = {stem: statistics.median(values) for stem, values in by_stem.items() if stem}
    everything = statistics.median(measured.values())
    seconds: dict[str, float] = {}
    own = by_op = 0
    for test in suite:
        if test in measured:
            seconds[test] = measured[test]
            own += 1
        elif (stem := operator(test)) in stem_median:
            seconds[test] = stem_median[stem]
            by_op += 1
        else:
            seconds[test] = everything
    if not any(seconds.values()):  # LPT would put every test in shard 1, "balanced"
        return by_count
    return Estimates(seconds, own, by_op, len(seconds) - own - by_op, True, len(measured))


# ----------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """Shard ``i + 1`` runs ``shards[i]`` (sorted test ids) in an estimated ``loads[i]`` s."""

    shards: tuple[tuple[str, ...], ...]
    loads: tuple[float, ...]

    @property
    def tests(self) -> int:
        return sum(len(s) for s in self.shards)

    @property
    def mean(self) -> float:
        return sum(self.loads) / len(self.loads)

    @property
    def ratio(self) -> float:
        """The slowest shard over the mean shard (1.0 for an empty plan)."""
        mean = self.mean
        return max(self.loads) / mean if mean > 0 else 1.0


@dataclass(frozen=True)
class Stability:
    """How the plan differs from the previous one."""

    kept: int  # tests in the same shard as before
    moved: int  # tests in another shard than before
    new: int  # tests the previous plan did not have (or had in a shard no longer there)
    gone: int  # tests of the previous plan no longer in the suite
    replanned: bool  # keeping tests in place could not reach the target: a fresh LPT plan
    previous: bool  # there was a previous plan


def _finish(shards: Sequence[Sequence[str]], weights: Mapping[str, float]) -> Plan:
    ordered = tuple(tuple(sorted(s)) for s in shards)
    return Plan(ordered, tuple(float(sum(weights[t] for t in s)) for s in ordered))


def _lpt_into(
    shards: list[list[str]], loads: list[float], tests: Sequence[str], weights: Mapping[str, float]
) -> None:
    """Each of ``tests``, heaviest first (ties: by id), onto the lightest shard (ties: the
    lower index), updating ``shards`` and ``loads`` in place."""
    heap = [(load, i) for i, load in enumerate(loads)]
    heapq.heapify(heap)
    for test in sorted(tests, key=lambda t: (-weights[t], t)):
        load, i = heapq.heappop(heap)
        shards[i].append(test)
        loads[i] = load + weights[test]
        heapq.heappush(heap, (loads[i], i))


def lpt(weights: Mapping[str, float], num_shards: int) -> Plan:
    """The greedy LPT plan of ``weights`` (test id -> seconds) over ``num_shards`` shards."""
    _check_shards(num_shards)
    shards: list[list[str]] = [[] for _ in range(num_shards)]
    _lpt_into(shards, [0.0] * num_shards, list(weights), weights)
    return _finish(shards, weights)


def by_count(suite: Sequence[str], weights: Mapping[str, float], num_shards: int) -> Plan:
    """Round robin over ``suite`` in its order, as ``--shard-id/--num-shards`` shard
    PyTorch's tests: what the sweep takes without a plan (for comparison)."""
    _check_shards(num_shards)
    return _finish([suite[i::num_shards] for i in range(num_shards)], weights)


def _check_shards(num_shards: int) -> None:
    if num_shards < 1:
        raise PipelineError(f"shards: --num-shards must be at least 1, not {num_shards}")


def _rebalance(
    shards: list[list[str]], loads: list[float], weights: Mapping[str, float], target: float
) -> None:
    """Move tests from the slowest shard to the fastest until the slowest is within
    ``target`` × the mean, or no move narrows their gap (see the module docs)."""
    n = len(shards)
    mean = sum(loads) / n
    ranked = [sorted((weights[t], t) for t in s) for s in shards]  # each shard, lightest first
    for _ in range(sum(map(len, shards))):  # every move narrows a gap: this is never reached
        heavy = max(range(n), key=lambda i: (loads[i], -i))
        light = min(range(n), key=lambda i: (loads[i], i))
        if loads[heavy] <= target * mean or heavy == light:
            break
        gap = loads[heavy] - loads[light]
        fits = min(loads[heavy] - mean, mean - loads[light])
        tests = ranked[heavy]
        first = bisect.bisect_right(tests, (0.0, _LAST))  # tests of 0 s move nothing
        at = bisect.bisect_right(tests, (fits, _LAST))
        if at > first:  # the biggest that fits without overshooting the mean
            pick = at - 1
        elif first < len(tests) and tests[first][0] < gap:  # the smallest narrows the gap
            pick = first
        else:
            break
        seconds, test = tests.pop(pick)
        bisect.insort(ranked[light], (seconds, test))
        loads[heavy] -= seconds
        loads[light] += seconds
    for shard, tests in zip(shards, ranked, strict=True):
        shard[:] = [t for _, t in tests]


def _relabel(fresh: Plan, before: Mapping[str, int], num_shards: int) -> list[list[str]]:
    """``fresh``'s shards numbered to keep as many tests in their previous shard as it can
    (greedy on the overlaps, largest first; ties by shard index)."""
    overlap = [[0] * num_shards for _ in range(num_shards)]
    for i, tests in enumerate(fresh.shards):
        for test in tests:
            if (j := before.get(test)) is not None:
                overlap[i][j] += 1
    pairs = sorted(
        ((overlap[i][j], i, j) for i in range(num_shards) for j in range(num_shards)),
        key=lambda p: (-p[0], p[1], p[2]),
    )
    target_of: dict[int, int] = {}
    taken: set[int] = set()
    for _, i, j in pairs:
        if i not in target_of and j not in taken:
            target_of[i] = j
            taken.add(j)
    shards: list[list[str]] = [[] for _ in range(num_shards)]
    for i, tests in enumerate(fresh.shards):
        shards[target_of[i]] = list(tests)
    return shards


def plan(
    weights: Mapping[str, float],
    num_shards: int,
    previous: Sequence[Sequence[str]] | None = None,
    *,
    target: float = TARGET,
) -> tuple[Plan, Stability]:
    """Every test of ``weights`` (test id -> seconds) in exactly one of ``num_shards``
    shards, balanced and, given the ``previous`` plan's shards, stable (module docs)."""
    _check_shards(num_shards)
    if target < 1:
        raise PipelineError(f"shards: the target ratio must be at least 1, not {target}")
    before: dict[str, int] = {}
    for i, tests in enumerate((previous or ())[:num_shards]):
        for test in tests:
            before.setdefault(test, i)
    old = {t for tests in previous or () for t in tests}
    shards: list[list[str]] = [[] for _ in range(num_shards)]
    new = []
    for test in weights:
        if test in before:
            shards[before[test]].append(test)
        else:
            new.append(test)
    loads = [float(sum(weights[t] for t in s)) for s in shards]
    _lpt_into(shards, loads, new, weights)
    replanned = False
    if previous:
        _rebalance(shards, loads, weights, target)
        kept = _finish(shards, weights)
        if kept.ratio > target:
            fresh = lpt(weights, num_shards)
            if fresh.ratio <= target or fresh.ratio * target < kept.ratio:
                shards, replanned = _relabel(fresh, before, num_shards), True
    result = _finish(shards, weights)
    moved = sum(1 for i, tests in enumerate(result.shards) for t in tests if before.get(t, i) != i)
    in_new = sum(1 for t in weights if t not in before)
    stability = Stability(
        kept=len(weights) - in_new - moved,
        moved=moved,
        new=in_new,
        gone=len(old - set(weights)),
        replanned=replanned,
        previous=bool(previous),
    )
    return result, stability


# ------------------------------------------------------------------------- the document


class ShardJson(TypedDict):
    index: int  # 1 first
    tests: list[str]
    seconds: float | None  # estimated; None for a plan by count


class PlanJson(TypedDict):
    schema: int
    shards: list[ShardJson]


def to_json(result: Plan, *, timed: bool = True) -> PlanJson:
    """The plan document: ``{"schema": 1, "shards": [{"index", "tests", "seconds"}]}``;
    ``seconds`` (estimated) is null for a plan by count."""
    shards = tuple(
        _ShardJson(i, tuple(tests), round(load, 6) if timed else None)
        for i, (tests, load) in enumerate(zip(result.shards, result.loads, strict=True), 1)
    )
    return cast(PlanJson, dump(_PlanJson(SCHEMA, shards)))


@dataclass(frozen=True)
class _ShardJson:
    index: int
    tests: tuple[str, ...]
    seconds: float | None  # the estimate, for the person only


@dataclass(frozen=True)
class _PlanJson:
    schema: int | None
    shards: tuple[_ShardJson, ...]

    def __post_init__(self) -> None:
        if self.schema != SCHEMA:
            raise ValueError(f"schema is {self.schema!r}, this mps-pipeline reads {SCHEMA}")
        for n, shard in enumerate(self.shards, 1):
            if shard.index != n:
                raise ValueError(f"shards[{n - 1}].index is not {n}")


def from_json(doc: object, where: str) -> list[list[str]]:
    """The shards (test ids, shard 1 first) of a plan document; PipelineError naming
    ``where`` when it is not one."""
    try:
        return [list(shard.tests) for shard in read(_PlanJson, doc, where).shards]
    except DocumentError as exc:
        raise PipelineError(f"{where}: not a shard plan ({exc.where} {exc.problem})") from None


@dataclass(frozen=True)
class PlanRun:
    """A plan as ``shards`` made it: the plan and how it was made (for :func:`to_json` and
    the person's report, pipeline.report.shards)."""

    plan: Plan
    stability: Stability
    estimates: Estimates
    by_count: Plan  # the same suite by count: what --shard-id/--num-shards would give
    source: str  # where the suite came from
    history: str  # where the durations came from, its secrets hidden
    previous: Path | None  # the previous plan it started from
    out: Path  # where it was written
    nights: int
    target: float
    warnings: tuple[str, ...]
