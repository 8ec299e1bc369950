"""The review checks' findings for a terminal and for the PR comment."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from pipeline.guide.review.base import Finding, Severity
from pipeline.report.pr_comment import code_span, defuse

STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "dim"}
ICON = {Severity.ERROR: "❌", Severity.WARNING: "⚠️", Severity.INFO: "ℹ️"}
MAX_LISTED = 50


def render_terminal(findings: Sequence[Finding], notes: Sequence[str], console: Console) -> None:
    """One line per finding: ``path:line: severity [check] reason``; one per note (what
    could not be judged); then their counts, each in the word its lines use."""
    for f in findings:
        console.print(
            f"{escape(f.path)}:{f.line}: [{STYLE[f.severity]}]{f.severity}[/] "
            f"[bold]\\[{f.check}][/] {escape(f.reason)}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    for note in notes:
        console.print(f"[dim]note: {escape(note)}[/]", highlight=False, soft_wrap=True)
    counts = {s: sum(f.severity is s for f in findings) for s in Severity}
    words = [_count(counts[Severity.ERROR], "error"), _count(counts[Severity.WARNING], "warning"),
             f"{counts[Severity.INFO]} info", _count(len(notes), "note")]  # fmt: skip
    console.print(f"review: {', '.join(words)}", highlight=False)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_markdown(findings: Sequence[Finding], notes: Sequence[str] = ()) -> str:
    """The PR comment's review section (defused: reasons quote names from the diff)."""
    lines = ["### Review checks", ""]
    if not findings:
        lines.append("No findings.")
    for f in findings[:MAX_LISTED]:
        where = code_span(f"{f.path}:{f.line}")
        lines.append(f"- {ICON[f.severity]} **{f.check}** {where}: {defuse(f.reason)}")
    if len(findings) > MAX_LISTED:
        lines.append(f"- _…and {len(findings) - MAX_LISTED} more (`mps-pipeline review`)_")
    lines += [f"\n_{defuse(n)}_" for n in notes]
    return "\n".join(lines) + "\n"
