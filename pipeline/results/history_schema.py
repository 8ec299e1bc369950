"""The history's schema, written for both backends, and its migrations.

The tables, columns and keys are the same on SQLite and PostgreSQL (the module docstring of
:mod:`pipeline.results.history` describes them); only the types are each backend's own
spelling. On the server every text column compares in the "C" collation, byte order, as
SQLite compares text: the nightlies' order, ``started <= '\\uffff'`` and every ORDER BY
must give the same answer on both. Numbers are 64-bit (``seconds`` and the speed figures
DOUBLE PRECISION: PostgreSQL's REAL is 32-bit and would round them).

Each :class:`Step` brings a history from one version to the next on either backend, in
the caller's transaction
(:func:`apply`); :func:`pending` lists those a history has yet to take.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import PipelineError
from pipeline.results.history_db import Backend, HistoryDB

SCHEMA_VERSION = 6
# what a history must have: table -> its columns (more are fine: a later migration's)
TABLES = {
    "schema_version": ("version",),
    "runs": ("id", "started", "runner", "commit", "source"),
    "tests": ("id", "classname", "name", "kind", "stem", "dtype"),
    "results": ("run_id", "test_id", "outcome", "flaky", "attempts"),
}
# what each later schema version added: version -> (table, column)
ADDED = {
    2: ("results", "seconds"),
    3: ("run_outcomes", "tests"),
    4: ("speed", "median"),
    5: ("exec_paths", "overloads"),
    6: ("run_devices", "virtualization"),
}
# every table with its key, in an order that respects the foreign keys: what a copy reads
KEYED = (
    ("schema_version", ("version",)),
    ("runs", ("id",)),
    ("tests", ("id",)),
    ("results", ("run_id", "test_id")),
    ("run_outcomes", ("run_id", "outcome")),
    ("speed", ("run_id", "op", "dtype", "shape", "layout")),
    ("exec_paths", ("run_id", "path")),
    ("run_devices", ("run_id",)),
)

# version 4's table: one row per kernel micro-benchmark (operator, dtype, shape, layout) of a
# run (pipeline.results.speed)
_SPEED = """CREATE TABLE IF NOT EXISTS speed (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    op TEXT NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL, layout TEXT NOT NULL,
    median REAL NOT NULL, q25 REAL NOT NULL, q75 REAL NOT NULL, repeats INTEGER NOT NULL,
    PRIMARY KEY (run_id, op, dtype, shape, layout)
) WITHOUT ROWID"""
# version 5's table: the tree's overloads per MPS path (pipeline.guide.exec_paths) on the night
# of each run, so the dashboard shows the share of each path and how it moves night to night
_EXEC_PATHS = """CREATE TABLE IF NOT EXISTS exec_paths (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path TEXT NOT NULL, overloads INTEGER NOT NULL,
    PRIMARY KEY (run_id, path)
) WITHOUT ROWID"""
# version 6's table: the device each run's results came from (pipeline.results.device), what
# speed's baselines are chosen by; a run without a row (older, or no device.json) has an
# unknown device. gpu_cores NULL: unknown
_RUN_DEVICES = """CREATE TABLE IF NOT EXISTS run_devices (
    run_id INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    chip TEXT NOT NULL, gpu TEXT NOT NULL, gpu_family TEXT NOT NULL, gpu_cores INTEGER,
    macos TEXT NOT NULL, macos_build TEXT NOT NULL, metal TEXT NOT NULL,
    virtualization TEXT NOT NULL
) WITHOUT ROWID"""
_RUN_OUTCOMES = """CREATE TABLE IF NOT EXISTS run_outcomes (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    outcome TEXT NOT NULL,
    tests INTEGER NOT NULL,
    PRIMARY KEY (run_id, outcome)
) WITHOUT ROWID"""
VIEW = """CREATE VIEW IF NOT EXISTS results_flat AS
    SELECT r.run_id, t.classname, t.name, t.kind, t.stem, t.dtype, r.outcome, r.flaky,
           r.attempts, r.seconds
    FROM results AS r JOIN tests AS t ON t.id = r.test_id"""

SQLITE = f"""
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
{_RUN_OUTCOMES};
CREATE INDEX IF NOT EXISTS runs_by_runner ON runs (runner, started);
CREATE INDEX IF NOT EXISTS runs_by_source ON runs (source);
CREATE INDEX IF NOT EXISTS tests_by_stem ON tests (stem, kind, dtype);
{VIEW};
{_SPEED};
{_EXEC_PATHS};
{_RUN_DEVICES};
"""

_T = 'TEXT COLLATE "C"'
_PG_SPEED = f"""CREATE TABLE IF NOT EXISTS speed (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    op {_T} NOT NULL, dtype {_T} NOT NULL, shape {_T} NOT NULL, layout {_T} NOT NULL,
    median DOUBLE PRECISION NOT NULL, q25 DOUBLE PRECISION NOT NULL,
    q75 DOUBLE PRECISION NOT NULL, repeats INTEGER NOT NULL,
    PRIMARY KEY (run_id, op, dtype, shape, layout)
)"""
_PG_EXEC_PATHS = f"""CREATE TABLE IF NOT EXISTS exec_paths (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path {_T} NOT NULL, overloads INTEGER NOT NULL,
    PRIMARY KEY (run_id, path)
)"""
_PG_RUN_DEVICES = f"""CREATE TABLE IF NOT EXISTS run_devices (
    run_id BIGINT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    chip {_T} NOT NULL, gpu {_T} NOT NULL, gpu_family {_T} NOT NULL, gpu_cores INTEGER,
    macos {_T} NOT NULL, macos_build {_T} NOT NULL, metal {_T} NOT NULL,
    virtualization {_T} NOT NULL
)"""
_PG_RUN_OUTCOMES = f"""CREATE TABLE IF NOT EXISTS run_outcomes (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    outcome {_T} NOT NULL,
    tests INTEGER NOT NULL,
    PRIMARY KEY (run_id, outcome)
)"""
_PG_VIEW = VIEW.replace("CREATE VIEW IF NOT EXISTS", "CREATE OR REPLACE VIEW")
# results_by_test: the server checks results' foreign key for every test a prune deletes;
# without an index on test_id each check reads every result (SQLite's prune finds the
# unused tests itself, by primary key, and deletes few)

POSTGRESQL = f"""
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    started {_T} NOT NULL,
    runner {_T} NOT NULL,
    "commit" {_T} NOT NULL DEFAULT '',
    source {_T} NOT NULL DEFAULT '',
    UNIQUE (started, runner)
);
CREATE TABLE IF NOT EXISTS tests (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    classname {_T} NOT NULL,
    name {_T} NOT NULL,
    kind {_T},
    stem {_T},
    dtype {_T},
    UNIQUE (classname, name)
);
CREATE TABLE IF NOT EXISTS results (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    test_id BIGINT NOT NULL REFERENCES tests (id),
    outcome {_T} NOT NULL,
    flaky INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    seconds DOUBLE PRECISION,
    PRIMARY KEY (run_id, test_id)
);
{_PG_RUN_OUTCOMES};
CREATE INDEX IF NOT EXISTS runs_by_runner ON runs (runner, started);
CREATE INDEX IF NOT EXISTS runs_by_source ON runs (source);
CREATE INDEX IF NOT EXISTS tests_by_stem ON tests (stem, kind, dtype);
CREATE INDEX IF NOT EXISTS results_by_test ON results (test_id);
{_PG_VIEW};
{_PG_SPEED};
{_PG_EXEC_PATHS};
{_PG_RUN_DEVICES};
"""

# a run's counts, from its results (at the run's insert, and for older runs in the migration)
COUNT_RUN = (
    "INSERT INTO run_outcomes (run_id, outcome, tests) "
    "SELECT run_id, outcome, COUNT(*) FROM results WHERE run_id = ? GROUP BY run_id, outcome"
)


def statements(script: str) -> tuple[str, ...]:
    """A script's statements (none of ours holds a ``;`` inside one)."""
    return tuple(s.strip() for s in script.split(";") if s.strip())


@dataclass(frozen=True)
class Step:
    """What brings a history to ``version`` from the one before, per backend; ``count_runs``:
    then fill ``run_outcomes`` from every run's results."""

    version: int
    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...]
    count_runs: bool = False

    def on(self, backend: Backend) -> tuple[str, ...]:
        return self.sqlite if backend is Backend.SQLITE else self.postgresql


STEPS = (
    # 1 -> 2: the column added (NULL for the results there), the view recreated with it
    Step(
        2,
        ("ALTER TABLE results ADD COLUMN seconds REAL", "DROP VIEW IF EXISTS results_flat", VIEW),
        (
            "ALTER TABLE results ADD COLUMN seconds DOUBLE PRECISION",
            "DROP VIEW IF EXISTS results_flat",
            _PG_VIEW,
        ),
    ),  # fmt: skip
    # 2 -> 3: the table made and filled, run by run along the results' primary key
    Step(3, (_RUN_OUTCOMES,), (_PG_RUN_OUTCOMES,), count_runs=True),
    # 3 -> 4: the speed table, empty
    Step(4, (_SPEED,), (_PG_SPEED,)),
    # 4 -> 5: the exec_paths table, empty
    Step(5, (_EXEC_PATHS,), (_PG_EXEC_PATHS,)),
    # 5 -> 6: the run_devices table, empty (the runs there keep an unknown device)
    Step(6, (_RUN_DEVICES,), (_PG_RUN_DEVICES,)),
)


def pending(start: int) -> tuple[Step, ...]:
    """The steps a history at version ``start`` has yet to take, in order."""
    return tuple(step for step in STEPS if step.version > start)


def apply(db: HistoryDB, step: Step) -> None:
    """Take ``step`` in the caller's transaction, which holds the write lock and read the
    version under it (so two processes opening one older history migrate it once)."""
    for sql in step.on(db.backend):
        db.execute(sql)
    if step.count_runs:
        runs = db.execute("SELECT id FROM runs ORDER BY id").fetchall()
        db.executemany(COUNT_RUN, runs)
    db.execute("UPDATE schema_version SET version = ?", (step.version,))


def migrate(db: HistoryDB, start: int, errors: tuple[type[BaseException], ...]) -> None:
    """Take every pending step in the caller's open transaction, and commit; on one of the
    backend's ``errors`` roll back and raise a PipelineError naming the step (the history
    is left at ``start``)."""
    version = start
    try:
        for step in pending(start):
            apply(db, step)
            version = step.version
        db.commit()
    except errors as exc:
        db.rollback()
        raise PipelineError(
            f"cannot migrate the history from schema version {version} to {version + 1} "
            f"({exc}); it was left as it was (version {start})"
        ) from exc
    except BaseException:
        db.rollback()
        raise
