"""The nightly history on a PostgreSQL server (``history.url: postgresql://...``), with
psycopg 3: the second implementation of :class:`pipeline.results.history_db.HistoryDB`.

What the server changes, against the SQLite file:

- **One night at a time, from any number of jobs.** Every write (a night, a prune, a
  migration) first takes one transaction-scoped advisory lock (:data:`WRITE_LOCK`), waiting
  for it as long as ``lock_wait`` says and saying so once; so aggregation jobs of several
  fleets, or of several ``--source``s, that record at once are recorded one after the other,
  each night whole and once (a re-run source replaces its night under the same lock).
  Readers never wait: PostgreSQL's snapshots show them the last committed night.
- **Nothing half-recorded.** A night is one transaction; a connection that goes away
  before its COMMIT (the server restarted, the network cut) leaves nothing of it.
- **PR jobs read with a read-only role.** :func:`open_read_only` asks the server for
  read-only transactions, and a writer grants SELECT on every table to the role
  :data:`READER_ROLE` whenever that role exists: the PR workflow's URL names a login in it,
  which can read the history and cannot change it, whatever the tool does.
- **The URL's secrets never reach a log.** Every error is one line, said with the URL
  redacted and the driver's own text scrubbed of the password (:mod:`pipeline.redact`).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pipeline.errors import HistoryServerError
from pipeline.redact import scrub
from pipeline.results import history_schema as schema
from pipeline.results.history_db import Backend, HistoryDB, HistoryLocation, Rows

if TYPE_CHECKING:
    import psycopg

# pg_advisory_xact_lock's key for "writing the history": any fixed 64-bit number, the same
# for every mps-pipeline (the bytes of "mpshist" read as an integer)
WRITE_LOCK = int.from_bytes(b"mpshist", "big")
# the group role PR jobs' logins belong to: SELECT on every table, nothing else
READER_ROLE = "mps_pipeline_reader"
CONNECT_TIMEOUT = 10  # seconds
_POLL = 0.25  # seconds between attempts at the write lock
_cursors = itertools.count()  # names of server-side cursors
# what READER_ROLE may read: every table and the view
_OBJECTS = (*(table for table, _ in schema.KEYED), "results_flat")


def _driver() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # an install without the dependency
        raise HistoryServerError(
            f"a history server needs psycopg 3 ({exc}): pip install 'psycopg[binary]'"
        ) from None
    return psycopg


@lru_cache(maxsize=256)
def _marks(sql: str) -> str:
    """Our portable ``?`` parameters as psycopg's ``%s`` (no ``%`` nor ``?`` in our SQL's
    text otherwise)."""
    return sql.replace("?", "%s")


def _one_line(text: str) -> str:
    return " ".join(text.split())


class PostgresDB(HistoryDB):
    """An open connection to the history server; every driver error a HistoryServerError."""

    backend = Backend.POSTGRESQL

    def __init__(
        self,
        conn: psycopg.Connection,
        location: HistoryLocation,
        wait: float = 0.0,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        self.conn = conn
        self.location = location
        self._wait = wait
        self._on_wait = on_wait

    @contextlib.contextmanager
    def _said(self) -> Iterator[None]:
        with said(self.location):
            yield

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        with self._said():
            return self.conn.execute(_marks(sql), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._said(), self.conn.cursor() as cursor:
            cursor.executemany(_marks(sql), list(rows))

    def insert_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        names = ", ".join(f'"{c}"' for c in columns)
        count = 0
        sql = f"COPY {table} ({names}) FROM STDIN"
        with self._said(), self.conn.cursor() as cursor, cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        return count

    def stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        # a server-side cursor, in the current transaction: a whole table is never in memory
        with self._said(), self.conn.cursor(name=f"stream_{next(_cursors)}") as cursor:
            cursor.itersize = 10_000
            cursor.execute(_marks(sql), params)
            yield from cursor

    def follow_ids(self) -> None:
        for table in ("runs", "tests"):
            self.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"COALESCE(MAX(id), 0) + 1, false) FROM {table}"
            )

    def settle(self, tables: Sequence[str]) -> None:
        # a bulk load leaves the tables unanalyzed and their rows unmarked all-visible:
        # autovacuum then reads the whole copy, and competes with the first nights for the
        # server, for minutes at a year of nights. VACUUM runs outside a transaction, and
        # skips (with a warning) tables of another owner.
        with self._said():
            self.conn.commit()
            self.conn.autocommit = True
            try:
                self.conn.execute(f"VACUUM (ANALYZE) {', '.join(tables)}")
            finally:
                self.conn.autocommit = False

    def lock_writes(self) -> None:
        deadline = time.monotonic() + max(self._wait, 0.0)
        announced = False
        while not self.execute("SELECT pg_try_advisory_xact_lock(?)", (WRITE_LOCK,)).fetchone()[0]:
            if time.monotonic() >= deadline:
                raise HistoryServerError(
                    f"{self.location}: the history is locked by another job (waited "
                    f"{self._wait:g} s for its write lock); wait for the other nightly to "
                    "finish, or raise lock_wait"
                )
            if not announced and self._on_wait is not None:
                self._on_wait()
                announced = True
            time.sleep(_POLL)

    def columns(self, table: str) -> set[str]:
        rows = self.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        )
        return {name for (name,) in rows}

    def commit(self) -> None:
        with self._said():
            self.conn.commit()

    def rollback(self) -> None:
        with self._said():
            self.conn.rollback()

    def close(self) -> None:
        self.conn.close()  # an open transaction is rolled back by the server


@contextlib.contextmanager
def said(location: HistoryLocation) -> Iterator[None]:
    """Driver errors inside as one HistoryServerError line, the URL's secrets hidden."""
    driver = _driver()
    try:
        yield
    except driver.Error as exc:
        text = _one_line(scrub(str(exc) or type(exc).__name__, location.url))
        raise HistoryServerError(f"{location}: {text}") from None


def _open(location: HistoryLocation, *, read_only: bool) -> psycopg.Connection:
    driver = _driver()
    options = "-c default_transaction_read_only=on" if read_only else ""
    with said(location):
        conn: psycopg.Connection = driver.connect(
            location.url,
            connect_timeout=CONNECT_TIMEOUT,
            application_name="mps-pipeline",
            options=options,
        )
    return conn


def connect(
    location: HistoryLocation, *, wait: float = 0.0, on_wait: Callable[[], None] | None = None
) -> PostgresDB:
    """The history on the server, for writing: its schema made (on an empty database) or
    migrated in place, under the write lock; SELECT granted to :data:`READER_ROLE`."""
    db = PostgresDB(_open(location, read_only=False), location, wait, on_wait)
    try:
        db.lock_writes()
        version = _version(db)
        if version is None:
            for sql in schema.statements(schema.POSTGRESQL):
                db.execute(sql)
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (schema.SCHEMA_VERSION,))
        elif version < schema.SCHEMA_VERSION:
            schema.migrate(db, version, ())
            db.lock_writes()  # the migration committed: the lock again, for the grant
        user, writes = db.execute(
            "SELECT current_user, has_table_privilege('runs', 'INSERT')"
        ).fetchone()
        if not writes:
            raise HistoryServerError(
                f"{location}: role {user} may only read this history (no INSERT on runs): "
                "the nightly records with a writer's URL; a PR job's reads"
            )
        _grant_readers(db)
        db.commit()
    except BaseException:
        db.close()
        raise
    return db


def open_read_only(location: HistoryLocation) -> PostgresDB:
    """The history on the server, read-only (every transaction READ ONLY: a PR job's, whose
    role should be :data:`READER_ROLE`'s anyway). A database without a history, or with a
    newer one, is refused; an older one is read as it is."""
    db = PostgresDB(_open(location, read_only=True), location)
    try:
        if _version(db) is None:
            raise HistoryServerError(
                f"{location}: no history on this server yet (a nightly starts one)"
            )
        db.rollback()  # no transaction left open while the caller works
    except BaseException:
        db.close()
        raise
    return db


def _version(db: PostgresDB) -> int | None:
    """The schema version (None: no history here); a database holding other tables, or a
    newer schema, is refused."""
    found = {table: db.columns(table) for table in schema.TABLES}
    if not any(found.values()):
        return None
    lacking = [t for t, columns in schema.TABLES.items() if not set(columns) <= found[t]]
    if lacking:
        raise HistoryServerError(
            f"{db.location}: not an mps-pipeline history (table {lacking[0]} is missing or "
            "lacks columns): use a database of its own"
        )
    versions = [v for (v,) in db.execute("SELECT version FROM schema_version")]
    if len(versions) != 1:
        raise HistoryServerError(f"{db.location}: schema_version holds {versions!r}, not one")
    (version,) = versions
    if version > schema.SCHEMA_VERSION:
        raise HistoryServerError(
            f"{db.location}: schema version {version} is newer than this mps-pipeline "
            f"understands ({schema.SCHEMA_VERSION}); upgrade mps-pipeline"
        )
    return int(version)


def _grant_readers(db: PostgresDB) -> None:
    if db.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (READER_ROLE,)).fetchone() is None:
        return
    granted = db.execute(
        "SELECT bool_and(has_table_privilege(?, c.oid, 'SELECT')) FROM pg_class AS c "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(?)",
        (READER_ROLE, list(_OBJECTS)),
    ).fetchone()[0]
    if not granted:
        db.execute(f"GRANT SELECT ON {', '.join(_OBJECTS)} TO {READER_ROLE}")


@dataclass(frozen=True)
class ServerCheck:
    """What ``nightly --check-history`` says of a history on a server (its integrity and
    backups are the server's own: not checked here)."""

    schema_version: int
    nightlies: int
    first: str | None  # started of the oldest and newest nightly
    last: str | None
    runs: int
    tests: int
    results: int
    size: int  # bytes of its tables and indexes on the server


def counts(db: HistoryDB) -> ServerCheck:
    """The schema version and counts of the history open as ``db``."""
    (version,) = db.execute("SELECT version FROM schema_version").fetchone()
    nights, first, last = db.execute(
        "SELECT COUNT(DISTINCT started), MIN(started), MAX(started) FROM runs"
    ).fetchone()
    runs, tests, results = (
        db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("runs", "tests", "results")
    )
    (size,) = db.execute(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
        "AND c.relname = ANY(?)",
        (list(_OBJECTS),),
    ).fetchone()
    return ServerCheck(int(version), nights, first, last, runs, tests, results, int(size))
