"""Which MPS xfails outside common_mps.py can be judged by the tests the tool runs (issue 31).

The tool runs the consistency tests (``TestConsistency.test_output_match`` and
``test_output_grad_match``). A ``DecorateInfo`` xfail of an OpInfo that decorates one of
them is judged as a common_mps.py entry is (:func:`pipeline.results.decide.decide_xfails`:
every runner, flaky-aware, macOS-aware): it becomes a :class:`DecorationEntry`. Everything
else is kept, each with the reason, never left out silently:

- a skip (a skipped test proves nothing), a decorator in a test file, a ``DecorateInfo``
  reaching other tests (``TestCommon.test_python_ref``) or every test: their tests do not
  run here, so their results are unknown;
- one on ``TestConsistency`` with no test name: it reaches both consistency tests, while a
  decision judges one;
- a ``DecorateInfo`` of an OpInfo no consistency test runs (a ``PythonRefInfo``'s);
- an ``active_if`` other than a plain macOS bound (``MACOS_VERSION < 14.0``) or a condition
  every runner meets (``IS_MACOS``, ``TEST_MPS``).

A macOS bound is judged on the runners it holds on, as a ``MACOS_BEFORE_<V>`` list is: the
entry's ``list`` spells the bound that way for :func:`decide.list_bound` to read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.results import decide
from pipeline.results.decide import OpInfoLike, XfailAction, XfailDecision
from pipeline.results.table import DtypeTable
from pipeline.tree.decorations import Decoration, DecorationKind, Place

# the list name a DecorateInfo's decision shows (and its macOS bound, if any)
LIST = "DecorateInfo"
# tests the tool runs: what a DecorateInfo's cls_name.test_name must be to be judged
_JUDGED_TESTS = {
    "TestConsistency.test_output_match",
    "TestConsistency.test_output_grad_match",
}
# conditions true on every runner (all are Macs with MPS)
_ALWAYS = re.compile(r"\A\(?\s*(?:IS_MACOS|TEST_MPS|IS_APPLE_M1)\s*\)?\Z")
_BOUND = re.compile(r"\A\(?\s*MACOS_VERSION\s*(<|>=)\s*(\d+)(?:\.(\d+))?\s*\)?\Z")


@dataclass(frozen=True)
class DecorationEntry:
    """A judgeable DecorateInfo, in the shape :class:`decide.XfailLike` asks for."""

    list: str  # "DecorateInfo", or "DecorateInfo_MACOS_BEFORE_14_0" for a bound
    function: str  # the test it decorates: "TestConsistency.test_output_match"
    key: str  # its OpInfo's
    dtypes: tuple[str, ...] | None
    raw: str | None  # dtypes not given as a literal list: kept by decide
    at: str  # file:line


def _list_name(active_if: str | None) -> str | None:
    """The list name that carries ``active_if``'s macOS bound; None when the condition is
    not one this module reads."""
    if active_if is None or _ALWAYS.match(active_if):
        return LIST
    bound = _BOUND.match(active_if)
    if bound is None:
        return None
    side = "BEFORE" if bound.group(1) == "<" else "AFTER"
    return f"{LIST}_MACOS_{side}_{bound.group(2)}_{bound.group(3) or 0}"


def _keep(d: Decoration, reason: str) -> XfailDecision:
    return XfailDecision(
        LIST if d.place is Place.OPINFO else d.place.value,
        d.test or "every test",
        d.key or d.test or "",
        XfailAction.KEEP,
        d.dtypes,
        d.dtypes,
        reason,
        at=str(d.span),
    )


def split(
    decorations: Iterable[Decoration], keys: Iterable[str]
) -> tuple[tuple[DecorationEntry, ...], tuple[XfailDecision, ...]]:
    """The xfails and skips among ``decorations`` as (those the consistency tests of the
    OpInfos ``keys`` judge, a "keep" decision with its reason for each of the others)."""
    known = set(keys)
    judged: list[DecorationEntry] = []
    kept: list[XfailDecision] = []
    for d in decorations:
        if not d.kind.expects_failure:
            continue  # a tolerance: the test runs and is expected to pass
        if d.place is Place.TEST_FILE:
            kept.append(_keep(d, f"a decorator on {d.test}, a test the tool does not run"))
        elif d.kind is DecorationKind.SKIP:
            kept.append(_keep(d, "a skip: a skipped test proves nothing; review it by hand"))
        elif d.test == "TestConsistency.*":
            why = "decorates both consistency tests at once, and each is judged apart"
            kept.append(_keep(d, f"{why}; review it by hand"))
        elif d.test not in _JUDGED_TESTS:
            what = d.test or "every test"
            kept.append(_keep(d, f"decorates {what}, which the tool does not run"))
        elif d.key not in known:
            kept.append(_keep(d, f"no consistency test runs the OpInfo {d.key!r}"))
        elif (name := _list_name(d.active_if)) is None:
            kept.append(_keep(d, f"active_if {d.active_if}: when it holds is not read"))
        else:
            judged.append(DecorationEntry(name, d.test, d.key, d.dtypes, d.raw_dtypes, str(d.span)))
    return tuple(judged), tuple(kept)


def decide_decorations(
    decorations: Iterable[Decoration],
    table: DtypeTable,
    required: Sequence[str] = (),
    *,
    opinfos: Sequence[OpInfoLike],
) -> tuple[XfailDecision, ...]:
    """One decision per MPS xfail or skip of ``decorations`` (file order): judged by
    :func:`decide.decide_xfails` where the consistency tests reach it, else kept with why."""
    judged, kept = split(decorations, (info.key for info in opinfos))
    decisions = (*decide.decide_xfails(judged, table, required, opinfos=opinfos), *kept)
    return tuple(sorted(decisions, key=lambda d: _place(d.at)))


def _place(at: str) -> tuple[str, int]:
    path, _, line = at.rpartition(":")
    return path, int(line)
