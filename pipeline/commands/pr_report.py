"""`pr-report --pr N`: a PR's affected operators, built and tested, in one PR comment.

What it does, and how ci/workflows/mps-pr.yml splits it between a tokenless Mac job
(``--results-only``) and a posting job (``--post-from DIR``), is described in
:mod:`pipeline.flows.pr`; ``--dry-run`` prints the comment instead of posting it. How the
failing tests are compared with the nightly history (``--history``, ``--runner``) is
described in :mod:`pipeline.results.baseline`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from pipeline.config import Settings
from pipeline.flows.pr import report
from pipeline.flows.pr_sections import Sections, annotator
from pipeline.options import HISTORY
from pipeline.results.baseline import RUNNER_ENV
from pipeline.tree.git import BASE_BRANCHES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pr", type=int, required=True, metavar="N", help="pull request number")
    parser.add_argument(
        "--base", help=f"base revision (default: merge base with {' or '.join(BASE_BRANCHES)})"
    )
    parser.add_argument(
        "--head", help="head revision (default: the work tree, where the tests run)"
    )
    parser.add_argument(
        "--repo", metavar="OWNER/NAME", help="repository of the PR (default: github.repo)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the comment instead of posting it"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--results-only",
        action="store_true",
        help="write <state_dir>/results/pr-N/ (results.json, schema: docs/machine-output.md) "
        "and post nothing; needs no token (CI's Mac job)",
    )
    mode.add_argument(
        "--post-from",
        type=Path,
        metavar="DIR",
        help="post the comment rebuilt from a folder --results-only wrote (CI's report job)",
    )
    parser.add_argument(
        "--status-sha",
        metavar="SHA",
        help="commit to set the status on: the PR head that was tested (default: the PR's "
        "head when posting, which a push in between moves)",
    )
    HISTORY.add_to(
        parser,
        more="Failing tests are classified with it: new, already failing on main, flaky (a "
        "file only if it exists; without one every failure is new). With --post-from: "
        "classify again here; without a history, the classes in results.json stand",
    )
    parser.add_argument(
        "--runner",
        metavar="NAME",
        help="the runner configuration the tests run on (macos-m2-15...): compared with its "
        f"nightly results only (default: ${RUNNER_ENV}; unknown: any runner of the latest "
        "nightly)",
    )

    parser.add_argument(
        "--no-review", action="store_true",
        help="leave the review checks (mps-pipeline review) out of the comment",
    )  # fmt: skip
    parser.add_argument(
        "--no-math", action="store_true",
        help="leave check-math's per-dtype table of the affected operators' functors (the "
        "functor math, compiled on the host and compared with torch on CPU) and check-kernel's "
        "of the changed kernel files out",
    )  # fmt: skip
    parser.add_argument(
        "--speed", choices=("mps", "cpu"), metavar="DEVICE",
        help="also time the affected operators' kernels on DEVICE (mps on the Macs) and "
        "compare them with main's figures of --runner in the nightly history",
    )  # fmt: skip


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``pr-report`` with the parsed command line."""
    if args.repo:
        settings = replace(settings, github=replace(settings.github, repo=args.repo))
    return report(
        settings,
        args.pr,
        base=args.base,
        head=args.head,
        dry_run=args.dry_run,
        results_only=args.results_only,
        post_from=args.post_from,
        status_sha=args.status_sha,
        history_path=args.history,
        runner=args.runner,
        annotate=annotator(
            settings,
            Sections(
                math=not args.no_math,
                review=not args.no_review,
                speed=args.speed,
                runner=args.runner or os.environ.get(RUNNER_ENV) or "",
                history=args.history,
            ),
        ),
    )
