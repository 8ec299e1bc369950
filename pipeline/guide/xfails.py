"""The xfail plan: which entries go (or move), as an (unapplied, verified) edit of common_mps.py.

The decisions are :mod:`pipeline.results`' (pure judgements over results); turning them into
the editor's input lives here, above both, so results and edit never know each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.config import Settings
from pipeline.edit.atomic import FileEdit
from pipeline.results import decide
from pipeline.results.decide import XfailAction, XfailDecision
from pipeline.results.decorations import decide_decorations
from pipeline.results.table import DtypeTable
from pipeline.tree import paths
from pipeline.tree.common_mps import XfailEntry
from pipeline.tree.decorations import Decoration
from pipeline.tree.opinfo import OpInfoRecord
from pipeline.tree.text import read_text

if TYPE_CHECKING:
    # libcst, behind the editors, is 0.2 s of start-up: imported where an edit is really made
    from pipeline.edit.xfails import XfailChange


def plan_xfail_changes(
    settings: Settings,
    entries: Iterable[XfailEntry],
    opinfos: Iterable[OpInfoRecord],
    table: DtypeTable,
) -> tuple[tuple[decide.XfailDecision, ...], FileEdit | None]:
    """Decide which ``entries`` of ``opinfos``' keys go given ``table``; the (unapplied) edit."""
    decisions = decide.decide_xfails(entries, table, opinfos=opinfos)
    return decisions, removal_edit(settings.root, decisions)


def plan_decoration_changes(
    settings: Settings,
    decorations: Iterable[Decoration],
    opinfos: Sequence[OpInfoRecord],
    table: DtypeTable,
) -> tuple[tuple[decide.XfailDecision, ...], tuple[FileEdit, ...]]:
    """The MPS xfails of ``opinfos`` outside common_mps.py (their OpInfos' DecorateInfos, the
    test files' decorators): a decision each, the judgeable ones by ``table``, and the
    (unapplied, verified) edits of the files that hold those that go."""
    decisions = decide_decorations(decorations, table, opinfos=opinfos)
    return decisions, decoration_edits(settings.root, decisions)


def decoration_edits(root: Path, decisions: Iterable[XfailDecision]) -> tuple[FileEdit, ...]:
    """The edits, one per file, removing or narrowing the DecorateInfos ``decisions`` drop
    dtypes from (those with an ``at``); common_mps.py's entries are not among them."""
    by_path: dict[str, list[XfailDecision]] = {}
    for d in decisions:
        if d.at and d.action is not XfailAction.KEEP:
            by_path.setdefault(d.at.rpartition(":")[0], []).append(d)
    if not by_path:
        return ()
    from pipeline.edit.decorations import DecorationChange, apply_decoration_changes

    edits = []
    for path, going in sorted(by_path.items()):
        changes = [
            DecorationChange(
                int(d.at.rpartition(":")[2]),
                d.key,
                None if d.action is XfailAction.DELETE else d.new_dtypes,
                delete=d.action is XfailAction.DELETE,
            )
            for d in going
        ]
        edits.append(apply_decoration_changes(read_text(root / path, path), path, changes))
    return tuple(edits)


def to_changes(decisions: Iterable[XfailDecision]) -> tuple[XfailChange, ...]:
    """The editor's input (pipeline.edit.xfails.XfailChange) for every decision but "keep".

    A "move" is not a removal alone: :func:`proposal_edit` edits it.
    """
    from pipeline.edit.xfails import XfailChange

    decisions = tuple(decisions)
    moves = [d.key for d in decisions if d.action is XfailAction.MOVE]
    if moves:
        raise ValueError(f"to_changes: {', '.join(moves)} move to another list, not only out")
    return tuple(
        XfailChange(
            d.list,
            d.function,
            d.key,
            None if d.action is XfailAction.DELETE else d.new_dtypes,
            delete=d.action is XfailAction.DELETE,
        )
        for d in decisions
        if d.action is not XfailAction.KEEP and not d.at
    )


def removal_edit(root: Path, decisions: Iterable[XfailDecision]) -> FileEdit | None:
    """The (unapplied) edit of the tree's common_mps.py that ``decisions`` make; None when
    every decision keeps its entry."""
    changes = to_changes(decisions)
    if not changes:
        return None
    # Imported here: libcst (behind the xfail editor) is 0.2 s of start-up that only a
    # caller that really has entries to drop should pay.
    from pipeline.edit.xfails import apply_xfail_changes

    text = read_text(root / paths.COMMON_MPS, paths.COMMON_MPS)
    return apply_xfail_changes(text, paths.COMMON_MPS, changes)


def proposal_edit(root: Path, decisions: Iterable[XfailDecision]) -> FileEdit | None:
    """The (unapplied, verified) edit of the tree's common_mps.py that removals and moves
    make together; None when there is nothing to change.

    An entry that loses dtypes to several decisions (a removal and a move, two moves)
    keeps only the dtypes every one of them keeps.
    """
    decisions = [d for d in decisions if d.action is not XfailAction.KEEP and not d.at]
    if not decisions:
        return None
    from pipeline.edit.macos_lists import XfailAddition, apply_xfail_moves
    from pipeline.edit.xfails import XfailChange

    # what each entry keeps: what every decision on it keeps (none of them keeps "all")
    keeps: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for d in decisions:
        target = (d.list, d.function, d.key)
        new = () if d.action is XfailAction.DELETE else tuple(d.new_dtypes or ())
        keeps[target] = tuple(x for x in keeps.get(target, new) if x in new)
    changes = [XfailChange(*target, new or None, delete=not new) for target, new in keeps.items()]
    additions = [
        XfailAddition(d.to_list, d.function, d.key, d.dropped)
        for d in decisions
        if d.action is XfailAction.MOVE and d.to_list is not None
    ]
    text = read_text(root / paths.COMMON_MPS, paths.COMMON_MPS)
    return apply_xfail_moves(text, paths.COMMON_MPS, changes, additions)
