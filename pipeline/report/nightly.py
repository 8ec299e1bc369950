"""A nightly for people: summary.md, the CI log's short report, and the dashboard's files.

Everything here reads the summary :func:`pipeline.results.nightly.run_nightly` returns (the
``summary.json`` data), so any of it can be redrawn from that file alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from pipeline.report import dashboard, render
from pipeline.report.dashboard import MAX_SUSPECTS, action_text, suspects_more
from pipeline.report.pr_comment import code_block
from pipeline.results.device import Device
from pipeline.results.nightly import NightlyOutcome
from pipeline.results.table import DtypeTable
from pipeline.tree.index import NO_OPINFO

TOP_BACKLOG = 15
MAX_LISTED = 50  # regressions / flaky tests listed in summary.md (the JSON has all)


def _more(count: int) -> str:
    """The line after a list cut at MAX_LISTED items (or saying the list is empty)."""
    if count == 0:
        return "None."
    return f"- …and {count - MAX_LISTED} more (summary.json has all)" if count > MAX_LISTED else ""


def _suspect_lines(regression: Mapping[str, Any]) -> list[str]:
    """A regression's suspects, most likely first, as nested list items; then its note."""
    esc = render.escape_markdown
    suspects = regression.get("suspects", [])
    lines = [
        f"  - suspect `{s['commit'][:12]}` ({s['kind']}) {esc(s['title'])} — "
        f"{esc('; '.join(s['reasons'])[:300])}"
        for s in suspects[:MAX_SUSPECTS]
    ]
    if more := suspects_more(len(suspects)):
        lines.append(f"  - {esc(more)}")
    if regression.get("suspects_note"):
        lines.append(f"  - {esc(regression['suspects_note'])}")
    return lines


def _device_lines(devices: Mapping[str, Any]) -> list[str]:
    """Which device each runner's results came from; a VM's are marked, its timings left
    out of the history."""
    esc = render.escape_markdown
    lines = []
    for runner, data in devices.items():
        if not isinstance(data, dict):
            lines.append(f"- {esc(runner)}: device unknown (none recorded)")
            continue
        found = Device.from_dict(data, f"summary devices[{runner}]")
        vm = " — **a VM: pass/fail kept, timings not recorded**" if found.paravirtual else ""
        lines.append(f"- {esc(runner)}: {esc(found.label())}{vm}")
    return ["", "Devices:", "", *lines] if lines else []


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
    out += _device_lines(summary.get("devices", {}))
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
        out += _suspect_lines(r)
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
        out.append(f"- {entry}: {esc(action_text(d))} — {esc(d['reason'])}")
    if summary["diff"]:
        out += ["", code_block(summary["diff"], "diff")]
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
            unknown = "" if item["has_opinfo"] else f"; {NO_OPINFO}"
            out.append(f"- {esc(item['op'])}: {item['workflow']}{kernels}{unknown}")

    out += ["", "## Results", "", render.render_markdown(table).rstrip("\n")]
    if summary["warnings"]:
        out += ["", f"## Warnings ({len(summary['warnings'])})", ""]
        skipped, total = summary["reports"]["skipped"], summary["reports"]["total"]
        if skipped:
            out += [f"**{len(skipped)} of {total} JUnit reports skipped** (nothing read):", ""]
        out += [f"- {esc(w)}" for w in summary["warnings"]]
    return "\n".join(out) + "\n"


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
    reports = summary["reports"]
    if reports["skipped"]:
        console.print(
            f"[bold]reports skipped: {len(reports['skipped'])} of {reports['total']}[/bold]",
            highlight=False,
        )
    console.print(f"[bold]regressions: {len(summary['regressions'])}[/bold]")
    for r in summary["regressions"]:
        console.print(
            f"  [red]{escape(r['name'])}[/red] on {r['runner']}: {r['before']} → {r['after']}",
            highlight=False,
        )
        for s in r.get("suspects", [])[:MAX_SUSPECTS]:
            line = f"    suspect {s['commit'][:12]} ({s['kind']}) {s['title']}"
            console.print(line, markup=False, highlight=False)
        for extra in (suspects_more(len(r.get("suspects", []))), r.get("suspects_note")):
            if extra:
                console.print(f"    {extra}", markup=False, highlight=False)
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
        console.print(f"  {entry}: {action_text(d)} — {d['reason']}", markup=False, highlight=False)
    if summary["diff"]:
        console.print(summary["diff"], markup=False, highlight=False)
    elif summary["proposal_note"]:
        console.print(f"  {summary['proposal_note']}", markup=False, highlight=False)
    bl = summary["backlog"]
    counts = ", ".join(f"{w} {n}" for w, n in bl["counts"].items())
    console.print(
        f"[bold]migration backlog: {bl['total']} operators[/bold] ({counts})"
        if not bl["error"]
        else "[bold]migration backlog:[/bold] unavailable",
        highlight=False,
    )
    console.print(f"dashboard: {files[0].parent}", highlight=False)


def publish(outcome: NightlyOutcome) -> tuple[Path, ...]:
    """Write the dashboard (index.html, summary.md, summary.json, the diff) beside the merged
    JUnit reports; every file of the dashboard, the HTML page first."""
    markdown = render_summary_markdown(outcome.summary, outcome.table)
    files = dashboard.write_dashboard(outcome.dashboard_dir, outcome.summary, markdown)
    return (*files, *outcome.junit_files)
