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
from pipeline.flows import audit_replay as replay

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from pipeline.flows.request import Request
    from pipeline.guide.checklist import CheckItem
    from pipeline.tree.index import OperatorRecord, TreeIndex


def record_audit(
    settings: Settings, op: str, console: Console | None, *, index: TreeIndex | None = None
) -> tuple[CheckItem, ...]:
    """Print the checklist (unless ``console`` is None) and record it with its inputs' digest;
    its items.

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
    return items


def _judge(settings: Settings, op: str) -> tuple[TreeIndex, OperatorRecord, tuple[CheckItem, ...]]:
    from pipeline.guide.checklist import checklist
    from pipeline.tree.index import load_index

    index = load_index(settings.tree)
    record = index.record(op)
    return index, record, checklist(record)


def audit_command(settings: Settings, op: str, *, as_json: bool, argv: Sequence[str] | None) -> int:
    """`audit OP`: print the checklist (or, ``as_json``, its document); 0 when every item
    passes, 1 otherwise. The tree's warnings go to stderr.

    When nothing the checklist rests on changed since the last one printed for this
    terminal, that output is written again (:mod:`pipeline.flows.audit_replay`): the index,
    the checklist and rich are then not even imported. ``argv``: the command line it was
    started from, which the saved output's witness is keyed on (None: no witness).
    """
    if as_json:
        from pipeline.guide.checklist import to_json

        index, record, items = _judge(settings, op)
        sys.stderr.write("".join(f"warning: {warning}\n" for warning in index.warnings))
        print(json.dumps(to_json(record, items, index.warnings), indent=2))
        return 0 if all(i.ok for i in items) else 1
    # the witness before the keys: the status of what the digest is about to read
    witness = None if argv is None else _witness(settings, argv)
    keys = replay.keys(settings, "cli")
    if (saved := replay.replay(settings, op, keys, witness)) is not None:
        return 0 if saved.ok else 1
    from pipeline.report.console import terminal
    from pipeline.report.guide import render_checklist

    index, record, items = _judge(settings, op)
    warned = "".join(f"warning: {warning}\n" for warning in index.warnings)
    sys.stderr.write(warned)
    ok = all(i.ok for i in items)
    console = terminal()
    console.begin_capture()
    try:
        render_checklist(record, items, console)
    finally:
        shown = console.end_capture()
        sys.stdout.write(shown)
    replay.save(settings, op, keys, shown, warned, ok, witness)
    return 0 if ok else 1


def _witness(settings: Settings, argv: Sequence[str]) -> replay.Witness | None:
    """The witness of a run started from a command line (:func:`replay.witness`), with
    what :func:`pipeline.workspace.announce` said on stderr before it."""
    from pipeline.workspace import announcement

    return replay.witness(settings, list(argv), announcement(settings))


def audit(request: Request, console: Console) -> None:
    """The stage: the checklist printed and recorded, or, when the recorded one holds and
    was printed for this terminal, what it printed then (:mod:`pipeline.flows.audit_replay`)."""
    settings, op = request.settings, request.op
    keys = replay.keys(settings, "doit")
    current = state.audit_current(settings, op, keys.inputs)
    if current and replay.replay(settings, op, keys) is not None:
        return
    console.begin_capture()
    try:
        items = record_audit(settings, op, console)
    finally:
        shown = console.end_capture()
        sys.stdout.write(shown)
        sys.stdout.flush()
    replay.save(settings, op, keys, shown, "", all(item.ok for item in items))
