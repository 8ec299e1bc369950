"""`nightly --results DIR`: every runner's JUnit → history → proposals, regressions, dashboard.

``DIR`` holds one folder per runner configuration, as the nightly workflow downloads its
artifacts: ``DIR/<runner>/shard-<n>.xml``. Any ``*.xml`` below a runner's folder is one of
its shards; the runner is the nearest enclosing folder named like a configured runner
(``settings.runners``), else the top-level folder. Each runner's shards are merged into one
result set, and the night is recorded in the history database as one run per runner.

Then, from the history:

- **xfail removals**: a dtype's xfail goes only when the dtype xpassed, not flaky, on every
  configured runner in each of the last ``--min-passes`` nightlies. Each of those nights is
  judged by :func:`pipeline.results.decide.decide_xfails` with ``required_runners`` (so
  macOS-version lists, skip lists and "not run" keep their rules), and a dtype is proposed
  when every one of them would drop it. The proposal is a unified diff of common_mps.py,
  not applied.
- **regressions**: a test that worked (pass or xpass) in a runner's previous run and fails
  (fail, error, or xfail) now.
- **flaky tests**: attempts that disagreed tonight (a rerun passed), or an outcome that
  changed and changed back over the last ``--flaky-window`` nightlies.
- **migration backlog**: the ``backlog`` command's list, counted by workflow.

Everything goes to the dashboard directory (index.html, summary.md, summary.json, the
diff, and one merged JUnit file per runner). Exit status: 0, or 1 when there are
regressions (the job shows red; the outputs are written first), 2 on an error.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from pipeline.results import history
from pipeline.commands.backlog import BacklogItem, backlog
from pipeline.config import Settings
from pipeline.edit.xfails import apply_xfail_changes
from pipeline.errors import PipelineError
from pipeline.report import dashboard, render
from pipeline.report.console import terminal
from pipeline.results import decide, junit
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import DtypeTable, merge_runs
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.paths import COMMON_MPS

SCHEMA = 1
DEFAULT_MIN_PASSES = 3
DEFAULT_FLAKY_WINDOW = 5
DEFAULT_KEEP = 180
CHART_NIGHTLIES = 60
TOP_BACKLOG = 15
MAX_LISTED = 50  # regressions / flaky tests listed in summary.md (the JSON has all)
DIFF_FILE = "xfail-removals.diff"

WORKED = frozenset({Outcome.PASS, Outcome.XPASS})
BROKEN = frozenset({Outcome.FAIL, Outcome.ERROR, Outcome.XFAIL})


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


def _git_head(root: Path) -> str:
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _names(index: TreeIndex | None) -> dict[str, str]:
    if index is None:
        return {}
    return {
        info.stem: info.name + (f" ({info.variant_test_name})" if info.variant_test_name else "")
        for info in index.opinfos
    }


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
    rel = COMMON_MPS
    text = (settings.root / rel).read_text(encoding="utf-8")
    return apply_xfail_changes(text, rel, decide.to_changes(decisions)).diff()


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
            if t.before in WORKED and t.after in BROKEN:
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
                    )
                )
    return tuple(sorted(found, key=lambda r: (r.name, r.runner)))


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


def _outcomes(values: Sequence[Outcome]) -> list[str]:
    return [o.value for o in values]


def _backlog_dict(items: Sequence[BacklogItem] | None, error: str) -> dict[str, Any]:
    if items is None:
        return {"error": error, "counts": {}, "total": 0, "items": []}
    counts: dict[str, int] = {}
    for item in items:
        counts[item.workflow] = counts.get(item.workflow, 0) + 1
    return {
        "error": None,
        "counts": counts,
        "total": len(items),
        "items": [{**item.__dict__, "mps_kernels": list(item.mps_kernels)} for item in items],
    }


def build_summary(
    *,
    night: history.Nightly,
    settings: Settings,
    table: DtypeTable,
    proposals: Proposals | None,
    regressions: Sequence[Regression],
    flaky: Sequence[FlakyTest],
    backlog_items: Sequence[BacklogItem] | None,
    backlog_error: str,
    trend: Sequence[tuple[str, str, dict[str, int]]],
    min_passes: int,
    warnings: Sequence[str],
) -> dict[str, Any]:
    """The nightly's summary.json (schema 1): what the dashboard and --json show."""
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
        "table": table.to_dict(),
        "proposals": [d.to_dict() for d in proposals.decisions] if proposals else [],
        "proposal_note": proposals.note if proposals else "needs the tree index (see warnings)",
        "judged_nightlies": list(proposals.nightlies) if proposals else [],
        "candidates": [
            {"list": c.list, "function": c.function, "key": c.key, "streaks": c.streaks}
            for c in (proposals.candidates if proposals else ())
        ],
        "diff": proposals.diff if proposals else "",
        "regressions": [
            {**r.__dict__, "before": r.before.value, "after": r.after.value} for r in regressions
        ],
        "flaky": [
            {**f.__dict__, "reasons": list(f.reasons), "outcomes": _outcomes(f.outcomes)}
            for f in flaky
        ],
        "backlog": _backlog_dict(backlog_items, backlog_error),
        "history": [
            {"started": started, "runner": runner, "counts": c, "pass_rate": pass_rate(c)}
            for started, runner, c in trend
        ],
        "warnings": list(warnings),
    }


def _fence(text: str) -> str:
    """A code fence longer than any backtick run in ``text``."""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _more(count: int) -> str:
    if count == 0:
        return "None."
    return f"- …and {count - MAX_LISTED} more (summary.json has all)" if count > MAX_LISTED else ""


def render_summary_markdown(summary: Mapping[str, Any], table: DtypeTable) -> str:
    """summary.md: the night in GitHub Markdown (also fit for $GITHUB_STEP_SUMMARY)."""
    esc = render.escape_markdown
    out = [f"# MPS nightly {esc(summary['started'][:16].replace('T', ' '))} UTC", ""]
    if summary["commit"]:
        out.append(f"Commit `{esc(summary['commit'][:12])}`.")
    rates = [
        f"{esc(r)} {rate:.1%}" if rate is not None else f"{esc(r)} –"
        for r, rate in summary["pass_rate"].items()
    ]
    out.append("Pass rate (pass or xpass, of the tests that ran): " + ", ".join(rates) + ".")
    if summary["missing_runners"]:
        out.append(
            f"**No results from {esc(', '.join(summary['missing_runners']))}**: "
            "no xfail can be proposed tonight."
        )
    out.append("")

    regressions, flaky = summary["regressions"], summary["flaky"]
    out += [f"## Regressions ({len(regressions)})", ""]
    for r in regressions[:MAX_LISTED]:
        message = f": {esc(r['message'][:200])}" if r["message"] else ""
        out.append(
            f"- {esc(r['name'])} on {esc(r['runner'])}: {r['before']} → {r['after']}{message}"
        )
    out.append(_more(len(regressions)))
    out += ["", f"## Flaky tests ({len(flaky)})", ""]
    for f in flaky[:MAX_LISTED]:
        why = esc("; ".join(f["reasons"]))
        seq = " → ".join(f["outcomes"])
        out.append(f"- {esc(f['name'])} on {esc(f['runner'])}: {why} ({seq})")
    out.append(_more(len(flaky)))

    out += ["", f"## xfail removals ({len(summary['proposals'])})", ""]
    for d in summary["proposals"]:
        entry = f"{esc(d['list'])}\\[{esc(repr(d['key']))}\\]"
        out.append(f"- {entry}: {d['action']} — {esc(d['reason'])}")
    if summary["diff"]:
        fence = _fence(summary["diff"])
        out += ["", f"{fence}diff", summary["diff"].rstrip("\n"), fence]
    elif not summary["proposals"]:
        out.append(esc(summary["proposal_note"]) + ".")
    if summary["candidates"]:
        out += ["", f"Waiting for {summary['min_passes']} nightlies in a row:", ""]
        for c in summary["candidates"]:
            streaks = ", ".join(f"{d} {n}/{summary['min_passes']}" for d, n in c["streaks"].items())
            out.append(f"- {esc(c['list'])}\\[{esc(repr(c['key']))}\\]: {esc(streaks)}")

    bl = summary["backlog"]
    out += ["", f"## Migration backlog ({bl['total']})", ""]
    if bl["error"]:
        out.append(f"Unavailable: {esc(bl['error'])}")
    else:
        out.append(", ".join(f"{esc(w)} {n}" for w, n in bl["counts"].items()) or "Empty.")
        for item in bl["items"][:TOP_BACKLOG]:
            kernels = f" ({esc(', '.join(item['mps_kernels']))})" if item["mps_kernels"] else ""
            out.append(f"- {esc(item['op'])}: {item['workflow']}{kernels}")

    out += ["", "## Results", "", render.render_markdown(table).rstrip("\n")]
    if summary["warnings"]:
        out += ["", "## Warnings", ""] + [f"- {esc(w)}" for w in summary["warnings"]]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------- run


@dataclass(frozen=True)
class NightlyOutcome:
    summary: dict[str, Any]
    table: DtypeTable
    files: tuple[Path, ...]


def run_nightly(
    settings: Settings,
    results: Path,
    *,
    history_path: Path | None = None,
    dashboard_dir: Path | None = None,
    min_passes: int = DEFAULT_MIN_PASSES,
    flaky_window: int = DEFAULT_FLAKY_WINDOW,
    keep: int = DEFAULT_KEEP,
    commit: str | None = None,
    source: str = "",
    started: str | None = None,
) -> NightlyOutcome:
    """Record one nightly and write its dashboard; see the module docstring."""
    if min_passes < 1 or flaky_window < 2 or keep < max(min_passes, flaky_window):
        raise PipelineError(
            "nightly: --min-passes must be >= 1, --flaky-window >= 2, and --keep at least both"
        )
    history_path = history_path or settings.state_dir / history.DEFAULT_FILE
    dashboard_dir = dashboard_dir or settings.state_dir / "dashboard"
    reports, warnings = collect_reports(results, settings.runners)
    warnings = list(warnings)
    cases: dict[str, tuple[CaseResult, ...]] = {}
    for runner, paths in reports.items():
        parsed = junit.parse_reports(paths)
        warnings.extend(parsed.warnings)
        cases[runner] = parsed.cases
    missing = [r for r in settings.runners if r not in cases]
    if missing:
        warnings.append(f"no results from {', '.join(missing)} (did its jobs run?)")

    index: TreeIndex | None = None
    backlog_items: tuple[BacklogItem, ...] | None = None
    backlog_error = ""
    try:
        index = load_index(settings)
        backlog_items = backlog(index)
    except PipelineError as exc:
        backlog_error = str(exc)
        warnings.append(f"cannot read the tree at {settings.root}: {exc}")
    table = merge_runs(cases, _names(index))

    db = history.connect(history_path)
    try:
        night = history.record_nightly(
            db,
            cases,
            commit=_git_head(settings.root) if commit is None else commit,
            started=started,
            source=source,
        )
        proposals = None
        if index is not None:
            window = history.nightlies(db, min_passes, until=night.started)
            proposals = propose(db, index, table, window, settings.runners, min_passes)
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
        pruned = history.prune(db, keep)
        if pruned:
            warnings.append(f"history: dropped the {pruned} oldest nightlies (keeping {keep})")
    finally:
        db.close()

    merged = []
    for runner, paths in reports.items():
        out = dashboard_dir / "junit" / f"{runner}.xml"
        warnings.extend(w for w in junit.merge_reports(paths, out) if w not in warnings)
        merged.append(out)
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
        warnings=warnings,
    )
    markdown = render_summary_markdown(summary, table)
    files = dashboard.write_dashboard(dashboard_dir, summary, markdown)
    return NightlyOutcome(summary, table, (*files, *merged))


def render_terminal(summary: Mapping[str, Any], files: Sequence[Path], console: Console) -> None:
    """A short report for the CI log: the whole table is in the dashboard."""
    console.print(
        f"[bold]MPS nightly[/bold] {summary['started']}  commit {summary['commit'][:12] or '?'}",
        highlight=False,
    )
    for runner, counts in summary["counts"].items():
        rate = summary["pass_rate"][runner]
        shown = " · ".join(f"{o} {n}" for o, n in counts.items() if n)
        pct = f"{rate:.1%}" if rate is not None else "–"
        console.print(f"  {runner}: pass rate {pct}  ({shown})", highlight=False)
    for w in summary["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    console.print(f"[bold]regressions: {len(summary['regressions'])}[/bold]")
    for r in summary["regressions"]:
        console.print(
            f"  [red]{escape(r['name'])}[/red] on {r['runner']}: {r['before']} → {r['after']}",
            highlight=False,
        )
    console.print(f"[bold]flaky: {len(summary['flaky'])}[/bold]")
    for f in summary["flaky"]:
        console.print(
            f"  {f['name']} on {f['runner']}: {'; '.join(f['reasons'])}",
            markup=False,
            highlight=False,
        )
    console.print(f"[bold]xfail removals: {len(summary['proposals'])}[/bold]")
    for d in summary["proposals"]:
        entry = f"{d['list']}[{d['key']!r}]"
        console.print(f"  {entry}: {d['action']} — {d['reason']}", markup=False, highlight=False)
    if summary["diff"]:
        console.print(summary["diff"], markup=False, highlight=False)
    elif summary["proposal_note"]:
        console.print(f"  {summary['proposal_note']}", markup=False, highlight=False)
    bl = summary["backlog"]
    counts = ", ".join(f"{w} {n}" for w, n in bl["counts"].items())
    console.print(
        f"[bold]migration backlog: {bl['total']}[/bold] {counts}"
        if not bl["error"]
        else "[bold]migration backlog:[/bold] unavailable",
        highlight=False,
    )
    console.print(f"dashboard: {files[0].parent}", highlight=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results",
        required=True,
        type=Path,
        help="directory with one folder of JUnit files per runner (results/<runner>/*.xml)",
    )
    parser.add_argument(
        "--history", type=Path, help=f"SQLite history (default: <state_dir>/{history.DEFAULT_FILE})"
    )
    parser.add_argument(
        "--dashboard", type=Path, help="dashboard directory (default: <state_dir>/dashboard)"
    )
    parser.add_argument("--json", action="store_true", help="print summary.json, not a report")
    parser.add_argument(
        "--min-passes",
        type=int,
        default=DEFAULT_MIN_PASSES,
        help="nightlies in a row a dtype must xpass on every runner before its xfail goes "
        f"(default {DEFAULT_MIN_PASSES})",
    )
    parser.add_argument(
        "--flaky-window",
        type=int,
        default=DEFAULT_FLAKY_WINDOW,
        help=f"nightlies to look back for flipping outcomes (default {DEFAULT_FLAKY_WINDOW})",
    )
    parser.add_argument(
        "--keep",
        type=int,
        default=DEFAULT_KEEP,
        help=f"nightlies the history keeps (default {DEFAULT_KEEP})",
    )
    parser.add_argument("--commit", help="the PyTorch commit tested (default: git HEAD of root)")
    parser.add_argument(
        "--source",
        default="",
        help="where the results come from, e.g. the CI run's URL; recording the same source "
        "again replaces that nightly instead of counting it twice",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Record the nightly, write the dashboard, print a report; 1 when there are regressions."""
    outcome = run_nightly(
        settings,
        args.results,
        history_path=args.history,
        dashboard_dir=args.dashboard,
        min_passes=args.min_passes,
        flaky_window=args.flaky_window,
        keep=args.keep,
        commit=args.commit,
        source=args.source,
    )
    if args.json:
        print(json.dumps(outcome.summary, indent=2, ensure_ascii=False))
    else:
        render_terminal(outcome.summary, outcome.files, terminal())
    return 1 if outcome.summary["regressions"] else 0
