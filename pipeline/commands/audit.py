"""`audit OP`: the metal-kernel guide's checklist for one operator, each item with file:line."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.guide.checklist import checklist, to_json
from pipeline.report.console import terminal
from pipeline.report.guide import render_checklist
from pipeline.tree.index import load_index


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator name or OpInfo alias, e.g. atan2 or arctan2")
    parser.add_argument(
        "--json", action="store_true", help="print JSON (schema: docs/machine-output.md)"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the checklist; exit 0 when every item passes, 1 otherwise (an unknown item,
    one that could not be judged, does not pass). The tree's warnings go to stderr."""
    index = load_index(settings.tree)
    record = index.record(args.op)
    items = checklist(record)
    for warning in index.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(record, items, index.warnings), indent=2))
    else:
        render_checklist(record, items, terminal())
    return 0 if all(i.ok for i in items) else 1
