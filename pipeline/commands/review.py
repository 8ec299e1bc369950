"""`review [--base REV] [--head REV] [--json]`: the checks reviewers of an MPS kernel make by
eye (pytorch#187827): the MPSGraph path really gone, ``fast::`` math, bare ``min``/``max``, a
helper ``c10/metal`` already has, dtype coverage; each finding with its check's id,
severity, ``file:line`` and one reason. Exit 1 when a finding is an error."""

from __future__ import annotations

import argparse
import json

from pipeline.config import Settings
from pipeline.errors import EXIT_OK, EXIT_WORK_LEFT
from pipeline.flows.review import review
from pipeline.guide.review import CHECKS
from pipeline.options import JSON
from pipeline.report.console import terminal
from pipeline.report.review import render_terminal
from pipeline.tree.git import BASE_BRANCHES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base", help=f"base revision (default: merge base with {' or '.join(BASE_BRANCHES)})"
    )
    parser.add_argument("--head", help="head revision (default: the work tree)")
    JSON.add_to(parser)
    parser.add_argument("--list", action="store_true", help="list the checks and exit")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.list:
        for cid, module in CHECKS.items():
            off = " (off: review.disable)" if cid in settings.review.disable else ""
            print(f"{cid:<16}{module.SEVERITY.value:<9}{module.TITLE}{off}")
        return EXIT_OK
    from pipeline.guide.review import to_json

    report = review(settings, args.base, args.head)
    if args.json:
        doc = to_json(report.findings, report.ran, report.notes)
        print(json.dumps({**doc, "base": report.base}, indent=2))
    else:
        render_terminal(report.findings, report.notes, terminal())
    return EXIT_WORK_LEFT if report.blocking else EXIT_OK
