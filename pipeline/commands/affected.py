"""`affected --base REV [--head REV] [--json]`: the operators a diff affects, and why."""

from __future__ import annotations

import argparse
import json

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.impact import diff_impact, listed_impact
from pipeline.report.impact import render_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", help="base revision of the diff (merge base of the PR)")
    parser.add_argument("--head", help="head revision (default: the work tree)")
    parser.add_argument(
        "--changed",
        action="append",
        default=[],
        metavar="PATH[:A-B,...]",
        help="a changed file and its changed lines, instead of --base (repeatable)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON (schema: docs/machine-output.md)"
    )
    parser.add_argument("--tests", action="store_true", help="also list the selected test ids")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the impact of a diff (``--base``) or of a list of changed lines (``--changed``)."""
    if not args.base and not args.changed:
        raise PipelineError("affected: give --base REV (a git diff) or --changed PATH[:LINES]")
    if args.changed:
        impact = listed_impact(settings, args.changed)
    else:
        impact = diff_impact(settings, args.base, args.head)
    if args.json:
        print(json.dumps(impact.to_json(), indent=2))
    else:
        print(render_text(impact, show_tests=args.tests))
    return 0
