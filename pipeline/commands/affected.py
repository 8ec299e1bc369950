"""`affected --base REV [--head REV] [--json]`: the operators a diff affects, and why.

Warnings (a ``--changed`` path outside the tree or naming no file, a source the readers
could not follow) go to stderr as ``warning: ...`` in both output modes, and into the JSON
document's ``warnings`` list.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.impact import diff_impact, listed_impact
from pipeline.options import JSON
from pipeline.report.impact import render_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", help="base revision of the diff (merge base of the PR)")
    parser.add_argument("--head", help="head revision (default: the work tree)")
    parser.add_argument(
        "--changed",
        action="append",
        default=[],
        metavar="PATH[:A-B,...]",
        help=(
            "a changed file and its changed lines (1-based, inclusive; none: the whole file), "
            "instead of --base (repeatable). PATH is relative to the tree root, relative to "
            "the current directory (when that names a file in the tree), or absolute inside "
            "the tree. A path outside the tree or naming no file in it (a deleted file: use "
            "--base) is a warning and contributes nothing; exit 2 if no PATH is a file in "
            "the tree"
        ),
    )
    JSON.add_to(parser)
    parser.add_argument("--tests", action="store_true", help="also list the selected test ids")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the impact of a diff (``--base``) or of a list of changed lines (``--changed``)."""
    if not args.base and not args.changed:
        raise PipelineError("affected: give --base REV (a git diff) or --changed PATH[:LINES]")
    if args.changed:
        impact = listed_impact(settings, args.changed)
    else:
        impact = diff_impact(settings, args.base, args.head)
    for warning in impact.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(impact.to_json(), indent=2))
    else:
        print(render_text(impact, show_tests=args.tests, warnings=False))
    return 0
