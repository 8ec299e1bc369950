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
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline import state
from pipeline.config import Settings
from pipeline.flows.pr import report
from pipeline.report.pr import PrResults
from pipeline.results import baseline as baselines
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
    parser.add_argument(
        "--history",
        type=Path,
        metavar="DB",
        help="the nightly history to classify failing tests with: new, already failing on "
        f"main, flaky (default: <state_dir>/{state.HISTORY} if it exists; without "
        "one every failure is new). With --post-from: classify again here; without a "
        "history, the classes in results.json stand",
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


def _annotate(
    settings: Settings, args: argparse.Namespace
) -> Callable[[PrResults, bool], PrResults]:
    """What the comment adds to the targeted tests: the review checks and kernel speed. The
    Mac job (no history there) measures; the posting job, which has main's history, judges
    the measurements results.json carries."""

    def annotate(results: PrResults, loaded: bool) -> PrResults:
        if loaded:
            if results.speed and results.speed.get("measurements"):
                results = replace(results, speed=_judged(settings, args, dict(results.speed)))
            return results
        from pipeline.flows.review import review
        from pipeline.guide.review import to_json

        if not args.no_math and results.impact["operators"]:
            results = replace(results, math=_math(settings, results))
        if not args.no_math:
            results = replace(results, kernels=_kernels(settings, results))
        if not args.no_review:
            found = review(settings, results.base, results.head)
            results = replace(results, review=to_json(found.findings, found.ran, found.notes))
        if args.speed and results.build_ok:
            results = replace(results, speed=_measured(settings, args, results))
        return results

    return annotate


def _math(settings: Settings, results: PrResults) -> dict[str, Any]:
    """check-math of the affected operators' functors, as
    ``check-math --json`` prints it; ``{"schema", "skipped"}`` saying why when it cannot run
    here (no functor, no compiler, no torch), as the migrate chain's stage records it."""
    from pipeline.flows.math import NothingToCheckError, run_check
    from pipeline.report.math import to_json as math_json
    from pipeline.results.math import SCHEMA
    from pipeline.run.cxx import NoCompilerError
    from pipeline.run.reference import NoTorchError

    ops = [o["operator"] for o in results.impact["operators"]]
    try:
        report = run_check(settings, ops=ops)
    except (NothingToCheckError, NoCompilerError, NoTorchError) as exc:
        return {"schema": SCHEMA, "skipped": str(exc)}
    return math_json(report)


def _kernels(settings: Settings, results: PrResults) -> dict[str, Any] | None:
    """check-kernel of the kernel files the PR changes that have a launch spec (None: none)."""
    from pipeline.flows.kernel_checks import for_files
    from pipeline.impact import changed_files
    from pipeline.tree.paths import KERNELS_DIR

    changed = [
        settings.root / c.path for c in changed_files(settings.root, results.base, results.head)
        if c.status != "D" and c.path.startswith(f"{KERNELS_DIR}/") and c.path.endswith(".metal")
    ]  # fmt: skip
    return for_files(settings, changed) if changed else None


def _measured(
    settings: Settings, args: argparse.Namespace, results: PrResults
) -> dict[str, Any] | None:
    """The affected operators timed on this build, judged if a history is here; None (no
    speed section: the tests' comment still goes out) when there is no such device here."""
    from pipeline.errors import DeviceRefusedError
    from pipeline.flows.speed import measure
    from pipeline.run.speed import NoDeviceError

    ops = [o["operator"] for o in results.impact["operators"]]
    try:
        timed = measure(settings, ops, device=args.speed) if ops else None
    except NoDeviceError as exc:
        left_out = "the comment has no kernel speed (--speed cpu times the kernels on the CPU)"
        print(f"warning: {exc.suggesting(left_out)}", file=sys.stderr)
        return None
    except DeviceRefusedError as exc:
        print(f"warning: {exc}; the comment has no kernel speed", file=sys.stderr)
        return None
    measured = timed.measurements if timed is not None else ()
    machine = timed.machine if timed is not None else None
    doc = {
        "runner": args.runner or os.environ.get(RUNNER_ENV) or "",
        # what the Mac's commands said; the CPU's figures name the CPU
        "device": machine.label() if machine is not None else f"{args.speed} (unknown)",
        "measurements": [
            {
                "op": m.op,
                "dtype": m.dtype,
                "shape": m.shape,
                "layout": m.layout,
                "times": list(m.times),
            }
            for m in measured
        ],  # fmt: skip
    }
    return _judged(settings, args, doc)


def _judged(settings: Settings, args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``'s measurements against main's figures of its runner, when there is a history."""
    from pipeline.flows.speed import judge
    from pipeline.results.speed import compare, parse, verdict_to_dict

    _, measured = parse({"schema": 1, "results": doc["measurements"]}, "results.json: speed")
    path = baselines.history_file(settings.state_dir, args.history)
    review = settings.review
    if path is None or not doc["runner"]:
        verdicts = compare(measured, {}, threshold=review.speed_threshold, min_nights=1)
        nights = 0
    else:
        judged = judge(settings, measured, path, doc["runner"])
        verdicts, nights = judged.verdicts, judged.nights
    return doc | {"threshold": review.speed_threshold, "nights": nights,
                  "verdicts": [verdict_to_dict(v) for v in verdicts]}  # fmt: skip


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
        annotate=_annotate(settings, args),
    )
