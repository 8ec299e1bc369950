"""Where the nightly history lives, and the one interface its queries are written against.

Two backends keep the same schema (:mod:`pipeline.results.history_schema`): an SQLite file,
the embedded default for one fleet and for the tests, and a PostgreSQL server
(:mod:`pipeline.results.history_pg`), for fleets that outgrow one file. The queries of
:mod:`pipeline.results.history` and :mod:`pipeline.results.speed` are portable SQL (``?``
parameters, ``ON CONFLICT``, ``RETURNING``) run through :class:`HistoryDB`; what differs
between the two (bulk inserts, the write lock, the catalogue) is a method here.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from pipeline.errors import ConfigError
from pipeline.redact import redact

_SERVER_SCHEMES = ("postgresql://", "postgres://")


class Backend(Enum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class HistoryLocation:
    """An SQLite file (``path``) or a PostgreSQL server (``url``, which may hold a password:
    it is never in the repr, and ``str()`` shows it redacted)."""

    backend: Backend
    path: Path | None = None
    url: str = field(default="", repr=False)

    @classmethod
    def parse(cls, text: str | Path, *, where: str = "--history") -> HistoryLocation:
        """``postgresql://...`` (or ``postgres://``): a server; anything else: a file."""
        if isinstance(text, Path):
            return cls(Backend.SQLITE, path=text)
        if text.startswith(_SERVER_SCHEMES):
            return cls(Backend.POSTGRESQL, url=text)
        if "://" in text:
            scheme = text.partition("://")[0]
            raise ConfigError(
                f"{where}: {redact(text)}: a history is an SQLite file's path or a "
                f"postgresql:// URL, not {scheme}://"
            )
        return cls(Backend.SQLITE, path=Path(text).expanduser())

    @classmethod
    def of(cls, given: HistoryLocation | str | Path) -> HistoryLocation:
        """``given`` as a location (a path or text: :meth:`parse`)."""
        return given if isinstance(given, HistoryLocation) else cls.parse(given)

    @property
    def is_server(self) -> bool:
        return self.backend is Backend.POSTGRESQL

    @property
    def file(self) -> Path:
        """The SQLite file; a bug to ask a server for one."""
        assert self.path is not None, "a history server has no file"
        return self.path

    def __str__(self) -> str:
        return redact(self.url) if self.is_server else str(self.path)


class Rows(Protocol):
    """What an ``execute`` returns on both backends (a DB-API cursor)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class HistoryDB(ABC):
    """An open history: portable SQL with ``?`` parameters, a transaction as a context
    (``with db:`` commits, or rolls back on an exception, like sqlite3's connection), and
    what the backends do differently."""

    backend: Backend
    location: HistoryLocation

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows: ...

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    def insert_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        """Append ``rows`` to ``table`` as fast as the backend can (COPY on the server);
        how many."""

    @abstractmethod
    def stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of a query as they come, never all at once (a whole table's)."""

    @abstractmethod
    def follow_ids(self) -> None:
        """After rows were inserted with their ids (a copy): the next new run or test takes
        the id after the largest there."""

    @abstractmethod
    def settle(self, tables: Sequence[str]) -> None:
        """After a bulk load (a copy), committed: bring what the backend keeps beside the
        rows (a server's planner statistics and visibility map) up to date, so the next
        nights do not pay for it."""

    @abstractmethod
    def lock_writes(self) -> None:
        """Take the history's write lock for the current transaction (waiting as long as
        the connection was opened to wait): one night is recorded at a time."""

    @abstractmethod
    def columns(self, table: str) -> set[str]:
        """The columns ``table`` has (none: no such table)."""

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def rollback(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> HistoryDB:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self.rollback()


class SqliteDB(HistoryDB):
    """The SQLite file: its write lock is SQLite's own (taken by the first write, waited
    for by the busy timeout :func:`pipeline.results.history_disk.wait_for_write_lock` set)."""

    backend = Backend.SQLITE

    def __init__(self, raw: sqlite3.Connection, path: Path) -> None:
        self.raw = raw
        self.location = HistoryLocation(Backend.SQLITE, path=path)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return self.raw.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.raw.executemany(sql, rows)

    def insert_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" * len(columns))
        cursor = self.raw.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
        return cursor.rowcount

    def stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        return iter(self.raw.execute(sql, params))  # sqlite3 steps through the rows

    def follow_ids(self) -> None:
        pass  # INTEGER PRIMARY KEY: the next id is always after the largest

    def settle(self, tables: Sequence[str]) -> None:
        pass  # no statistics kept (no ANALYZE: the queries are planned without them)

    def lock_writes(self) -> None:
        pass  # the transaction's first write takes SQLite's lock

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.raw.execute(f"PRAGMA table_info({table})")}

    def commit(self) -> None:
        self.raw.commit()

    def rollback(self) -> None:
        self.raw.rollback()

    def close(self) -> None:
        self.raw.close()

    def backup(self, target: sqlite3.Connection) -> None:
        """SQLite's online backup of this file into ``target``."""
        self.raw.backup(target)
