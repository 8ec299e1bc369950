"""`backlog`: operators still on MPSGraph or without MPS, easiest wins first."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.guide.backlog import backlog, to_json
from pipeline.report.console import terminal
from pipeline.report.guide import render_backlog
from pipeline.tree.index import load_index


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of a table (schema: docs/machine-output.md)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the backlog; the tree's warnings (what could not be read) go to stderr."""
    index = load_index(settings.tree)
    items = backlog(index)
    for warning in index.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(items, index.warnings), indent=2))
    else:
        render_backlog(items, terminal())
    return 0
