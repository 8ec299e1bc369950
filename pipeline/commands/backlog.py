"""`backlog`: operators still on MPSGraph or without MPS, easiest wins first."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import Settings
from pipeline.guide.backlog import backlog, to_json
from pipeline.options import JSON
from pipeline.report.console import terminal
from pipeline.report.guide import render_backlog
from pipeline.tree.index import load_index


def add_arguments(parser: argparse.ArgumentParser) -> None:
    JSON.add_to(parser)
    parser.add_argument(
        "--claims",
        action="store_true",
        help="also the open MPS pull requests working on each operator, duplicates flagged "
        "(asks GitHub: needs the token in github.token_env)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the backlog; the tree's warnings (what could not be read) go to stderr."""
    if args.claims:
        return _claims(args, settings)
    index = load_index(settings.tree)
    items = backlog(index)
    for warning in index.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(items, index.warnings), indent=2))
    else:
        render_backlog(items, terminal())
    return 0


def _claims(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.flows.tracker import CLAIMS_READ, Cache, client_for, find_claims
    from pipeline.github import token_from_env
    from pipeline.guide.claims import to_json as claims_json
    from pipeline.report.tracker import render_claims
    from pipeline.state import tracker_cache

    cache = Cache.load(tracker_cache(settings))
    token = token_from_env(
        settings.github.token_env,
        f"backlog --claims reads the open pull requests from GitHub: it needs a token with "
        f"{CLAIMS_READ}",
    )
    client = client_for(settings, token, cache, permissions=CLAIMS_READ)
    found = find_claims(settings, client, cache)
    if args.json:
        print(json.dumps(claims_json(found.claims, found.prs), indent=2))
    else:
        render_claims(found.claims, found.prs, terminal())
    print(
        f"{len(found.prs)} open PRs read with {found.requests} GitHub requests "
        f"({found.not_modified} answered 304)",
        file=sys.stderr,
    )
    return 0
