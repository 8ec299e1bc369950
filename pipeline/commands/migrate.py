"""`migrate OP`: audit → edit → build → test → table → drop xfails → summary.

The same doit task graph and database as `doit migrate_op`, run in-process.
"""

from __future__ import annotations

import argparse

from pipeline.config import Settings
from pipeline.flows.migrate import STAGE_NAMES
from pipeline.options import OP, OPTIONS, SETTINGS_OPTIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OP.add_to(parser, positional=True)
    for name in ("force", "dry_run", "body", "host_body"):
        OPTIONS[name].add_to(parser)
    parser.add_argument(
        "--stage",
        default="migrate_op",
        choices=STAGE_NAMES,
        help="run only up to this stage (doit runs what it depends on)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the doit task graph in-process; doit's exit status is the command's."""
    from pipeline import tasks

    # Pass on what the user gave, not the resolved settings: unset keys keep their origin
    # (environment, config file, the checkout you stand in) and root=sandbox stays "sandbox".
    doit_vars = [f"op={args.op}"] + [
        f"{key}={value}" for key in SETTINGS_OPTIONS if (value := getattr(args, key, None))
    ]
    doit_vars += ["force=1"] * args.force + ["dry_run=1"] * args.dry_run
    if args.body:
        doit_vars.append(f"body={args.body}")
    if args.host_body:
        doit_vars.append(f"host_body={args.host_body}")
    # this command has said which tree it works on already
    return tasks.run_doit([args.stage, *doit_vars], announce=False)
