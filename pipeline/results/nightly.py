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

:func:`run_nightly` does all of it and returns the night's ``summary.json`` data;
:func:`pipeline.report.nightly.publish` turns that into the dashboard.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.impact.suspects import CommitAnalysis, Suspect
from pipeline.results import decide, history, junit, macos
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import DtypeTable, display_names, merge_runs
from pipeline.tree.git import head_commit
from pipeline.tree.index import TreeIndex, load_index

SCHEMA = 2  # of summary.json (2: plain table cells are just their outcome; shards)
DEFAULT_MIN_PASSES = 3
DEFAULT_FLAKY_WINDOW = 5
DEFAULT_KEEP = 180
DEFAULT_DASHBOARD = "dashboard"  # relative to the state directory
CHART_NIGHTLIES = 60


@dataclass(frozen=True)
class Regression:
    """A test that worked in ``runner``'s previous run (``previous``) and fails now."""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "before": self.before.value,
            "after": self.after.value,
            "suspects": [s.to_dict() for s in self.suspects],
        }


@dataclass(frozen=True)
class FlakyTest:
    """A test whose result on ``runner`` cannot be trusted, and why."""

    runner: str
    classname: str
    name: str
    stem: str | None
    dtype: str | None
    reasons: tuple[str, ...]
    outcomes: tuple[Outcome, ...]  # over the flaky window, oldest first (or tonight's only)


@dataclass(frozen=True)
class Candidate:
    """An entry some of whose dtypes xpass everywhere, but not yet for enough nightlies."""

    list: str
    function: str
    key: str
    streaks: dict[str, int]  # dtype -> consecutive nightlies, newest back, it would go


@dataclass(frozen=True)
class Proposals:
    """What :func:`propose` found: the removals to make, the ones still waiting, the diff."""

    decisions: tuple[decide.XfailDecision, ...]  # confirmed by history; actionable only
    candidates: tuple[Candidate, ...]
    diff: str
    nightlies: tuple[str, ...]  # the window judged, newest first
    note: str  # why there are none, when there are none


# ---------------------------------------------------------------------------- results


def collect_reports(
    results: Path, runners: Sequence[str]
) -> tuple[dict[str, tuple[Path, ...]], tuple[str, ...]]:
    """Runner -> its JUnit files under ``results`` (configured runners first), and warnings."""
    if not results.is_dir():
        raise PipelineError(
            f"--results {results}: no such directory; it should hold one folder per runner "
            "configuration (results/<runner>/shard-<n>.xml)"
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
    order = [r for r in runners if r in found] + sorted(r for r in found if r not in runners)
    return {r: tuple(found[r]) for r in order}, tuple(warnings)


_SHARD_NUMBER = re.compile(r"shard-(\d+)")


def shard_balance(
    results: Path, walls: Mapping[str, Sequence[junit.ReportWall]]
) -> dict[str, dict[str, Any]]:
    """summary.json's ``shards``: per runner, each report's wall time (a shard's, in the
    nightly workflow's layout) and the slowest shard over the mean."""
    out: dict[str, dict[str, Any]] = {}
    for runner, found in walls.items():
        if not found:
            continue
        reports = []
        for w in found:
            path = Path(w.source)
            rel = path.relative_to(results).as_posix() if path.is_relative_to(results) else w.source
            number = _SHARD_NUMBER.fullmatch(path.stem)
            reports.append(
                {
                    "report": rel,
                    "shard": int(number.group(1)) if number else None,
                    "seconds": w.seconds,
                    "measured": w.measured,
                    "tests": w.tests,
                }
            )
        seconds = [r["seconds"] for r in reports]
        mean = sum(seconds) / len(seconds)
        out[runner] = {
            "reports": reports,
            "total_seconds": round(sum(seconds), 6),
            "max_seconds": max(seconds),
            "mean_seconds": round(mean, 6),
            "ratio": round(max(seconds) / mean, 4) if mean > 0 else None,
        }
    return out


# -------------------------------------------------------------------------- proposals


def propose(
    db: sqlite3.Connection,
    index: TreeIndex,
    latest: DtypeTable,
    window: Sequence[history.Nightly],
    required: Sequence[str],
    min_passes: int,
) -> Proposals:
    """xfail removals confirmed over ``window`` (the last nightlies, newest = ``latest``)."""
    starts = tuple(n.started for n in window)
    stem_of = {info.key: info.stem for info in index.opinfos}
    entries = [e for e in index.xfails.entries if e.key in stem_of]
    tonight = decide.decide_xfails(entries, latest, required, opinfos=index.opinfos)
    live = [(e, d) for e, d in zip(entries, tonight, strict=True) if d.action != "keep"]
    if not live:
        return Proposals((), (), "", starts, "nothing xpassed on every runner tonight")
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
            reason = (
                f"{', '.join(sorted(going))}: xpassed on {', '.join(required)} in each of "
                f"the last {min_passes} nightlies ({span})"
            )
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
    return Proposals(tuple(proposals), tuple(candidates), "", starts, note)


def _diff(settings: Settings, decisions: Sequence[decide.XfailDecision]) -> str:
    """The unified diff of common_mps.py that ``decisions`` make (the tree is not touched)."""
    edit = macos.proposal_edit(settings.root, decisions)
    return edit.diff() if edit is not None else ""


# ------------------------------------------------------------ regressions and flakes


def find_regressions(
    db: sqlite3.Connection,
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
) -> tuple[Regression, ...]:
    """Each regression with its suspects: the commits between the PyTorch commit its
    previous run tested and ``commit`` (tonight's) that can affect its OpInfo, in the
    checkout at ``root``. Each commit is analysed once, for every regression."""
    analysis = CommitAnalysis(root, opinfos, kinds)
    named = []
    for r in regressions:
        found = analysis.suspects(r.previous_commit, commit, r.stem)
        named.append(replace(r, suspects=found.suspects, suspects_note=found.note))
    return tuple(named)


def find_flaky(
    db: sqlite3.Connection, cases: Mapping[str, Sequence[CaseResult]], window: int
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


def _backlog_dict(items: Sequence[Any] | None, error: str) -> dict[str, Any]:
    """summary.json's backlog: counts by workflow and the items, or why there are none."""
    if items is None:
        return {"error": error, "counts": {}, "total": 0, "items": []}
    counts: dict[str, int] = {}
    for item in items:
        counts[item.workflow.value] = counts.get(item.workflow.value, 0) + 1
    return {
        "error": None,
        "counts": counts,
        "total": len(items),
        "items": [item.to_dict() for item in items],
    }


def build_summary(
    *,
    night: history.Nightly,
    settings: Settings,
    table: DtypeTable,
    proposals: Proposals | None,
    regressions: Sequence[Regression],
    flaky: Sequence[FlakyTest],
    backlog_items: Sequence[Any] | None,
    backlog_error: str,
    trend: Sequence[tuple[str, str, dict[str, int]]],
    min_passes: int,
    reports: tuple[int, Sequence[str]],
    warnings: Sequence[str],
    shards: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The nightly's summary.json (schema ``SCHEMA``, documented in docs/machine-output.md):
    what the dashboard and --json show."""
    counts = {runner: table.counts(runner) for runner in night.runners}
    return {
        "schema": SCHEMA,
        "started": night.started,
        "commit": night.commit,
        "source": night.runs[0].source if night.runs else "",
        "runners": list(night.runners),
        "required_runners": list(settings.runners),
        "missing_runners": [r for r in settings.runners if r not in night.runners],
        "min_passes": min_passes,
        "counts": counts,
        "pass_rate": {runner: pass_rate(c) for runner, c in counts.items()},
        "table": table.to_dict(compact=True),
        "shards": dict(shards or {}),
        "proposals": [d.to_dict() for d in proposals.decisions] if proposals else [],
        "proposal_note": proposals.note if proposals else "needs the tree index (see warnings)",
        "judged_nightlies": list(proposals.nightlies) if proposals else [],
        "candidates": [
            {"list": c.list, "function": c.function, "key": c.key, "streaks": c.streaks}
            for c in (proposals.candidates if proposals else ())
        ],
        "diff": proposals.diff if proposals else "",
        "regressions": [r.to_dict() for r in regressions],
        "flaky": [
            {**f.__dict__, "reasons": list(f.reasons), "outcomes": [o.value for o in f.outcomes]}
            for f in flaky
        ],
        "backlog": _backlog_dict(backlog_items, backlog_error),
        "history": [
            {"started": started, "runner": runner, "counts": c, "pass_rate": pass_rate(c)}
            for started, runner, c in trend
        ],
        "reports": {"total": reports[0], "skipped": list(reports[1])},
        "warnings": list(warnings),
    }


# ------------------------------------------------------------------------------- run


@dataclass(frozen=True)
class NightlyOutcome:
    """A recorded nightly: its summary.json data, its table, and where its dashboard goes."""

    summary: dict[str, Any]
    table: DtypeTable
    dashboard_dir: Path
    junit_files: tuple[Path, ...]  # one merged report per runner, in dashboard_dir/junit/


class _HistoryCheck:
    """In a thread: :func:`history.check` (thorough) of ``path``, unless the file is
    byte for byte what the last nightly sealed and a whole check is not due
    (:func:`history.sealed`); :meth:`result` waits for it and raises what it raised."""

    def __init__(self, path: Path) -> None:
        self._error: BaseException | None = None
        self.full = True  # the whole integrity_check ran (set in the thread)
        self._thread = threading.Thread(target=self._run, args=(path,), daemon=True)
        self._thread.start()

    def _run(self, path: Path) -> None:
        try:
            if history.sealed(path):
                self.full = False
            else:
                history.check(path, thorough=True)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


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


def _read_reports(settings: Settings, results: Path) -> tuple[
    dict[str, tuple[Path, ...]],
    list[str],
    dict[str, tuple[CaseResult, ...]],
    list[str],
    dict[str, tuple[junit.ReportWall, ...]],
    int,
]:  # fmt: skip
    """Every runner's reports under ``results``, read: (reports, warnings, cases, skipped
    files, wall times, number of reports). A report that cannot be read is a warning (and
    in summary.json's "reports"); only when none can be read at all is there nothing to
    record (an input error, exit 2)."""
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
    return reports, warnings, cases, skipped, walls, n_reports


def run_nightly(
    settings: Settings,
    results: Path,
    *,
    history_path: Path | None = None,
    dashboard_dir: Path | None = None,
    min_passes: int = DEFAULT_MIN_PASSES,
    flaky_window: int = DEFAULT_FLAKY_WINDOW,
    keep: int = DEFAULT_KEEP,
    backups: int = history.DEFAULT_BACKUPS,
    commit: str | None = None,
    source: str = "",
    started: str | None = None,
    backlog_of: Callable[[TreeIndex], Sequence[Any]],
    verify: bool = True,
) -> NightlyOutcome:
    """Record one nightly in the history and analyse it; see the module docstring.

    ``backlog_of`` is :func:`pipeline.guide.backlog.backlog`, passed in by the caller:
    interpreting results sits below the guide's domain logic.

    The merged JUnit reports are written to ``dashboard_dir/junit/`` (default
    ``<state_dir>/dashboard``); the rest of the dashboard is the report layer's
    (:func:`pipeline.report.nightly.publish`).

    Order: the history is checked (a damaged one is an input error and stays untouched)
    beside the work: while every report is read and merged, the night recorded in one
    transaction and analysed. That transaction is committed only once the check has passed
    (a damaged history raises, the transaction is rolled back, the file never changed), and
    only then pruned. After that, ``backups`` copies of the history are kept in its
    ``backups/`` folder, made with its seal (:func:`pipeline.results.history.backup_and_seal`).
    ``verify`` False skips the check (for the benchmark that shows its cost).
    """
    if min_passes < 1 or flaky_window < 2 or keep < max(min_passes, flaky_window):
        raise PipelineError(
            "nightly: --min-passes must be >= 1, --flaky-window >= 2, and --keep at least both"
        )
    if backups < 0:
        raise PipelineError("nightly: --backups must be >= 0 (0: keep no backups)")
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-nightly-") as tmp:
        scratch = Path(tmp)
        history_path = history_path or settings.state_dir / history.DEFAULT_FILE
        dashboard_dir = dashboard_dir or settings.state_dir / DEFAULT_DASHBOARD
        checked = os.path.lexists(history_path)
        # A damaged history stops the night before anything is committed to it: the full
        # integrity_check (about 0.1 s for 30 nights of 21,000 results, 1.5 s for 180 nights of
        # 3 × 20,000, in SQLite, without the GIL) runs in a thread, on the file as it was, while
        # this one does the night's work; connect() then does not check again. In WAL mode what
        # the night writes stays in the -wal file until it is committed, so the check reads a
        # file nothing changes under it.
        check = _HistoryCheck(history_path) if checked and verify else None
        checker = check  # what the check was, once it is done
        try:
            reports, warnings, cases, skipped, walls, n_reports = _read_reports(settings, results)
            index: TreeIndex | None = None
            backlog_items: Sequence[Any] | None = None
            backlog_error = tree_warning = ""
            try:
                index = load_index(settings.tree)
                backlog_items = backlog_of(index)
            except PipelineError as exc:
                backlog_error = str(exc)
                tree_warning = f"cannot read the tree at {settings.root}: {exc}"
            table = merge_runs(cases, display_names(index.opinfos) if index is not None else {})
            # merged beside the check too, into scratch space: a damaged history leaves no
            # dashboard behind; they are put in place once the night is recorded
            merged = {}
            for runner in cases:
                out = scratch / f"{runner}.xml"
                found = junit.merge_reports(reports[runner], out)
                warnings.extend(w for w in found if w not in warnings)
                merged[out] = dashboard_dir / "junit" / f"{runner}.xml"
            if check is not None and history.writes_on_open(history_path):
                check.result()  # a migration, or a switch to WAL, waits for the check (rare)
                check = None
        except BaseException:
            if check is not None:
                check.result()  # a damaged history is the error to report first
            raise
        if tree_warning:
            warnings.append(tree_warning)
        try:
            db = history.connect(history_path, checked=checked)
        except BaseException:
            if check is not None:
                check.result()
            raise
        try:
            night = history.record_nightly(
                db,
                cases,
                commit=head_commit(settings.root) if commit is None else commit,
                started=started,
                source=source,
                hold=check is not None,
            )
            proposals = None
            if index is not None:
                window = history.nightlies(db, min_passes, until=night.started)
                proposals = propose(db, index, table, window, settings.runners, min_passes)
                moves = macos.propose_moves(
                    db, index, table, window, settings.runners, settings.runner_macos, min_passes
                )
                warnings.extend(macos.held_warnings(moves.held))
                if moves.decisions:
                    proposals = replace(
                        proposals, decisions=proposals.decisions + moves.decisions, note=""
                    )
                if proposals.decisions:
                    try:
                        diff = _diff(settings, proposals.decisions)
                        proposals = Proposals(
                            proposals.decisions, proposals.candidates, diff, proposals.nightlies, ""
                        )
                    except PipelineError as exc:
                        warnings.append(f"could not write the xfail diff: {exc}")
            regressions = find_regressions(db, night, cases)
            flaky = find_flaky(db, cases, flaky_window)
            trend = history.outcome_counts(db, CHART_NIGHTLIES)
            if check is not None:
                check.result()  # damaged: raises, and closing db rolls the night back
                check = None
                db.commit()
            pruned = history.prune(db, keep)
            if pruned:
                warnings.append(f"history: dropped the {pruned} oldest nightlies (keeping {keep})")
        except BaseException:
            if check is not None:
                check.result()  # what broke may be the damage the check is about to report
            raise
        finally:
            db.close()
        # closed, its WAL merged: the file as the next night should find it
        full = (checker is None or checker.full) if verify else None
        history.backup_and_seal(history_path, night.started, backups, full=full)
        for out, final in merged.items():
            _place(out, final)
        if regressions:
            opinfos = index.opinfos if index is not None else ()
            regressions = name_suspects(
                settings.root, regressions, night.commit, opinfos, settings.test_kinds
            )

        summary = build_summary(
            night=night,
            settings=settings,
            table=table,
            proposals=proposals,
            regressions=regressions,
            flaky=flaky,
            backlog_items=backlog_items,
            backlog_error=backlog_error,
            trend=trend,
            min_passes=min_passes,
            reports=(n_reports, tuple(skipped)),
            warnings=warnings,
            shards=shard_balance(results, walls),
        )
        return NightlyOutcome(summary, table, dashboard_dir, tuple(merged.values()))
