"""A PR's failing tests against the nightly history of main: new, already failing, flaky.

``pr-report`` compares every failing test of a targeted run (fail, error or xpass: what
fails the commit status) with the nightly history (:mod:`pipeline.results.history`):

- **flaky**: its outcome flipped (changed and changed back) over the last
  ``nightly.flaky_window`` nightlies (a setting), or its attempts disagreed (a rerun passed) in
  the nightly compared with;
- **already failing on main**: it failed (fail, error or xpass) in the nightly too;
- **new**: anything else: it passed, xfailed or was skipped there, or the nightly did not run
  it at all ("not in the nightly"), or there is no nightly to compare with.

Which nightly: when the PR run knows its runner configuration (``--runner``, else
``$RUNNER_CONFIG``), that configuration's latest run, and only its results count ("already
failing" needs the test to fail on the same configuration). Without one, or when the history
has no run of it, every runner of the latest nightly, and a test counts as failing on main
when it failed on any of them. Tests are matched by operator (test stem), test kind and
dtype, which the class name of a differently invoked pytest does not change.

Only new failures fail the commit status; without a nightly baseline every failure is new
and the status is what it was without a history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from pipeline import state
from pipeline.config import Settings, defaults
from pipeline.errors import PipelineError
from pipeline.fields import dump, key, shown
from pipeline.results import history
from pipeline.results.history_db import HistoryDB
from pipeline.results.junit import FAILING, CaseResult, Outcome
from pipeline.results.table import DtypeTable
from pipeline.sections import Key
from pipeline.testid import TestId

NEW = "new"
ALREADY_FAILING = "already_failing"
FLAKY = "flaky"
CLASSES = (NEW, ALREADY_FAILING, FLAKY)
# The variable the nightly's sweep sets to the runner configuration (matrix.runner); set it
# in a Mac runner's .env for the PR jobs that run there.
RUNNER_ENV = "RUNNER_CONFIG"
NO_BASELINE = "no nightly baseline"
_LATEST = "\uffff"  # after every ``started``: history.previous_run(..., _LATEST) is the latest
_WORDS = {
    Outcome.PASS: "passed",
    Outcome.FAIL: "failed",
    Outcome.ERROR: "errored",
    Outcome.XFAIL: "xfailed",
    Outcome.XPASS: "unexpectedly passed",
    Outcome.SKIP: "was skipped",
}

_Key = tuple[str, str, str]  # (kind, stem, dtype)


@dataclass(frozen=True)
class Night:
    """The nightly compared with: when it started, main's commit, the runs that count."""

    started: str
    commit: str  # "" when the nightly did not record it
    runners: tuple[str, ...]

    @property
    def date(self) -> str:
        return self.started[:10]


@dataclass(frozen=True)
class Failure:
    """One failing test of the PR run, classified: results.json's ``baseline.cases[]``."""

    # for readers: made of the rest
    _test: str = field(init=False, repr=False, compare=False,
                       metadata=shown(lambda f: f.test, "test"))  # fmt: skip
    stem: str
    kind: str
    dtype: str
    outcome: Outcome  # in the PR run
    klass: str = field(metadata=key("class"))  # one of CLASSES
    reason: str  # for people: what the history says about it
    main: Mapping[str, Outcome]  # runner -> its outcome in the nightly (empty: not run there)

    @property
    def test(self) -> str:
        """The test's name: ``test_output_match_atan2_mps_bool``."""
        return str(TestId(self.kind, self.stem, self.dtype))


class NightJson(TypedDict):
    started: str
    commit: str
    runners: list[str]


# functional form: "class" is a keyword
BaselineCaseJson = TypedDict(
    "BaselineCaseJson",
    {
        "test": str,
        "stem": str,
        "kind": str,
        "dtype": str,
        "outcome": str,
        "class": str,
        "reason": str,
        "main": dict[str, str],  # runner -> its outcome in the nightly
    },
)


class BaselineJson(TypedDict):
    """results.json's ``baseline``."""

    runner: str | None
    nightly: NightJson | None
    flaky_window: int
    note: str
    counts: dict[str, int]
    cases: list[BaselineCaseJson]


@dataclass(frozen=True)
class Baseline:
    """A PR run's failing tests, each with its class, and what they were compared with:
    results.json's ``baseline`` (docs/machine-output.md)."""

    runner: str | None  # the PR run's configuration, when known
    # None: no nightly baseline (every failure is new)
    night: Night | None = field(metadata=key("nightly"))
    # nightlies looked back over for flipping outcomes
    window: int = field(metadata=key("flaky_window"))
    note: str  # what the comparison could not do, for the comment ("" when nothing)
    # for readers: the cases'
    _counts: dict[str, int] = field(init=False, repr=False, compare=False,
                                    metadata=shown(lambda b: b.counts, "counts"))  # fmt: skip
    failures: tuple[Failure, ...] = field(metadata=key("cases"))

    def of(self, klass: str) -> tuple[Failure, ...]:
        return tuple(f for f in self.failures if f.klass == klass)

    @property
    def counts(self) -> dict[str, int]:
        """Failing tests per class, every class."""
        return {k: len(self.of(k)) for k in CLASSES}

    def to_dict(self) -> BaselineJson:
        """results.json's ``baseline``."""
        return cast(BaselineJson, dump(self))


def failing(table: DtypeTable | None) -> list[tuple[_Key, Outcome]]:
    """The failing tests of a run's table (fail, error, xpass), in table order."""
    if table is None:
        return []
    return [
        ((row.kind, row.stem, cell.dtype), cell.outcome)
        for row in table.rows
        for cell in row.cells
        if cell.outcome in FAILING
    ]


def _default_window() -> int:
    window: int = defaults()[Key.NIGHTLY_FLAKY_WINDOW]
    return window


def without_history(
    table: DtypeTable | None, runner: str | None = None, note: str = NO_BASELINE
) -> Baseline:
    """No nightly to compare with: every failure is new."""
    failures = tuple(
        Failure(stem, kind, dtype, outcome, NEW, NO_BASELINE, {})
        for (kind, stem, dtype), outcome in failing(table)
    )
    return Baseline(runner, None, _default_window(), note, failures)


def _runners(runners: Iterable[str]) -> str:
    return ", ".join(runners)


def _flips(series: history.OutcomeSeries) -> str:
    return (
        f"its outcome flipped over the last {len(series.outcomes)} nightlies on "
        f"{series.runner} ({' → '.join(o.value for o in series.outcomes)})"
    )


def _outcomes(results: Mapping[str, CaseResult]) -> str:
    """``passed on macos-m1-14, macos-m2-15; xfailed on macos-m2-26``."""
    by_outcome: dict[Outcome, list[str]] = {}
    for runner, case in results.items():
        by_outcome.setdefault(case.outcome, []).append(runner)
    return "; ".join(f"{_WORDS[o]} on {_runners(rs)}" for o, rs in by_outcome.items())


def compare(
    db: HistoryDB,
    table: DtypeTable | None,
    *,
    runner: str | None = None,
    window: int | None = None,
) -> Baseline:
    """Classify the failing tests of ``table`` against the history in ``db``, looking back
    ``window`` nightlies for flaky ones (None: the ``nightly.flaky_window`` default)."""
    window = _default_window() if window is None else window
    latest = history.nightlies(db, 1)
    if not latest:
        return without_history(table, runner, f"{NO_BASELINE}: the history holds no nightly yet")
    night = latest[0]
    runs = night.runs
    note = ""
    if runner:
        own = history.previous_run(db, runner, _LATEST)
        if own is None:
            note = (
                f"the nightly history has no run of {runner}: compared with every runner of "
                f"the latest nightly"
            )
        else:
            if own.started != night.started:
                note = (
                    f"the latest nightly ({night.started[:10]}) has no run of {runner}: "
                    f"compared with its latest run, of {own.started[:10]}"
                )
            runs = (own,)
    commit = next((r.commit for r in runs if r.commit), "")
    compared = Night(runs[0].started, commit, tuple(r.runner for r in runs))
    wanted = failing(table)
    stems = {stem for (_, stem, _), _ in wanted}
    main: dict[_Key, dict[str, CaseResult]] = {}
    for run in runs:
        for case in history.run_cases(db, run.id, stems=stems) if stems else ():
            if case.kind is not None and case.stem is not None and case.dtype is not None:
                main.setdefault((case.kind, case.stem, case.dtype), {})[run.runner] = case
    flipped: dict[_Key, list[history.OutcomeSeries]] = {}
    if wanted:
        for series in history.flipping(db, window):
            if series.runner in compared.runners and series.stem in stems:
                key = (series.kind or "", series.stem, series.dtype or "")
                flipped.setdefault(key, []).append(series)

    on = f"in the nightly of {compared.date}"
    at = f" (commit {commit[:12]})" if commit else ""
    failures = []
    for key, outcome in wanted:
        kind, stem, dtype = key
        results = main.get(key, {})
        disagreed = [r for r, c in results.items() if c.flaky]
        failed = {r: c for r, c in results.items() if c.outcome in FAILING}
        if flipped.get(key) or disagreed:
            reasons = [_flips(s) for s in flipped.get(key, ())]
            if disagreed:
                reasons.append(f"its attempts disagreed {on} on {_runners(disagreed)}")
            klass, reason = FLAKY, "; ".join(reasons)
        elif failed:
            klass, reason = ALREADY_FAILING, f"{_outcomes(failed)} {on}{at}"
        elif results:
            klass, reason = NEW, f"{_outcomes(results)} {on}"
        else:
            klass, reason = NEW, f"not in the nightly of {compared.date} (never run there)"
        seen = {r: c.outcome for r, c in results.items()}
        failures.append(Failure(stem, kind, dtype, outcome, klass, reason, seen))
    return Baseline(runner, compared, window, note, tuple(failures))


def history_at(settings: Settings, explicit: str | Path | None) -> history.HistoryLocation | None:
    """The history to compare with: ``explicit`` (``--history``: a file, which must exist, or
    a server), else the one the settings name (``history.url``, else
    ``<state_dir>/history/nightly.sqlite``) when there is one; None: no baseline."""
    at = history.locate(explicit, settings)
    if at.is_server or at.file.is_file():
        return at
    if explicit is not None:
        raise PipelineError(
            f"--history {at}: no such file; pass the nightly's history "
            f"(<state_dir>/{state.HISTORY}, which `nightly` writes, or its server's "
            "postgresql:// URL), or leave --history out to report without a baseline"
        )
    return None


def refuse_unusable_history(at: history.HistoryLocation) -> None:
    """Refuse now, before any build, a history that cannot be compared with (a damaged file,
    a server that cannot be reached or holds no history)."""
    history.for_comparing(at).close()


def classify(
    at: history.HistoryLocation | None,
    table: DtypeTable | None,
    *,
    runner: str | None = None,
    window: int | None = None,
) -> Baseline:
    """:func:`compare` with the history ``at``; no history (None): every failure new."""
    if at is None:
        return without_history(table, runner)
    db = history.for_comparing(at)
    try:
        return compare(db, table, runner=runner, window=window)
    finally:
        db.close()
