"""The nightly dashboard: one static HTML page with inline SVG charts.

Everything is drawn from the nightly's summary (a
:class:`~pipeline.report.nightly_summary.NightlySummary`, which ``summary.json`` holds
exactly), so a dashboard can be redrawn from that file alone:

- pass rate over time, one line per runner configuration;
- a heatmap of operator × dtype outcomes for the latest nightly (:mod:`heatmap`: a skip
  hatched, an untested cell outlined, a cell split into one stripe per runner where the
  runners disagree, a dot on a flaky result; hovering shows each runner's outcome and
  message);
- the migration backlog by workflow, and its easiest items;
- the share of overloads on each MPS path (Metal, MPSGraph, composite, none, unknown) and
  its change since the previous night that recorded one;
- regressions with their suspects (the commits since the runner's previous run that can
  affect the operator), flaky tests, the proposed xfail removals as a diff.

Every piece of text is escaped (:func:`pipeline.report.svg.escape`), and a Content-Security-Policy
that allows no script keeps a test message that slips through from running anyway. The one
exception is a heatmap too large for SVG (over ``heatmap_canvas.SVG_MAX_CELLS`` cells):
it is a JSON data block drawn on canvases by a fixed script, the only one the policy then
allows, by its hash (:mod:`pipeline.report.heatmap_canvas`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipeline.fsio import write_atomic
from pipeline.guide.backlog import paths_cell, xfail_cell
from pipeline.report import heatmap_canvas
from pipeline.report.heatmap import OUTCOME_ORDER, heatmap, large_heatmap
from pipeline.report.nightly_summary import (
    SUMMARY_JSON,
    Backlog,
    NightlySummary,
    NightPaths,
    RunCounts,
)
from pipeline.report.svg import clip as _clip
from pipeline.report.svg import empty as _empty
from pipeline.report.svg import escape as _e
from pipeline.report.svg import svg as _svg
from pipeline.results.decide import XfailDecision
from pipeline.results.device import Device
from pipeline.results.nightly import Regression, ShardBalance

INDEX = "index.html"
SUMMARY_MD = "summary.md"
DIFF = "xfail-removals.diff"

RUNNER_COLORS = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#57606a")
WORKFLOW_LABELS = {"migrate": "migrate (MPSGraph → Metal)", "add": "add (no MPS kernel yet)"}
MAX_SUSPECTS = 5  # per regression, on the page and in summary.md (the JSON has all)

_CSS = """
body{font:14px/1.45 ui-sans-serif,system-ui,-apple-system,sans-serif;color:#1f2328;
margin:0 auto;max-width:1100px;padding:16px 24px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;
border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#57606a}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:22px}.bad b{color:#cf222e}.good b{color:#1a7f37}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px;overflow:auto}
.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}
.scroll{overflow:auto;max-height:80vh;border:1px solid #d0d7de;border-radius:6px}
.caption{color:#57606a;font-size:12px}.warn{color:#9a6700}code{font-size:12px}
.suspects{margin:0;padding-left:18px}.suspects li{margin:0 0 4px}
"""


# ----------------------------------------------------------------------------- charts


def pass_rate_chart(history: Sequence[RunCounts]) -> str:
    """Pass rate (0-1) per runner over nightlies (the summary's ``history``): an SVG line
    chart."""
    rates = {(h.started, h.runner): rate for h in history if (rate := h.pass_rate) is not None}
    if not rates:
        return _empty("no nightly history yet")
    nights = sorted({h.started for h in history})
    runners = list(dict.fromkeys(h.runner for h in history))
    width, height = 760, 280
    left, right, top, bottom = 52, 150, 16, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    low = min(rates.values())
    floor = max(0.0, math.floor((low - 0.02) * 20) / 20)  # a 5% step below the lowest point

    def x(started: str) -> float:
        if len(nights) == 1:
            return left + plot_w / 2
        return left + plot_w * nights.index(started) / (len(nights) - 1)

    def y(rate: float) -> float:
        return top + plot_h * (1 - (rate - floor) / (1 - floor or 1))

    body = []
    for i in range(5):
        rate = floor + (1 - floor) * i / 4
        body.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(rate):.1f}" y2="{y(rate):.1f}" '
            'stroke="#d0d7de"/>'
            f'<text x="{left - 6}" y="{y(rate) + 4:.1f}" text-anchor="end" fill="#57606a">'
            f"{rate:.0%}</text>"
        )
    step = max(1, math.ceil(len(nights) / 8))
    for started in nights[::step]:
        body.append(
            f'<text x="{x(started):.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
            f'fill="#57606a">{_e(started[5:10])}</text>'
        )
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" '
        'fill="#57606a">nightly (UTC date)</text>'
    )
    for n, runner in enumerate(runners):
        color = RUNNER_COLORS[n % len(RUNNER_COLORS)]
        rows = {h.started: h for h in history if h.runner == runner}
        path, pen_down = [], False
        for started in nights:
            rate = rates.get((started, runner))
            if rate is None:
                pen_down = False  # a night the runner did not report: break the line
                continue
            path.append(f"{'L' if pen_down else 'M'}{x(started):.1f},{y(rate):.1f}")
            pen_down = True
        body.append(f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="2"/>')
        for started, row in rows.items():
            if (rate := rates.get((started, runner))) is None:
                continue
            counts = row.counts
            detail = ", ".join(f"{o} {counts[o]}" for o in OUTCOME_ORDER if counts.get(o))
            tip = f"{runner} {started[:16]}: {rate:.1%} ({detail})"
            body.append(
                f'<circle cx="{x(started):.1f}" cy="{y(rate):.1f}" r="3.5" '
                f'fill="{color}"><title>{_e(tip)}</title></circle>'
            )
        ly = top + 14 + 18 * n
        body.append(
            f'<rect x="{left + plot_w + 14}" y="{ly - 9}" width="12" height="12" fill="{color}"/>'
            f'<text x="{left + plot_w + 32}" y="{ly + 1}">{_e(runner)}</text>'
        )
    return _svg(width, height, "pass rate per runner over the nightlies", body)


def bar_chart(counts: Mapping[str, int], labels: Mapping[str, str] | None = None) -> str:
    """Horizontal bars, one per key of ``counts`` (the backlog by workflow)."""
    if not counts:
        return _empty("nothing to show")
    labels = labels or {}
    names = [labels.get(k, k) for k in counts]
    label_w = 12 + 6.5 * max(len(n) for n in names)
    bar_w, row_h = 360, 26
    most = max(counts.values()) or 1
    body = []
    for i, (key, name) in enumerate(zip(counts, names, strict=True)):
        ty = 8 + i * row_h
        w = max(1.0, bar_w * counts[key] / most)
        body.append(
            f'<text x="{label_w - 8:.1f}" y="{ty + 14}" text-anchor="end">{_e(name)}</text>'
            f'<rect x="{label_w:.1f}" y="{ty}" width="{w:.1f}" height="18" '
            f'fill="{RUNNER_COLORS[i % len(RUNNER_COLORS)]}"/>'
            f'<text x="{label_w + w + 6:.1f}" y="{ty + 14}">{counts[key]}</text>'
        )
    return _svg(label_w + bar_w + 60, 16 + row_h * len(counts), "counts by category", body)


def paths_section(nights: Sequence[NightPaths], started: str) -> str:
    """The share of overloads per MPS path on the latest night that recorded it, and the
    change from the night before (the summary's ``paths``, oldest first)."""
    head = "<h2>MPS paths: overloads by the path they take</h2>"
    if not nights:
        return head + '<p class="warn">Unavailable: no night recorded the paths yet.</p>'
    latest = nights[-1]
    counts = latest.counts
    before = nights[-2].counts if len(nights) > 1 else None
    total = sum(counts.values()) or 1
    total_before = (sum(before.values()) or 1) if before else 1
    rows = []
    for path, n in counts.items():
        share = n / total
        if before is None:
            change = "–"
        else:
            was = before.get(path, 0)
            points = 100 * (share - was / total_before)
            change = f"{n - was:+d} ({points:+.1f} points)"
        rows.append((path, n, f"{share:.1%}", change))
    when = latest.started[:16].replace("T", " ")
    note = "" if latest.started == started else (
        f'<p class="warn">From the night of {_e(when)} UTC: tonight\'s tree could not be '
        "read.</p>"
    )  # fmt: skip
    since = (
        f"since {_e(nights[-2].started[:16].replace('T', ' '))} UTC"
        if before is not None
        else "since the night before (none recorded)"
    )
    return (
        head + note + bar_chart(counts)
        + _table(["path", "overloads", "share", f"change {since}"], rows)
        + '<p class="caption">Read from the tree each night as <code>mps-pipeline paths</code> '
        "reads it; <code>unknown</code>: what the path rests on could not be read.</p>"
    )  # fmt: skip


def _seconds(value: float) -> str:
    minutes, secs = divmod(value, 60)
    return f"{int(minutes)} min {secs:02.0f} s" if minutes else f"{secs:.1f} s"


def shard_balance(shards: Mapping[str, ShardBalance]) -> str:
    """Last night's wall time per shard, per runner (the summary's ``shards``): a bar per
    shard, scaled to the slowest shard of the night, with each runner's slowest / mean."""
    if not shards:
        return "<p>No shard times (no report was read).</p>"
    longest = max((r.seconds for s in shards.values() for r in s.reports), default=0)
    rows = []
    for n, (runner, s) in enumerate(shards.items()):
        ratio = f"{s.ratio:.2f}×" if s.ratio is not None else "unknown (no times)"
        for i, r in enumerate(s.reports):
            share = r.seconds / longest if longest > 0 else 0
            bar = (
                f'<svg xmlns="http://www.w3.org/2000/svg" width="204" height="12" '
                f'role="img" aria-label="{_e(_seconds(r.seconds))}">'
                f'<rect x="0" y="1" width="{max(1.0, 200 * share):.1f}" height="10" '
                f'fill="{RUNNER_COLORS[n % len(RUNNER_COLORS)]}"/></svg>'
            )
            label = f"shard {r.shard}" if r.shard is not None else r.report
            measured = "" if r.measured == "suite" else " (sum of its tests)"
            rows.append(
                (
                    runner if i == 0 else "",
                    ratio if i == 0 else "",
                    label,
                    _Html(f"{_e(_seconds(r.seconds))}{_e(measured)}"),
                    r.tests,
                    _Html(bar),
                )
            )
    return _table(["runner", "slowest / mean", "shard", "wall time", "tests", ""], rows)


# ------------------------------------------------------------------------------- page


class _Html(str):
    """A table cell that is markup already (every piece of text in it escaped)."""


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if isinstance(c, _Html) else _e(c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _diff_block(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        cls = ""
        if line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+") and not line.startswith("+++"):
            cls = "add"
        elif line.startswith("-") and not line.startswith("---"):
            cls = "del"
        lines.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def action_text(decision: XfailDecision) -> str:
    """A proposal's action for people: ``delete``, ``move → MACOS_BEFORE_15_0_XFAILLIST``."""
    action = decision.action.value
    return f"{action} → {decision.to_list}" if decision.to_list else action


def suspects_more(count: int) -> str:
    """The line after a regression's suspects cut at MAX_SUSPECTS ("" when none were cut)."""
    more = count - MAX_SUSPECTS
    return f"…and {more} more suspect{'s' * (more > 1)} (summary.json has all)" if more > 0 else ""


def _suspects_cell(regression: Regression) -> _Html:
    """A regression's ranked suspects (commit, kind, title, reasons) and its note."""
    suspects = regression.suspects
    items = [
        f"<li><code>{_e(s.commit[:12])}</code> <b>{_e(s.kind)}</b> {_e(_clip(s.title))}"
        f'<br><span class="caption">{_e(_clip("; ".join(s.reasons)))}</span></li>'
        for s in suspects[:MAX_SUSPECTS]
    ]
    parts = [f'<ol class="suspects">{"".join(items)}</ol>'] if items else []
    if more := suspects_more(len(suspects)):
        parts.append(f'<span class="caption">{_e(more)}</span>')
    if regression.suspects_note:
        parts.append(f'<span class="caption">{_e(regression.suspects_note)}</span>')
    return _Html("".join(parts) or "–")


def _card(label: str, value: object, tone: str = "") -> str:
    return f'<div class="card {tone}"><b>{_e(value)}</b>{_e(label)}</div>'


def _devices_html(devices: Mapping[str, Device | None]) -> list[str]:
    """Which device each runner's results came from (the summary's ``devices``); a VM's
    are marked: its pass/fail results count, its timings were not recorded."""
    items = []
    for runner, device in devices.items():
        if device is None:
            items.append(f"<li>{_e(runner)}: device unknown (none recorded)</li>")
            continue
        vm = " — <strong>a VM: timings not recorded</strong>" if device.paravirtual else ""
        items.append(f"<li>{_e(runner)}: {_e(device.label())}{vm}</li>")
    return ["<h2>Devices</h2>", f"<ul>{''.join(items)}</ul>"] if items else []


def _head(summary: NightlySummary, large: bool) -> list[str]:
    """The page's head, its title and its cards: what a glance at the night should tell."""
    started = summary.started[:16].replace("T", " ")
    commit = summary.commit or "unknown"
    regressions, flaky = summary.regressions, summary.flaky
    proposals, backlog = summary.proposals, summary.backlog
    cards = [
        _card("regressions", len(regressions), "bad" if regressions else "good"),
        _card("flaky tests", len(flaky), "bad" if flaky else "good"),
        _card("xfail removals", len(proposals), "good" if proposals else ""),
        _card("migration backlog", len(backlog.items) if backlog.error is None else "–"),
    ]
    for runner, rate in summary.pass_rate.items():
        cards.append(_card(f"pass rate {runner}", f"{rate:.1%}" if rate is not None else "–"))
    for runner in summary.missing_runners:
        cards.append(_card(f"{runner}: no results", "✗", "bad"))
    # a large heatmap is drawn by one script, which the policy allows by its hash alone
    script = f" script-src {heatmap_canvas.SCRIPT_SOURCE};" if large else ""
    return [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" '
        f"content=\"default-src 'none';{script} style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>MPS nightly {_e(started)} UTC</title><style>{_CSS}</style></head><body>",
        f"<h1>MPS nightly · {_e(started)} UTC</h1>",
        f'<p class="meta">commit <code>{_e(commit[:12])}</code> · runners '
        f"{_e(', '.join(summary.runners) or 'none')}"
        + (f" · source {_e(summary.source)}" if summary.source else "")
        + "</p>",
        f'<div class="cards">{"".join(cards)}</div>',
        *_devices_html(summary.devices),
    ]


def _changes(summary: NightlySummary) -> list[str]:
    """What changed since each runner's previous run: regressions (with their suspects)
    and flaky tests."""
    regressions, flaky = summary.regressions, summary.flaky
    parts = [f"<h2>Regressions ({len(regressions)})</h2>"]
    if regressions:
        parts.append(
            _table(
                ["test", "runner", "was", "now", "message", "suspects (most likely first)"],
                [
                    (
                        r.name,
                        r.runner,
                        r.before.value,
                        r.after.value + (" (flaky)" if r.flaky else ""),
                        _clip(r.message),
                        _suspects_cell(r),
                    )
                    for r in regressions
                ],
            )
        )
    else:
        parts.append("<p>None: nothing that worked in a runner's previous run fails now.</p>")
    parts.append(f"<h2>Flaky tests ({len(flaky)})</h2>")
    if flaky:
        parts.append(
            _table(
                ["test", "runner", "why", "outcomes (oldest first)"],
                [
                    (
                        f.name,
                        f.runner,
                        "; ".join(f.reasons),
                        " → ".join(o.value for o in f.outcomes),
                    )
                    for f in flaky
                ],
            )
        )
    else:
        parts.append("<p>None.</p>")
    return parts


def _xfail_removals(summary: NightlySummary) -> list[str]:
    """The xfail entries the night proposes to drop, the diff that does it, and those
    still waiting for enough nightlies in a row."""
    proposals = summary.proposals
    parts = [f"<h2>xfail removals ({len(proposals)})</h2>"]
    if proposals:
        parts.append(
            _table(
                ["list", "key", "action", "dtypes after", "why"],
                [
                    (
                        d.list,
                        d.key,
                        action_text(d),
                        "all" if d.new_dtypes is None else ", ".join(d.new_dtypes) or "–",
                        d.reason,
                    )
                    for d in proposals
                ],
            )
        )
    else:
        parts.append(f"<p>{_e(summary.proposal_note)}.</p>")
    if summary.diff:
        parts.append(f'<p>Ready to apply (<a href="{DIFF}">{DIFF}</a>):</p>')
        parts.append(_diff_block(summary.diff))
    if summary.candidates:
        need = summary.min_passes
        parts.append(f"<p>Xpassing everywhere, waiting for {need} nightlies in a row:</p>")
        rows = []
        for c in summary.candidates:
            streaks = ", ".join(f"{d} {n}/{need}" for d, n in c.streaks.items())
            rows.append((c.list, c.key, streaks))
        parts.append(_table(["list", "key", "dtypes (nightlies so far)"], rows))
    return parts


def _backlog(backlog: Backlog) -> list[str]:
    """The migration backlog by workflow, and its easiest items (or why it is missing)."""
    parts = [f"<h2>Migration backlog ({len(backlog.items)})</h2>"]
    if backlog.error is not None:
        parts.append(f'<p class="warn">Unavailable: {_e(backlog.error)}</p>')
        return parts
    parts.append(bar_chart(backlog.counts, WORKFLOW_LABELS))
    parts.append("<p>Easiest first:</p>")
    parts.append(
        _table(
            [
                "operator",
                "workflow",
                "overloads",
                "xfail dtypes",
                "functor",
                "paths",
                "MPS kernels",
            ],  # fmt: skip
            [
                (
                    i.op,
                    i.workflow.value,
                    i.overloads,
                    xfail_cell(i.xfail_dtypes, i.has_opinfo),
                    "✓" if i.has_functor else "",
                    paths_cell(i.paths),
                    ", ".join(i.mps_kernels),
                )
                for i in backlog.items[:15]
            ],
        )
    )
    return parts


def render_html(summary: NightlySummary) -> str:
    """The dashboard page for one nightly summary."""
    table = summary.table
    large = heatmap_canvas.cell_count(table) > heatmap_canvas.SVG_MAX_CELLS
    parts = _head(summary, large)
    parts += [
        "<h2>Pass rate</h2>",
        pass_rate_chart(summary.history),
        '<p class="caption">Share of the tests that ran (skips left out) whose operator worked '
        "on MPS: pass or xpass. One line per runner configuration; hover a point for its "
        "counts.</p>",
    ]
    parts += _changes(summary)
    parts += _xfail_removals(summary)
    parts.append("<h2>Shard balance</h2>")
    parts.append(shard_balance(summary.shards))
    parts.append(
        '<p class="caption">Each shard\'s wall time last night, as its JUnit report records it '
        "(the testsuite time pytest writes: the whole session, collection included). "
        "Slowest / mean: how much longer the runner's job waited for its slowest shard than "
        "for an even split; <code>mps-pipeline shards</code> plans balanced ones.</p>"
    )
    parts.append("<h2>Latest results: operator × dtype</h2>")
    drawn = large_heatmap(table) if large else heatmap(table)
    parts.append(f'<div class="scroll">{drawn}</div>')
    parts += _backlog(summary.backlog)
    parts.append(paths_section(summary.paths, summary.started))
    if summary.warnings:
        parts.append("<h2>Warnings</h2><ul>")
        parts += [f'<li class="warn">{_e(w)}</li>' for w in summary.warnings]
        parts.append("</ul>")
    parts.append(
        f'<p class="caption">Also here: <a href="{SUMMARY_MD}">{SUMMARY_MD}</a> · '
        f'<a href="{SUMMARY_JSON}">{SUMMARY_JSON}</a> · merged JUnit per runner in '
        '<a href="junit/">junit/</a></p></body></html>'
    )
    return "\n".join(parts) + "\n"


def write_dashboard(out_dir: Path, summary: NightlySummary, markdown: str) -> tuple[Path, ...]:
    """Write index.html, summary.md, summary.json and (when there is one) the xfail diff.

    Each file is replaced atomically; a diff left by an earlier night is removed when
    tonight has none. Returns the paths written.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        INDEX: render_html(summary),
        SUMMARY_MD: markdown,
        # compact: at fleet size the indentation alone was a third of the file
        SUMMARY_JSON: json.dumps(summary.to_json(), separators=(",", ":"), ensure_ascii=False)
        + "\n",
    }
    if summary.diff:
        files[DIFF] = summary.diff
    else:
        (out_dir / DIFF).unlink(missing_ok=True)
    written = []
    for name, text in files.items():
        write_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return tuple(written)
