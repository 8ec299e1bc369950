"""A nightly at fleet size (``--only fleet``): 3 runners × 20,000 results, 180 nights kept.

The history is generated once (SQL inserts); each measured night runs on a fresh copy of
it, in a subprocess (:func:`fleet_child`), with the history's integrity check and without
it (the peer that shows what the check costs), the two alternating.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO, Context, Figure, Result, _median, run, settings_for
from bench.rss import peak_rss_mb
from pipeline import sandbox

FLEET_RUNNERS = ("macos-m1-14", "macos-m2-15", "macos-m2-26")
FLEET_TESTS = 20_000  # consistency results per runner per night
FLEET_NIGHTS = 180  # the history keeps 180 nightlies (nightly --keep)
FLEET_SHARDS = 4  # JUnit files per runner
# the analysis' phases, timed in the child: (module, function)
_FLEET_PHASES = (
    ("pipeline.results.history", "check"),
    ("pipeline.results.history", "sealed"),
    ("pipeline.results.history", "seal"),
    ("pipeline.results.junit", "parse_reports"),
    ("pipeline.results.junit", "merge_reports"),
    ("pipeline.results.history", "record_nightly"),
    ("pipeline.flows.nightly", "propose"),  # patched where the flow calls it
    ("pipeline.results.macos", "propose_moves"),
    ("pipeline.flows.nightly", "find_regressions"),  # patched where the flow calls it
    ("pipeline.flows.nightly", "name_suspects"),  # patched where the flow calls it
    ("pipeline.flows.nightly", "find_flaky"),  # patched where the flow calls it
    ("pipeline.results.history", "outcome_counts"),
    ("pipeline.results.history", "prune"),
    ("pipeline.results.history", "backup_and_seal"),
)
_ANALYSIS = ("propose", "propose_moves", "find_regressions", "name_suspects", "find_flaky")


def fleet_history(path: Path, n_tests: int, nights: int, runners: Sequence[str]) -> None:
    """A history of ``nights`` nightlies × ``runners`` × ``n_tests`` results, in SQL.

    The tests are :func:`bench.synthetic.make_report`'s, with its outcomes,
    except that a quarter of its failures passed before (tonight's regressions) and one
    test in 1,999 failed on a night (flips: flaky over the window, fixes, regressions).
    """
    from datetime import datetime, timedelta, timezone

    from bench.synthetic import case_name
    from pipeline.results import history
    from pipeline.results.junit import parse_test_id

    db = history.connect(path)
    try:
        with db:
            rows = []
            for i in range(n_tests):
                name = case_name(i)
                kind, stem, dtype = parse_test_id(name) or (None, None, None)
                rows.append((i + 1, "test_mps.TestConsistencyMPS", name, kind, stem, dtype))
            db.executemany("INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?)", rows)
        first = datetime(2026, 3, 1, 3, 17, tzinfo=timezone.utc) - timedelta(days=nights)
        run = 0
        for night in range(nights):
            started = history.timestamp(first + timedelta(days=night))
            with db:
                for runner in runners:
                    run += 1
                    db.execute(
                        'INSERT INTO runs (id, started, runner, "commit", source) '
                        "VALUES (?, ?, ?, '', ?)",
                        (run, started, runner, f"bench-{night}"),
                    )
                    db.execute(
                        """INSERT INTO results SELECT ?, id, CASE
                            WHEN (id - 1) % 211 = 0 THEN 'error'
                            WHEN (id - 1) % 97 = 0 AND ((id - 1) / 97) % 4 != 0 THEN 'fail'
                            WHEN (id - 1) % 89 = 0 THEN 'xpass'
                            WHEN (id - 1) % 13 = 0 THEN 'xfail'
                            WHEN (id - 1) % 31 = 0 THEN 'skip'
                            WHEN ((id - 1) * 7 + ?) % 1999 = 0 THEN 'fail'
                            ELSE 'pass' END, 0, 1, ((id - 1) % 1000) / 1000.0 + 0.0005
                        FROM tests""",
                        (run, night),
                    )
                    db.execute(  # as history.record_nightly stores them with each run
                        "INSERT INTO run_outcomes SELECT ?, outcome, COUNT(*) FROM results "
                        "WHERE run_id = ? GROUP BY outcome",
                        (run, run),
                    )
    finally:
        db.close()


def fleet_child(spec: str) -> None:
    """In a subprocess (``python -c``): one nightly on the generated history, as the command
    runs it (run_nightly + publish), each phase timed; prints JSON with the peak RSS."""
    import functools
    import importlib

    from pipeline.flows import nightly
    from pipeline.guide.backlog import backlog
    from pipeline.report.nightly import publish

    args = json.loads(spec)
    phases: dict[str, float] = {}
    for module, name in _FLEET_PHASES:
        mod = importlib.import_module(module)
        fn = getattr(mod, name)

        def timed_fn(*a: Any, _fn: Any = fn, _name: str = name, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                phases[_name] = phases.get(_name, 0.0) + time.perf_counter() - start

        setattr(mod, name, functools.wraps(fn)(timed_fn))
    root = Path(args["root"])
    settings = dataclasses.replace(
        settings_for(root, Path(args["state"]), opinfo_table=root / sandbox.OPINFO_TABLE),
        runners=tuple(args["runners"]),
    )
    start = time.perf_counter()
    outcome = nightly.run_nightly(
        settings,
        Path(args["results"]),
        history_at=args["history"],  # a file's path or a server's URL
        backlog_of=backlog,
        keep=args.get("keep", 180),
        commit="",
        started="2026-03-01T03:17Z",
        verify=args.get("verify", True),
    )
    recorded = time.perf_counter()
    files = publish(outcome)
    done = time.perf_counter()
    peak_mb = peak_rss_mb()
    summary = outcome.summary
    print(
        json.dumps(
            {
                "run_nightly_s": recorded - start,
                "publish_s": done - recorded,
                "peak_rss_mb": peak_mb,
                "phases_s": phases,
                "files": {f.name: f.stat().st_size for f in files},
                "regressions": len(summary.regressions),
                "flaky": len(summary.flaky),
                "rows": len(summary.table.rows),
                "ratios": {r: s.ratio for r, s in summary.shards.items()},
            }
        )
    )


def write_reports(results: Path, n_tests: int, shards_per_runner: int) -> Path:
    """Each runner's night as ``shards_per_runner`` JUnit files of make_report's cases."""
    from bench.synthetic import make_report

    per = -(-n_tests // shards_per_runner)
    for r, runner in enumerate(FLEET_RUNNERS):
        for k in range(shards_per_runner):
            count = min(per, n_tests - k * per)
            report = results / runner / f"shard-{k + 1}.xml"
            report.parent.mkdir(parents=True, exist_ok=True)
            # wall times a little uneven, as shards are
            wall = 0.25 * count * (1 + 0.05 * ((k + r) % 3))
            report.write_text(make_report(count, start=k * per, suite_time=wall), "utf-8")
    return results


def bench_dashboard(ctx: Context, n_results: int = 100_000) -> Result:
    """The dashboard of a night of ``n_results`` results (3 runners), after one earlier
    night: index.html's size, and summary.json's."""
    n_tests = -(-n_results // len(FLEET_RUNNERS))
    work = ctx.work / "dashboard"
    path = work / "history" / "nightly.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    fleet_history(path, n_tests, 1, FLEET_RUNNERS)
    results = write_reports(work / "results", n_tests, FLEET_SHARDS)
    root = sandbox.materialize(work / "tree")
    spec = {"root": str(root), "state": str(work / "state"), "results": str(results),
            "history": str(path), "runners": list(FLEET_RUNNERS)}  # fmt: skip
    code = f"from bench.fleet import fleet_child; fleet_child({json.dumps(spec)!r})"
    child = json.loads(run(ctx, [sys.executable, "-c", code], REPO).stdout.splitlines()[-1])
    size = child["files"]
    scale = f"{len(FLEET_RUNNERS)} × {n_tests:,} results"
    return Result(
        "dashboard",
        f"the dashboard at {n_results:,} results a night",
        f"one nightly of {scale} (make_report's outcomes; one earlier night in the history) "
        "through run_nightly + publish, in a subprocess: the files it writes",
        (
            Figure("dashboard index.html", size["index.html"] / 1e6, "MB", "<= 5 MB", True),
            Figure("  summary.json", size["summary.json"] / 1e6, "MB"),
            Figure("  heatmap rows", child["rows"], ""),
        ),
        (
            "a heatmap over 4,000 cells is a JSON data block drawn on canvases "
            "(pipeline/report/heatmap_canvas.py); smaller ones are inline SVG",
        ),
        {"files": size, "rows": child["rows"], "results": n_tests * len(FLEET_RUNNERS)},
    )


def bench_fleet(
    ctx: Context,
    n_tests: int | None = None,
    nights: int | None = None,
    shards_per_runner: int = FLEET_SHARDS,
) -> Result:
    """One nightly at fleet size, on a generated history: see :func:`fleet_history`."""
    from bench.synthetic import case_name
    from pipeline.results import history, shards

    n_tests = n_tests or (1_200 if ctx.quick else FLEET_TESTS)
    nights = nights or (8 if ctx.quick else FLEET_NIGHTS)
    work = ctx.work / "fleet"
    path = work / "history" / "nightly.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fleet_history(path, n_tests, nights, FLEET_RUNNERS)
    history.seal(path, full=True)  # as the last nightly leaves it
    generate_s = time.perf_counter() - start
    generated_mb = path.stat().st_size / 1e6
    results = write_reports(work / "results", n_tests, shards_per_runner)
    root = sandbox.materialize(work / "tree")
    night = work / "night" / "nightly.sqlite"
    children: dict[bool | None, list[dict[str, Any]]] = {True: [], False: [], None: []}
    # checked (the usual night: the file is what the last night sealed), unchecked, and
    # once a night whose file is not sealed: the whole integrity_check, 1 night in 7
    for verify in [True, False] * ctx.repeats(5) + [None]:
        # a fresh copy each time: a night changes the history (one more, one pruned)
        shutil.rmtree(night.parent, ignore_errors=True)
        night.parent.mkdir(parents=True)
        shutil.copyfile(path, night)
        if verify is not None:
            shutil.copyfile(f"{path}{history.SEAL}", f"{night}{history.SEAL}")
        spec = {"root": str(root), "state": str(work / f"state-{len(children[verify])}-{verify}"),
                "results": str(results), "history": str(night),
                "runners": list(FLEET_RUNNERS), "verify": verify is not False}  # fmt: skip
        code = f"from bench.fleet import fleet_child; fleet_child({json.dumps(spec)!r})"
        out = run(ctx, [sys.executable, "-c", code], REPO).stdout.splitlines()[-1]
        children[verify].append(json.loads(out))
        shutil.rmtree(str(spec["state"]), ignore_errors=True)
    walls = {v: [c["run_nightly_s"] + c["publish_s"] for c in runs] for v, runs in children.items()}
    full = walls[None][0]
    child = children[None][0]  # its phases: the whole check's among them
    ingest = _median(walls[True])
    unchecked = _median(walls[False])
    phases = child["phases_s"]
    analysis = sum(phases.get(name, 0.0) for name in _ANALYSIS)
    db_mb = night.stat().st_size / 1e6
    suite = [shards.test_id("TestConsistencyMPS", case_name(i)) for i in range(n_tests)]
    plans = []
    for _ in range(ctx.repeats(3)):
        begin = time.perf_counter()
        ro = history.open_read_only(night)
        try:
            found = history.durations(ro, 7)
        finally:
            ro.close()
        samples = {shards.test_id(c.rsplit(".", 1)[-1], n): v for (c, n), v in found.items()}
        estimates = shards.estimate(suite, shards.medians(samples))
        plan, _ = shards.plan(estimates.seconds, 3)
        plans.append(time.perf_counter() - begin)
    size = child["files"]
    scale = f"{len(FLEET_RUNNERS)} runners × {n_tests:,} results × {nights} nights"
    figures = (
        Figure(f"generate the history ({scale})", generate_s, "s"),
        Figure(
            f"one night's ingestion ({len(FLEET_RUNNERS)} × {n_tests:,} cases, "
            f"{shards_per_runner} shards each): run_nightly + publish, median of "
            f"{len(walls[True])}",
            ingest,
            "s",
            "<= 2.5 s",
            True,
        ),
        Figure("  the same night without the history's integrity check", unchecked, "s"),
        Figure(
            f"  a night with the whole integrity check (1 in {history.FULL_CHECK_EVERY})",
            full,
            "s",
        ),
        Figure("  with the check / without it", ingest / unchecked, "x", headline=True),
        Figure(
            "  the usual night's check: the file against its seal (digest)",
            children[True][0]["phases_s"].get("sealed", 0.0),
            "s",
        ),
        Figure(
            "  peak memory without the check",
            _median([c["peak_rss_mb"] for c in children[False]]),
            "MB",
        ),
        *(Figure(f"  {name}", secs, "s") for name, secs in phases.items()),
        Figure(
            "  peak memory of the nightly (child's ru_maxrss)",
            max(c["peak_rss_mb"] for c in children[True]),
            "MB",
            "<= 200 MB",
            True,
        ),  # fmt: skip
        Figure(
            f"history size after the night ({nights} nights kept)", db_mb, "MB", "<= 1000 MB", True
        ),  # fmt: skip
        Figure(
            "proposals + macOS moves + regressions + suspects + flaky",
            analysis,
            "s",
            "<= 5 s",
            True,
        ),  # fmt: skip
        Figure(
            f"shards plan of {n_tests:,} tests from the history, median of {len(plans)}",
            _median(plans),
            "s",
            "<= 2 s",
            True,
        ),  # fmt: skip
        Figure("summary.json", size["summary.json"] / 1e6, "MB", "<= 5 MB", True),
        Figure("dashboard index.html", size["index.html"] / 1e6, "MB", "<= 5 MB", True),
        Figure("  summary.md", size["summary.md"] / 1e6, "MB"),
        Figure("  slowest / mean shard, per runner (max)", max(child["ratios"].values()), "x"),
    )
    return Result(
        "fleet",
        "a nightly at fleet size (issue 11)",
        f"a generated history of {scale} ({generated_mb:.0f} MB, SQL inserts), then one more "
        "night through run_nightly + publish in a subprocess (the history checked, read, "
        "recorded, analysed, pruned to 180 nights, backed up; the dashboard written), and "
        "a 3-shard plan from the last 7 nights' durations",
        figures,
        (
            f"tonight: {child['regressions']} regressions, {child['flaky']} flaky tests, "
            f"{child['rows']:,} table rows; the tree is the sandbox's, so the xfail proposals "
            "judge its few entries (the generated operators have none)",
            "suspects: the generated runs record no PyTorch commit, so each regression's "
            "suspects stop at 'not recorded' (no git log): the figure excludes commit analysis",
            "each night runs on a fresh copy of the generated history (sealed as a nightly leaves "
            "it), with its check and without it, alternately, then once unsealed (the whole "
            "integrity_check, due every 7th night); the phases are that night's, timed inside "
            "the child (the check in a thread, beside the rest of the work)",
        ),
        {
            "generate_s": generate_s,
            "generated_mb": generated_mb,
            "child": child,
            "nights_s": {"checked": walls[True], "unchecked": walls[False], "full": walls[None]},
            "vs_peer": [
                {
                    "path": f"one nightly at fleet size ({scale})",
                    "ours": ingest,
                    "peer": unchecked,
                    "peer_name": "the same nightly, integrity check off",
                    "unit": "s",
                },
            ],  # fmt: skip
            "db_mb": db_mb,
            "plan_s": plans,
            "tests": n_tests,
            "nights": nights,
        },  # fmt: skip
    )
