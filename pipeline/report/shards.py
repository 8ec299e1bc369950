"""The shard plan for a person (``shards`` without ``--json``)."""

from __future__ import annotations

from pipeline.results.shards import PlanRun


def render_plan(run: PlanRun) -> str:
    """How the plan was made, for a person: where its tests and durations come from, each
    shard's size and load, its balance against a plan by count, and what moved."""
    result, stability, estimates, count = run.plan, run.stability, run.estimates, run.by_count
    source, history_path, previous, out, nights = (
        run.source, run.history, run.previous, run.out, run.nights
    )  # fmt: skip
    n = len(result.shards)
    lines = [f"shard plan: {result.tests:,} tests ({source}) in {n} shards → {out}"]
    if estimates.timed:
        lines.append(
            f"durations: median of the last {nights} nightlies of {history_path}: "
            f"{estimates.measured:,} tests measured, {estimates.by_operator:,} by their "
            f"operator's median, {estimates.by_all:,} by all tests' median"
        )
    elif estimates.recorded:
        lines.append(
            f"note: the {estimates.recorded:,} tests' durations in the last {nights} "
            f"nightlies of {history_path} are all 0 s (reports without times): a plan by count"
        )
    else:
        lines.append(
            f"note: no durations in the last {nights} nightlies of {history_path}: "
            "a plan by count (each nightly records them; the next plan balances by time)"
        )
    width = len(f"{max(map(len, result.shards), default=0):,}")
    for i, (tests, load) in enumerate(zip(result.shards, result.loads, strict=True), 1):
        seconds = f"  {load:,.1f} s" if estimates.timed else ""
        lines.append(f"  shard {i:>{len(str(n))}}  {len(tests):>{width},} tests{seconds}")
    if estimates.timed:
        lines.append(
            f"slowest / mean shard: {result.ratio:.3f} (target {run.target}); "
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
