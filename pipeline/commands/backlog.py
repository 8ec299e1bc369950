"""`backlog`: operators still on MPSGraph or without MPS, easiest wins first."""

from __future__ import annotations

import argparse
import json

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
    items = backlog(load_index(settings.tree))
    if args.json:
        print(json.dumps(to_json(items), indent=2))
    else:
        render_backlog(items, terminal())
    return 0
