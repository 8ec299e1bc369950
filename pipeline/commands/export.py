"""`export --results DIR` / `export --nights N`: test results as rows PyTorch's HUD can load.

One JSON Lines row per test case, in the columns of the HUD's ClickHouse test-run table
plus ours (operator, dtype, test kind, runner, chip, macOS, PyTorch commit): every column
is in docs/machine-output.md ("export rows"). ``--results DIR`` exports a night's reports
as ``nightly`` reads them; ``--nights N`` the history's last N nightlies.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.flows.export import from_history, from_results
from pipeline.fsio import write_atomic
from pipeline.options import HISTORY
from pipeline.results import history
from pipeline.results.hud import CiRun


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--results",
        type=Path,
        metavar="DIR",
        help="a night's JUnit reports, one folder per runner (as nightly reads them)",
    )
    what.add_argument(
        "--nights", type=int, metavar="N", help="the last N nightlies of the history instead"
    )
    HISTORY.add_to(parser, more="With --nights")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="the JSON Lines file to write (default: standard output); schema: "
        "docs/machine-output.md",
    )
    parser.add_argument(
        "--commit", help="with --results: the PyTorch commit tested (default: git HEAD of root)"
    )
    parser.add_argument(
        "--started", help="with --results: when the night ran, ISO 8601 (default: now)"
    )
    parser.add_argument(
        "--job-id",
        type=int,
        default=0,
        help="with --results: the GitHub Actions job's id (default 0: unknown)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Write the rows; say how many, to stderr; 0."""
    warnings: list[str] = []
    if args.results is not None:
        ci = CiRun.from_env(os.environ, args.job_id)
        found, warnings = from_results(
            settings, args.results, ci=ci, started=args.started, commit=args.commit
        )
        rows = list(found)
    else:
        if args.nights < 1:
            raise PipelineError("export: --nights must be at least 1")
        at = history.locate(args.history, settings)
        rows = list(from_history(settings, at, args.nights))
    text = "".join(row.to_json() + "\n" for row in rows)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(text)
        where = "standard output"
    else:
        write_atomic(args.out, text)
        where = str(args.out)
    runners = len({row.runner for row in rows})
    nights = len({row.time_inserted for row in rows})
    print(
        f"exported {len(rows):,} rows ({nights} nightlies, {runners} runners, "
        f"{len(text.encode()) / 1e6:.2f} MB) to {where}",
        file=sys.stderr,
    )
    return 0
