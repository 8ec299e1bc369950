"""macOS-version moves: an xfail that only the older Macs still need.

A dtype of an xfail entry that, on a night, xpasses on every runner whose macOS version is
V or newer and xfails on every runner older than V is not kept where it is: it moves from
its list into ``MACOS_BEFORE_<V>_XFAILLIST`` (``MACOS_BEFORE_<V>_XFAILLIST_GRAD`` for an
entry of ``mps_ops_grad_modifier``), in the same function. V is the lowest macOS version
among the runners where it xpassed, written ``<major>_<minor>`` as common_mps.py spells
versions (runners on 14, 15 and 26, failing on 14 only: ``MACOS_BEFORE_15_0_XFAILLIST``);
every failing runner must be older than that ``major.minor``, or there is no such list.

As for removals (:mod:`pipeline.results.nightly`), one night is not enough: the same move
(same dtype, same destination) must hold in each of the last ``min_passes`` nightlies, with
results from every required runner and no flaky one. Only the plain xfail lists move
(``UNIMPLEMENTED_XFAILLIST``, ``ON_MPS_XFAILLIST``, ``XFAILLIST_GRAD``...): skip lists,
sparse-only lists, entries whose value is not a literal dtype list, and the macOS-version
lists themselves stay (a macOS list whose dtypes now xpass on the versions it applies to is
a plain removal, :mod:`pipeline.results.decide`).

A runner's macOS version is the ``runners:`` table's (:attr:`pipeline.config.Settings.
runner_macos`), else read from its name (``macos-m2-15``: 15.0). A runner whose version is
not known takes part in no move: a move it would be part of is reported in ``held``, with
why, instead of proposed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.dtypes import sort_key
from pipeline.results import decide, history
from pipeline.results.decide import (
    OpInfoLike,
    XfailAction,
    XfailDecision,
    XfailLike,
    show_version,
)
from pipeline.results.history_db import HistoryDB
from pipeline.results.junit import Outcome
from pipeline.results.table import Cell, DtypeTable, merge_runs

if TYPE_CHECKING:
    from pipeline.tree.index import TreeIndex

_GRAD_FUNCTION = "mps_ops_grad_modifier"


def macos_version(
    runner: str, table: Mapping[str, tuple[int, ...]] | None = None
) -> tuple[int, ...] | None:
    """The runner's macOS version: the ``runners:`` table's, else its name's; None if
    neither says."""
    return (table or {}).get(runner) or decide.runner_version(runner)


def target_list(entry: XfailLike, bound: tuple[int, int]) -> str:
    """The macOS-version list an entry's dtypes move to: ``MACOS_BEFORE_15_0_XFAILLIST``."""
    grad = entry.function == _GRAD_FUNCTION
    return f"MACOS_BEFORE_{bound[0]}_{bound[1]}_XFAILLIST" + ("_GRAD" if grad else "")


def not_movable(entry: XfailLike) -> str | None:
    """Why an entry's dtypes never move to a macOS-version list; None when they may."""
    name = entry.list.upper()
    if getattr(entry, "raw", None) is not None:
        return "the value is not a plain dtype list"
    if "SKIP" in name or "SPARSE" in name or "XFAIL" not in name:
        return "not a plain xfail list"
    if "MACOS" in name:
        return "a macOS-version list already"
    if decide.entry_kind(entry) is None:
        return f"{entry.function} does not decorate the consistency tests"
    if entry.dtypes == ():
        return "the entry lists no dtypes"
    return None


@dataclass(frozen=True)
class Split:
    """One dtype's results on one night: xfail on ``failing``, xpass on ``passing``.

    ``bound`` is where they part (the lowest passing version as ``(major, minor)``); None
    when they do not part at a version, with ``held`` saying why.
    """

    failing: tuple[str, ...]
    passing: tuple[str, ...]
    bound: tuple[int, int] | None
    held: str = ""


def split(
    cell: Cell | None,
    scope: Sequence[str],
    required: Sequence[str],
    versions: Mapping[str, tuple[int, ...]] | None = None,
) -> Split | None:
    """How ``cell``'s results on the runners in ``scope`` part by macOS version; None when
    they are not xfail on the older runners and xpass on the newer ones (each runner not
    flaky, every required one there)."""
    results = [r for r in (cell.results if cell else ()) if r.runner in scope]
    have = {r.runner for r in results}
    if any(r not in have for r in required) or any(r.flaky for r in results):
        return None
    failing = tuple(r.runner for r in results if r.outcome is Outcome.XFAIL)
    passing = tuple(r.runner for r in results if r.outcome is Outcome.XPASS)
    if not failing or not passing or len(failing) + len(passing) != len(results):
        return None
    version = {r: macos_version(r, versions) for r in (*failing, *passing)}
    unknown = [r for r, v in version.items() if v is None]
    if unknown:
        why = (
            f"the macOS version of {', '.join(unknown)} is not known (its name ends in no "
            "version and the runners: table gives none)"
        )
        return Split(failing, passing, None, why)
    known = {r: v for r, v in version.items() if v is not None}  # all of them, by now
    key = decide.version_key
    newest_failing = max(failing, key=lambda r: key(known[r]))
    oldest_passing = min(passing, key=lambda r: key(known[r]))
    low = known[oldest_passing]
    if key(known[newest_failing]) >= key(low):
        return None  # fails on a newer macOS than one it works on: no version boundary
    bound = (low[0], low[1] if len(low) > 1 else 0)
    if key(known[newest_failing]) >= key(bound):
        why = (
            f"xfails on {newest_failing} (macOS {show_version(known[newest_failing])}), "
            f"which a list for before macOS {show_version(bound)} would not cover"
        )
        return Split(failing, passing, None, why)
    return Split(failing, passing, bound)


def _judged(entry: XfailLike, info: OpInfoLike, table: DtypeTable) -> tuple[str, ...]:
    """The dtypes an entry is judged on: its own, or for all dtypes (None) the test's."""
    if entry.dtypes is not None:
        return entry.dtypes
    kind = decide.entry_kind(entry) or "output_match"
    row = table.row(info.stem, kind)
    found = {*info.dtypes_for(kind), *(row.dtypes if row else ())}
    return tuple(sorted(found, key=sort_key))


def night_splits(
    entry: XfailLike,
    info: OpInfoLike,
    table: DtypeTable,
    required: Sequence[str],
    versions: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, Split]:
    """dtype -> its split on one night (dtypes whose results do not split are left out)."""
    if not_movable(entry) is not None:
        return {}
    kind = decide.entry_kind(entry) or "output_match"
    row = table.row(info.stem, kind)
    if row is None:
        return {}
    found = {}
    for dtype in _judged(entry, info, table):
        s = split(row.cell(dtype), table.runners, required, versions)
        if s is not None:
            found[dtype] = s
    return found


@dataclass(frozen=True)
class Moves:
    """Confirmed moves (``action == "move"``), and the splits no move could be made of."""

    decisions: tuple[XfailDecision, ...]
    held: tuple[str, ...]


def _where(runners: Sequence[str], versions: Mapping[str, tuple[int, ...]] | None) -> str:
    shown = []
    for r in runners:
        v = macos_version(r, versions)
        shown.append(f"{r} (macOS {show_version(v)})" if v else r)
    return ", ".join(shown)


def decide_moves(
    entries: Iterable[XfailLike],
    tables: Sequence[DtypeTable],
    required: Sequence[str],
    versions: Mapping[str, tuple[int, ...]] | None = None,
    *,
    opinfos: Iterable[OpInfoLike],
    min_passes: int,
    span: str = "",
) -> Moves:
    """The moves ``tables`` (one per nightly, newest first) confirm: those that hold in
    each of the first ``min_passes``. ``span`` names those nightlies in the reasons."""
    by_key = {info.key: info for info in opinfos}
    decisions, held = [], []
    for entry in entries:
        info = by_key.get(entry.key)
        if info is None or not tables:
            continue
        tonight = night_splits(entry, info, tables[0], required, versions)
        for dtype, s in tonight.items():
            if s.held:
                held.append(f"{entry.list}[{entry.key!r}] {dtype}: {s.held}")
        tonight = {d: s for d, s in tonight.items() if s.bound is not None}
        if not tonight or len(tables) < min_passes:
            continue
        earlier = [night_splits(entry, info, t, required, versions) for t in tables[1:min_passes]]
        confirmed = {
            d: s
            for d, s in tonight.items()
            if all(d in night and night[d].bound == s.bound for night in earlier)
        }
        groups: dict[tuple[int, int], dict[tuple, list[str]]] = {}
        for dtype, s in confirmed.items():
            assert s.bound is not None
            groups.setdefault(s.bound, {}).setdefault((s.failing, s.passing), []).append(dtype)
        judged = _judged(entry, info, tables[0])
        for bound, sides in sorted(groups.items()):
            moving = {d for dtypes in sides.values() for d in dtypes}
            when = f"in each of the last {min_passes} nightlies" + (f" ({span})" if span else "")
            reason = "; ".join(
                f"{', '.join(dtypes)}: xfail on {_where(failing, versions)} and xpass on "
                f"{_where(passing, versions)} {when}"
                for (failing, passing), dtypes in sides.items()
            )
            reason += f": only macOS before {show_version(bound)} needs the xfail"
            decisions.append(
                XfailDecision(
                    entry.list,
                    entry.function,
                    entry.key,
                    XfailAction.MOVE,
                    entry.dtypes,
                    tuple(d for d in judged if d not in moving),
                    reason,
                    tuple(d for d in judged if d in moving),
                    to_list=target_list(entry, bound),
                )
            )
    return Moves(tuple(decisions), tuple(held))


def propose_moves(
    db: HistoryDB,
    index: TreeIndex,
    latest: DtypeTable,
    window: Sequence[history.Nightly],
    required: Sequence[str],
    versions: Mapping[str, tuple[int, ...]] | None,
    min_passes: int,
) -> Moves:
    """The moves the history confirms: ``latest`` is tonight's table, ``window`` the last
    nightlies, newest (tonight) first. ``index`` is the tree's TreeIndex."""
    keys = {info.key for info in index.opinfos}
    entries = [e for e in index.xfails.entries if e.key in keys and not_movable(e) is None]
    first = decide_moves(entries, [latest], required, versions, opinfos=index.opinfos,
                         min_passes=1)  # fmt: skip
    if not first.decisions or len(window) < min_passes:
        return Moves((), first.held)
    live = {(d.list, d.function, d.key) for d in first.decisions}
    entries = [e for e in entries if (e.list, e.function, e.key) in live]
    stem_of = {info.key: info.stem for info in index.opinfos}
    stems = {stem_of[e.key] for e in entries}
    tables = [latest]
    for night in window[1:min_passes]:
        runs = {r.runner: history.run_cases(db, r.id, stems=stems) for r in night.runs}
        tables.append(merge_runs(runs))
    starts = [n.started for n in window]
    span = f"{starts[min_passes - 1][:10]} … {starts[0][:10]}"
    moves = decide_moves(entries, tables, required, versions, opinfos=index.opinfos,
                         min_passes=min_passes, span=span)  # fmt: skip
    return Moves(moves.decisions, first.held)


def held_warnings(held: Sequence[str], limit: int = 3) -> tuple[str, ...]:
    """``held`` as the nightly's warnings: the first few, then how many more."""
    out = [f"no macOS-version move for {h}" for h in held[:limit]]
    if len(held) > limit:
        out.append(f"no macOS-version move for {len(held) - limit} more dtype(s), likewise")
    return tuple(out)
