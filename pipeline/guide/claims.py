"""Who is migrating what: the backlog's operators against the open MPS pull requests.

A pull request claims an operator when its changed lines name one of the operator's own
identifiers (``atan2_functor``, ``atan2_out_mps``, ``atan2_stub``), name the operator where
only an operator's name goes (``func: atan2(``, the first argument of a ``REGISTER_*``
macro, a ``"atan2"`` string), or its title names it. Two or more open pull requests on one
operator are duplicates: the "scooped"/"superseded" closes of pytorch#187455.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from pipeline.guide.backlog import BacklogItem

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# where a bare operator name stands for the operator, not for an English word
_BARE = re.compile(
    r"func:\s*([A-Za-z_][A-Za-z0-9_]*)[.(]"  # a yaml schema
    r"|\b[A-Z_]+\(\s*([a-z_][a-z0-9_]*)\s*,"  # REGISTER_BINARY_OP(atan2, ...
    r'|"([a-z_][a-z0-9_.]*)"'  # a kernel name or an xfail key
)
_TITLE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


class ClaimState(str, Enum):
    UNCLAIMED = "unclaimed"
    CLAIMED = "claimed"  # one open pull request
    DUPLICATE = "duplicate"  # two or more open pull requests
    MERGED = "merged"  # left the backlog since the tracker last listed it

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PullRequest:
    """An open pull request as the claims need it: the words of its changed lines."""

    number: int
    title: str
    author: str
    files: tuple[str, ...]
    words: frozenset[str]


@dataclass(frozen=True)
class Claim:
    op: str
    state: ClaimState
    prs: tuple[int, ...]  # open pull requests claiming it, oldest first
    item: BacklogItem | None  # None for a merged operator


def identifiers(op: str, old_names: Iterable[str] = ()) -> frozenset[str]:
    """The words that name operator ``op`` in a change: its own identifiers and its name."""
    return frozenset({op, f"{op}_functor", f"{op}_stub", f"{op}_out_mps", f"{op}_mps", *old_names})


def patch_words(patch: str) -> set[str]:
    """The words of a unified diff's changed lines that can name an operator: every
    identifier with an underscore or digit, and bare names in an operator's places."""
    words: set[str] = set()
    for line in patch.splitlines():
        if line[:1] not in ("+", "-") or line.startswith(("+++", "---")):
            continue
        words.update(w for w in _IDENTIFIER.findall(line) if "_" in w or not w.isalpha())
        for match in _BARE.finditer(line):
            words.update(g for g in match.groups() if g)
    return words


def title_words(title: str) -> set[str]:
    return {w.strip(".") for w in _TITLE_WORD.findall(title)}


def claims(
    items: Sequence[BacklogItem],
    names: Mapping[str, frozenset[str]],
    prs: Sequence[PullRequest],
    merged: Iterable[str] = (),
) -> tuple[Claim, ...]:
    """Each backlog item (in backlog order, easiest first) with its claims, then the
    ``merged`` operators that are no longer in the backlog. ``names``: op -> its
    :func:`identifiers` (an op without an entry goes by :func:`identifiers` of its name)."""
    owners: dict[str, set[str]] = {}
    for item in items:
        for word in names.get(item.op) or identifiers(item.op):
            owners.setdefault(word, set()).add(item.op)
    claimed: dict[str, list[int]] = {}
    for pr in sorted(prs, key=lambda p: p.number):
        ops = {op for w in pr.words if w in owners for op in owners[w]}
        ops |= {item.op for item in items if item.op in title_words(pr.title)}
        for op in ops:
            claimed.setdefault(op, []).append(pr.number)
    out = []
    for item in items:
        numbers = tuple(claimed.get(item.op, ()))
        state = (
            ClaimState.DUPLICATE if len(numbers) > 1
            else ClaimState.CLAIMED if numbers else ClaimState.UNCLAIMED
        )  # fmt: skip
        out.append(Claim(item.op, state, numbers, item))
    listed = {item.op for item in items}
    out += [Claim(op, ClaimState.MERGED, (), None) for op in sorted(set(merged) - listed)]
    return tuple(out)


def to_json(found: Sequence[Claim], prs: Sequence[PullRequest]) -> dict:
    """``backlog --claims --json``'s document (docs/machine-output.md)."""
    by_number = {pr.number: pr for pr in prs}
    return {
        "schema": 1,
        "operators": [
            {
                "op": c.op,
                "state": c.state.value,
                "rank": i + 1 if c.item else None,
                "workflow": c.item.workflow.value if c.item else None,
                "prs": [
                    {"number": n, "title": by_number[n].title, "author": by_number[n].author}
                    for n in c.prs
                ],
            }
            for i, c in enumerate(found)
        ],
    }
