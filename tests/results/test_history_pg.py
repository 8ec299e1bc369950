"""The nightly history on a real PostgreSQL server (the session's, tests/postgres.py): the
schema, its migration, concurrent writers, the write lock, the read-only role, faults."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from pipeline.errors import HistoryServerError
from pipeline.results import history, history_pg
from pipeline.results import history_schema as schema
from pipeline.results.history_schema import SCHEMA_VERSION
from tests.postgres import PASSWORD
from tests.results.test_history import XP, P, X, case, night

ROOT = Path(__file__).parents[2]


@pytest.fixture
def at(pg_url) -> history.HistoryLocation:
    return history.HistoryLocation.parse(pg_url)


def _night(db, day: int, source: str = "", runners=("m1", "m2")):
    cases = [case("atan2", "float32", P), case("atan2", "int64", XP), case("add", "int8", X)]
    return history.record_nightly(
        db, {r: cases for r in runners}, commit=f"c{day}", started=night(day), source=source
    )


def test_the_server_holds_the_files_schema(at, tmp_path):
    server = history.writer(at)
    file = history.connect(tmp_path / "h.sqlite")
    try:
        for table, _key in schema.KEYED:
            assert server.columns(table) == file.columns(table) != set(), table
        assert server.columns("results_flat") == file.columns("results_flat")
        (version,) = server.execute("SELECT version FROM schema_version").fetchone()
        assert version == schema.SCHEMA_VERSION
    finally:
        server.close()
        file.close()
    history.writer(at).close()  # opening again adds nothing
    with psycopg.connect(at.url) as raw:
        assert raw.execute("SELECT COUNT(*) FROM schema_version").fetchone() == (1,)


def test_a_night_reads_back_as_recorded(at):
    db = history.writer(at)
    try:
        first = _night(db, 1, source="run-1")
        second = _night(db, 2)
        assert [n.started for n in history.nightlies(db)] == [second.started, first.started]
        assert history.nightlies(db, until=first.started) == (first,)
        run = first.runs[0]
        assert history.run_cases(db, run.id, stems=["atan2"])[0].outcome is P
        _night(db, 3, source="run-1")  # the same source again: replaced, never doubled
        sources = db.execute("SELECT source, COUNT(*) FROM runs GROUP BY source").fetchall()
        assert sorted(sources) == [("", 2), ("run-1", 2)]
        assert history.prune(db, 1) == 1
        assert len(history.nightlies(db)) == 1
    finally:
        db.close()


def test_an_older_schema_is_migrated_in_place(at):
    db = history.writer(at)
    _night(db, 1)
    db.close()
    with psycopg.connect(at.url, autocommit=True) as raw:  # as version 2 left it
        raw.execute("DROP TABLE speed")
        raw.execute("DROP TABLE run_outcomes")
        raw.execute("UPDATE schema_version SET version = 2")
    db = history.writer(at)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
        assert "median" in db.columns("speed")
        counts = history.outcome_counts(db, 5)  # filled from the results there
        assert [c[2]["pass"] for c in counts] == [1, 1]
    finally:
        db.close()


def test_version_5_gains_run_devices_in_place(at):
    from pipeline.results import speed as speeds
    from tests.results.test_device import mac, recorded

    db = history.writer(at)
    first = _night(db, 1, runners=("macos-m2-15",))
    with db:
        speeds.record(db, first.runs[0].id, [speeds.Measurement(
            "atan2", "float32", "large", "contiguous", (1e-4,) * 3)])  # fmt: skip
    db.close()
    with psycopg.connect(at.url, autocommit=True) as raw:  # as version 5 left it
        raw.execute("DROP TABLE run_devices")
        raw.execute("UPDATE schema_version SET version = 5")
    m2 = mac("macos-m2-15")
    ro = history.reader(at)  # read as it is: no device, no baseline
    try:
        assert speeds.nightly_medians(ro, m2.device_class, 7) == {}
    finally:
        ro.close()
    db = history.writer(at)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
        assert "virtualization" in db.columns("run_devices")
        # the earlier run keeps its figures, its device unknown: never a baseline
        assert speeds.nightly_medians(db, m2.device_class, 7) == {}
        second = _night(db, 2, runners=("macos-m2-15", "vm"))
        runs = {r.runner: r.id for r in second.runs}
        with db:
            history.record_devices(db, {runs["macos-m2-15"]: m2, runs["vm"]: recorded("vm")})
            speeds.record(db, runs["macos-m2-15"], [speeds.Measurement(
                "atan2", "float32", "large", "contiguous", (2e-4,) * 3)])  # fmt: skip
        key = ("atan2", "float32", "large", "contiguous")
        assert speeds.nightly_medians(db, m2.device_class, 7) == {key: [2e-4]}
        kinds = db.execute("SELECT virtualization FROM run_devices ORDER BY run_id").fetchall()
        assert kinds == [("bare metal",), ("paravirtual (VM)",)]
    finally:
        db.close()


def test_a_newer_schema_is_refused_untouched(at):
    history.writer(at).close()
    with psycopg.connect(at.url, autocommit=True) as raw:
        raw.execute("UPDATE schema_version SET version = 99")
    for opening in (history.writer, history.reader):
        with pytest.raises(HistoryServerError, match="schema version 99 is newer") as err:
            opening(at)
        assert "\n" not in str(err.value) and PASSWORD not in str(err.value)
    with psycopg.connect(at.url) as raw:
        assert raw.execute("SELECT version FROM schema_version").fetchone() == (99,)


def test_another_database_is_refused(at):
    with psycopg.connect(at.url, autocommit=True) as raw:
        raw.execute("CREATE TABLE runs (id INTEGER)")
    with pytest.raises(HistoryServerError, match="not an mps-pipeline history"):
        history.writer(at)


def test_a_lock_held_by_another_job_is_waited_for_then_refused(at):
    history.writer(at).close()
    holder = psycopg.connect(at.url)
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (history_pg.WRITE_LOCK,))
    said = []
    try:
        started = time.monotonic()
        with pytest.raises(HistoryServerError, match="locked by another job") as err:
            history.writer(at, wait=0.6, on_wait=lambda: said.append(1))
        assert 0.5 < time.monotonic() - started < 5 and said == [1]
        assert PASSWORD not in str(err.value)
    finally:
        holder.close()
    history.writer(at, wait=0.6).close()  # released with the other job's transaction


RECORD = """
import sys, time
from pipeline.results import history
from tests.results.test_history import P, X, case
url, source, started, go = sys.argv[1:5]
cases = [case(f"op{i}", "float32", P if i % 3 else X) for i in range(400)]
while time.time() < float(go):
    time.sleep(0.005)
db = history.writer(history.HistoryLocation.parse(url), wait=60)
history.record_nightly(db, {"m1": cases, "m2": cases}, commit="c", source=source,
                       started=started or None)
db.close()
"""


@pytest.mark.slow
def test_jobs_recording_at_once_record_each_night_exactly_once(at):
    """Six real processes record at the same moment: four fleets' jobs, and one job's
    re-run twice over (the same --source): five nights, each whole, none twice."""
    history.writer(at).close()
    go = str(time.time() + 1.5)  # all start together, once their interpreters are up
    jobs = [("fleet-a", ""), ("fleet-b", ""), ("fleet-c", ""), ("fleet-d", ""),
            ("rerun", night(7)), ("rerun", night(8))]  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(RECORD), at.url, source, started, go],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for source, started in jobs
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
    db = history.reader(at)
    try:
        per_source = dict(db.execute("SELECT source, COUNT(*) FROM runs GROUP BY source"))
        assert per_source == {"fleet-a": 2, "fleet-b": 2, "fleet-c": 2, "fleet-d": 2, "rerun": 2}
        (results,) = db.execute("SELECT COUNT(*) FROM results").fetchone()
        assert results == 5 * 2 * 400
        counts = db.execute("SELECT SUM(tests) FROM run_outcomes").fetchone()
        assert int(counts[0]) == results
        assert len(history.nightlies(db)) == 5
    finally:
        db.close()


def test_a_read_only_role_reads_and_cannot_write(pg_server, at):
    with psycopg.connect(at.url, autocommit=True) as raw:
        raw.execute(f"DROP ROLE IF EXISTS pr_job; DROP ROLE IF EXISTS {history_pg.READER_ROLE}")
        raw.execute(f"CREATE ROLE {history_pg.READER_ROLE} NOLOGIN")
        raw.execute(f"CREATE ROLE pr_job LOGIN PASSWORD 'pr-s3cret' IN ROLE "
                    f"{history_pg.READER_ROLE}")  # fmt: skip
    db = history.writer(at)  # grants SELECT to the reader role
    _night(db, 1)
    db.close()
    reader_at = history.HistoryLocation.parse(
        pg_server.url(at.url.rsplit("/", 1)[1], user="pr_job", password="pr-s3cret")
    )
    db = history.for_comparing(reader_at)  # what pr-report opens
    try:
        assert len(history.nightlies(db)) == 1
    finally:
        db.close()
    with pytest.raises(HistoryServerError, match="role pr_job may only read") as err:
        history.writer(reader_at)
    assert "pr-s3cret" not in str(err.value) and "***" in str(err.value)
    raw_reader = psycopg.connect(reader_at.url)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        raw_reader.execute("DELETE FROM runs")
    raw_reader.close()


def test_an_unreachable_server_is_one_line_without_the_password(pg_server):
    url = pg_server.url("nowhere").replace(f":{pg_server.port}/", ":1/")
    with pytest.raises(HistoryServerError) as err:
        history.writer(history.HistoryLocation.parse(url))
    said = str(err.value)
    assert "\n" not in said and "127.0.0.1:1/nowhere" in said
    for secret in (PASSWORD, "s3cr%3Aet%2Fpw%40x", "s3cr:et"):
        assert secret not in said
    wrong = pg_server.url(user="mps_admin", password="wrong-pass-123")
    with pytest.raises(HistoryServerError, match="password authentication failed") as err:
        history.writer(history.HistoryLocation.parse(wrong))
    assert "wrong-pass-123" not in str(err.value)
