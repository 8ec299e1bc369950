"""The nightly flow: every runner's JUnit -> history -> proposals, regressions, flakes.

The analysis itself is :mod:`pipeline.results.nightly`'s (see its docstring for the rules);
this module strings it together with the tree, the xfail plan and the history database, in
the order that keeps a damaged history untouched. :func:`pipeline.report.nightly.publish`
turns the outcome into the dashboard.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline import state
from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.guide.backlog import BacklogItem
from pipeline.guide.exec_paths import counts_to_json, operator_paths
from pipeline.guide.xfails import decoration_edits, proposal_edit
from pipeline.report.nightly_summary import (
    Backlog,
    NightlyOutcome,
    NightlySummary,
    NightPaths,
    ReportsRead,
    RunCounts,
)
from pipeline.results import decide, device, history, junit, macos, speed
from pipeline.results.device import Device
from pipeline.results.history_db import HistoryDB
from pipeline.results.junit import CaseResult
from pipeline.results.nightly import (
    CHART_NIGHTLIES,
    FlakyTest,
    Proposals,
    Regression,
    collect_reports,
    find_flaky,
    find_regressions,
    name_suspects,
    propose,
    shard_balance,
)
from pipeline.results.table import DtypeTable, display_names, merge_runs
from pipeline.sections import NightlySettings
from pipeline.tree.git import head_commit
from pipeline.tree.index import TreeIndex, load_index

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor


def _diff(settings: Settings, decisions: Sequence[decide.XfailDecision]) -> str:
    """The unified diff of common_mps.py and of the OpInfo files whose DecorateInfos
    ``decisions`` drop (the tree is not touched)."""
    edit = proposal_edit(settings.root, decisions)
    edits = (*([edit] if edit is not None else []), *decoration_edits(settings.root, decisions))
    return "".join(e.diff() for e in edits)


class _HistoryCheck:
    """In a thread: :func:`history.check` (thorough) of ``path``, unless the file is
    byte for byte what the last nightly sealed and a whole check is not due
    (:func:`history.sealed`); :meth:`result` waits for it and raises what it raised."""

    def __init__(self, path: Path) -> None:
        self._error: BaseException | None = None
        self.full = True  # the whole integrity_check ran (set in the thread)
        # looked at now: the night's own connection, opened while the thread runs, makes a
        # -wal file that the thread would take for another program's writes
        wal = os.path.lexists(f"{path}-wal")
        self._thread = threading.Thread(target=self._run, args=(path, wal), daemon=True)
        self._thread.start()

    def _run(self, path: Path, wal: bool) -> None:
        try:
            if history.sealed(path, wal=wal):
                self.full = False
            else:
                history.check(path, thorough=True)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _devices(
    results: Path, runners: Mapping[str, object], warnings: list[str]
) -> dict[str, Device | None]:
    """Each runner's recorded device; one that cannot be read is unknown, with a warning
    (its test results still count)."""
    found: dict[str, Device | None] = {}
    for runner in runners:
        try:
            found[runner] = device.read(results / runner)
        except PipelineError as exc:
            warnings.append(f"device: {exc}; {runner}'s device is unknown")
            found[runner] = None
    return found


def _place(made: Path, final: Path) -> None:
    """Move the file ``made`` to ``final`` in one rename (a copy beside it first when
    they are on different file systems)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(made, final)
    except OSError:
        beside = final.with_name(f".{final.name}.new")
        shutil.copyfile(made, beside)
        os.replace(beside, final)


# Reports over this size in all are merged by a child process, on the other core, while
# this one records and analyses the night: the merge is ElementTree work that holds the
# GIL (0.6 s at fleet size, 3 runners × 20,000 results); below it, a child's start-up
# (about 0.1 s) costs more than it saves.
MERGE_APART_BYTES = 4 << 20


class _Merges:
    """Each runner's reports merged into one file in ``scratch`` (junit.merge_reports),
    started at once, apart in a child process when they are large; :meth:`warnings` waits
    for them. Used as a context manager: the child is gone when it exits."""

    def __init__(self, reports: dict[str, tuple[Path, ...]], runners: Sequence[str],
                 scratch: Path) -> None:  # fmt: skip
        self.made: dict[str, Path] = {runner: scratch / f"{runner}.xml" for runner in runners}
        self._said: list[str] = []  # what the merges done here said
        self._apart: list[Future[tuple[str, ...]]] = []
        self._pool: ProcessPoolExecutor | None = None
        size = sum(p.stat().st_size for r in runners for p in reports[r] if p.is_file())
        if size <= MERGE_APART_BYTES:
            for runner, out in self.made.items():
                self._said.extend(junit.merge_reports(reports[runner], out))
            return
        import multiprocessing  # only for a night this large
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        for runner, out in self.made.items():
            self._apart.append(self._pool.submit(junit.merge_reports, reports[runner], out))

    def warnings(self) -> list[str]:
        """What the merges said, once they are done (a merge's error is raised here)."""
        return self._said + [w for found in self._apart for w in found.result()]

    def __enter__(self) -> _Merges:
        return self

    def __exit__(self, *_: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class _Reports:
    """Every runner's reports under ``--results``, read (see :func:`_read_reports`)."""

    paths: dict[str, tuple[Path, ...]]
    warnings: list[str]  # the night's, added to as it goes
    cases: dict[str, tuple[CaseResult, ...]]  # of the runners any testcase was read from
    skipped: tuple[str, ...]  # files nothing could be read from
    walls: dict[str, tuple[junit.ReportWall, ...]]
    total: int  # files found


def _read_reports(settings: Settings, results: Path) -> _Reports:
    """Every runner's reports under ``results``, read. A report that cannot be read is a
    warning (and in summary.json's "reports"); only when none can be read at all is there
    nothing to record (an input error, exit 2)."""
    reports, found = collect_reports(results, settings.runners)
    warnings = list(found)
    cases: dict[str, tuple[CaseResult, ...]] = {}
    skipped: list[str] = []
    walls: dict[str, tuple[junit.ReportWall, ...]] = {}
    for runner, paths in reports.items():
        parsed = junit.parse_reports(paths)
        warnings.extend(parsed.warnings)
        skipped.extend(parsed.skipped)
        if parsed.cases:
            cases[runner] = parsed.cases
            walls[runner] = parsed.walls
        else:
            # recorded as an empty run, it would hide tomorrow's regressions (compared with
            # no results) and look like a night it did not have
            warnings.append(
                f"{runner}: no testcase could be read from its {len(paths)} report(s); "
                "it is left out of tonight's record"
            )
    n_reports = sum(len(paths) for paths in reports.values())
    if not cases:
        shown = "; ".join(warnings[:3]) + ("; ..." if len(warnings) > 3 else "")
        raise PipelineError(
            f"--results {results}: none of the {n_reports} JUnit report(s) held a testcase "
            f"that could be read, so no nightly was recorded ({shown})"
        )
    missing = [r for r in settings.runners if r not in cases]
    if missing:
        warnings.append(f"no results from {', '.join(missing)} (did its jobs run?)")
    return _Reports(reports, warnings, cases, tuple(skipped), walls, n_reports)


@dataclass(frozen=True)
class _Tree:
    """What the night reads of the tree: its index, the backlog, the overloads per MPS
    path; all None, with why, when the tree cannot be read (the results still count)."""

    index: TreeIndex | None
    backlog: tuple[BacklogItem, ...] | None
    path_counts: dict[str, int] | None
    error: str = ""


def _read_tree(
    settings: Settings, backlog_of: Callable[[TreeIndex], Sequence[BacklogItem]]
) -> _Tree:
    index: TreeIndex | None = None
    items: tuple[BacklogItem, ...] | None = None
    try:
        index = load_index(settings.tree)
        items = tuple(backlog_of(index))
        return _Tree(index, items, counts_to_json(operator_paths(index).counts()))
    except PipelineError as exc:
        return _Tree(index, items, None, str(exc))


def _rules(settings: Settings, **given: int | None) -> NightlySettings:
    """The nightly's rules: each one given, else its setting (``nightly.*``); refused when
    they cannot work together."""
    rules = replace(settings.nightly, **{k: v for k, v in given.items() if v is not None})
    if (
        rules.min_passes < 1
        or rules.flaky_window < 2
        or (rules.keep < max(rules.min_passes, rules.flaky_window))
    ):
        raise PipelineError(
            "nightly: --min-passes must be >= 1, --flaky-window >= 2, and --keep at least both"
        )
    if rules.backups < 0:
        raise PipelineError("nightly: --backups must be >= 0 (0: keep no backups)")
    return rules


@contextlib.contextmanager
def _damage_first(check: _HistoryCheck | None) -> Iterator[None]:
    """On any error, the history check's verdict first: what broke may be the damage the
    check is about to report, and a damaged history is the error to report."""
    try:
        yield
    except BaseException:
        if check is not None:
            check.result()
        raise


@dataclass(frozen=True)
class _Gathered:
    """The night read, beside the history check: reports, tree, table, merges."""

    reports: _Reports
    tree: _Tree
    table: DtypeTable
    merges: _Merges
    merged: dict[Path, Path]  # scratch file -> its place under the dashboard's junit/


def _gather(
    settings: Settings,
    results: Path,
    stack: contextlib.ExitStack,
    dashboard_dir: Path,
    backlog_of: Callable[[TreeIndex], Sequence[BacklogItem]],
) -> _Gathered:
    """Read every report and the tree, and start merging each runner's reports into
    scratch space (a damaged history leaves no dashboard behind: they are put in place
    once the night is recorded)."""
    reports = _read_reports(settings, results)
    tree = _read_tree(settings, backlog_of)
    names = display_names(tree.index.opinfos) if tree.index is not None else {}
    table = merge_runs(reports.cases, names)
    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mps-pipeline-nightly-")))
    merges = stack.enter_context(_Merges(reports.paths, list(reports.cases), scratch))
    merged = {out: dashboard_dir / "junit" / out.name for out in merges.made.values()}
    if tree.error:
        reports.warnings.append(f"cannot read the tree at {settings.root}: {tree.error}")
    return _Gathered(reports, tree, table, merges, merged)


def _proposals(
    db: HistoryDB, settings: Settings, got: _Gathered, night: history.Nightly, min_passes: int
) -> Proposals | None:
    """The xfail removals and macOS-version moves the history confirms, with their diff
    (None: the tree could not be read)."""
    index, warnings = got.tree.index, got.reports.warnings
    if index is None:
        return None
    window = history.nightlies(db, min_passes, until=night.started)
    proposals = propose(db, index, got.table, window, settings.runners, min_passes)
    moves = macos.propose_moves(
        db, index, got.table, window, settings.runners, settings.runner_macos, min_passes
    )
    warnings.extend(macos.held_warnings(moves.held))
    if moves.decisions:
        proposals = replace(proposals, decisions=proposals.decisions + moves.decisions, note="")
    if proposals.decisions:
        try:
            proposals = replace(proposals, diff=_diff(settings, proposals.decisions), note="")
        except PipelineError as exc:
            warnings.append(f"could not write the xfail diff: {exc}")
    return proposals


@dataclass(frozen=True)
class _Found:
    """What the history says of the night: proposals, regressions, flakes, the charts."""

    night: history.Nightly
    proposals: Proposals | None
    regressions: tuple[Regression, ...]
    flaky: tuple[FlakyTest, ...]
    trend: tuple[tuple[str, str, dict[str, int]], ...]
    paths: tuple[tuple[str, dict[str, int]], ...]


def _record(
    db: HistoryDB,
    settings: Settings,
    got: _Gathered,
    rules: NightlySettings,
    devices: Mapping[str, Device | None],
    results: Path,
    recorded: tuple[str | None, str | None, str],
) -> _Found:
    """The night recorded in ``db``'s transaction, held open (``recorded``: its commit,
    None for the tree's HEAD, started and source), its kernel timings beside it, and
    analysed against the history."""
    commit, started, source = recorded
    night = history.record_nightly(
        db, got.reports.cases,
        commit=head_commit(settings.root) if commit is None else commit,
        started=started, source=source,
        hold=True,  # committed by _commit_and_prune, once the check is done
    )  # fmt: skip
    warnings = got.reports.warnings
    if got.tree.path_counts is not None:
        history.record_paths(db, (r.id for r in night.runs), got.tree.path_counts)
    runs = {r.runner: r.id for r in night.runs}
    # each run's device, a VM's too (its pass/fail results stay marked as a VM's); one
    # without a device.json is unknown: no row
    history.record_devices(
        db, {runs[r]: d for r, d in devices.items() if d is not None and r in runs}
    )
    # each runner's kernel micro-benchmarks, when its results hold a speed.json; a VM's are
    # left out, with the reason
    refused = {r: why for r, d in devices.items() if (why := device.refuse_timings(d))}
    warnings.extend(speed.record_night(db, runs, results, refused))
    return _Found(
        night,
        _proposals(db, settings, got, night, rules.min_passes),
        find_regressions(db, night, got.reports.cases),
        find_flaky(db, got.reports.cases, rules.flaky_window),
        history.outcome_counts(db, CHART_NIGHTLIES),
        history.path_counts(db, CHART_NIGHTLIES),
    )


def _commit_and_prune(
    db: HistoryDB, got: _Gathered, check: _HistoryCheck | None, keep: int
) -> None:
    """Commit the night once the merges and the history check are done (a damaged history
    raises here, and closing ``db`` rolls the night back), then prune."""
    warnings = got.reports.warnings
    warnings.extend(w for w in dict.fromkeys(got.merges.warnings()) if w not in warnings)
    if check is not None:
        check.result()
    db.commit()
    pruned = history.prune(db, keep)
    if pruned:
        warnings.append(f"history: dropped the {pruned} oldest nightlies (keeping {keep})")


def _summary(
    settings: Settings,
    got: _Gathered,
    found: _Found,
    results: Path,
    devices: Mapping[str, Device | None],
    min_passes: int,
) -> NightlySummary:
    """The night's summary, its regressions with their suspects named (after the commit:
    the git work it takes holds no lock on the history)."""
    night, proposals, tree = found.night, found.proposals, got.tree
    regressions = found.regressions
    if regressions:
        opinfos = tree.index.opinfos if tree.index is not None else ()
        regressions = name_suspects(settings.root, regressions, night.commit, opinfos,
                                    settings.test_kinds, settings.test_file)  # fmt: skip
    backlog = Backlog(tree.backlog, None) if tree.backlog is not None else Backlog((), tree.error)
    return NightlySummary(
        started=night.started,
        commit=night.commit,
        source=night.runs[0].source if night.runs else "",
        runners=night.runners,
        required_runners=tuple(settings.runners),
        min_passes=min_passes,
        counts={runner: got.table.counts(runner) for runner in night.runners},
        table=got.table,
        shards=shard_balance(results, got.reports.walls),
        devices={runner: devices.get(runner) for runner in night.runners},
        proposals=proposals.decisions if proposals else (),
        proposal_note=proposals.note if proposals else "needs the tree index (see warnings)",
        judged_nightlies=proposals.nightlies if proposals else (),
        candidates=proposals.candidates if proposals else (),
        diff=proposals.diff if proposals else "",
        not_judged=proposals.not_judged if proposals else (),
        regressions=regressions,
        flaky=found.flaky,
        backlog=backlog,
        paths=tuple(NightPaths(started, c) for started, c in found.paths),
        history=tuple(RunCounts(started, runner, c) for started, runner, c in found.trend),
        reports=ReportsRead(got.reports.total, got.reports.skipped),
        warnings=tuple(got.reports.warnings),
    )


def run_nightly(
    settings: Settings,
    results: Path,
    *,
    history_at: history.HistoryLocation | Path | None = None,
    dashboard_dir: Path | None = None,
    min_passes: int | None = None,
    flaky_window: int | None = None,
    keep: int | None = None,
    backups: int | None = None,
    commit: str | None = None,
    source: str = "",
    started: str | None = None,
    backlog_of: Callable[[TreeIndex], Sequence[BacklogItem]],
    verify: bool = True,
) -> NightlyOutcome:
    """Record one nightly in the history and analyse it; see the module docstring.

    ``backlog_of`` is :func:`pipeline.guide.backlog.backlog`, passed in by the caller.

    The merged JUnit reports are written to ``dashboard_dir/junit/`` (default
    ``<state_dir>/dashboard``); the rest of the dashboard is the report layer's
    (:func:`pipeline.report.nightly.publish`).

    The history is ``history_at`` (an SQLite file or a server), else the one the settings
    name (:func:`pipeline.results.history.locate`).

    Order: the history file is checked (a damaged one is an input error and stays untouched)
    beside the work: while every report is read and merged, the night recorded in one
    transaction and analysed. That transaction is committed only once the check has passed
    (a damaged history raises, the transaction is rolled back, the file never changed), and
    only then pruned. After that, ``backups`` copies of the history are kept in its
    ``backups/`` folder, made with its seal (:func:`pipeline.results.history.backup_and_seal`).
    ``verify`` False skips the check (for the benchmark that shows its cost).
    ``min_passes``, ``flaky_window``, ``keep``, ``backups``: None is the setting's.
    A history server has no file to check, back up or seal: it keeps its own, and its
    transaction is what keeps a failed night out.
    """
    rules = _rules(settings, min_passes=min_passes, flaky_window=flaky_window, keep=keep,
                   backups=backups)  # fmt: skip
    at = history.locate(history_at, settings)
    history_path = None if at.is_server else at.file
    dashboard_dir = dashboard_dir or state.dashboard_dir(settings.state_dir)
    checked = history_path is not None and os.path.lexists(history_path)
    with contextlib.ExitStack() as stack:
        # A damaged history stops the night before anything is committed to it: the full
        # integrity_check (about 0.1 s for 30 nights of 21,000 results, 1.5 s for 180 nights of
        # 3 × 20,000, in SQLite, without the GIL) runs in a thread, on the file as it was, while
        # this one does the night's work; connect() then does not check again. In WAL mode what
        # the night writes stays in the -wal file until it is committed, so the check reads a
        # file nothing changes under it.
        check = _HistoryCheck(history_path) if history_path and checked and verify else None
        with _damage_first(check):
            got = _gather(settings, results, stack, dashboard_dir, backlog_of)
            if check is not None and history_path and history.writes_on_open(history_path):
                check.result()  # a migration, or a switch to WAL, waits for the check (rare)
        devices = _devices(results, got.reports.cases, got.reports.warnings)
        with _damage_first(check):
            db = history.writer(at, checked=checked, wait=settings.lock_wait,
                                on_wait=lambda: _waiting(settings, at))  # fmt: skip
        # closed last: a failed night is rolled back once the check has said its word
        with contextlib.closing(db), _damage_first(check):
            found = _record(db, settings, got, rules, devices, results, (commit, started, source))
            _commit_and_prune(db, got, check, rules.keep)
        # closed, its WAL merged: the file as the next night should find it
        full = (check is None or check.full) if verify else None
        if history_path is not None:
            history.backup_and_seal(history_path, found.night.started, rules.backups, full=full)
        for out, final in got.merged.items():
            _place(out, final)
        summary = _summary(settings, got, found, results, devices, rules.min_passes)
        return NightlyOutcome(summary, dashboard_dir, tuple(got.merged.values()))


def _waiting(settings: Settings, at: history.HistoryLocation) -> None:
    print(
        f"waiting up to {settings.lock_wait:g} s for the history's write lock, held by another "
        f"process: {at}",
        file=sys.stderr,
        flush=True,
    )
