"""The history on a PostgreSQL server against the SQLite file, at fleet size (issue 33).

A server of the benchmark's own (tests/postgres.py: initdb and pg_ctl in a temp folder, on
127.0.0.1) holds the same generated history as the file (:func:`bench.fleet.fleet_history`,
copied in by ``history copy``, which checks every row). Measured in one run, side by side:
one more night through run_nightly + publish on each (a subprocess each time, as the
command runs it; the file's copy fresh each time, the server's night deleted after each),
the dashboard's queries on each, four aggregation jobs recording at once on the server,
and the export of one night.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from typing import Any

from bench.common import REPO, BenchError, Context, Figure, Result, _median, run
from bench.fleet import FLEET_RUNNERS, FLEET_TESTS, fleet_history, write_reports
from pipeline import sandbox

SERVER_NIGHTS = 365  # issue 33: a year of nights on the server

JOB = """
import sys, time
from pipeline.results import history
from pipeline.results.junit import CaseResult, Outcome
url, source, go, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
cases = [CaseResult("test_mps.TestConsistencyMPS", f"test_output_match_op{i}_mps_float32",
                    "output_match", f"op{i}", "float32", Outcome.PASS, False, 1, "", 0.01, "")
         for i in range(n)]
while time.time() < go:
    time.sleep(0.005)
start = time.perf_counter()
db = history.writer(history.HistoryLocation.parse(url), wait=600)
history.record_nightly(db, {r: cases for r in ("m1", "m2", "m4")}, commit="", source=source)
db.close()
print(time.perf_counter() - start)
"""


def _night(ctx: Context, spec: dict[str, Any]) -> float:
    code = f"from bench.fleet import fleet_child; fleet_child({json.dumps(spec)!r})"
    child = json.loads(run(ctx, [sys.executable, "-c", code], REPO).stdout.splitlines()[-1])
    return float(child["run_nightly_s"] + child["publish_s"])


def _queries(at: Any) -> float:
    """The dashboard's and the analysis' reads of the last nights, once."""
    from pipeline.results import history

    start = time.perf_counter()
    db = history.reader(at)
    try:
        history.outcome_counts(db, 60)
        history.flipping(db, 5)
        history.durations(db, 7)
        history.nightlies(db, 3)
    finally:
        db.close()
    return time.perf_counter() - start


def _jobs_at_once(ctx: Context, url: str, n_tests: int) -> tuple[float, int, int]:
    """Four jobs (other sources) record a night each at the same moment: the wall time,
    and the nights and runs the server then holds of them."""
    import psycopg

    go = time.time() + 2.0
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(JOB), url, f"job-{i}", str(go),
                          str(n_tests)], cwd=REPO, env={**ctx.env, "PYTHONPATH": str(REPO)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(4)
    ]  # fmt: skip
    for proc in procs:
        _out, err = proc.communicate(timeout=1200)
        if proc.returncode != 0:
            raise BenchError(f"an aggregation job failed: {err.strip()[-400:]}")
    wall = time.time() - go
    with psycopg.connect(url) as conn:
        nights, runs = conn.execute(
            "SELECT COUNT(DISTINCT started), COUNT(*) FROM runs WHERE source LIKE 'job-%'"
        ).fetchone()
    return wall, int(nights), int(runs)


def bench_server(ctx: Context) -> Result:
    from tests.postgres import PostgresUnavailable, running

    try:
        with running() as pg:
            return _measure(ctx, pg)
    except PostgresUnavailable as exc:
        raise BenchError(f"no PostgreSQL server: {exc}") from exc


def _nights_side_by_side(ctx: Context, work: Any, path: Any, url: str, nights: int,
                         n_tests: int) -> tuple[list[float], list[float]]:  # fmt: skip
    """One more night on each backend, alternately; each starts from the same history."""
    import psycopg

    results = write_reports(work / "results", n_tests, 4)
    root = sandbox.materialize(work / "tree")
    on_file, on_server = [], []
    night = work / "night" / "nightly.sqlite"
    base = {"root": str(root), "results": str(results), "runners": list(FLEET_RUNNERS),
            "keep": nights + 1, "verify": False}  # fmt: skip
    for i in range(ctx.repeats(3)):
        shutil.rmtree(night.parent, ignore_errors=True)
        night.parent.mkdir(parents=True)
        shutil.copyfile(path, night)
        on_file.append(_night(ctx, {**base, "state": str(work / f"sf{i}"), "history": str(night)}))
        on_server.append(_night(ctx, {**base, "state": str(work / f"ss{i}"), "history": url}))
        with psycopg.connect(url, autocommit=True) as conn:  # as it was before the night
            conn.execute("DELETE FROM runs WHERE source = ''")  # the generated ones have one
    return on_file, on_server


def _measure(ctx: Context, pg: Any) -> Result:
    from pipeline.config import load_settings
    from pipeline.flows.export import from_history
    from pipeline.results import history, history_copy

    n_tests = 1_200 if ctx.quick else FLEET_TESTS
    nights = 8 if ctx.quick else SERVER_NIGHTS
    work = ctx.work / "server"
    path = work / "history" / "nightly.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    fleet_history(path, n_tests, nights, FLEET_RUNNERS)
    url = pg.new_database()
    at, file_at = history.HistoryLocation.parse(url), history.HistoryLocation.parse(path)
    start = time.perf_counter()
    copied = history_copy.copy(file_at, at)
    copy_s = time.perf_counter() - start
    on_file, on_server = _nights_side_by_side(ctx, work, path, url, nights, n_tests)
    file_q = _median([_queries(file_at) for _ in range(ctx.repeats(3))])
    server_q = _median([_queries(at) for _ in range(ctx.repeats(3))])
    jobs_wall, job_nights, job_runs = _jobs_at_once(ctx, url, n_tests // 4)
    settings = load_settings({"state_dir": str(work / "state")}, env={})
    start = time.perf_counter()
    lines = [row.to_json() for row in from_history(settings, at, 1)]
    export_s = time.perf_counter() - start
    export_mb = sum(len(line.encode()) + 1 for line in lines) / 1e6
    file_s, server_s = _median(on_file), _median(on_server)
    scale = f"{len(FLEET_RUNNERS)} runners × {n_tests:,} results × {nights} nights"
    return Result(
        "server",
        "the history on a PostgreSQL server against the SQLite file (issue 33)",
        f"a generated history of {scale} in a file and, copied in by `history copy`, on a "
        "local PostgreSQL server; one more night through run_nightly + publish on each "
        "(a subprocess, the file without its integrity check, which the server has no "
        "counterpart of), the dashboard's queries, four jobs recording at once, one "
        "night's export",
        (
            Figure(f"history copy into the server ({scale}), rows checked", copy_s, "s"),
            Figure(f"one night on SQLite, median of {len(on_file)}", file_s, "s"),
            Figure(f"the same night on PostgreSQL, median of {len(on_server)}", server_s, "s"),
            Figure("  PostgreSQL / SQLite", server_s / file_s, "x", "<= 1.5x", True),
            Figure("dashboard and analysis queries on SQLite", file_q, "s"),
            Figure("  on PostgreSQL", server_q, "s"),
            Figure("  PostgreSQL / SQLite", server_q / file_q, "x", headline=True),
            Figure(f"four jobs recording at once ({len(FLEET_RUNNERS)} × {n_tests // 4:,} "
                   "each): wall time", jobs_wall, "s"),  # fmt: skip
            Figure("  nightlies recorded of the four (each exactly once: 4)", job_nights, "",
                   "4", True),  # fmt: skip
            Figure("  runs recorded (12)", job_runs, ""),
            Figure("export of one night: rows per second", len(lines) / export_s, "cases/s",
                   headline=True),  # fmt: skip
            Figure("  its size", export_mb, "MB"),
        ),
        (
            f"the server: PostgreSQL from {pg.bin_dir}, fsync off, on this machine "
            "(a LAN server adds a round trip per statement: the night sends a few hundred)",
            f"copied: {dict(copied.rows)}",
        ),
        {
            "file_s": on_file,
            "server_s": on_server,
            "copy_s": copy_s,
            "queries": [file_q, server_q],
            "jobs": [jobs_wall, job_nights, job_runs],
            "export": [len(lines), export_s, export_mb],
        },
    )
