"""Which of an operator's xfail entries can go, as an (unapplied) edit of common_mps.py."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.config import Settings
from pipeline.edit.atomic import FileEdit
from pipeline.results import decide
from pipeline.results.table import DtypeTable
from pipeline.tree.common_mps import XfailEntry
from pipeline.tree.opinfo import OpInfoRecord


def plan_xfail_changes(
    settings: Settings,
    entries: Iterable[XfailEntry],
    opinfos: Iterable[OpInfoRecord],
    table: DtypeTable,
) -> tuple[tuple[decide.XfailDecision, ...], FileEdit | None]:
    """Decide which ``entries`` of ``opinfos``' keys go given ``table``; the (unapplied) edit."""
    decisions = decide.decide_xfails(entries, table, opinfos=opinfos)
    return decisions, decide.removal_edit(settings.root, decisions)
