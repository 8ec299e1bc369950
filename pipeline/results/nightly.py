"""One nightly, analysed: every runner's JUnit → history → proposals, regressions, flakes.

The nightly workflow downloads one folder per runner configuration: ``DIR/<runner>/
shard-<n>.xml``. Any ``*.xml`` below a runner's folder is one of its shards; the runner is
the nearest enclosing folder named like a configured runner (``settings.runners``), else the
top-level folder. Each runner's shards are merged into one result set, and the night is
recorded in the history database as one run per runner.

Then, from the history:

- **xfail removals**: a dtype's xfail goes only when the dtype xpassed, not flaky, on every
  configured runner in each of the last ``min_passes`` nightlies. Each of those nights is
  judged by :func:`pipeline.results.decide.decide_xfails` with ``required_runners`` (so
  macOS-version lists, skip lists and "not run" keep their rules), and a dtype is proposed
  when every one of them would drop it.
- **macOS-version moves** (:mod:`pipeline.results.macos`): a dtype that xfails on the
  runners older than some macOS version V and xpasses on the others, in each of those
  nightlies, moves into ``MACOS_BEFORE_<V>_XFAILLIST``.

  The proposals are one unified diff of common_mps.py, not applied.
- **regressions**: a test that worked (pass or xpass) in a runner's previous run and fails
  (fail, error, or xfail) now, with its suspects: the commits between the two runs'
  PyTorch commits that can affect its operator (:mod:`pipeline.impact.suspects`, on the
  checkout at ``settings.root``).
- **flaky tests**: attempts that disagreed tonight (a rerun passed), or an outcome that
  changed and changed back over the last ``flaky_window`` nightlies.
- **migration backlog**: the ``backlog`` command's list, counted by workflow.

:func:`pipeline.flows.nightly.run_nightly` does all of it and builds the night's
:class:`~pipeline.report.nightly_summary.NightlySummary`; :func:`pipeline.report.nightly.publish`
turns that into the dashboard.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict, cast

from pipeline.errors import PipelineError
from pipeline.fields import dump, shown
from pipeline.impact.suspects import CommitAnalysis, Suspect, SuspectJson
from pipeline.results import decide, decorations, history, junit
from pipeline.results.history_db import HistoryDB
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import DtypeTable, merge_runs
from pipeline.tree import paths
from pipeline.tree.index import TreeIndex

SCHEMA = 2  # of summary.json (2: plain table cells are just their outcome; shards)
CHART_NIGHTLIES = 60
MEASURED = ("suite", "cases")  # how a report's wall time was measured (junit.ReportWall)


class RegressionJson(TypedDict):
    runner: str
    classname: str
    name: str
    stem: str | None
    dtype: str | None
    before: str
    after: str
    flaky: bool
    message: str
    previous: str
    previous_commit: str
    suspects: list[SuspectJson]
    suspects_note: str


class FlakyTestJson(TypedDict):
    runner: str
    classname: str
    name: str
    stem: str | None
    dtype: str | None
    reasons: list[str]
    outcomes: list[str]


class CandidateJson(TypedDict):
    list: str
    function: str
    key: str
    streaks: dict[str, int]


class ShardReportJson(TypedDict):
    report: str
    shard: int | None
    seconds: float
    measured: str
    tests: int


class ShardBalanceJson(TypedDict):
    reports: list[ShardReportJson]
    total_seconds: float
    max_seconds: float
    mean_seconds: float
    ratio: float | None


@dataclass(frozen=True)
class Regression:
    """A test that worked in ``runner``'s previous run (``previous``) and fails now:
    summary.json's ``regressions[]``."""

    runner: str
    classname: str
    name: str
    stem: str | None
    dtype: str | None
    before: Outcome
    after: Outcome
    flaky: bool
    message: str
    previous: str  # started of the run it worked in
    previous_commit: str = ""  # the PyTorch commit that run tested
    suspects: tuple[Suspect, ...] = ()  # ranked, from name_suspects
    suspects_note: str = ""  # what limits the suspects ("": nothing)

    def to_dict(self) -> RegressionJson:
        return cast(RegressionJson, dump(self))


@dataclass(frozen=True)
class FlakyTest:
    """A test whose result on ``runner`` cannot be trusted, and why: summary.json's
    ``flaky[]``."""

    runner: str
    classname: str
    name: str
    stem: str | None
    dtype: str | None
    reasons: tuple[str, ...]
    outcomes: tuple[Outcome, ...]  # over the flaky window, oldest first (or tonight's only)

    def to_dict(self) -> FlakyTestJson:
        return cast(FlakyTestJson, dump(self))


@dataclass(frozen=True)
class Candidate:
    """An entry some of whose dtypes xpass everywhere, but not yet for enough nightlies:
    summary.json's ``candidates[]``."""

    list: str
    function: str
    key: str
    streaks: dict[str, int]  # dtype -> consecutive nightlies, newest back, it would go

    def to_dict(self) -> CandidateJson:
        return cast(CandidateJson, dump(self))


@dataclass(frozen=True)
class ShardReport:
    """One JUnit report's wall time (a shard's, in the nightly workflow's layout)."""

    report: str  # its path under --results
    shard: int | None  # <n> of shard-<n>.xml
    seconds: float
    measured: str  # "suite" | "cases" (junit.ReportWall)
    tests: int

    def __post_init__(self) -> None:
        if self.measured not in MEASURED:
            raise ValueError(f"measured is {self.measured!r}, not one of {', '.join(MEASURED)}")


@dataclass(frozen=True)
class ShardBalance:
    """One runner's reports' wall times, and the slowest over the mean: summary.json's
    ``shards.<runner>``, whose figures are for readers, made of the reports'."""

    reports: tuple[ShardReport, ...]  # at least one
    # for readers, made of the reports'
    _total: float = field(init=False, repr=False, compare=False,
                          metadata=shown(lambda b: b.total_seconds, "total_seconds"))  # fmt: skip
    _max: float = field(init=False, repr=False, compare=False,
                        metadata=shown(lambda b: b.max_seconds, "max_seconds"))  # fmt: skip
    _mean: float = field(init=False, repr=False, compare=False,
                         metadata=shown(lambda b: b.mean_seconds, "mean_seconds"))  # fmt: skip
    _ratio: float | None = field(init=False, repr=False, compare=False,
                                 metadata=shown(lambda b: b.ratio, "ratio"))  # fmt: skip

    def __post_init__(self) -> None:
        if not self.reports:
            raise ValueError("reports is empty")

    @property
    def ratio(self) -> float | None:
        """The slowest over the mean (None: every report took 0 s)."""
        mean = sum(r.seconds for r in self.reports) / len(self.reports)
        return round(self.max_seconds / mean, 4) if mean > 0 else None

    @property
    def max_seconds(self) -> float:
        return max(r.seconds for r in self.reports)

    @property
    def total_seconds(self) -> float:
        return round(sum(r.seconds for r in self.reports), 6)

    @property
    def mean_seconds(self) -> float:
        return round(sum(r.seconds for r in self.reports) / len(self.reports), 6)

    def to_dict(self) -> ShardBalanceJson:
        return cast(ShardBalanceJson, dump(self))


@dataclass(frozen=True)
class Proposals:
    """What :func:`propose` found: the removals to make, the ones still waiting, the diff."""

    decisions: tuple[decide.XfailDecision, ...]  # confirmed by history; actionable only
    candidates: tuple[Candidate, ...]
    diff: str
    nightlies: tuple[str, ...]  # the window judged, newest first
    note: str  # why there are none, when there are none
    # xfails outside common_mps.py the consistency tests cannot judge, each with why
    not_judged: tuple[decide.XfailDecision, ...] = ()


# ---------------------------------------------------------------------------- results


def collect_reports(
    results: Path, runners: Sequence[str]
) -> tuple[dict[str, tuple[Path, ...]], tuple[str, ...]]:
    """Runner -> its JUnit files under ``results`` (configured runners first), and warnings:
    a report outside any runner folder, a runner folder not among ``runners`` (a typo there
    would start a runner of its own in the history)."""
    if not results.is_dir():
        what = "no such folder"
        if results.exists():
            what = "a file, not a folder" if results.is_file() else "not a folder"
        raise PipelineError(
            f"--results {results}: {what}; --results takes a folder of JUnit reports, one "
            "folder per runner configuration in it (results/<runner>/shard-<n>.xml)"
        )
    found: dict[str, list[Path]] = {}
    warnings = []
    for path in sorted(results.rglob("*.xml")):
        folders = path.relative_to(results).parts[:-1]
        if not folders:
            warnings.append(f"{path}: not inside a runner folder (results/<runner>/...); ignored")
            continue
        runner = next((f for f in reversed(folders) if f in runners), folders[0])
        found.setdefault(runner, []).append(path)
    if not found:
        raise PipelineError(
            f"--results {results}: no JUnit reports (*.xml) in runner folders; expected "
            "results/<runner>/shard-<n>.xml"
        )
    extra = sorted(r for r in found if r not in runners)
    configured = ", ".join(runners) if runners else "none"
    warnings += [
        f"{results / r}: runner folder {r!r} is not among the config's runners ({configured}); "
        "its reports are recorded as a runner of its own (add it to `runners:` if it is one, "
        "or rename the folder)"
        for r in extra
    ]
    order = [r for r in runners if r in found] + extra
    return {r: tuple(found[r]) for r in order}, tuple(warnings)


_SHARD_NUMBER = re.compile(r"shard-(\d+)")


def shard_balance(
    results: Path, walls: Mapping[str, Sequence[junit.ReportWall]]
) -> dict[str, ShardBalance]:
    """summary.json's ``shards``: per runner, each report's wall time."""
    out: dict[str, ShardBalance] = {}
    for runner, found in walls.items():
        if not found:
            continue
        reports = []
        for w in found:
            path = Path(w.source)
            rel = path.relative_to(results).as_posix() if path.is_relative_to(results) else w.source
            number = _SHARD_NUMBER.fullmatch(path.stem)
            shard = int(number.group(1)) if number else None
            reports.append(ShardReport(rel, shard, w.seconds, w.measured, w.tests))
        out[runner] = ShardBalance(tuple(reports))
    return out


# -------------------------------------------------------------------------- proposals


def propose(
    db: HistoryDB,
    index: TreeIndex,
    latest: DtypeTable,
    window: Sequence[history.Nightly],
    required: Sequence[str],
    min_passes: int,
) -> Proposals:
    """xfail removals confirmed over ``window`` (the last nightlies, newest = ``latest``)."""
    starts = tuple(n.started for n in window)
    stem_of = {info.key: info.stem for info in index.opinfos}
    # the OpInfos' DecorateInfos on the consistency tests are judged as common_mps.py's are
    judged, not_judged = decorations.split(index.decorations.entries, stem_of)
    entries: list[decide.XfailLike] = [e for e in index.xfails.entries if e.key in stem_of]
    entries += judged
    tonight = decide.decide_xfails(entries, latest, required, opinfos=index.opinfos)
    live = [
        (e, d)
        for e, d in zip(entries, tonight, strict=True)
        if d.action is not decide.XfailAction.KEEP
    ]
    if not live:
        note = "nothing xpassed on every runner tonight"
        return Proposals((), (), "", starts, note, not_judged)
    subset = [e for e, _ in live]
    stems = {stem_of[e.key] for e in subset}
    gone = [[set(d.dropped) for _, d in live]]
    for night in window[1:min_passes]:
        runs = {r.runner: history.run_cases(db, r.id, stems=stems) for r in night.runs}
        decisions = decide.decide_xfails(subset, merge_runs(runs), required, opinfos=index.opinfos)
        gone.append([set(d.dropped) for d in decisions])

    proposals, candidates = [], []
    span = f"{starts[min_passes - 1][:10]} … {starts[0][:10]}" if len(starts) >= min_passes else ""
    for i, (entry, decision) in enumerate(live):
        streaks: dict[str, int] = {}
        for dtype in sorted(gone[0][i]):
            streaks[dtype] = next(
                (n for n, night in enumerate(gone) if dtype not in night[i]), len(gone)
            )
        going = {d for d, n in streaks.items() if n >= min_passes}
        if going:
            when = f"in each of the last {min_passes} nightlies ({span})"
            reason = _removal_reason(entry, stem_of[entry.key], going, required, latest, when)
            proposals.append(decision.dropping_only(going, reason))
        waiting = {d: n for d, n in streaks.items() if n < min_passes}
        if waiting:
            candidates.append(Candidate(entry.list, entry.function, entry.key, waiting))
    note = ""
    if not proposals:
        note = (
            f"xpasses are not yet confirmed: {min_passes} nightlies in a row are needed"
            f" (history has {len(starts)} so far)"
            if len(starts) < min_passes
            else f"no xpass held on every runner for {min_passes} nightlies in a row"
        )
    return Proposals(tuple(proposals), tuple(candidates), "", starts, note, not_judged)


# What a runner did, as the reasons say it.
_DID = {
    Outcome.PASS: "passed",
    Outcome.FAIL: "failed",
    Outcome.ERROR: "errored",
    Outcome.XFAIL: "xfailed",
    Outcome.XPASS: "xpassed",
    Outcome.SKIP: "skipped",
}


def _removal_reason(
    entry: decide.XfailLike,
    stem: str,
    going: set[str],
    required: Sequence[str],
    latest: DtypeTable,
    when: str,
) -> str:
    """Why ``going`` leave ``entry``: the runners they xpassed on. A macOS-version list is
    judged on the runners it applies to alone: the reason names them, and apart, the others
    with what they did tonight (a plain result: the list does not decorate their tests)."""
    dtypes = ", ".join(sorted(going))
    covered = decide.list_runners(entry.list, required)
    if covered is None:
        return f"{dtypes}: xpassed on {', '.join(required)} {when}"
    reason = (
        f"{dtypes}: xpassed on {', '.join(covered)}, the runners {entry.list} applies to "
        f"({decide.list_versions(entry.list)}), {when}"
    )
    others = [r for r in required if r not in covered]
    if not others:
        return reason
    row = latest.row(stem, decide.entry_kind(entry) or "output_match")
    cells = [cell for d in sorted(going) if row is not None and (cell := row.cell(d))]
    did: dict[str, list[str]] = {}
    for runner in others:
        seen = {res.outcome for cell in cells for res in cell.results if res.runner == runner}
        words = ", ".join(_DID[o] for o in junit.DISPLAY_ORDER if o in seen) or "did not run"
        did.setdefault(words, []).append(runner)
    tonight = "; ".join(f"{words} on {', '.join(runners)}" for words, runners in did.items())
    return f"{reason}; {tonight} tonight, which the list does not cover"


# ------------------------------------------------------------ regressions and flakes


def find_regressions(
    db: HistoryDB,
    night: history.Nightly,
    cases: Mapping[str, Sequence[CaseResult]],
) -> tuple[Regression, ...]:
    """Tests that worked in each runner's previous run and fail in ``night``."""
    found = []
    for run in night.runs:
        previous = history.previous_run(db, run.runner, night.started)
        if previous is None:
            continue
        messages = {(c.classname, c.name): c.message for c in cases.get(run.runner, ())}
        for t in history.transitions(db, previous.id, run.id):
            if t.before in junit.WORKED and t.after in junit.BROKEN:
                found.append(
                    Regression(
                        run.runner,
                        t.classname,
                        t.name,
                        t.stem,
                        t.dtype,
                        t.before,
                        t.after,
                        t.flaky,
                        messages.get((t.classname, t.name), ""),
                        previous.started,
                        previous.commit,
                    )
                )
    return tuple(sorted(found, key=lambda r: (r.name, r.runner)))


def name_suspects(
    root: Path,
    regressions: Sequence[Regression],
    commit: str,
    opinfos: Sequence[Any],
    kinds: Sequence[str],
    test_file: str = paths.TEST_MPS,
) -> tuple[Regression, ...]:
    """Each regression with its suspects: the commits between the PyTorch commit its
    previous run tested and ``commit`` (tonight's) that can affect its OpInfo, in the
    checkout at ``root``. Each commit is analysed once, for every regression."""
    analysis = CommitAnalysis(root, opinfos, kinds, test_file=test_file)
    named = []
    for r in regressions:
        found = analysis.suspects(r.previous_commit, commit, r.stem)
        named.append(replace(r, suspects=found.suspects, suspects_note=found.note))
    return tuple(named)


def find_flaky(
    db: HistoryDB, cases: Mapping[str, Sequence[CaseResult]], window: int
) -> tuple[FlakyTest, ...]:
    """Tonight's disagreeing attempts, and outcomes flipping back and forth over ``window``."""
    found: dict[tuple[str, str, str], FlakyTest] = {}
    for runner, runner_cases in cases.items():
        for c in runner_cases:
            if c.flaky:
                reason = (
                    f"attempts disagreed tonight ({c.attempts} attempts, ended {c.outcome.value})"
                )
                found[(runner, c.classname, c.name)] = FlakyTest(
                    runner, c.classname, c.name, c.stem, c.dtype, (reason,), (c.outcome,)
                )
    for s in history.flipping(db, window):
        reason = f"outcome flipped over the last {len(s.outcomes)} nightlies"
        key = (s.runner, s.classname, s.name)
        earlier = found.get(key)
        reasons = (*earlier.reasons, reason) if earlier else (reason,)
        found[key] = FlakyTest(s.runner, s.classname, s.name, s.stem, s.dtype, reasons, s.outcomes)
    return tuple(sorted(found.values(), key=lambda f: (f.name, f.runner)))


# ---------------------------------------------------------------------------- summary


def pass_rate(counts: Mapping[str, int]) -> float | None:
    """Share of the tests that ran (not skipped) whose op worked on MPS: pass or xpass."""
    ran = sum(counts.values()) - counts.get(Outcome.SKIP.value, 0)
    if ran <= 0:
        return None
    return (counts.get(Outcome.PASS.value, 0) + counts.get(Outcome.XPASS.value, 0)) / ran
