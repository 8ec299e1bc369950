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
from pipeline.errors import PipelineError
from pipeline.fsio import write_atomic
from pipeline.options import HISTORY
from pipeline.results import history, shards
from pipeline.results.junit import parse_test_id
from pipeline.tree.opinfo import load_opinfos


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--num-shards", type=int, required=True, help="how many shards the sweep runs in"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the plan as JSON (schema: docs/machine-output.md)",
    )
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
        default=shards.DEFAULT_NIGHTS,
        help=f"nightlies whose durations are taken (default {shards.DEFAULT_NIGHTS})",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=shards.TARGET,
        help=f"tests move only while the slowest shard takes more than this times the mean "
        f"(default {shards.TARGET})",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.nights < 1:
        raise PipelineError("shards: --nights must be at least 1")
    at = history.locate(args.history, settings)
    out = args.out or state.shard_plan(settings.state_dir)
    warnings: list[str] = []
    samples = _samples(at, args.nights)
    suite, source = _suite(settings, samples, warnings)
    previous, previous_path = _previous(args.previous, out, warnings)
    estimates = shards.estimate(suite, shards.medians(samples))
    result, stability = shards.plan(
        estimates.seconds, args.num_shards, previous, target=args.target
    )
    doc = shards.to_json(result, timed=estimates.timed)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(doc, indent=1) + "\n")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    count = shards.by_count(suite, estimates.seconds, args.num_shards)
    print(_render(result, stability, estimates, count, source, at, previous_path, out,
                  args))  # fmt: skip
    return 0


def _samples(at: history.HistoryLocation, nights: int) -> dict[str, list[float]]:
    """Test id -> its seconds in the last ``nights`` nightlies; {} without a history file."""
    if not history.found(at):
        return {}
    db = history.reader(at)  # a damaged history: exit 2, untouched
    try:
        found = history.durations(db, nights)
    finally:
        db.close()
    samples: dict[str, list[float]] = {}
    for (classname, name), seconds in found.items():
        samples.setdefault(shards.test_id(classname, name), []).extend(seconds)
    return samples


def _suite(
    settings: Settings, samples: dict[str, list[float]], warnings: list[str]
) -> tuple[list[str], str]:
    """The consistency tests to plan, and where they come from."""
    kinds = " and ".join(settings.test_kinds)
    try:
        records = load_opinfos(settings.tree)
    except PipelineError as exc:
        suite = sorted(
            t
            for t in samples
            if (p := parse_test_id(t.rpartition("::")[2])) and p[0] in settings.test_kinds
        )
        if not suite:
            raise PipelineError(
                f"shards: no suite to plan: the OpInfo metadata cannot be read ({exc}), and the "
                "history has no durations to take the tests from"
            ) from exc
        warnings.append(
            f"the OpInfo metadata cannot be read ({exc}); planning the {len(suite)} tests "
            "the history has durations for (run-sweep.sh runs a test the plan lacks in the "
            "shard its hash picks)"
        )
        return suite, "the tests in the history"
    suite = list(
        dict.fromkeys(t for r in records for kind in settings.test_kinds for t in r.test_ids(kind))
    )
    if not suite:
        raise PipelineError(f"shards: the tree's {len(records)} OpInfos instantiate no test")
    return suite, f"the tree's {len(records)} OpInfos × dtypes × {kinds}"


def _previous(
    given: Path | None, out: Path, warnings: list[str]
) -> tuple[list[list[str]] | None, Path | None]:
    """The previous plan's shards: ``--previous`` (which must be readable), else the plan
    at ``out`` when there is one (unreadable: a warning, and a plan from scratch)."""
    path = given or out
    if given is None and not out.is_file():
        return None, None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return shards.from_json(doc, str(path)), path
    except (OSError, ValueError, PipelineError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        message = f"{path}: cannot read the previous plan ({why})"
        if given is not None:
            raise PipelineError(f"shards: --previous {message}") from exc
        warnings.append(f"{message}; planning from scratch")
        return None, None


def _render(
    result: shards.Plan,
    stability: shards.Stability,
    estimates: shards.Estimates,
    count: shards.Plan,
    source: str,
    history_path: history.HistoryLocation,
    previous: Path | None,
    out: Path,
    args: argparse.Namespace,
) -> str:
    n = len(result.shards)
    lines = [f"shard plan: {result.tests:,} tests ({source}) in {n} shards → {out}"]
    if estimates.timed:
        lines.append(
            f"durations: median of the last {args.nights} nightlies of {history_path}: "
            f"{estimates.measured:,} tests measured, {estimates.by_operator:,} by their "
            f"operator's median, {estimates.by_all:,} by all tests' median"
        )
    elif estimates.recorded:
        lines.append(
            f"note: the {estimates.recorded:,} tests' durations in the last {args.nights} "
            f"nightlies of {history_path} are all 0 s (reports without times): a plan by count"
        )
    else:
        lines.append(
            f"note: no durations in the last {args.nights} nightlies of {history_path}: "
            "a plan by count (each nightly records them; the next plan balances by time)"
        )
    width = len(f"{max(map(len, result.shards), default=0):,}")
    for i, (tests, load) in enumerate(zip(result.shards, result.loads, strict=True), 1):
        seconds = f"  {load:,.1f} s" if estimates.timed else ""
        lines.append(f"  shard {i:>{len(str(n))}}  {len(tests):>{width},} tests{seconds}")
    if estimates.timed:
        lines.append(
            f"slowest / mean shard: {result.ratio:.3f} (target {args.target}); "
            f"by count (--shard-id/--num-shards) it would be {count.ratio:.3f}"
        )
    else:
        lines.append("slowest / mean shard: unknown (no times)")
    if stability.previous:
        how = " (a fresh plan: keeping tests in place could not reach the target)"
        lines.append(
            f"stability: {stability.moved:,} test{'' if stability.moved == 1 else 's'} moved "
            f"since {previous}, "
            f"{stability.kept:,} kept, {stability.new:,} new, {stability.gone:,} gone"
            + (how if stability.replanned else "")
        )
    else:
        lines.append("stability: no previous plan (a new one)")
    return "\n".join(lines)
