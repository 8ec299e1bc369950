"""The nightly results history: one SQLite file, one run per runner configuration per night.

A *nightly* is the set of runs recorded together by ``python -m pipeline nightly``: they
share ``runs.started`` (UTC, ISO 8601 with microseconds, so text order is time order). The
xfail proposals, regressions, flaky tests and the dashboard's pass-rate chart all read
the last few nightlies.

Schema (version 2)::

    schema_version(version)
    runs(id, started, runner, commit, source)                    -- one per runner per nightly
    tests(id, classname, name, kind, stem, dtype)                 -- each test id once
    results(run_id, test_id, outcome, flaky, attempts, seconds)   -- one per test per run
    results_flat                                                  -- view: results joined with tests

``seconds`` is the test's JUnit time, summed over its attempts (what the ``shards`` command
balances the sweep by); NULL where unknown. Version 1 had no ``seconds``: :func:`connect`
migrates a version 1 file in place, in one transaction (the column added, the view
recreated, the version set to 2), its earlier results keeping NULL seconds. :func:`check`
accepts both versions (a version 1 file is valid and waits for its migration) and refuses
newer ones.

Test ids live in their own table because a night of the full sweep is about 7,000 tests
on each of three runners: repeating the names in every row made a night 8x bigger, and
the file travels through the Actions cache every night. ``results_flat`` gives the plain
(run_id, classname, name, kind, stem, dtype, outcome, flaky, attempts, seconds) rows for ad-hoc
SQL. The file is in WAL mode; everything a nightly writes is one transaction.

A file that exists but is not a valid history (empty, not SQLite, corrupt, a directory,
another program's database, a newer schema) is refused without being touched: taking an
empty file for a new history would silently drop every earlier night. Only a missing file
starts a new history, made under a temporary name and renamed into place, so a file at the
path is always a complete one. After each night :func:`backup` keeps a copy of the last
few nights beside it (``backups/``), made with SQLite's backup API.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.results.history_files import (  # backups: re-exported, their home moved
    BACKUPS as BACKUPS,
)
from pipeline.results.history_files import (
    backup as backup,
)
from pipeline.results.history_files import (
    backups as backups,
)
from pipeline.results.history_files import (
    check_writable,
    remove_stale_temps,
    temp_file,
    wait_for_write_lock,
)
from pipeline.results.junit import CaseResult, Outcome

SCHEMA_VERSION = 2
DEFAULT_FILE = "history/nightly.sqlite"  # relative to the state directory
DEFAULT_BACKUPS = 7
_SQLITE_HEADER = b"SQLite format 3\x00"
# what a history must have: table -> its columns (more are fine: a later migration's)
_TABLES = {
    "schema_version": ("version",),
    "runs": ("id", "started", "runner", "commit", "source"),
    "tests": ("id", "classname", "name", "kind", "stem", "dtype"),
    "results": ("run_id", "test_id", "outcome", "flaky", "attempts"),
}
# what each later schema version added: version -> (table, column)
_ADDED = {2: ("results", "seconds")}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started TEXT NOT NULL,
    runner TEXT NOT NULL,
    "commit" TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    UNIQUE (started, runner)
);
CREATE TABLE IF NOT EXISTS tests (
    id INTEGER PRIMARY KEY,
    classname TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT,
    stem TEXT,
    dtype TEXT,
    UNIQUE (classname, name)
);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    test_id INTEGER NOT NULL REFERENCES tests (id),
    outcome TEXT NOT NULL,
    flaky INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    seconds REAL,
    PRIMARY KEY (run_id, test_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_runner ON runs (runner, started);
CREATE INDEX IF NOT EXISTS runs_by_source ON runs (source);
CREATE INDEX IF NOT EXISTS tests_by_stem ON tests (stem, kind, dtype);
CREATE VIEW IF NOT EXISTS results_flat AS
    SELECT r.run_id, t.classname, t.name, t.kind, t.stem, t.dtype, r.outcome, r.flaky,
           r.attempts, r.seconds
    FROM results AS r JOIN tests AS t ON t.id = r.test_id;
"""
_VIEW = _SCHEMA[_SCHEMA.index("CREATE VIEW") :]


@dataclass(frozen=True)
class Run:
    """One runner's results of one nightly."""

    id: int
    started: str
    runner: str
    commit: str
    source: str


@dataclass(frozen=True)
class Nightly:
    """The runs recorded together (they share ``started``), in runner order."""

    started: str
    runs: tuple[Run, ...]

    @property
    def runners(self) -> tuple[str, ...]:
        return tuple(run.runner for run in self.runs)

    @property
    def commit(self) -> str:
        return next((run.commit for run in self.runs if run.commit), "")


@dataclass(frozen=True)
class Transition:
    """A test whose outcome differs between two runs of one runner."""

    classname: str
    name: str
    kind: str | None
    stem: str | None
    dtype: str | None
    before: Outcome
    after: Outcome
    flaky: bool  # the later result is flaky


@dataclass(frozen=True)
class OutcomeSeries:
    """One test's outcomes on one runner over several nightlies, oldest first."""

    runner: str
    classname: str
    name: str
    kind: str | None
    stem: str | None
    dtype: str | None
    outcomes: tuple[Outcome, ...]
    flaky: tuple[bool, ...]


def timestamp(when: datetime | str | None = None) -> str:
    """``when`` (default: now) as the canonical ``started`` text, UTC with microseconds.

    A naive datetime or ISO string is read as UTC.
    """
    if when is None:
        when = datetime.now(timezone.utc)
    elif isinstance(when, str):
        try:
            when = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            raise PipelineError(
                f"{when!r} is not an ISO 8601 time such as 2026-03-01T03:17:00Z"
            ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class DamagedHistoryError(PipelineError):
    """A file at the history's path that is not a valid history; it was not touched."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(
            f"{path}: not a valid mps-pipeline history ({why}): restore it from a backup, "
            "or move it away to start a new history"
        )


@dataclass(frozen=True)
class HistoryCheck:
    """What :func:`check` found in a valid history."""

    path: Path
    integrity: str  # "ok", the answer of PRAGMA integrity_check (or quick_check)
    schema_version: int
    nightlies: int
    runs: int
    tests: int
    results: int
    first: str | None  # started of the oldest and newest nightly
    last: str | None
    size: int  # bytes of the file (without its -wal)


def _read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot change the file (nor, without a -wal beside it, add any).

    Without a -wal file everything is in the main file, and ``immutable`` reads it without
    the -shm/-wal files a read-only WAL connection would otherwise leave behind; with one
    (a writer died), ``mode=ro`` reads the committed transactions it holds too.
    """
    uri = path.resolve().as_uri() + "?mode=ro"
    if not Path(f"{path}-wal").exists():
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True)


def check(path: str | Path, *, thorough: bool = False) -> HistoryCheck:
    """Validate the existing history at ``path`` without writing to it.

    ``PRAGMA quick_check`` (``integrity_check`` when ``thorough``: also indexes against
    tables), the tables and columns of the schema, one known schema version. Raises
    :class:`DamagedHistoryError` saying why the file is not a valid history, or a plain
    PipelineError when there is no file.
    """
    path = Path(path)
    if path.is_dir():
        raise DamagedHistoryError(path, "it is a directory, not a file")
    if path.is_symlink() and not path.exists():
        raise DamagedHistoryError(path, "a symbolic link to nothing")
    if not path.exists():
        raise PipelineError(f"{path}: no history here (a nightly starts one)")
    if not path.is_file():
        raise DamagedHistoryError(path, "not a regular file")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise DamagedHistoryError(path, f"cannot read it: {exc.strerror or exc}") from exc
    if size == 0:
        raise DamagedHistoryError(path, "an empty file, 0 bytes")
    if header != _SQLITE_HEADER:
        raise DamagedHistoryError(path, "not an SQLite database: no SQLite header")
    try:
        db = _read_only(path)
    except sqlite3.Error as exc:
        raise DamagedHistoryError(path, f"SQLite cannot open it: {exc}") from exc
    try:
        pragma = "integrity_check" if thorough else "quick_check"
        problems = [row[0] for row in db.execute(f"PRAGMA {pragma}(20)")]
        if problems != ["ok"]:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise DamagedHistoryError(path, f"corrupt: {problems[0]}{more}")
        tables = {
            name: {row[1] for row in db.execute(f"PRAGMA table_info({name})")} for name in _TABLES
        }
        if not any(tables.values()):
            found = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            what = f"tables {', '.join(found[:5])}" if found else "no tables at all"
            raise DamagedHistoryError(path, f"another database: {what}")
        for name, columns in _TABLES.items():
            lacking = [c for c in columns if c not in tables[name]]
            if lacking:
                what = f"no table {name}" if not tables[name] else (
                    f"table {name} lacks {', '.join(lacking)}"
                )  # fmt: skip
                raise DamagedHistoryError(path, f"another schema: {what}")
        versions = [v for (v,) in db.execute("SELECT version FROM schema_version")]
        if len(versions) != 1 or not isinstance(versions[0], int):
            raise DamagedHistoryError(path, f"schema_version holds {versions!r}, not one number")
        (version,) = versions
        if version > SCHEMA_VERSION:
            raise DamagedHistoryError(
                path,
                f"schema version {version} is newer than this mps-pipeline understands "
                f"({SCHEMA_VERSION}); upgrade mps-pipeline",
            )
        if version < 1:
            raise DamagedHistoryError(path, f"unknown schema version {version}")
        for added, (table, column) in _ADDED.items():
            if version >= added and column not in tables[table]:
                raise DamagedHistoryError(
                    path, f"another schema: version {version}, but table {table} lacks {column}"
                )
        (nights, first, last), = db.execute(
            "SELECT COUNT(DISTINCT started), MIN(started), MAX(started) FROM runs"
        )  # fmt: skip
        counts = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in ("runs", "tests", "results")]  # fmt: skip
    except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed", ...
        raise DamagedHistoryError(path, str(exc)) from exc
    finally:
        db.close()
    return HistoryCheck(path, "ok", version, nights, *counts, first, last, size)


def _create(path: Path) -> None:
    """A new, empty history at ``path``: made under a temporary name, then renamed."""
    tmp = temp_file(path)
    try:
        db = sqlite3.connect(tmp)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            with db:
                db.executescript(_SCHEMA)
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        finally:
            db.close()  # the last connection: the WAL is checkpointed into the file, removed
        os.replace(tmp, path)
    except BaseException:
        for leftover in (tmp, f"{tmp}-wal", f"{tmp}-shm"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        raise


def connect(
    path: str | Path,
    *,
    checked: bool = False,
    wait: float = 0.0,
    on_wait: Callable[[], None] | None = None,
) -> sqlite3.Connection:
    """Open (creating it and its directory if there is no file) the history at ``path``.

    An existing file is checked first (:func:`check`, quick): one that is not a valid
    history raises :class:`DamagedHistoryError` and is left as it was. ``checked``: the
    caller has just run :func:`check` itself (the nightly runs the thorough one), so it is
    not run twice: on 180 nights of a fleet (300 MB) each check reads the whole file, 1.3 s.
    A valid version 1 file is then migrated to version 2 (:func:`_migrate`). A file that
    cannot be written is a PipelineError; one whose write lock another process holds is
    waited for up to ``wait`` seconds (``on_wait`` called when the waiting starts).
    """
    path = Path(path)
    remove_stale_temps(path.parent)  # of a run killed while it created the file
    if os.path.lexists(path):
        if not checked:
            check(path)
        check_writable(path)
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _create(path)
        except (OSError, sqlite3.Error) as exc:
            raise PipelineError(f"{path}: cannot create the history there ({exc})") from exc
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never torn
        wait_for_write_lock(db, path, wait, on_wait)
        _migrate(db)
        with db:
            db.executescript(_SCHEMA)  # indexes or views an older file may lack
    except PipelineError:
        db.close()
        raise
    except sqlite3.DatabaseError as exc:
        db.close()
        raise DamagedHistoryError(path, str(exc)) from exc
    except BaseException:
        db.close()
        raise
    return db


def _migrate(db: sqlite3.Connection) -> None:
    """Bring a checked history to SCHEMA_VERSION in one transaction, or leave it as it was.

    1 -> 2: ``results.seconds`` added (NULL for the results already there), ``results_flat``
    recreated with it. The version is read again under the write lock, so two processes
    opening one version 1 file migrate it once.
    """
    (version,) = db.execute("SELECT version FROM schema_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")  # explicit: sqlite3 opens no transaction before DDL
    try:
        (version,) = db.execute("SELECT version FROM schema_version").fetchone()
        if version == 1:
            db.execute("ALTER TABLE results ADD COLUMN seconds REAL")
            db.execute("DROP VIEW IF EXISTS results_flat")
            db.execute(_VIEW)
            db.execute("UPDATE schema_version SET version = 2")
        db.commit()
    except sqlite3.Error as exc:
        db.rollback()
        raise PipelineError(
            f"cannot migrate the history from schema version {version} to {SCHEMA_VERSION} "
            f"({exc}); it was left as it was (version {version})"
        ) from exc
    except BaseException:
        db.rollback()
        raise


def open_read_only(path: str | Path) -> sqlite3.Connection:
    """The existing history at ``path``, checked (:func:`check`) and opened read-only: never
    migrated nor otherwise written (a version 1 file has no ``seconds``)."""
    path = Path(path)
    check(path)
    return _read_only(path)


def _insert_run(
    db: sqlite3.Connection,
    runner: str,
    commit: str,
    cases: Iterable[CaseResult],
    started: str,
    source: str,
) -> int:
    cursor = db.execute(
        'INSERT INTO runs (started, runner, "commit", source) VALUES (?, ?, ?, ?)',
        (started, runner, commit, source),
    )
    run_id = cursor.lastrowid
    assert run_id is not None
    cases = list(cases)
    db.executemany(
        "INSERT OR IGNORE INTO tests (classname, name, kind, stem, dtype) VALUES (?, ?, ?, ?, ?)",
        ((c.classname, c.name, c.kind, c.stem, c.dtype) for c in cases),
    )
    ids = {(cls, name): i for i, cls, name in db.execute("SELECT id, classname, name FROM tests")}
    # one id reported twice in a run: the later row wins, as in junit.parse_reports
    db.executemany(
        "INSERT OR REPLACE INTO results (run_id, test_id, outcome, flaky, attempts, seconds) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            (run_id, ids[(c.classname, c.name)], Outcome(c.outcome).value, *_counts(c))
            for c in cases
        ),
    )
    return run_id


def _counts(case: CaseResult) -> tuple[int, int, float]:
    return int(case.flaky), case.attempts, case.time


def record_nightly(
    db: sqlite3.Connection,
    runs: Mapping[str, Sequence[CaseResult]],
    *,
    commit: str,
    started: str | None = None,
    source: str = "",
) -> Nightly:
    """Store every runner's results of one nightly in one transaction.

    A non-empty ``source`` (say, the CI run's URL) identifies the nightly: recording the
    same source again (a re-run aggregation job) replaces the earlier record instead of
    counting the same night twice.
    """
    started = started or timestamp()
    with db:
        if source:
            db.execute("DELETE FROM runs WHERE source = ?", (source,))
        for runner, cases in runs.items():
            _insert_run(db, runner, commit, cases, started, source)
    return nightly(db, started)


def _runs(rows: Iterable[tuple]) -> tuple[Run, ...]:
    return tuple(Run(*row) for row in rows)


def nightly(db: sqlite3.Connection, started: str) -> Nightly:
    """The nightly recorded at ``started``."""
    rows = db.execute(
        'SELECT id, started, runner, "commit", source FROM runs WHERE started = ? ORDER BY id',
        (started,),
    )
    return Nightly(started, _runs(rows))


def nightlies(
    db: sqlite3.Connection, last_n: int | None = None, *, until: str | None = None
) -> tuple[Nightly, ...]:
    """The last ``last_n`` nightlies (all when None), newest first; with ``until``, only
    those that started then or earlier."""
    query = "SELECT started FROM runs WHERE started <= ? GROUP BY started ORDER BY started DESC"
    params: tuple = (until or "\uffff",)  # after every timestamp
    if last_n is not None:
        query += " LIMIT ?"
        params += (last_n,)
    return tuple(nightly(db, started) for (started,) in db.execute(query, params).fetchall())


def previous_run(db: sqlite3.Connection, runner: str, before: str) -> Run | None:
    """``runner``'s latest run from a nightly older than ``before``."""
    row = db.execute(
        'SELECT id, started, runner, "commit", source FROM runs '
        "WHERE runner = ? AND started < ? ORDER BY started DESC LIMIT 1",
        (runner, before),
    ).fetchone()
    return Run(*row) if row else None


def run_cases(
    db: sqlite3.Connection, run_id: int, *, stems: Iterable[str] | None = None
) -> tuple[CaseResult, ...]:
    """The stored results of one run as CaseResults (no message: not stored; time 0.0 where
    the history has no seconds).

    With ``stems``, only those consistency tests.
    """
    query = (
        "SELECT t.classname, t.name, t.kind, t.stem, t.dtype, r.outcome, r.flaky, r.attempts, "
        "r.seconds FROM results AS r JOIN tests AS t ON t.id = r.test_id WHERE r.run_id = ?"
    )
    params: list = [run_id]
    if stems is not None:
        stems = sorted(set(stems))
        query += f" AND t.stem IN ({', '.join('?' * len(stems))})"
        params += stems
    source = f"history run {run_id}"
    rows = db.execute(query + " ORDER BY t.id", params)
    return tuple(
        CaseResult(*ids, Outcome(outcome), bool(flaky), attempts, "", seconds or 0.0, source)
        for *ids, outcome, flaky, attempts, seconds in rows
    )


def transitions(db: sqlite3.Connection, before: int, after: int) -> tuple[Transition, ...]:
    """Tests whose outcome differs between run ``before`` and run ``after``."""
    rows = db.execute(
        "SELECT t.classname, t.name, t.kind, t.stem, t.dtype, p.outcome, c.outcome, c.flaky "
        "FROM results AS c JOIN results AS p ON p.test_id = c.test_id AND p.run_id = ? "
        "JOIN tests AS t ON t.id = c.test_id "
        "WHERE c.run_id = ? AND p.outcome != c.outcome ORDER BY t.id",
        (before, after),
    )
    return tuple(
        Transition(cls, name, kind, stem, dtype, Outcome(b), Outcome(a), bool(flaky))
        for cls, name, kind, stem, dtype, b, a, flaky in rows
    )


def flipping(
    db: sqlite3.Connection, last_n: int, *, min_changes: int = 2
) -> tuple[OutcomeSeries, ...]:
    """Tests whose outcome changed at least ``min_changes`` times on one runner over the
    last ``last_n`` nightlies (pass → fail → pass is two), with their outcome series.

    One change is a fix or a regression; it takes a change and a change back to call a test
    flaky. Nights a runner did not run the test are left out of its series.
    """
    runs = db.execute(
        "SELECT id, runner FROM runs WHERE started IN (SELECT started FROM runs "
        "    GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    # run by run along the primary key, the changes counted here: the window function over
    # a join sorted every result of the window (0.8 s for 5 nights of a 3 × 20,000 fleet)
    seen: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for run, runner in runs:
        for test, outcome, flaky in db.execute(
            "SELECT test_id, outcome, flaky FROM results WHERE run_id = ?", (run,)
        ):
            seen.setdefault((runner, test), []).append((outcome, flaky))
    flipped = {
        key: got
        for key, got in seen.items()
        if len(got) > min_changes
        and sum(a[0] != b[0] for a, b in itertools.pairwise(got)) >= min_changes
    }
    if not flipped:
        return ()
    wanted = sorted({test for _, test in flipped})
    tests: dict[int, tuple] = {}
    for chunk in range(0, len(wanted), 500):
        ids = wanted[chunk : chunk + 500]
        tests.update(
            (row[0], row[1:])
            for row in db.execute(
                "SELECT id, classname, name, kind, stem, dtype FROM tests "
                f"WHERE id IN ({', '.join('?' * len(ids))})",
                ids,
            )
        )
    series = [
        OutcomeSeries(
            runner,
            *tests[test],
            tuple(Outcome(o) for o, _ in got),
            tuple(bool(f) for _, f in got),
        )
        for (runner, test), got in flipped.items()
    ]
    return tuple(sorted(series, key=lambda s: (s.classname, s.name, s.runner)))


def durations(db: sqlite3.Connection, last_n: int) -> dict[tuple[str, str], list[float]]:
    """(classname, name) -> the test's recorded seconds in the last ``last_n`` nightlies,
    one per run that has them (every runner's), oldest first.

    A version 1 history (opened read-only, unmigrated) has none: ``{}``.
    """
    if "seconds" not in {row[1] for row in db.execute("PRAGMA table_info(results)")}:
        return {}
    runs = db.execute(
        "SELECT id FROM runs WHERE started IN (SELECT started FROM runs "
        "    GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    # run by run along the primary key: a third of the time of one sorted join
    by_id: dict[int, list[float]] = {}
    for (run,) in runs:
        for test, seconds in db.execute(
            "SELECT test_id, seconds FROM results WHERE run_id = ? AND seconds IS NOT NULL", (run,)
        ):
            by_id.setdefault(test, []).append(seconds)
    names = {i: (cls, name) for i, cls, name in db.execute("SELECT id, classname, name FROM tests")}
    return {names[test]: seconds for test, seconds in by_id.items()}


def outcome_counts(
    db: sqlite3.Connection, last_n: int
) -> tuple[tuple[str, str, dict[str, int]], ...]:
    """(started, runner, {outcome: tests}) for every run of the last ``last_n`` nightlies,
    oldest first."""
    runs = db.execute(
        "SELECT id, started, runner FROM runs WHERE started IN (SELECT started FROM runs "
        "    GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    # run by run along the primary key: one join grouped by run and outcome sorted every
    # result of the window in a temporary b-tree (2.1 s for 60 nights of a 3 × 20,000-test
    # fleet; 0.7 s this way)
    out: dict[tuple[str, str], dict[str, int]] = {}
    for run, started, runner in runs:
        for outcome, count in db.execute(
            "SELECT outcome, COUNT(*) FROM results WHERE run_id = ? GROUP BY outcome", (run,)
        ):
            out.setdefault((started, runner), {o.value: 0 for o in Outcome})[outcome] = count
    return tuple((started, runner, counts) for (started, runner), counts in out.items())


def prune(db: sqlite3.Connection, keep: int) -> int:
    """Delete all but the last ``keep`` nightlies (and tests no run refers to any more).

    Returns how many nightlies were deleted.
    """
    with db:
        old = db.execute(
            "SELECT started FROM runs GROUP BY started ORDER BY started DESC LIMIT -1 OFFSET ?",
            (keep,),
        ).fetchall()
        if not old:
            return 0
        by_night = "SELECT id FROM runs WHERE started = ?"
        gone = [run for (started,) in old for (run,) in db.execute(by_night, (started,))]
        # the tests of the runs going; those the newest nightly has stay (one primary key
        # lookup each): scanning every result for the unreferenced tests took 1.3 s on 180
        # nights of a 3 × 20,000-test fleet, and the tests of a night rarely change
        candidates: set[int] = set()
        for run in gone:
            candidates.update(t for (t,) in db.execute(
                "SELECT test_id FROM results WHERE run_id = ?", (run,)))  # fmt: skip
        db.executemany("DELETE FROM runs WHERE started = ?", old)
        newest = db.execute("SELECT id, started FROM runs ORDER BY started DESC, id").fetchall()
        for run, started in newest:
            if started != newest[0][1]:
                break  # the newest nightly's runs only
            candidates.difference_update(t for (t,) in db.execute(
                "SELECT test_id FROM results WHERE run_id = ?", (run,)))  # fmt: skip
        if len(candidates) > 1000:
            db.execute("DELETE FROM tests WHERE id NOT IN (SELECT DISTINCT test_id FROM results)")
        elif candidates:
            runs = [run for run, _ in newest]
            unused = [
                (t,) for t in sorted(candidates)
                if not any(db.execute("SELECT 1 FROM results WHERE run_id = ? AND test_id = ?",
                                      (run, t)).fetchone() for run in runs)
            ]  # fmt: skip
            db.executemany("DELETE FROM tests WHERE id = ?", unused)
    return len(old)
