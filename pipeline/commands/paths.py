"""`paths [OP...]`: which path MPS takes for each overload (Metal, MPSGraph, composite, none).

Without an operator, every operator of native_functions.yaml: the count of overloads on
each path, the operators by path, and the half-done migrations flagged with file:line.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.guide.exec_paths import operator_paths, to_json
from pipeline.options import JSON
from pipeline.tree.index import load_index


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="*", metavar="OP", help="operators (default: every one)")
    JSON.add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the paths; the tree's warnings (what could not be read) go to stderr."""
    index = load_index(settings.tree)
    ops = [index.resolve(op) for op in args.ops] if args.ops else None
    report = operator_paths(index, ops)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        # compact: indenting takes json's pure-Python encoder, 0.4 s of a whole tree's 2,500
        # overloads against 0.02 s
        print(json.dumps(to_json(report), separators=(",", ":")))
    else:
        # rich, only for the table: `--json` is what scripts and the benchmark call
        from pipeline.report.console import terminal
        from pipeline.report.guide import render_paths

        render_paths(report, terminal(), detail=bool(args.ops))
    return 0
