"""Which of an operator's xfail entries can go, as an (unapplied) edit of common_mps.py."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.config import Settings
from pipeline.edit.atomic import FileEdit
from pipeline.results import decide
from pipeline.results.table import DtypeTable
from pipeline.tree import paths
from pipeline.tree.common_mps import XfailEntry
from pipeline.tree.opinfo import OpInfoRecord


def plan_xfail_changes(
    settings: Settings,
    entries: Iterable[XfailEntry],
    opinfos: Iterable[OpInfoRecord],
    table: DtypeTable,
) -> tuple[tuple[decide.XfailDecision, ...], FileEdit | None]:
    """Decide which ``entries`` of ``opinfos``' keys go given ``table``; the (unapplied) edit."""
    # Imported here: libcst (behind the xfail editor) is 0.2 s of start-up that only a
    # stage that really drops entries should pay.
    from pipeline.edit import xfails as xfail_edit

    decisions = decide.decide_xfails(entries, table, opinfos=opinfos)
    changes = decide.to_changes([d for d in decisions if d.action != "keep"])
    if not changes:
        return decisions, None
    rel = paths.COMMON_MPS
    text = (settings.root / rel).read_text(encoding="utf-8")
    return decisions, xfail_edit.apply_xfail_changes(text, rel, changes)
