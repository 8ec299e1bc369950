"""The nightly history database: real SQLite files in tmp_path."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from pipeline.errors import DamagedHistoryError, PipelineError
from pipeline.results import history
from pipeline.results.junit import CaseResult, Outcome

CLS = "test_mps.TestConsistencyMPS"
P, F, X, XP = Outcome.PASS, Outcome.FAIL, Outcome.XFAIL, Outcome.XPASS


def case(stem: str, dtype: str, outcome: Outcome, *, flaky: bool = False) -> CaseResult:
    name = f"test_output_match_{stem}_mps_{dtype}"
    return CaseResult(
        CLS, name, "output_match", stem, dtype, outcome, flaky, 1 + flaky, "m", 0.5, "x"
    )


def night(day: int) -> str:
    return history.timestamp(f"2026-03-{day:02d}T03:17:00Z")


@pytest.fixture
def db(tmp_path):
    conn = history.connect(tmp_path / "h" / "nightly.sqlite")
    yield conn
    conn.close()


def test_new_file_has_the_schema_in_wal_mode(tmp_path):
    path = tmp_path / "deep" / "dir" / "nightly.sqlite"
    conn = history.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"schema_version", "runs", "tests", "results"} <= tables
        indexes = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"runs_by_runner", "runs_by_source", "tests_by_stem"} <= indexes
        version = conn.execute("SELECT version FROM schema_version").fetchall()
        assert version == [(history.SCHEMA_VERSION,)]
    finally:
        conn.close()
    # reopening does not add a second version row
    again = history.connect(path)
    assert again.execute("SELECT COUNT(*) FROM schema_version").fetchone() == (1,)
    again.close()


def _history_with_nights(path, n: int) -> None:
    db = history.connect(path)
    for day in range(1, n + 1):
        history.record_nightly(
            db, {"a": [case("add", "float32", P)]}, commit="", started=night(day)
        )
    db.close()


def _foreign(path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    raw.commit()
    raw.close()


def _other_schema(path) -> None:
    raw = sqlite3.connect(path)
    raw.executescript(
        "CREATE TABLE schema_version (version INTEGER); INSERT INTO schema_version VALUES (1);"
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT);"
    )
    raw.close()


def _newer(path) -> None:
    history.connect(path).close()
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("UPDATE schema_version SET version = 99")
    raw.close()


def _corrupt(path) -> None:
    _history_with_nights(path, 3)
    data = bytearray(path.read_bytes())
    page = 4096  # the default page size: damage every page after the first (the schema's)
    data[page:] = bytes(random.Random(1).randrange(256) for _ in range(len(data) - page))
    path.write_bytes(bytes(data))


def _header_then_junk(path) -> None:
    path.write_bytes(
        b"SQLite format 3\x00" + bytes(random.Random(2).randrange(256) for _ in range(8000))
    )


DAMAGED = {
    "empty": (lambda p: p.write_bytes(b""), "an empty file, 0 bytes"),
    "random bytes": (
        lambda p: p.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(8192))),
        "not an SQLite database: no SQLite header",
    ),
    "SQLite header, then junk": (_header_then_junk, "file is not a database"),
    "corrupt pages": (_corrupt, "database disk image is malformed"),
    "directory": (lambda p: p.mkdir(), "it is a directory, not a file"),
    "another program's database": (_foreign, "another database: tables users"),
    "another schema": (_other_schema, "another schema: table runs lacks runner, commit, source"),
    "newer schema": (
        _newer,
        f"schema version 99 is newer than this mps-pipeline understands ({history.SCHEMA_VERSION})",
    ),
}


def _snapshot(folder) -> dict[str, bytes | None]:
    return {
        str(f.relative_to(folder)): f.read_bytes() if f.is_file() else None
        for f in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("form", DAMAGED)
def test_damaged_histories_are_refused_and_left_untouched(tmp_path, form):
    make, why = DAMAGED[form]
    path = tmp_path / "h" / "nightly.sqlite"
    path.parent.mkdir()
    make(path)
    before = _snapshot(path.parent)
    for attempt in (history.check, lambda p: history.check(p, thorough=True), history.connect):
        with pytest.raises(DamagedHistoryError) as raised:
            attempt(path)
        message = str(raised.value)
        assert message.startswith(f"{path}: not a valid mps-pipeline history (")
        assert message.endswith(
            "): restore it from a backup, or move it away to start a new history"
        )
        assert why in message
        assert raised.value.exit_code == 2
        # the same bytes, and no -wal/-shm or temporary file beside it
        assert _snapshot(path.parent) == before


def test_a_missing_file_is_a_new_history_made_whole(tmp_path):
    path = tmp_path / "h" / "nightly.sqlite"
    history.connect(path).close()
    assert sorted(f.name for f in path.parent.iterdir()) == ["nightly.sqlite"]
    found = history.check(path, thorough=True)
    assert (found.integrity, found.schema_version, found.nightlies, found.results) == (
        "ok", history.SCHEMA_VERSION, 0, 0,
    )  # fmt: skip
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(PipelineError, match="cannot create the history there"):
        history.connect(blocked / "nightly.sqlite")


def test_check_counts_a_valid_history(tmp_path):
    path = tmp_path / "nightly.sqlite"
    _history_with_nights(path, 4)
    found = history.check(path, thorough=True)
    assert (found.nightlies, found.runs, found.tests, found.results) == (4, 4, 1, 4)
    assert (found.first, found.last) == (night(1), night(4))
    # while a writer has it open (WAL mode, a -wal file beside it) it is read as committed
    db = history.connect(path)
    history.record_nightly(db, {"a": [case("sub", "int8", F)]}, commit="", started=night(5))
    assert history.check(path).nightlies == 5
    db.close()


def test_backups_rotate_and_each_is_a_valid_history(tmp_path):
    path = tmp_path / "history" / "nightly.sqlite"
    db = history.connect(path)
    made = []
    try:
        for day in range(1, 11):
            history.record_nightly(db, {"a": [case("add", "float32", P)]}, commit="",
                                   started=night(day))  # fmt: skip
            made.append(history.backup(db, path, night(day), keep=7))
    finally:
        db.close()
    assert made[0] == path.parent / "backups" / "nightly-2026-03-01-031700.sqlite"
    kept = history.backups(path)
    assert kept == tuple(made[-7:])
    assert sorted(f.name for f in (path.parent / "backups").iterdir()) == [p.name for p in kept]
    for n, copy in enumerate(kept, 4):
        found = history.check(copy, thorough=True)
        assert (found.nightlies, found.last) == (n, night(n))
        assert not Path(f"{copy}-wal").exists()  # one self-contained file
    # restoring one is copying it into place
    path.unlink()
    shutil.copy(kept[0], path)
    assert history.check(path).nightlies == 4
    db = history.connect(path)
    assert history.backup(db, path, night(11), keep=0) is None
    db.close()
    assert history.backups(path) == ()


def test_record_nightly_round_trips_and_reads_flat(db):
    cases = [case("atan2", "int64", XP), case("atan2", "float32", P, flaky=True)]
    recorded = history.record_nightly(
        db, {"macos-m1-14": cases}, commit="abc123", started=night(1), source="s"
    )
    run_id = recorded.runs[0].id
    back = history.run_cases(db, run_id)
    assert [(c.name, c.outcome, c.flaky, c.attempts) for c in back] == [
        ("test_output_match_atan2_mps_int64", XP, False, 1),
        ("test_output_match_atan2_mps_float32", P, True, 2),
    ]
    assert back[0].kind == "output_match" and back[0].stem == "atan2" and back[0].dtype == "int64"
    flat = db.execute(
        "SELECT run_id, classname, name, kind, stem, dtype, outcome, flaky, attempts "
        "FROM results_flat ORDER BY name"
    ).fetchall()
    assert flat[0] == (run_id, CLS, "test_output_match_atan2_mps_float32", "output_match",
                       "atan2", "float32", "pass", 1, 2)  # fmt: skip
    (only,) = history.nightlies(db)
    assert only.started == night(1) and only.runners == ("macos-m1-14",) and only.commit == "abc123"


def test_run_cases_filters_by_stem_and_tests_are_stored_once(db):
    for day in (1, 2):
        history.record_nightly(
            db,
            {"r": [case("atan2", "int64", XP), case("fmod", "float16", X)]},
            commit="",
            started=night(day),
        )
    assert db.execute("SELECT COUNT(*) FROM tests").fetchone() == (2,)
    latest = history.nightlies(db, 1)[0].runs[0]
    assert [c.stem for c in history.run_cases(db, latest.id, stems=["fmod"])] == ["fmod"]


def test_nightlies_group_runs_by_start_newest_first(db):
    for day in (3, 1, 2):  # recorded out of order: order is by time, not by insertion
        history.record_nightly(
            db, {"a": [case("add", "float32", P)], "b": [case("add", "float32", P)]},
            commit=f"c{day}", started=night(day),
        )  # fmt: skip
    got = history.nightlies(db, 2)
    assert [n.started for n in got] == [night(3), night(2)]
    assert got[0].runners == ("a", "b") and got[0].commit == "c3"
    assert [n.started for n in history.nightlies(db, until=night(2))] == [night(2), night(1)]
    assert history.previous_run(db, "b", night(3)).started == night(2)
    assert history.previous_run(db, "b", night(1)) is None


def test_recording_the_same_source_again_replaces_the_nightly(db):
    runs = {"a": [case("add", "float32", P)]}
    history.record_nightly(db, runs, commit="x", started=night(1), source="run/1")
    history.record_nightly(db, runs, commit="x", started=night(2), source="run/7")
    history.record_nightly(db, {"a": [case("add", "float32", F)]}, commit="x", started=night(3),
                           source="run/7")  # fmt: skip
    assert [n.started for n in history.nightlies(db)] == [night(3), night(1)]
    assert db.execute("SELECT COUNT(*) FROM results").fetchone() == (2,)  # cascade deleted


def test_transitions_between_two_runs(db):
    (first,) = history.record_nightly(
        db, {"a": [case("add", "float32", P), case("sub", "int64", P)]}, commit="", started=night(1)
    ).runs
    (second,) = history.record_nightly(
        db, {"a": [case("add", "float32", F), case("sub", "int64", P)]}, commit="", started=night(2)
    ).runs
    (t,) = history.transitions(db, first.id, second.id)
    assert (t.stem, t.dtype, t.before, t.after) == ("add", "float32", P, F)


def test_flipping_needs_a_change_and_a_change_back(db):
    series = {
        "add": (P, F, P, P),  # flaky: two changes
        "sub": (P, P, F, F),  # one change: a regression, not flakiness
        "mul": (X, XP, X, XP),  # three changes
    }
    for day in range(4):
        cases = [case(stem, "float32", outcomes[day]) for stem, outcomes in series.items()]
        history.record_nightly(db, {"a": cases}, commit="", started=night(day + 1))
    flips = history.flipping(db, 4)
    assert [(s.stem, s.outcomes) for s in flips] == [
        ("add", (P, F, P, P)),
        ("mul", (X, XP, X, XP)),
    ]
    # the last three nightlies see add change once (F, P, P), mul twice (XP, X, XP)
    assert [s.stem for s in history.flipping(db, 3)] == ["mul"]


def test_outcome_counts_and_prune(db):
    for day in range(1, 6):
        history.record_nightly(
            db, {"a": [case("add", "float32", P), case("sub", "float32", F if day == 5 else P)]},
            commit="", started=night(day),
        )  # fmt: skip
    counts = history.outcome_counts(db, 2)
    assert [(s, r, c["pass"], c["fail"]) for s, r, c in counts] == [
        (night(4), "a", 2, 0),
        (night(5), "a", 1, 1),
    ]
    assert history.prune(db, 3) == 2
    assert [n.started for n in history.nightlies(db)] == [night(5), night(4), night(3)]
    assert db.execute("SELECT COUNT(*) FROM results").fetchone() == (6,)
    assert history.prune(db, 3) == 0


def test_timestamp_is_canonical_utc():
    assert history.timestamp("2026-03-01T04:17:00+01:00") == "2026-03-01T03:17:00.000000Z"
    assert history.timestamp("2026-03-01 03:17") == "2026-03-01T03:17:00.000000Z"
    assert history.timestamp().endswith("Z")
    with pytest.raises(PipelineError, match="ISO 8601"):
        history.timestamp("last tuesday")


# --- schema version 2: seconds, and the migration of version 1 files ----------------------

# the schema of version 1 as mps-pipeline wrote it, before results had seconds
_V1_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, started TEXT NOT NULL, runner TEXT NOT NULL,
    "commit" TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT '', UNIQUE (started, runner)
);
CREATE TABLE tests (
    id INTEGER PRIMARY KEY, classname TEXT NOT NULL, name TEXT NOT NULL, kind TEXT, stem TEXT,
    dtype TEXT, UNIQUE (classname, name)
);
CREATE TABLE results (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    test_id INTEGER NOT NULL REFERENCES tests (id),
    outcome TEXT NOT NULL, flaky INTEGER NOT NULL, attempts INTEGER NOT NULL,
    PRIMARY KEY (run_id, test_id)
) WITHOUT ROWID;
CREATE INDEX runs_by_runner ON runs (runner, started);
CREATE INDEX runs_by_source ON runs (source);
CREATE INDEX tests_by_stem ON tests (stem, kind, dtype);
CREATE VIEW results_flat AS
    SELECT r.run_id, t.classname, t.name, t.kind, t.stem, t.dtype, r.outcome, r.flaky,
           r.attempts
    FROM results AS r JOIN tests AS t ON t.id = r.test_id;
INSERT INTO schema_version VALUES (1);
INSERT INTO runs VALUES (1, '2026-03-01T03:17:00.000000Z', 'macos-m1-14', 'abc', 'run-1');
INSERT INTO tests VALUES (1, 'test_mps.TestConsistencyMPS',
                          'test_output_match_add_mps_float32', 'output_match', 'add', 'float32');
INSERT INTO results VALUES (1, 1, 'pass', 0, 1);
"""


def _v1_file(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.executescript(_V1_SCHEMA)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.close()


def _columns(path: Path, table: str) -> list[str]:
    raw = sqlite3.connect(path)
    try:
        return [row[1] for row in raw.execute(f"PRAGMA table_info({table})")]
    finally:
        raw.close()


def test_seconds_are_recorded_read_back_and_windowed(db):
    for day, seconds in ((1, 2.0), (2, 3.0), (3, 7.5)):
        fast = case("add", "float32", P)._replace(time=seconds)
        history.record_nightly(db, {"a": [fast], "b": [case("sub", "int8", F)]}, commit="",
                               started=night(day))  # fmt: skip
    run = history.nightlies(db, 1)[0].runs[0]
    assert [c.time for c in history.run_cases(db, run.id)] == [7.5]
    key = (CLS, "test_output_match_add_mps_float32")
    assert history.durations(db, 7)[key] == [2.0, 3.0, 7.5]  # oldest first
    assert history.durations(db, 2) == {key: [3.0, 7.5], (CLS, case("sub", "int8", F).name):
                                        [0.5, 0.5]}  # fmt: skip
    flat = db.execute("SELECT name, seconds FROM results_flat WHERE seconds = 7.5").fetchall()
    assert flat == [("test_output_match_add_mps_float32", 7.5)]


def test_a_version_1_file_is_valid_and_migrated_in_place(tmp_path):
    path = tmp_path / "nightly.sqlite"
    _v1_file(path)
    found = history.check(path, thorough=True)
    assert (found.schema_version, found.results) == (1, 1)
    # read-only, it stays version 1 and has no durations
    ro = history.open_read_only(path)
    assert history.durations(ro, 7) == {}
    ro.close()
    assert "seconds" not in _columns(path, "results")

    db = history.connect(path)
    try:
        version = db.execute("SELECT version FROM schema_version").fetchall()
        assert version == [(history.SCHEMA_VERSION,)]
        assert _columns(path, "results")[-1] == "seconds"
        (old,) = history.run_cases(db, 1)  # the version 1 result, its seconds unknown
        assert (old.name, old.outcome, old.time) == ("test_output_match_add_mps_float32", P, 0.0)
        assert db.execute("SELECT seconds FROM results_flat").fetchall() == [(None,)]
        history.record_nightly(db, {"macos-m1-14": [case("add", "float32", P)]}, commit="",
                               started=night(2))  # fmt: skip
        assert history.durations(db, 7) == {(CLS, "test_output_match_add_mps_float32"): [0.5]}
    finally:
        db.close()
    again = history.check(path, thorough=True)
    assert (again.schema_version, again.nightlies, again.results) == (history.SCHEMA_VERSION, 2, 2)
    history.connect(path).close()  # migrating twice is nothing
    assert history.check(path).schema_version == history.SCHEMA_VERSION


def test_a_migration_that_fails_leaves_version_1_whole(tmp_path):
    path = tmp_path / "nightly.sqlite"
    _v1_file(path)
    raw = sqlite3.connect(path)
    raw.execute(  # the version's update fails after the column was added
        "CREATE TRIGGER no_update BEFORE UPDATE ON schema_version "
        "BEGIN SELECT RAISE(ABORT, 'read-only version'); END"
    )
    raw.commit()
    raw.close()
    with pytest.raises(
        PipelineError,
        match=r"cannot migrate .* from schema version 1 to 2 "
        r"\(read-only version\); it was left as it was \(version 1\)",
    ):
        history.connect(path)
    assert "seconds" not in _columns(path, "results")
    assert history.check(path, thorough=True).schema_version == 1


def test_version_2_without_seconds_is_another_schema(tmp_path):
    path = tmp_path / "nightly.sqlite"
    _v1_file(path)
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("UPDATE schema_version SET version = 2")
    raw.close()
    with pytest.raises(DamagedHistoryError, match="version 2, but table results lacks"):
        history.connect(path)


# --- schema version 3: each run's counts per outcome, and the migration of version 2 files ---


def _v2_file(path: Path, nights: int) -> dict[int, dict[str, int]]:
    """A version 2 history (version 3 without run_outcomes) of ``nights`` nightlies of two
    runners, and each run's counts from its results."""
    db = history.connect(path)
    for day in range(1, nights + 1):
        history.record_nightly(
            db,
            {
                "m1": [
                    case("add", "float32", P),
                    case("sub", "int8", F if day % 2 else P),
                    case("mul", "float16", X),
                ],
                "m2": [case("add", "float32", XP if day == 2 else P)],
            },  # fmt: skip
            commit="",
            started=night(day),
        )
    with db:
        db.execute("DROP TABLE run_outcomes")
        db.execute("UPDATE schema_version SET version = 2")
    counts: dict[int, dict[str, int]] = {}
    for run, outcome, n in db.execute(
        "SELECT run_id, outcome, COUNT(*) FROM results GROUP BY run_id, outcome"
    ):
        counts.setdefault(run, {})[outcome] = n
    db.close()
    return counts


def test_each_run_stores_its_counts_and_prune_drops_them(db):
    for day in range(1, 4):
        history.record_nightly(
            db, {"a": [case("add", "float32", P), case("sub", "float32", F if day == 3 else P)]},
            commit="", started=night(day),
        )  # fmt: skip
    stored = db.execute("SELECT run_id, outcome, tests FROM run_outcomes ORDER BY 1, 2").fetchall()
    assert stored == [(1, "pass", 2), (2, "pass", 2), (3, "fail", 1), (3, "pass", 1)]
    history.prune(db, 1)
    assert db.execute("SELECT DISTINCT run_id FROM run_outcomes").fetchall() == [(3,)]


def test_a_version_2_file_is_valid_and_migrated_in_place(tmp_path):
    path = tmp_path / "nightly.sqlite"
    counts = _v2_file(path, 4)
    found = history.check(path, thorough=True)
    assert (found.schema_version, found.nightlies, found.runs) == (2, 4, 8)
    assert "run_outcomes" not in _tables(path)
    db = history.connect(path)
    try:
        version = db.execute("SELECT version FROM schema_version").fetchall()
        assert version == [(history.SCHEMA_VERSION,)]
        stored: dict[int, dict[str, int]] = {}
        for run, outcome, n in db.execute("SELECT run_id, outcome, tests FROM run_outcomes"):
            stored.setdefault(run, {})[outcome] = n
        assert stored == counts  # every earlier run's counts, from its results
        trend = history.outcome_counts(db, 4)
        assert [(r, c["pass"], c["fail"], c["xpass"]) for s, r, c in trend if s == night(2)] == [
            ("m1", 2, 0, 0), ("m2", 0, 0, 1),
        ]  # fmt: skip
    finally:
        db.close()
    assert history.check(path, thorough=True).schema_version == history.SCHEMA_VERSION
    history.connect(path).close()  # migrating twice is nothing


def test_a_failed_version_2_migration_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "nightly.sqlite"
    _v2_file(path, 2)
    raw = sqlite3.connect(path)
    raw.execute(
        "CREATE TRIGGER no_update BEFORE UPDATE ON schema_version "
        "BEGIN SELECT RAISE(ABORT, 'read-only version'); END"
    )
    raw.commit()
    raw.close()
    with pytest.raises(
        PipelineError,
        match=r"from schema version 2 to 3 \(read-only version\); it was left as it was "
        r"\(version 2\)",
    ):
        history.connect(path)
    assert "run_outcomes" not in _tables(path)
    assert history.check(path, thorough=True).schema_version == 2


def test_version_3_without_run_outcomes_is_another_schema(tmp_path):
    path = tmp_path / "nightly.sqlite"
    _v2_file(path, 1)
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("UPDATE schema_version SET version = 3")
    raw.close()
    with pytest.raises(DamagedHistoryError, match="version 3, but table run_outcomes"):
        history.check(path)


def _tables(path: Path) -> set[str]:
    raw = sqlite3.connect(path)
    try:
        return {n for (n,) in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        raw.close()


def _flipping_by_definition(db, last_n: int, min_changes: int = 2) -> list[tuple]:
    """What flipping() means, read the plain way: every result of the window, in run order."""
    runs = db.execute(
        "SELECT id, runner FROM runs WHERE started IN (SELECT started FROM runs "
        "GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    seen: dict = {}
    for run, runner in runs:
        for name, outcome, flaky in db.execute(
            "SELECT t.name, r.outcome, r.flaky FROM results AS r JOIN tests AS t "
            "ON t.id = r.test_id WHERE r.run_id = ?",
            (run,),
        ):
            seen.setdefault((runner, name), []).append((outcome, flaky))
    return sorted(
        (name, runner, tuple(o for o, _ in got), tuple(bool(f) for _, f in got))
        for (runner, name), got in seen.items()
        if len(got) > min_changes
        and sum(a[0] != b[0] for a, b in zip(got, got[1:], strict=False)) >= min_changes
    )


@pytest.mark.parametrize("seed", range(6))
def test_flipping_finds_what_the_definition_finds_with_gaps(db, seed):
    import random

    rng = random.Random(seed)
    outcomes = (P, F, X, XP)
    for day in range(1, 8):
        runs = {}
        for runner in ("a", "b", "c"):
            if rng.random() < 0.15:
                continue  # the runner did not report that night
            runs[runner] = [
                case(
                    f"op{i}", "float32", rng.choice(outcomes[: 1 + i % 4]), flaky=rng.random() < 0.1
                )
                for i in range(40)
                if rng.random() > 0.2  # a test left out of a run now and then
            ]
        if runs:
            history.record_nightly(db, runs, commit="", started=night(day))
    for last_n, changes in ((7, 2), (4, 2), (5, 3), (3, 1)):
        got = [
            (s.name, s.runner, s.outcomes, s.flaky)
            for s in history.flipping(db, last_n, min_changes=changes)
        ]
        assert sorted(got) == _flipping_by_definition(db, last_n, changes)
        assert got == sorted(got, key=lambda s: (s[0], s[1]))


def test_an_older_history_gains_the_paths_table_and_prunes_it_with_its_runs(tmp_path):
    path = tmp_path / "h.sqlite"
    _v1_file(path)
    db = history.connect(path)
    try:
        assert _columns(path, "exec_paths") == ["run_id", "path", "overloads"]
        for n in (2, 3):
            nightly = history.record_nightly(
                db, {"macos-m1-14": [case("add", "float32", P)]}, commit="", started=night(n)
            )
            history.record_paths(db, (r.id for r in nightly.runs), {"metal": n, "mpsgraph": 1})
        db.commit()
        counts = history.path_counts(db, 60)
        assert [(s, c["metal"]) for s, c in counts] == [(night(2), 2), (night(3), 3)]
        history.prune(db, 1)
        assert [s for s, _ in history.path_counts(db, 60)] == [night(3)]
    finally:
        db.close()


def _v5_file(path: Path) -> None:
    """A version 5 history, as the last mps-pipeline before devices left one: two nights of
    two runners, some speed figures; no run_devices table."""
    db = history.connect(path)
    for day in (1, 2):
        history.record_nightly(
            db, {r: [case("atan2", "float32", P)] for r in ("macos-m1-14", "macos-m2-15")},
            commit="", started=night(day),
        )  # fmt: skip
    db.execute(
        "INSERT INTO speed (run_id, op, dtype, shape, layout, median, q25, q75, repeats) "
        "VALUES (2, 'atan2', 'float32', 'large', 'contiguous', 1e-4, 1e-4, 1e-4, 3)"
    )
    db.commit()
    db.close()
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("DROP TABLE run_devices")
        raw.execute("UPDATE schema_version SET version = 5")
    raw.close()


def test_a_version_5_file_gains_run_devices_in_place(tmp_path):
    from pipeline.results import speed as speeds
    from tests.results.test_device import mac

    path = tmp_path / "nightly.sqlite"
    _v5_file(path)
    assert history.check(path, thorough=True).schema_version == 5
    m2 = mac("macos-m2-15")
    ro = history.open_read_only(path)  # read as it is: no device, no baseline
    try:
        assert speeds.nightly_medians(ro, m2.device_class, 7) == {}
    finally:
        ro.close()
    db = history.connect(path)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
        assert _columns(path, "run_devices")[-1] == "virtualization"
        assert db.execute("SELECT COUNT(*) FROM run_devices").fetchone() == (0,)
        # the earlier runs keep their results and figures, their device unknown: never a
        # baseline
        assert db.execute("SELECT COUNT(*) FROM results").fetchone() == (4,)
        assert speeds.nightly_medians(db, m2.device_class, 7) == {}
        third = history.record_nightly(
            db, {"macos-m2-15": [case("atan2", "float32", P)]}, commit="", started=night(3),
            hold=True,
        )  # fmt: skip
        run = third.runs[0].id
        history.record_devices(db, {run: m2})
        speeds.record(db, run, [speeds.Measurement("atan2", "float32", "large", "contiguous",
                                                   (2e-4,) * 3)])  # fmt: skip
        db.commit()
        key = ("atan2", "float32", "large", "contiguous")
        assert speeds.nightly_medians(db, m2.device_class, 7) == {key: [2e-4]}
        history.prune(db, 1)  # a run's device goes with it
        assert db.execute("SELECT run_id FROM run_devices").fetchall() == [(run,)]
    finally:
        db.close()
    assert history.check(path, thorough=True).schema_version == history.SCHEMA_VERSION
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("DROP TABLE run_devices")
    raw.close()
    with pytest.raises(DamagedHistoryError, match="version 6, but table run_devices lacks"):
        history.check(path)
