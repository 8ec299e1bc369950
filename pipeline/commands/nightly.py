"""`nightly --results DIR`: every runner's JUnit → history → proposals, regressions, dashboard.

``DIR`` holds one folder per runner configuration (``DIR/<runner>/shard-<n>.xml``); what is
made of it is described in :mod:`pipeline.results.nightly`, how it is shown in
:mod:`pipeline.report.nightly`. Everything goes to the dashboard directory (index.html,
summary.md, summary.json, the diff, and one merged JUnit file per runner).

``--check-history`` only checks the history file (PRAGMA integrity_check, schema version,
counts) and changes nothing.

Exit status, which the nightly workflow's cache step reads (ci/README.md): 0; 1 when there
are regressions (the job shows red; the outputs and the history are written, and valid);
2 on an input error: no readable report at all, a damaged history (left untouched), bad
options; 70 when something unexpected broke (a bug: the traceback is printed) — never 1,
so a crash is not taken for regressions and its history is not saved.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import DamagedHistoryError, HistoryBusyError, PipelineError
from pipeline.flows.nightly import run_nightly
from pipeline.guide.backlog import backlog
from pipeline.options import HISTORY, JSON
from pipeline.report.console import terminal
from pipeline.report.nightly import publish, render_terminal
from pipeline.results import history, history_pg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results",
        type=Path,
        help="directory with one folder of JUnit files per runner (results/<runner>/*.xml); "
        "required unless --check-history",
    )
    HISTORY.add_to(parser)
    parser.add_argument(
        "--check-history",
        action="store_true",
        help="only check the history (integrity, schema version, counts; changes nothing): "
        "exit 0 when valid, 2 when damaged",
    )
    parser.add_argument(
        "--backups",
        type=int,
        help="copies of the history kept after each night in its backups/ folder "
        "(default: the setting nightly.backups; 0: none)",
    )
    parser.add_argument(
        "--dashboard", type=Path, help="dashboard directory (default: <state_dir>/dashboard)"
    )
    JSON.add_to(parser)
    parser.add_argument(
        "--min-passes",
        type=int,
        help="nightlies in a row a dtype must xpass on every runner before its xfail goes "
        "(default: the setting nightly.min_passes)",
    )
    parser.add_argument(
        "--flaky-window",
        type=int,
        help="nightlies to look back for flipping outcomes (default: the setting "
        "nightly.flaky_window)",
    )
    parser.add_argument(
        "--keep",
        type=int,
        help="nightlies the history keeps (default: the setting nightly.keep)",
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
    at = history.locate(args.history, settings)
    if args.check_history:
        return report_server(at) if at.is_server else report_history(at.file)
    if args.results is None:
        raise PipelineError("nightly: --results DIR is required (or --check-history)")
    try:
        outcome = run_nightly(
            settings,
            args.results,
            history_at=at,
            dashboard_dir=args.dashboard,
            min_passes=args.min_passes,
            flaky_window=args.flaky_window,
            keep=args.keep,
            backups=args.backups,
            commit=args.commit,
            source=args.source,
            backlog_of=backlog,
        )
    except sqlite3.OperationalError as exc:
        # the environment, not a bug: another process's lock, a file made read-only; any
        # other SQLite error is one (pipeline.errors.failure: exit 70, never 1)
        if not history.not_now(exc):
            raise
        raise HistoryBusyError(at.file, str(exc)) from exc
    files = publish(outcome)
    if args.json:
        print(json.dumps(outcome.summary.to_json(), indent=2, ensure_ascii=False))
    else:
        render_terminal(outcome.summary, files, terminal())
    return 1 if outcome.summary.regressions else 0


def report_history(path: Path) -> int:
    """``--check-history``: 0 and the counts when valid; a damaged history raises (exit 2)."""
    copies = history.backups(path)
    if not os.path.lexists(path):
        raise PipelineError(f"{path}: no history here (a nightly starts one)")
    try:
        found = history.check(path, thorough=True)
    except DamagedHistoryError:
        if copies:
            print(f"backups ({len(copies)}, newest last):", *map(str, copies), sep="\n  ")
        raise
    span = f", {found.first} … {found.last}" if found.first else ""
    size = f"{found.size / 1e6:.1f} MB" if found.size >= 100_000 else f"{found.size / 1e3:.0f} kB"
    print(
        f"{path}: a valid mps-pipeline history (integrity {found.integrity}, schema version "
        f"{found.schema_version}, {size})\n"
        f"  {found.nightlies} nightlies{span}\n"
        f"  {found.runs} runs, {found.tests} tests, {found.results} results\n"
        f"  {len(copies)} backup(s){': newest ' + copies[-1].name if copies else ''}"
    )
    return 0


def report_server(at: history.HistoryLocation) -> int:
    """``--check-history`` of a history server: its schema version and counts (read-only);
    no history there, or a newer one, raises (exit 2). The server keeps its own integrity
    and backups: this checks neither, and says so."""
    db = history.reader(at)
    try:
        found = history_pg.counts(db)
    finally:
        db.close()
    span = f", {found.first} … {found.last}" if found.first else ""
    print(
        f"{at}: an mps-pipeline history on a PostgreSQL server (schema version "
        f"{found.schema_version}, {found.size / 1e6:.1f} MB; integrity and backups are the "
        f"server's, not checked here)\n"
        f"  {found.nightlies} nightlies{span}\n"
        f"  {found.runs} runs, {found.tests} tests, {found.results} results"
    )
    return 0
