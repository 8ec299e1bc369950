"""The migration tracker: one marked section of an issue body, and the claims for a terminal.

The section sits between ``START`` and ``END``; everything else in the body is the
maintainers' own and is kept byte for byte. A body without the section gets it appended.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.guide.backlog import xfail_cell
from pipeline.guide.claims import Claim, ClaimState, PullRequest
from pipeline.report.pr_comment import code_span, defuse

START = "<!-- mps-pipeline:tracker:start -->"
END = "<!-- mps-pipeline:tracker:end -->"
_SECTION = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
# a backlog row's operator, and the merged line's operators, as render_section writes them
_ROW_OP = re.compile(r"^\| \d+ \| `([^`]+)` \|", re.M)
_MERGED_LINE = re.compile(r"^\*\*Merged since listed:\*\* (.*)$", re.M)
MARKS = {
    ClaimState.UNCLAIMED: "unclaimed",
    ClaimState.CLAIMED: "claimed",
    ClaimState.DUPLICATE: "⚠️ duplicate",
    ClaimState.MERGED: "merged",
}


def _prs(claim: Claim, prs: dict[int, PullRequest]) -> str:
    # a PR number as #N is what GitHub links (a cross-reference, on purpose); titles and
    # logins come from other people and are defused
    return ", ".join(
        f"#{n} ({defuse(code_span(prs[n].author))})" if n in prs else f"#{n}" for n in claim.prs
    )


def render_section(found: Sequence[Claim], prs: Sequence[PullRequest]) -> str:
    """The tracker's section, markers included: the backlog easiest first, then merged."""
    by_number = {pr.number: pr for pr in prs}
    listed = [c for c in found if c.item is not None]
    merged = [c.op for c in found if c.state is ClaimState.MERGED]
    duplicates = sum(c.state is ClaimState.DUPLICATE for c in listed)
    claimed = sum(c.state is not ClaimState.UNCLAIMED for c in listed)
    lines = [
        START,
        f"### MPS migration backlog: {len(listed)} operators, easiest first",
        "",
        f"{claimed} claimed by open pull requests ({duplicates} of them by more than one: "
        f"duplicates), {len(listed) - claimed} unclaimed. _Kept by mps-pipeline's nightly "
        "tracker: edits inside this section are replaced._",
        "",
        "| # | operator | workflow | overloads | xfail dtypes | state | open PRs |",
        "| ---: | --- | --- | ---: | ---: | --- | --- |",
    ]
    for rank, c in enumerate(listed, 1):
        item = c.item
        assert item is not None
        lines.append(
            f"| {rank} | `{c.op}` | {item.workflow} | {item.overloads} "
            f"| {xfail_cell(item.xfail_dtypes, item.has_opinfo)} "
            f"| {MARKS[c.state]} | {_prs(c, by_number)} |"
        )
    if merged:
        lines += ["", "**Merged since listed:** " + ", ".join(f"`{op}`" for op in merged)]
    lines.append(END)
    return "\n".join(lines)


def replace_section(body: str, section: str) -> str:
    """``body`` with its tracker section replaced by ``section`` (appended if none)."""
    if _SECTION.search(body):
        return _SECTION.sub(lambda _: section, body, count=1)
    return f"{body.rstrip()}\n\n{section}\n" if body.strip() else f"{section}\n"


def listed_operators(body: str) -> tuple[set[str], set[str]]:
    """The operators the body's section lists: (backlog rows, merged ones)."""
    match = _SECTION.search(body)
    if not match:
        return set(), set()
    text = match.group(0)
    rows = set(_ROW_OP.findall(text))
    merged = {op for line in _MERGED_LINE.findall(text) for op in re.findall(r"`([^`]+)`", line)}
    return rows, merged


def render_claims(found: Sequence[Claim], prs: Sequence[PullRequest], console: Console) -> None:
    """``backlog --claims``: the backlog with who is working on what."""
    by_number = {pr.number: pr for pr in prs}
    table = Table(title=f"MPS migration backlog with claims: {len(found)} operators")
    for col in ("#", "operator", "workflow", "state", "open PRs"):
        table.add_column(col)
    for rank, c in enumerate(found, 1):
        style = {ClaimState.DUPLICATE: "red", ClaimState.UNCLAIMED: "green"}.get(c.state, "")
        prs_text = ", ".join(
            f"#{n} {by_number[n].title} ({by_number[n].author})" if n in by_number else f"#{n}"
            for n in c.prs
        )
        table.add_row(
            str(rank) if c.item else "",
            escape(c.op),
            str(c.item.workflow) if c.item else "",
            f"[{style}]{c.state}[/]" if style else str(c.state),
            escape(prs_text),
        )
    console.print(table)
