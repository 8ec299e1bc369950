"""`history copy SRC DST`: the nightly history copied (an SQLite file into a server, as a
fleet moves up) and checked row by row (:mod:`pipeline.results.history_copy`).

SRC and DST are each an SQLite file's path or a ``postgresql://`` URL (its password best
kept in ~/.pgpass or given through ``$MPS_PIPELINE_HISTORY_URL``: DST may be written
``-`` for the ``history.url`` setting). Exit 0 when every row read back identical; 2 when
nothing was copied (a damaged source, a target that already holds nights, a difference).
"""

from __future__ import annotations

import argparse
import json

from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.options import JSON
from pipeline.results.history_copy import copy
from pipeline.results.history_db import HistoryLocation

PREPARES_TREE = False  # no PyTorch tree is read
SCHEMA = 1
SETTING = "-"  # DST: the history.url setting's server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    copying = actions.add_parser(
        "copy", help="copy a history into an empty one and compare every row"
    )
    copying.add_argument("source", metavar="SRC", help="an SQLite file or a postgresql:// URL")
    copying.add_argument(
        "target",
        metavar="DST",
        help="an empty history: a postgresql:// URL, an SQLite file, or '-' for the "
        "history.url setting (so the URL's password stays in the environment)",
    )
    JSON.add_to(copying)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Copy, verify, say what was copied; 0."""
    target = settings.history_url if args.target == SETTING else args.target
    if not target:
        raise ConfigError("history copy: DST '-' names the history.url setting, which is unset")
    done = copy(
        HistoryLocation.parse(args.source, where="SRC"),
        HistoryLocation.parse(target, where="DST"),
        wait=settings.lock_wait,
    )
    if args.json:
        doc = {
            "schema": SCHEMA,
            "source": done.source,
            "target": done.target,
            "nightlies": done.nightlies,
            "rows": dict(done.rows),
            "verified": True,
        }
        print(json.dumps(doc, indent=2))
        return 0
    total = sum(n for _, n in done.rows)
    print(f"copied {done.nightlies} nightlies from {done.source} to {done.target}")
    print("  " + ", ".join(f"{table} {n:,}" for table, n in done.rows))
    print(f"  all {total:,} rows read back from both and compared one by one: identical")
    return 0
