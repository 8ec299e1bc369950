"""`nightly --results DIR`: every runner's JUnit → history → proposals, regressions, dashboard.

``DIR`` holds one folder per runner configuration (``DIR/<runner>/shard-<n>.xml``); what is
made of it is described in :mod:`pipeline.results.nightly`, how it is shown in
:mod:`pipeline.report.nightly`. Everything goes to the dashboard directory (index.html,
summary.md, summary.json, the diff, and one merged JUnit file per runner). Exit status: 0,
or 1 when there are regressions (the job shows red; the outputs are written first), 2 on an
error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.config import Settings
from pipeline.guide.backlog import backlog
from pipeline.report.console import terminal
from pipeline.report.nightly import publish, render_terminal
from pipeline.results import history
from pipeline.results.nightly import (
    DEFAULT_FLAKY_WINDOW,
    DEFAULT_KEEP,
    DEFAULT_MIN_PASSES,
    run_nightly,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results",
        required=True,
        type=Path,
        help="directory with one folder of JUnit files per runner (results/<runner>/*.xml)",
    )
    parser.add_argument(
        "--history", type=Path, help=f"SQLite history (default: <state_dir>/{history.DEFAULT_FILE})"
    )
    parser.add_argument(
        "--dashboard", type=Path, help="dashboard directory (default: <state_dir>/dashboard)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print summary.json, not a report (schema: docs/machine-output.md)",
    )
    parser.add_argument(
        "--min-passes",
        type=int,
        default=DEFAULT_MIN_PASSES,
        help="nightlies in a row a dtype must xpass on every runner before its xfail goes "
        f"(default {DEFAULT_MIN_PASSES})",
    )
    parser.add_argument(
        "--flaky-window",
        type=int,
        default=DEFAULT_FLAKY_WINDOW,
        help=f"nightlies to look back for flipping outcomes (default {DEFAULT_FLAKY_WINDOW})",
    )
    parser.add_argument(
        "--keep",
        type=int,
        default=DEFAULT_KEEP,
        help=f"nightlies the history keeps (default {DEFAULT_KEEP})",
    )
    parser.add_argument("--commit", help="the PyTorch commit tested (default: git HEAD of root)")
    parser.add_argument(
        "--source",
        default="",
        help="where the results come from, e.g. the CI run's URL; recording the same source "
        "again replaces that nightly instead of counting it twice",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Record the nightly, write the dashboard, print a report; 1 when there are regressions."""
    outcome = run_nightly(
        settings,
        args.results,
        history_path=args.history,
        dashboard_dir=args.dashboard,
        min_passes=args.min_passes,
        flaky_window=args.flaky_window,
        keep=args.keep,
        commit=args.commit,
        source=args.source,
        backlog_of=backlog,
    )
    files = publish(outcome)
    if args.json:
        print(json.dumps(outcome.summary, indent=2, ensure_ascii=False))
    else:
        render_terminal(outcome.summary, files, terminal())
    return 1 if outcome.summary["regressions"] else 0
