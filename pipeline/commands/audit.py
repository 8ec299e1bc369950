"""`audit OP`: the metal-kernel guide's checklist for one operator, each item with file:line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pipeline.config import Settings
from pipeline.guide import replay
from pipeline.options import OPTIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OPTIONS["op"].add_to(parser, positional=True)
    OPTIONS["json"].add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the checklist; exit 0 when every item passes, 1 otherwise (an unknown item,
    one that could not be judged, does not pass). The tree's warnings go to stderr.

    When nothing the checklist rests on changed since the last one printed for this
    terminal, that output is written again (:mod:`pipeline.guide.replay`): the index, the
    checklist and rich are then not even imported.
    """
    # the witness before the keys: the status of what the digest is about to read
    witness = None if args.json else _witness(args, settings)
    keys = None if args.json else replay.keys(settings, "cli")
    if keys is not None and (saved := replay.replay(settings, args.op, keys, witness)) is not None:
        return 0 if saved["ok"] else 1
    from pipeline.guide.checklist import checklist, to_json
    from pipeline.report.console import terminal
    from pipeline.report.guide import render_checklist
    from pipeline.tree.index import load_index

    index = load_index(settings.tree)
    record = index.record(args.op)
    items = checklist(record)
    warned = "".join(f"warning: {warning}\n" for warning in index.warnings)
    sys.stderr.write(warned)
    ok = all(i.ok for i in items)
    if keys is None:
        print(json.dumps(to_json(record, items, index.warnings), indent=2))
    else:
        console = terminal()
        console.begin_capture()
        try:
            render_checklist(record, items, console)
        finally:
            shown = console.end_capture()
            sys.stdout.write(shown)
        replay.save(settings, args.op, keys, shown, warned, ok, witness)
    return 0 if ok else 1


def _witness(args: argparse.Namespace, settings: Settings) -> dict[str, Any] | None:
    """The witness of this run (:func:`pipeline.guide.replay.witness`), when it was started
    from a command line (:func:`pipeline.__main__.main` notes it) and has settings it can
    rest on (it says on stderr what :func:`pipeline.workspace.announce` said)."""
    argv = getattr(args, "argv", None)
    if argv is None:
        return None
    from pipeline.workspace import announcement

    return replay.witness(settings, list(argv), announcement(settings))
