"""`check-kernel FILE [--kernel NAME] | --all`: a .metal file's whole kernels (threadgroups,
barriers, SIMD-group functions) run on the host under several thread schedules and compared
with torch on CPU, before any Mac runs them; ``--all``: every file, with the findings new
since the last --all (the nightly's)."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.errors import EXIT_INPUT, EXIT_OK, EXIT_WORK_LEFT
from pipeline.flows.kernel import run_check
from pipeline.flows.kernel_checks import check_all
from pipeline.options import JSON
from pipeline.report.kernel import render_lines, to_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", help="a kernels/*.metal file: a path, or its name (SoftMax)"
    )
    parser.add_argument(
        "--all", action="store_true",
        help="every kernels/*.metal file; the findings new since the last --all are listed "
        "last (the nightly runs this)",
    )  # fmt: skip
    parser.add_argument(
        "--kernel", action="append", default=[], help="only this kernel (host name); repeatable"
    )
    JSON.add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every kernel checked agrees with torch under every schedule and at least
    one was checked; 1 on a finding, a kernel that does not compile, or nothing checked; 2 on
    bad input, a bad launch spec or a missing compiler."""
    if args.all == bool(args.file):
        print("error: check-kernel takes one of FILE or --all", file=sys.stderr)
        return EXIT_INPUT
    if args.all:
        return _all(settings, as_json=args.json)
    report = run_check(settings, args.file, kernels=args.kernel)
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        print("\n".join(render_lines(report)))
    return EXIT_WORK_LEFT if report.failed or report.checked == 0 else EXIT_OK


def _all(settings: Settings, *, as_json: bool) -> int:
    """Exit 1 on a finding not in the last --all's record or a file that could not be
    checked (a bad launch spec), else 0: known findings are listed, not failed on again."""
    done = check_all(settings)
    if as_json:
        doc = {
            "schema": 1, "files": [to_json(r) for r in done.reports],
            "errors": list(done.errors), "new": list(done.new),
        }  # fmt: skip
        print(json.dumps(doc, indent=2))
    else:
        for r in done.reports:
            print("\n".join(render_lines(r)))
        print("\n".join(f"not checked: {e}" for e in done.errors))
        print(f"new findings since the last run: {len(done.new)}")
        print("\n".join(f"  {f}" for f in done.new))
    return EXIT_WORK_LEFT if done.new or done.errors else EXIT_OK
