"""`check-kernel FILE [--kernel NAME]`: a .metal file's whole kernels (threadgroups, barriers,
SIMD-group functions) run on the host under several thread schedules and compared with torch
on CPU, before any Mac runs them."""

from __future__ import annotations

import argparse
import json

from pipeline.config import Settings
from pipeline.errors import EXIT_OK, EXIT_WORK_LEFT
from pipeline.flows.kernel import run_check
from pipeline.options import OPTIONS
from pipeline.report.kernel import render_lines, to_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a kernels/*.metal file: a path, or its name (SoftMax)")
    parser.add_argument(
        "--kernel", action="append", default=[], help="only this kernel (host name); repeatable"
    )
    OPTIONS["json"].add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every kernel checked agrees with torch under every schedule and at least
    one was checked; 1 on a finding, a kernel that does not compile, or nothing checked; 2 on
    bad input, a bad launch spec or a missing compiler."""
    report = run_check(settings, args.file, kernels=args.kernel)
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        print("\n".join(render_lines(report)))
    return EXIT_WORK_LEFT if report.failed or report.checked == 0 else EXIT_OK
