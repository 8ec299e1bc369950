"""The per-dtype outcome table for people: a coloured terminal table, GitHub Markdown, JSON.

A cell shows the outcome its runners agree on (``~`` marks a flaky one). When runners
disagree, it shows one glyph per runner, in the table's runner order, explained below the
table. Everything that comes from test output is escaped for Markdown with
``escape_markdown``: no raw HTML, no @-mentions or #123 references, no broken table rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.report.console import terminal
from pipeline.results.junit import DISPLAY_ORDER, Outcome
from pipeline.results.table import Cell, DtypeTable

LABELS: dict[Outcome, str] = {
    Outcome.PASS: "pass",
    Outcome.FAIL: "FAIL",
    Outcome.ERROR: "ERROR",
    Outcome.XFAIL: "xfail",
    Outcome.XPASS: "XPASS",
    Outcome.SKIP: "skip",
}
STYLES: dict[Outcome, str] = {
    Outcome.PASS: "green",
    Outcome.FAIL: "red",
    Outcome.ERROR: "bold red",
    Outcome.XFAIL: "dim",
    Outcome.XPASS: "bold green",
    Outcome.SKIP: "dim",
}
# One character per runner in a cell where runners disagree.
GLYPHS: dict[Outcome, str] = {
    Outcome.PASS: "✓",
    Outcome.FAIL: "✗",
    Outcome.ERROR: "E",
    Outcome.XFAIL: "x",
    Outcome.XPASS: "X",
    Outcome.SKIP: "-",
}
MARKDOWN_LABELS: dict[Outcome, str] = {
    Outcome.PASS: "✓",
    Outcome.FAIL: "✗ fail",
    Outcome.ERROR: "✗ error",
    Outcome.XFAIL: "xfail",
    Outcome.XPASS: "**XPASS**",
    Outcome.SKIP: "skip",
}
FLAKY = "~"
# What each outcome means for the operator: the legend under every table and in the README.
MEANINGS: dict[Outcome, str] = {
    Outcome.PASS: "the MPS result matches CPU",
    Outcome.XPASS: (
        "passes although common_mps.py expects a failure: good news, its xfail entry can go"
    ),
    Outcome.FAIL: "the MPS result differs from CPU, or the op raised",
    Outcome.ERROR: "the test could not run (a crash, a setup error)",
    Outcome.XFAIL: "fails, as an xfail entry in common_mps.py (or a decorator) expects",
    Outcome.SKIP: "not run: a skip entry or decorator, or a dtype MPS does not support",
}
FLAKY_MEANING = (
    "flaky: the attempts disagreed (a rerun passed), or the outcome flips from night to night"
)
# pytest's message for an xfail that passed ("Failed: Unexpected success") reads as a failure
XPASS_MESSAGE = "passes now: its xfail entry can go"
_KIND_LABELS = {"output_match": "output", "output_grad_match": "grad"}
_MAX_MESSAGE_CHARS = 200

# A zero-width joiner: invisible, yet it separates what GitHub would link as one token.
ZWJ = "\u200d"
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
# "#12" and "owner/repo#12" (the joiner goes after "#"), "GH-12" (after "GH-")
_ISSUE_REF = re.compile(r"#(?=[0-9])|(?<![A-Za-z0-9_])GH-(?=[0-9])", re.IGNORECASE)
# An issue or PR URL, which GitHub autolinks and cross-references; the name characters
# include "\" for text already escaped (an owner "a_b" reads "a\_b" there).
_ISSUE_URL = re.compile(
    r"(?<![A-Za-z0-9_])(?:https?://)?(?:www\.)?github\.com/[\w.\\-]+/[\w.\\-]+/(?:issues|pull)/"
    r"[0-9]",
    re.IGNORECASE,
)
# in such a URL: the end of "http(s)" before "://", of "www" and "github" before "."
_URL_JOINTS = re.compile(
    r"(?<=https)(?=://)|(?<=http)(?=://)|(?<=www)(?=\.)|(?<=github)(?=\.)", re.I
)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def neutralize_references(text: str) -> str:
    """``text`` as it reads, without the @-mentions, issue references and issue URLs that
    GitHub would link (and notify or cross-reference from): a zero-width joiner goes after
    ``@``, after ``#`` and ``GH-`` before a number, and into an issue or PR URL's scheme and
    host (``https‍://github‍.com/o/r/issues/1``: no autolink, no link to that issue).

    The one mechanism for text from test output (``escape_markdown``,
    ``pr_comment.defuse``); code spans and blocks need none of it, GitHub links nothing in
    them. Idempotent.
    """
    text = _ISSUE_URL.sub(lambda m: _URL_JOINTS.sub(ZWJ, m.group(0)), text)
    text = _MENTION.sub("@" + ZWJ, text)
    return _ISSUE_REF.sub(lambda m: m.group(0) + ZWJ, text)


def escape_markdown(text: str) -> str:
    """``text`` shown literally in GitHub Markdown, on one line, safe inside a table cell.

    HTML is escaped (``&``, ``<``, ``>``), Markdown punctuation (emphasis, code, links,
    ``|``, ``~``) is backslash-escaped, line breaks become spaces, and mentions, issue
    references and issue URLs are neutralized (``neutralize_references``): GitHub pings
    nobody and cross-references no issue.
    """
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return neutralize_references(text)


def _terminal_cell(cell: Cell | None) -> Text:
    if cell is None:
        return Text("·", style="dim")
    if cell.mixed:
        text = Text()
        for result in cell.results:
            text.append(GLYPHS[result.outcome], style=STYLES[result.outcome])
    else:
        text = Text(LABELS[cell.outcome], style=STYLES[cell.outcome])
    if cell.flaky:
        text.append(FLAKY, style="yellow")
    return text


def _markdown_cell(cell: Cell | None) -> str:
    if cell is None:
        return ""
    if cell.mixed:
        label = "".join(GLYPHS[r.outcome] for r in cell.results)
        label = escape_markdown(label)
    else:
        label = MARKDOWN_LABELS[cell.outcome]
    return label + ("\\~" if cell.flaky else "")


def _summary(table: DtypeTable) -> str:
    """'pass 40 · XPASS 2 · xfail 7 · flaky 1': outcomes that occur, then flaky cells."""
    counts = table.counts()
    parts = [f"{LABELS[o]} {counts[o.value]}" for o in DISPLAY_ORDER if counts[o.value]]
    return " · ".join([*parts, f"flaky {table.flaky_count}"])


def legend(outcomes: Iterable[Outcome] = DISPLAY_ORDER, *, flaky: bool = True) -> list[str]:
    """One ``label: meaning`` line per outcome (in display order), then flaky's."""
    shown = set(outcomes)
    lines = [f"{LABELS[o]}: {MEANINGS[o]}" for o in DISPLAY_ORDER if o in shown]
    return [*lines, f"{FLAKY} {FLAKY_MEANING}"] if flaky else lines


def _present(table: DtypeTable) -> list[Outcome]:
    return [o for o in DISPLAY_ORDER if table.counts()[o.value]]


def _legend(table: DtypeTable) -> str | None:
    """Explains per-runner glyphs, only when some cell needs them."""
    if not any(cell.mixed for row in table.rows for cell in row.cells):
        return None
    glyphs = ", ".join(f"{GLYPHS[o]} {LABELS[o]}" for o in DISPLAY_ORDER)
    return f"runners disagree: one glyph per runner ({', '.join(table.runners)}): {glyphs}"


def render_terminal(table: DtypeTable, console: Console | None = None) -> None:
    """Print ``table`` with rich: one row per operator (and test kind), one column per dtype."""
    console = console or terminal()
    if not table.rows:
        console.print("[dim]no consistency test results[/dim]")
        return
    show_kind = len(table.kinds) > 1
    grid = Table(title="MPS consistency results", title_justify="left", header_style="bold")
    grid.add_column("operator", no_wrap=True)
    if show_kind:
        grid.add_column("test")
    for dtype in table.dtypes:
        grid.add_column(dtype, justify="center")
    for row in table.rows:
        lead = [Text(row.name)]
        if show_kind:
            lead.append(Text(_KIND_LABELS.get(row.kind, row.kind), style="dim"))
        grid.add_row(*lead, *(_terminal_cell(row.cell(d)) for d in table.dtypes))
    console.print(grid)
    footer = _summary(table)
    if len(table.runners) > 1:
        footer += f"  (runners: {', '.join(table.runners)})"
    console.print(Text(footer + f"   {FLAKY} = flaky", style="dim"))
    glyphs = _legend(table)
    if glyphs:
        console.print(Text(glyphs, style="dim"))
    for line in legend(_present(table), flaky=table.flaky_count > 0):
        console.print(Text(f"  {line}", style="dim"))


def render_markdown(table: DtypeTable, *, max_messages: int = 20) -> str:
    """GitHub Markdown: the table, a one-line summary, and the first failure messages.

    Messages are the fail/error/xpass results' first lines, escaped and cut to 200 chars.
    """
    if not table.rows:
        return "_No consistency test results._\n"
    show_kind = len(table.kinds) > 1
    header = ["Operator", *(["Test"] if show_kind else []), *table.dtypes]
    lines = [
        "| " + " | ".join(escape_markdown(h) for h in header) + " |",
        "| --- |" + (" --- |" if show_kind else "") + " :-: |" * len(table.dtypes),
    ]
    for row in table.rows:
        cells = [escape_markdown(row.name)]
        if show_kind:
            cells.append(escape_markdown(_KIND_LABELS.get(row.kind, row.kind)))
        cells += [_markdown_cell(row.cell(d)) for d in table.dtypes]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", _summary(table) + f" ({escape_markdown(FLAKY)} = flaky)"]
    glyphs = _legend(table)
    if glyphs:
        lines += ["", escape_markdown(glyphs)]
    lines += ["", "<details><summary>Legend</summary>", ""]
    lines += [f"- {escape_markdown(line)}" for line in legend()]
    lines += ["", "</details>"]

    problems = [
        (row, cell.dtype, result)
        for row in table.rows
        for cell in row.cells
        for result in cell.results
        if result.outcome in (Outcome.FAIL, Outcome.ERROR, Outcome.XPASS)
    ]
    if problems and max_messages > 0:
        lines += ["", "Messages:", ""]
        for row, dtype, result in problems[:max_messages]:
            message = (
                XPASS_MESSAGE
                if result.outcome is Outcome.XPASS
                else result.message or "(no message)"
            )
            if len(message) > _MAX_MESSAGE_CHARS:
                message = message[: _MAX_MESSAGE_CHARS - 1] + "…"
            where = f"{row.name} {dtype}" + (
                f" on {result.runner}" if len(table.runners) > 1 else ""
            )
            lines.append(
                f"- {escape_markdown(where)}: {LABELS[result.outcome]}: {escape_markdown(message)}"
            )
        if len(problems) > max_messages:
            lines.append(f"- …and {len(problems) - max_messages} more")
    return "\n".join(lines) + "\n"


def render_json(table: DtypeTable) -> str:
    """``table.to_dict()`` as indented JSON (UTF-8 text, not ASCII-escaped)."""
    return json.dumps(table.to_dict(), indent=2, ensure_ascii=False) + "\n"
