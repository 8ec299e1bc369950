"""`tracker --issue N`: keep the migration tracker's section of issue N up to date.

The section is the backlog, easiest first, with each operator's open pull requests,
duplicates flagged, and the operators merged since it last listed them
(:mod:`pipeline.flows.tracker`). The token comes from ``github.token_env`` and needs
issues: write and pull-requests: read on the repository; ``--dry-run`` writes nothing, but
reads the issue and the pull requests with it all the same.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from pipeline.config import Settings
from pipeline.errors import EXIT_OK
from pipeline.flows.tracker import TRACKER_READ, TRACKER_WRITE, Cache, client_for, update_tracker
from pipeline.github import token_from_env
from pipeline.guide.claims import ClaimState
from pipeline.state import tracker_cache


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--issue", type=int, required=True, metavar="N", help="the tracker issue")
    parser.add_argument(
        "--repo", metavar="OWNER/NAME", help="repository of the issue (default: github.repo)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the section instead of writing it"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.repo:
        settings = replace(settings, github=replace(settings.github, repo=args.repo))
    needs = TRACKER_READ if args.dry_run else TRACKER_WRITE
    reads = f"issue #{args.issue} and the open pull requests from GitHub"
    does = (
        f"tracker --dry-run writes nothing, but reads {reads}" if args.dry_run
        else f"tracker reads {reads} and writes the section"
    )  # fmt: skip
    token = token_from_env(settings.github.token_env, f"{does}: it needs a token with {needs}")
    cache = Cache.load(tracker_cache(settings))
    client = client_for(settings, token, cache, permissions=needs)
    done = update_tracker(settings, client, cache, args.issue, dry_run=args.dry_run)
    if args.dry_run:
        print(done.section)
    listed = [c for c in done.found.claims if c.item is not None]
    duplicates = sum(c.state is ClaimState.DUPLICATE for c in listed)
    print(
        f"issue #{args.issue}: tracker section {done.outcome}; {len(listed)} operators, "
        f"{len(done.found.prs)} open PRs, {duplicates} duplicated; {done.requests} GitHub "
        f"requests ({done.not_modified} answered 304)",
        file=sys.stderr,
    )
    return EXIT_OK
