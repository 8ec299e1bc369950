"""Which xfail entries of common_mps.py the test results say can go.

Only an xpass is evidence: a dtype leaves an entry when its test xpassed on every runner in
scope (and on every required runner). Anything else keeps it: a flaky result, a dtype that
was not run, a plain pass (the entry did not apply to that run), a failure. An entry for all
dtypes (None) is judged on every dtype its test is instantiated for (the OpInfo's), not only
on those the results hold: a report cut short or a run filtered to some dtypes leaves the
others "not run", and they keep the entry. Skip lists are never touched (a skipped test
proves nothing), sparse-only lists neither, and macOS-version lists only count runners on
the versions they apply to. The result is one decision per entry with its reason, for
people; ``to_changes`` turns the actionable ones into the editor's input.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import NotRequired, Protocol, TypedDict

from pipeline.dtypes import sort_key
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import Cell, DtypeTable, merge_runs


class XfailAction(str, Enum):
    """What an xfail decision does to its entry (the glossary's five)."""

    KEEP = "keep"
    DROP_DTYPES = "drop_dtypes"  # some dtypes leave the entry's list
    DELETE = "delete"  # the whole entry goes
    NARROW_NONE = "narrow_none"  # an all-dtypes entry (None) lists the dtypes that still fail
    MOVE = "move"  # the dtypes leave for a macOS-version list (pipeline.results.macos)

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> XfailAction:
        """The action named ``text``; ValueError naming the five otherwise."""
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(a.value for a in cls)
            raise ValueError(f"{text!r} is no xfail action (one of {known})") from None


# The modifier a list lives in says which consistency test its xfails decorate.
_KIND_BY_FUNCTION = {
    "mps_ops_modifier": "output_match",
    "mps_ops_grad_modifier": "output_grad_match",
    # an OpInfo's DecorateInfo names the test it decorates (pipeline.results.decorations)
    "TestConsistency.test_output_match": "output_match",
    "TestConsistency.test_output_grad_match": "output_grad_match",
}
_MACOS_BOUND = re.compile(r"MACOS_(BEFORE|AFTER)_(\d+)(?:_(\d+))?_")
_VERSION = re.compile(r"^(\d+)(?:[._](\d+))?$")


class XfailLike(Protocol):
    """What decide needs of pipeline.tree.common_mps.XfailEntry."""

    @property
    def list(self) -> str: ...
    @property
    def function(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def dtypes(self) -> tuple[str, ...] | None: ...


class OpInfoLike(Protocol):
    """What decide needs of pipeline.tree.opinfo.OpInfoRecord."""

    @property
    def key(self) -> str: ...
    @property
    def stem(self) -> str: ...
    def dtypes_for(self, kind: str) -> tuple[str, ...]: ...


class XfailDecisionJson(TypedDict):
    list: str
    function: str
    key: str
    action: str
    reason: str
    old_dtypes: list[str] | None  # None: every dtype
    new_dtypes: list[str] | None
    dropped: list[str]
    to_list: NotRequired[str]  # a move's only
    at: NotRequired[str]  # an entry's outside common_mps.py only


@dataclass(frozen=True)
class XfailDecision:
    """What to do with one xfail entry, and why.

    ``new_dtypes`` is what the entry should list afterwards: ``old_dtypes`` for "keep",
    ``()`` for "delete", the remaining/still-failing dtypes otherwise (None = all dtypes).
    ``dropped`` is what leaves it: the dtypes that xpassed everywhere (``()`` for "keep"),
    or for a "move", the dtypes that go to ``to_list`` (``new_dtypes``: what stays).
    """

    list: str
    function: str
    key: str
    action: XfailAction
    old_dtypes: tuple[str, ...] | None
    new_dtypes: tuple[str, ...] | None
    reason: str
    dropped: tuple[str, ...] = ()
    to_list: str | None = None  # a "move"'s destination list (in the same function)
    # file:line of an entry outside common_mps.py (an OpInfo's DecorateInfo); "" for a list's
    at: str = ""

    def dropping_only(self, dtypes: Collection[str], reason: str) -> XfailDecision:
        """This entry's decision when only ``dtypes`` of ``dropped`` go (the rest stay)."""
        old = self.old_dtypes
        # the dtypes this decision judged: for an all-dtypes entry, what stays plus what goes
        judged = old if old is not None else (*(self.new_dtypes or ()), *self.dropped)
        going = set(dtypes) & set(self.dropped)
        decision = _dropping(self.list, self.function, self.key, old, judged, going, reason)
        return replace(decision, at=self.at)

    def to_dict(self) -> XfailDecisionJson:
        """The decision as JSON data: every field, dtype tuples as lists (None = all dtypes)."""
        as_list = lambda dtypes: None if dtypes is None else list(dtypes)  # noqa: E731
        out: XfailDecisionJson = {
            "list": self.list,
            "function": self.function,
            "key": self.key,
            "action": self.action.value,
            "reason": self.reason,
            "old_dtypes": as_list(self.old_dtypes),
            "new_dtypes": as_list(self.new_dtypes),
            "dropped": list(self.dropped),
        }
        if self.to_list is not None:
            out["to_list"] = self.to_list
        if self.at:
            out["at"] = self.at
        return out


def runner_version(runner: str) -> tuple[int, ...] | None:
    """macOS version of a runner named like ``macos-m1-14`` or ``macos-m2-15.5`` (last part).

    A bare major version reads as ``.0``: ``macos-m1-14`` counts as macOS 14.0.
    """
    match = _VERSION.match(runner.rsplit("-", 1)[-1])
    if match is None:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def version_key(version: tuple[int, ...]) -> tuple[int, ...]:
    """``version`` for comparing: 15, 15.0 and 15.0.0 are one release (trailing zeros go)."""
    parts = list(version)
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def list_bound(list_name: str) -> tuple[str, tuple[int, ...]] | None:
    """("BEFORE" or "AFTER", version) of a macOS-version list's name, else None."""
    match = _MACOS_BOUND.search(list_name + "_")
    if match is None:
        return None
    return match.group(1), tuple(int(part) for part in match.groups()[1:] if part is not None)


def show_version(version: tuple[int, ...]) -> str:
    """``(15,)`` -> ``"15.0"``, ``(15, 5, 1)`` -> ``"15.5.1"``."""
    parts = (*version, 0) if len(version) == 1 else version
    return ".".join(map(str, parts))


def list_versions(list_name: str) -> str | None:
    """The macOS versions a list applies to, for people: ``macOS before 13.3``; None when
    its name does not say."""
    bound = list_bound(list_name)
    if bound is None:
        return None
    side, at = bound
    shown = show_version(at)
    return f"macOS before {shown}" if side == "BEFORE" else f"macOS {shown} or later"


def list_runners(list_name: str, runners: Iterable[str]) -> tuple[str, ...] | None:
    """Those of ``runners`` a macOS-version list applies to, by the version their names end
    in (a runner whose name gives none is not covered); None when the list's name does not
    say which versions it applies to."""
    if list_bound(list_name) is None:
        return None
    return tuple(r for r in runners if _applies(list_name, runner_version(r)))


def _applies(list_name: str, version: tuple[int, ...] | None) -> bool | None:
    """Does a macOS-version list apply on ``version``? None: the list's name does not say."""
    bound = list_bound(list_name)
    if bound is None:
        return None
    if version is None:
        return False
    side, at = bound
    before = version_key(version) < version_key(at)
    return before if side == "BEFORE" else not before


def entry_kind(entry: XfailLike) -> str | None:
    """The consistency test kind an entry's list decorates; None for other modifiers."""
    kind = _KIND_BY_FUNCTION.get(entry.function)
    if kind is None and "GRAD" in entry.list.upper():
        return "output_grad_match"
    return kind


def _evidence(cell: Cell | None, scope: Sequence[str], required: Sequence[str]) -> tuple[bool, str]:
    """(xpassed on every runner in scope that ran it and on every required one, what was seen)."""
    results = [r for r in (cell.results if cell else ()) if r.runner in scope]
    have = {r.runner for r in results}
    missing = [r for r in required if r not in have]
    if missing:
        return False, f"not run on {', '.join(missing)}"
    if not results:
        return False, "not run"
    flaky = [r.runner for r in results if r.flaky]
    if flaky:
        return False, f"flaky on {', '.join(flaky)}"
    by_outcome: dict[str, list[str]] = {}
    for r in results:
        by_outcome.setdefault(r.outcome.value, []).append(r.runner)
    seen = "; ".join(f"{o} on {', '.join(rs)}" for o, rs in by_outcome.items())
    return list(by_outcome) == [Outcome.XPASS.value], seen


def _dropping(
    list_name: str,
    function: str,
    key: str,
    old: tuple[str, ...] | None,
    judged: Iterable[str],
    gone: Collection[str],
    reason: str,
) -> XfailDecision:
    """The decision removing ``gone`` from an entry listing ``old``, of which ``judged`` were
    looked at (for an all-dtypes entry: every dtype the test runs for)."""
    judged = tuple(judged)
    dropped = tuple(d for d in judged if d in gone)
    if not dropped:
        return XfailDecision(list_name, function, key, XfailAction.KEEP, old, old, reason)
    remaining = tuple(d for d in judged if d not in gone)
    if not remaining:
        action = XfailAction.DELETE
    elif old is None:
        remaining = tuple(sorted(remaining, key=sort_key))
        action = XfailAction.NARROW_NONE
    else:
        action = XfailAction.DROP_DTYPES
    return XfailDecision(list_name, function, key, action, old, remaining, reason, dropped)


def _decide(
    entry: XfailLike, info: OpInfoLike, table: DtypeTable, required: Sequence[str]
) -> XfailDecision:
    def keep(reason: str) -> XfailDecision:
        return XfailDecision(
            entry.list, entry.function, entry.key, XfailAction.KEEP, old, old, reason
        )

    old = entry.dtypes
    raw = getattr(entry, "raw", None)
    if raw is not None:
        return keep(f"the value is not a plain dtype list ({raw}); review it by hand")
    if "SKIP" in entry.list.upper():
        return keep("skip list: a skipped test proves nothing either way; review it by hand")
    if "SPARSE" in entry.list.upper():
        # merged into its dense twin only for sparse tests: the xpass we see is the twin's
        return keep("applies to the sparse tests only, which these results do not cover")
    kind = entry_kind(entry)
    if kind is None:
        return keep(f"{entry.function} does not decorate the consistency tests")
    row = table.row(info.stem, kind)
    if row is None:
        return keep(f"no {kind} results for {info.stem}")

    scope: Sequence[str] = table.runners
    if "MACOS" in entry.list.upper():
        covered = list_runners(entry.list, (*table.runners, *required))
        if covered is None:
            return keep("macOS list whose name does not say which versions it applies to")
        scope = [r for r in table.runners if r in covered]
        required = [r for r in required if r in covered]
        if not scope:
            return keep(f"macOS list: no results from runners it applies to ({entry.list})")

    if old == ():
        return keep("the entry lists no dtypes: it xfails nothing")
    if old is not None:
        targets = old
    else:
        # Every dtype the test runs for, not just those in the results: the missing ones
        # are "not run" and keep the entry. The results' own dtypes count too, should the
        # OpInfo metadata be older than the run.
        targets = tuple(sorted({*info.dtypes_for(kind), *row.dtypes}, key=sort_key))
    evidence = {d: _evidence(row.cell(d), scope, required) for d in targets}
    gone = {d for d, (xpassed, _) in evidence.items() if xpassed}
    # 'float16, int8: xpass on macos-m1-14, macos-m2-15; bool: not run'
    groups: dict[str, list[str]] = {}
    for dtype, (_, seen) in evidence.items():
        groups.setdefault(seen, []).append(dtype)
    summary = "; ".join(f"{', '.join(dtypes)}: {seen}" for seen, dtypes in groups.items())
    return _dropping(entry.list, entry.function, entry.key, old, targets, gone, summary)


def decide_xfails(
    entries: Iterable[XfailLike],
    results_by_runner: Mapping[str, Sequence[CaseResult]] | DtypeTable,
    required_runners: Sequence[str] = (),
    *,
    opinfos: Iterable[OpInfoLike],
) -> tuple[XfailDecision, ...]:
    """One decision per xfail entry of the OpInfos, in entry order.

    ``opinfos`` are the operator(s)' OpInfos (``OpInfoRecord``): an entry belongs to the one
    whose ``key`` it has, and is judged on its tests (``stem``) and, when it lists all
    dtypes, on every dtype the test is instantiated for (``dtypes``; float32/float16 only
    for the grad test). Entries of other keys are not decided. ``results_by_runner`` is
    runner name -> that runner's cases (or an already merged table). With
    ``required_runners``, a dtype goes only when it xpassed on all of them.
    """
    table = (
        results_by_runner
        if isinstance(results_by_runner, DtypeTable)
        else merge_runs(results_by_runner)
    )
    by_key = {info.key: info for info in opinfos}
    required = tuple(required_runners)
    return tuple(
        replace(_decide(entry, by_key[entry.key], table, required), at=getattr(entry, "at", ""))
        for entry in entries
        if entry.key in by_key
    )
