"""`audit OP`: the metal-kernel guide's checklist for one operator, each item with file:line."""

from __future__ import annotations

import argparse

from pipeline.config import Settings
from pipeline.flows.audit import audit_command
from pipeline.options import JSON, OP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OP.add_to(parser, positional=True)
    JSON.add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the checklist; exit 0 when every item passes, 1 otherwise (an unknown item,
    one that could not be judged, does not pass). The tree's warnings go to stderr."""
    # the command line the run was started from (pipeline.__main__.main notes it): what a
    # saved output's witness is keyed on; None when called otherwise
    argv = getattr(args, "argv", None)
    return audit_command(settings, args.op, as_json=args.json, argv=argv)
