"""`shards --num-shards N [--json]`: the nightly sweep's shards, balanced by duration.

The suite is every consistency test of the tree: its OpInfos × their dtypes × the
configured test kinds (``test.kinds``). When the OpInfo metadata cannot be read (the
aggregation job on Linux without that night's export), the suite is the tests the
history has durations for, with a warning. Durations are each test's median over the last
``--nights`` nightlies of the history, read without writing to it; how tests without any
are estimated and how the plan stays stable is :mod:`pipeline.results.shards`.

The plan is written to ``--out`` (default ``<state_dir>/shards.json``), the document
``--json`` prints (schema: docs/machine-output.md); the next run starts from it (or from
``--previous FILE``), so a test changes shard only when balance needs it. Without any
recorded duration above 0 s (no history, none with seconds yet, or reports without times)
the plan balances by count, its balance in time unknown, exit 0 with a note;
``ci/scripts/run-sweep.sh`` runs one shard of it. Exit 2 on a damaged history, an
unreadable ``--previous`` file or an empty suite.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline import state
from pipeline.config import Settings
from pipeline.flows.shards import ShardRequest, plan_shards
from pipeline.options import HISTORY, JSON
from pipeline.report.shards import render_plan
from pipeline.results import shards


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--num-shards", type=int, required=True, help="how many shards the sweep runs in"
    )
    JSON.add_to(parser)
    HISTORY.add_to(parser)
    parser.add_argument(
        "--out",
        type=Path,
        help=f"where the plan is written (default: <state_dir>/{state.SHARD_PLAN})",
    )
    parser.add_argument(
        "--previous",
        type=Path,
        help="the previous night's plan, kept wherever balance allows (default: the --out file, "
        "when there is one)",
    )
    parser.add_argument(
        "--nights",
        type=int,
        help="nightlies whose durations are taken (default: the setting nightly.shard_nights)",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=shards.TARGET,
        help=f"tests move only while the slowest shard takes more than this times the mean "
        f"(default {shards.TARGET})",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    request = ShardRequest(
        num_shards=args.num_shards,
        nights=args.nights,
        history=args.history,
        out=args.out,
        previous=args.previous,
        target=args.target,
    )
    done = plan_shards(settings, request)
    for warning in done.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(shards.to_json(done.plan, timed=done.estimates.timed), indent=2))
    else:
        print(render_plan(done))
    return 0
