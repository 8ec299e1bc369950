"""The audit stage: the checklist printed and recorded with its inputs' digest.

Apart from :mod:`pipeline.flows.stages` because `doit audit` runs it on every call: it must
not pay for importing the runners, editors and renderers the other stages need.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from pipeline import state
from pipeline.config import Settings
from pipeline.guide import replay

if TYPE_CHECKING:
    from rich.console import Console

    from pipeline.flows.request import Request
    from pipeline.tree.index import OperatorRecord, TreeIndex


def record_audit(
    settings: Settings, op: str, console: Console | None, *, index: TreeIndex | None = None
) -> OperatorRecord:
    """Print the checklist (unless ``console`` is None) and record it with its inputs' digest.

    Printed, it is the tree before the chain's edits (the audit stage, the preview), and its
    count says so: ``before: 3/8 checks pass``.

    The edit and drop stages re-record it after they write, so it stays current. ``index``
    is the tree's index when the caller already loaded it for the tree as it is now.
    """
    # here, not at the top: a replayed audit (see audit()) needs none of them
    from pipeline.guide import checklist
    from pipeline.report.guide import render_checklist, render_warnings
    from pipeline.tree.index import load_index

    index = index if index is not None else load_index(settings.tree)
    record = index.record(op)
    items = checklist.checklist(record)
    if console is not None:
        render_warnings(index.warnings, console)
        render_checklist(record, items, console, before=True)
    files = state.op_files(settings, op)
    state.write_json(files.audit, checklist.to_json(record, items, index.warnings))
    state.write_text(files.audit_digest, state.inputs_digest(settings))
    return record


def audit(request: Request, console: Console) -> None:
    """The stage: the checklist printed and recorded, or, when the recorded one holds and
    was printed for this terminal, what it printed then (:mod:`pipeline.guide.replay`)."""
    settings, op = request.settings, request.op
    keys = replay.keys(settings, "doit")
    current = state.audit_current(settings, op, keys["inputs"])
    if current and replay.replay(settings, op, keys) is not None:
        return
    console.begin_capture()
    try:
        record_audit(settings, op, console)
    finally:
        shown = console.end_capture()
        sys.stdout.write(shown)
        sys.stdout.flush()
    recorded = json.loads(state.op_files(settings, op).audit.read_text(encoding="utf-8"))
    ok = all(item["ok"] for item in recorded["checklist"])
    replay.save(settings, op, keys, shown, "", ok)
