"""A nightly for people: summary.md, the CI log's short report, and the dashboard's files.

Everything here reads the :class:`~pipeline.report.nightly_summary.NightlySummary` the
nightly flow builds (``summary.json`` holds exactly it), so any of it can be redrawn from
that file alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from pipeline.report import dashboard, render
from pipeline.report.dashboard import MAX_SUSPECTS, action_text, suspects_more
from pipeline.report.nightly_summary import Backlog, NightlyOutcome, NightlySummary
from pipeline.report.pr_comment import code_block
from pipeline.results.device import Device
from pipeline.results.nightly import Regression
from pipeline.tree.index import NO_OPINFO

TOP_BACKLOG = 15
MAX_LISTED = 50  # regressions / flaky tests listed in summary.md (the JSON has all)


def _more(count: int) -> str:
    """The line after a list cut at MAX_LISTED items (or saying the list is empty)."""
    if count == 0:
        return "None."
    return f"- …and {count - MAX_LISTED} more (summary.json has all)" if count > MAX_LISTED else ""


def _suspect_lines(regression: Regression) -> list[str]:
    """A regression's suspects, most likely first, as nested list items; then its note."""
    esc = render.escape_markdown
    suspects = regression.suspects
    lines = [
        f"  - suspect `{s.commit[:12]}` ({s.kind}) {esc(s.title)} — "
        f"{esc('; '.join(s.reasons)[:300])}"
        for s in suspects[:MAX_SUSPECTS]
    ]
    if more := suspects_more(len(suspects)):
        lines.append(f"  - {esc(more)}")
    if regression.suspects_note:
        lines.append(f"  - {esc(regression.suspects_note)}")
    return lines


def _device_lines(devices: Mapping[str, Device | None]) -> list[str]:
    """Which device each runner's results came from; a VM's are marked, its timings left
    out of the history."""
    esc = render.escape_markdown
    lines = []
    for runner, found in devices.items():
        if found is None:
            lines.append(f"- {esc(runner)}: device unknown (none recorded)")
            continue
        vm = " — **a VM: pass/fail kept, timings not recorded**" if found.paravirtual else ""
        lines.append(f"- {esc(runner)}: {esc(found.label())}{vm}")
    return ["", "Devices:", "", *lines] if lines else []


def _changes_markdown(summary: NightlySummary) -> list[str]:
    """The regressions, with their suspects, and the flaky tests."""
    esc = render.escape_markdown
    regressions, flaky = summary.regressions, summary.flaky
    out = [f"## Regressions ({len(regressions)})", ""]
    for r in regressions[:MAX_LISTED]:
        message = f": {esc(r.message[:200])}" if r.message else ""
        out.append(
            f"- {esc(r.name)} on {esc(r.runner)}: {r.before.value} → {r.after.value}{message}"
        )
        out += _suspect_lines(r)
    out.append(_more(len(regressions)))
    out += ["", f"## Flaky tests ({len(flaky)})", ""]
    for f in flaky[:MAX_LISTED]:
        seq = " → ".join(o.value for o in f.outcomes)
        out.append(f"- {esc(f.name)} on {esc(f.runner)}: {esc('; '.join(f.reasons))} ({seq})")
    out.append(_more(len(flaky)))
    return out


def _removals_markdown(summary: NightlySummary) -> list[str]:
    """The xfail removals, their diff, and the entries still waiting."""
    esc = render.escape_markdown
    out = ["", f"## xfail removals ({len(summary.proposals)})", ""]
    for d in summary.proposals:
        entry = f"{esc(d.list)}\\[{esc(repr(d.key))}\\]"
        out.append(f"- {entry}: {esc(action_text(d))} — {esc(d.reason)}")
    if summary.diff:
        out += ["", code_block(summary.diff, "diff")]
    elif not summary.proposals:
        out.append(esc(summary.proposal_note) + ".")
    if summary.candidates:
        need = summary.min_passes
        out += ["", f"Waiting for {need} nightlies in a row:", ""]
        for c in summary.candidates:
            streaks = ", ".join(f"{d} {n}/{need}" for d, n in c.streaks.items())
            out.append(f"- {esc(c.list)}\\[{esc(repr(c.key))}\\]: {esc(streaks)}")
    return out


def _backlog_markdown(backlog: Backlog) -> list[str]:
    esc = render.escape_markdown
    out = ["", f"## Migration backlog ({len(backlog.items)})", ""]
    if backlog.error is not None:
        return [*out, f"Unavailable: {esc(backlog.error)}"]
    out.append(", ".join(f"{esc(w)} {n}" for w, n in backlog.counts.items()) or "Empty.")
    for item in backlog.items[:TOP_BACKLOG]:
        kernels = f" ({esc(', '.join(item.mps_kernels))})" if item.mps_kernels else ""
        unknown = "" if item.has_opinfo else f"; {NO_OPINFO}"
        out.append(f"- {esc(item.op)}: {item.workflow.value}{kernels}{unknown}")
    return out


def render_summary_markdown(summary: NightlySummary) -> str:
    """summary.md: the night in GitHub Markdown (also fit for $GITHUB_STEP_SUMMARY)."""
    esc = render.escape_markdown
    out = [f"# MPS nightly {esc(summary.started[:16].replace('T', ' '))} UTC", ""]
    if summary.commit:
        out.append(f"Commit `{esc(summary.commit[:12])}`.")
    rates = [
        f"{esc(r)} {rate:.1%}" if rate is not None else f"{esc(r)} –"
        for r, rate in summary.pass_rate.items()
    ]
    out.append("Pass rate (pass or xpass, of the tests that ran): " + ", ".join(rates) + ".")
    out += _device_lines(summary.devices)
    if summary.missing_runners:
        out.append(
            f"**No results from {esc(', '.join(summary.missing_runners))}**: "
            "no xfail can be proposed tonight."
        )
    out.append("")
    out += _changes_markdown(summary)
    out += _removals_markdown(summary)
    out += _backlog_markdown(summary.backlog)
    out += ["", "## Results", "", render.render_markdown(summary.table).rstrip("\n")]
    if summary.warnings:
        out += ["", f"## Warnings ({len(summary.warnings)})", ""]
        skipped, total = summary.reports.skipped, summary.reports.total
        if skipped:
            out += [f"**{len(skipped)} of {total} JUnit reports skipped** (nothing read):", ""]
        out += [f"- {esc(w)}" for w in summary.warnings]
    return "\n".join(out) + "\n"


def render_terminal(summary: NightlySummary, files: Sequence[Path], console: Console) -> None:
    """A short report for the CI log: the whole table is in the dashboard."""

    def plain(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    console.print(
        f"[bold]MPS nightly[/bold] {summary.started}  commit {summary.commit[:12] or '?'}",
        highlight=False,
    )
    rates = summary.pass_rate
    for runner, counts in summary.counts.items():
        rate = rates[runner]
        shown = " · ".join(f"{o} {n}" for o, n in counts.items() if n)
        pct = f"{rate:.1%}" if rate is not None else "–"
        console.print(f"  {runner}: pass rate {pct}  ({shown})", highlight=False)
    for w in summary.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    reports = summary.reports
    if reports.skipped:
        console.print(
            f"[bold]reports skipped: {len(reports.skipped)} of {reports.total}[/bold]",
            highlight=False,
        )
    console.print(f"[bold]regressions: {len(summary.regressions)}[/bold]")
    for r in summary.regressions:
        console.print(
            f"  [red]{escape(r.name)}[/red] on {r.runner}: {r.before.value} → {r.after.value}",
            highlight=False,
        )
        for s in r.suspects[:MAX_SUSPECTS]:
            plain(f"    suspect {s.commit[:12]} ({s.kind}) {s.title}")
        for extra in (suspects_more(len(r.suspects)), r.suspects_note):
            if extra:
                plain(f"    {extra}")
    console.print(f"[bold]flaky: {len(summary.flaky)}[/bold]")
    for f in summary.flaky:
        plain(f"  {f.name} on {f.runner}: {'; '.join(f.reasons)}")
    console.print(f"[bold]xfail removals: {len(summary.proposals)}[/bold]")
    for d in summary.proposals:
        plain(f"  {d.list}[{d.key!r}]: {action_text(d)} — {d.reason}")
    if summary.diff:
        plain(summary.diff)
    elif summary.proposal_note:
        plain(f"  {summary.proposal_note}")
    bl = summary.backlog
    by_workflow = ", ".join(f"{w} {n}" for w, n in bl.counts.items())
    console.print(
        f"[bold]migration backlog: {len(bl.items)} operators[/bold] ({by_workflow})"
        if bl.error is None
        else "[bold]migration backlog:[/bold] unavailable",
        highlight=False,
    )
    console.print(f"dashboard: {files[0].parent}", highlight=False)


def publish(outcome: NightlyOutcome) -> tuple[Path, ...]:
    """Write the dashboard (index.html, summary.md, summary.json, the diff) beside the merged
    JUnit reports; every file of the dashboard, the HTML page first."""
    markdown = render_summary_markdown(outcome.summary)
    files = dashboard.write_dashboard(outcome.dashboard_dir, outcome.summary, markdown)
    return (*files, *outcome.junit_files)
