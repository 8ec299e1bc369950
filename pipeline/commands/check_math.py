"""`check-math OP | --file X.metal | --all`: a functor's math, compiled on the host and
compared with torch on CPU, before any Mac runs it."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.errors import EXIT_INPUT, EXIT_OK, EXIT_WORK_LEFT
from pipeline.flows.math import run_check
from pipeline.options import JSON, OP
from pipeline.report.console import terminal
from pipeline.report.math import render_terminal, to_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OP.add_to(parser, positional=True, optional=True)
    parser.add_argument("--file", help="every functor of one kernels/*.metal file")
    parser.add_argument("--all", action="store_true", help="every functor of every .metal file")
    JSON.add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every checked dtype matches torch (or is known / has no reference), 1 on a
    mismatch or a functor that does not compile, 2 on bad input or a missing compiler."""
    chosen = [x for x in (args.op, args.file, args.all or None) if x]
    if len(chosen) != 1:
        print("error: check-math takes one of OP, --file FILE or --all", file=sys.stderr)
        return EXIT_INPUT
    report = run_check(settings, op=args.op, file=args.file, every=args.all)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        render_terminal(report, terminal())
    return EXIT_WORK_LEFT if report.failed else EXIT_OK
