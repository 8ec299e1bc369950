"""`history copy SRC DST`: an SQLite history copied into the session's PostgreSQL server,
read back and compared row by row; the source never written."""

from __future__ import annotations

import json
import random
import sqlite3

import psycopg
import pytest

from pipeline.__main__ import main
from pipeline.errors import CopyMismatchError
from pipeline.results import history, history_copy
from pipeline.results import speed as speeds
from pipeline.results.speed import Measurement
from tests.postgres import PASSWORD
from tests.results.test_device import mac
from tests.results.test_history import XP, F, P, X, case, night
from tests.test_machine_output import assert_valid

OUTCOMES = (P, F, X, XP)


def _fleet_file(path, nights: int = 6):
    """A history of ``nights`` nights on three runners, random outcomes and seconds (some
    unknown), flaky tests and speed figures: every table holds rows."""
    rng = random.Random(7)
    db = history.connect(path)
    for day in range(1, nights + 1):
        runs = {}
        for runner in ("m1", "m2", "m4"):
            cases = []
            for i in range(40):
                dtype = ("float32", "int64", "float16")[i % 3]
                c = case(f"op{i % 13}", dtype, rng.choice(OUTCOMES), flaky=rng.random() < 0.1)
                cases.append(c._replace(time=rng.uniform(0.001, 3.0)))
            runs[runner] = cases
        night_ = history.record_nightly(db, runs, commit=f"c{day}", started=night(day),
                                        source=f"run-{day}", hold=True)  # fmt: skip
        # the m4 sent no device record: its device is unknown
        macs = {"m1": mac("macos-m1-14"), "m2": mac("macos-m2-15")}
        history.record_devices(db, {r.id: macs[r.runner] for r in night_.runs if r.runner in macs})
        times = tuple(rng.uniform(1e-6, 2e-6) for _ in range(5))
        speeds.record(db, night_.runs[0].id, [Measurement("atan2", "float32", "small", "contiguous",
                                                          times)])  # fmt: skip
        db.commit()
    db.close()


def test_a_file_is_copied_into_the_server_and_checked_row_by_row(tmp_path, pg_url, capsys):
    path = tmp_path / "nightly.sqlite"
    _fleet_file(path)
    before = path.read_bytes()
    assert main(["history", "copy", str(path), pg_url, "--json"]) == 0
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err and "s3cr%3Aet" not in out.out + out.err
    doc = json.loads(out.out)
    assert_valid("history copy --json", doc)
    assert doc["nightlies"] == 6 and doc["verified"] is True
    assert doc["rows"] == {"runs": 18, "tests": 39, "results": 18 * 39, "run_outcomes":
                           doc["rows"]["run_outcomes"], "speed": 6, "exec_paths": 0,
                           "run_devices": 12}  # fmt: skip
    assert path.read_bytes() == before  # the source is never written
    with psycopg.connect(pg_url) as conn:  # settled: the first nights find no vacuum to do
        settled = conn.execute(
            "SELECT relname, last_vacuum IS NOT NULL AND last_analyze IS NOT NULL "
            "FROM pg_stat_user_tables ORDER BY relname"
        ).fetchall()
    assert dict(settled) == {t: t != "schema_version" for t, _ in settled}
    at = history.HistoryLocation.parse(pg_url)
    file, server = history.reader(history.HistoryLocation.parse(path)), history.reader(at)
    try:
        assert history.nightlies(file) == history.nightlies(server)
        assert history.flipping(file, 6) == history.flipping(server, 6)
        assert history_copy.verify(file, server)[2] == ("results", 18 * 39)
    finally:
        file.close()
        server.close()
    db = history.writer(at)  # new runs and tests take ids after the copied ones
    try:
        added = history.record_nightly(db, {"m1": [case("new_op", "float32", P)]}, commit="c7",
                                       started=night(7))  # fmt: skip
        assert added.runs[0].id == 19
    finally:
        db.close()


def test_a_target_holding_nights_is_refused_untouched(tmp_path, pg_url, capsys):
    path = tmp_path / "nightly.sqlite"
    _fleet_file(path, nights=2)
    assert main(["history", "copy", str(path), pg_url]) == 0
    capsys.readouterr()
    assert main(["history", "copy", str(path), pg_url]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "already holds 2 nightlies" in err and PASSWORD not in err
    with psycopg.connect(pg_url) as raw:
        assert raw.execute("SELECT COUNT(*) FROM runs").fetchone() == (6,)


def test_an_older_file_is_copied_at_the_current_schema(tmp_path, pg_url, capsys):
    path = tmp_path / "nightly.sqlite"
    _fleet_file(path, nights=2)
    raw = sqlite3.connect(path)  # as version 3 left it: no speed table
    raw.executescript("DROP TABLE speed; UPDATE schema_version SET version = 3;")
    raw.close()
    before = path.read_bytes()
    assert main(["history", "copy", str(path), pg_url]) == 0
    assert "identical" in capsys.readouterr().out
    assert path.read_bytes() == before


def test_a_difference_is_found_and_named(tmp_path, pg_url):
    path = tmp_path / "nightly.sqlite"
    _fleet_file(path, nights=2)
    at = history.HistoryLocation.parse(pg_url)
    history_copy.copy(history.HistoryLocation.parse(path), at)
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("UPDATE results SET seconds = seconds + 1e-9 WHERE run_id = 2 AND test_id = 5")
    file, server = history.reader(history.HistoryLocation.parse(path)), history.reader(at)
    try:
        with pytest.raises(CopyMismatchError, match=r"results \(run_id=2, test_id=5\) differs: "
                           r"seconds: [0-9.]+ in the source, [0-9.]+ in the copy"):  # fmt: skip
            history_copy.verify(file, server)
    finally:
        file.close()
        server.close()
