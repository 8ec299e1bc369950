"""``history copy SRC DST``: a fleet moving up copies its history into the server, and the
copy is read back and compared with the source row by row before it is kept.

The source is never written: an SQLite file is checked (as the nightly checks it), then
snapshotted with SQLite's backup API into a temporary file, which is migrated to the
current schema there if it is older. The target must hold no nightly yet (a copy never
merges two histories). Every table is copied with its ids, in one transaction on the
target that holds its write lock; then each table is read from both sides in key order
and compared row by row, and only an identical copy is committed. A difference rolls the
copy back and says where (:class:`pipeline.errors.CopyMismatchError`). A server then
vacuums and analyzes what it received (:meth:`HistoryDB.settle`).
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import CopyMismatchError, PipelineError
from pipeline.results import history_file
from pipeline.results import history_schema as schema
from pipeline.results.history_access import reader, writer
from pipeline.results.history_db import HistoryDB, HistoryLocation

# the tables copied (schema_version is the target's own, made by opening it)
_COPIED = tuple((table, key) for table, key in schema.KEYED if table != "schema_version")


@dataclass(frozen=True)
class Copied:
    """What a copy moved: each table's rows, every one read back identical."""

    source: str  # the locations as they may be shown (a server's secrets hidden)
    target: str
    nightlies: int
    rows: tuple[tuple[str, int], ...]  # (table, rows), in copy order


@contextlib.contextmanager
def _source(at: HistoryLocation) -> Iterator[HistoryDB]:
    """``at`` at the current schema, read-only: a file's migrated snapshot, or the server."""
    if at.is_server:
        db = reader(at)
        try:
            (version,) = db.execute("SELECT version FROM schema_version").fetchone()
            if version != schema.SCHEMA_VERSION:
                raise PipelineError(
                    f"{at}: schema version {version}; a nightly with this mps-pipeline "
                    f"migrates it to {schema.SCHEMA_VERSION} first"
                )
            yield db
        finally:
            db.close()
        return
    history_file.check(at.file, thorough=True)  # a damaged source is refused, untouched
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-copy-") as tmp:
        snapshot = Path(tmp) / "source.sqlite"
        history_file.install_backup(snapshot, lambda made: _snapshot(at.file, made))
        db = history_file.connect(snapshot, checked=True)
        try:
            yield db
        finally:
            db.close()


def _snapshot(path: Path, made: str) -> None:
    import sqlite3

    source = history_file.open_read_only(path)
    target = sqlite3.connect(made)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def copy(src: HistoryLocation, dst: HistoryLocation, *, wait: float = 0.0) -> Copied:
    """Copy the history ``src`` into the empty history ``dst``; see the module docstring."""
    if src == dst:
        raise PipelineError(f"history copy: {src} is both the source and the target")
    with _source(src) as source:
        target = writer(dst, wait=wait)
        try:
            with target:
                target.lock_writes()
                (held,) = target.execute("SELECT COUNT(DISTINCT started) FROM runs").fetchone()
                (tests,) = target.execute("SELECT COUNT(*) FROM tests").fetchone()
                if held or tests:
                    raise PipelineError(
                        f"history copy: {dst} already holds {held} nightlies and {tests} tests; "
                        "a copy goes into an empty history (it never merges two)"
                    )
                for table, key in _COPIED:
                    columns = _columns(source, target, table)
                    target.insert_rows(table, columns, source.stream(_select(table, columns, key)))
                target.follow_ids()
                rows = verify(source, target)
                (nights,) = target.execute("SELECT COUNT(DISTINCT started) FROM runs").fetchone()
            target.settle([table for table, _ in _COPIED])
        finally:
            target.close()
    return Copied(str(src), str(dst), int(nights), rows)


def _columns(source: HistoryDB, target: HistoryDB, table: str) -> tuple[str, ...]:
    ours, theirs = source.columns(table), target.columns(table)
    if ours != theirs:
        raise PipelineError(
            f"history copy: table {table} has columns {sorted(ours)} in the source and "
            f"{sorted(theirs)} in the target"
        )
    return tuple(sorted(ours))


def _select(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
    names = ", ".join(f'"{c}"' for c in columns)
    return f"SELECT {names} FROM {table} ORDER BY {', '.join(key)}"


def verify(a: HistoryDB, b: HistoryDB) -> tuple[tuple[str, int], ...]:
    """Each copied table of ``a`` and ``b`` read in key order and compared row by row:
    (table, rows) when all are identical, else CopyMismatchError at the first difference."""
    out = []
    for table, key in _COPIED:
        columns = _columns(a, b, table)
        select = _select(table, columns, key)
        count = 0
        for left, right in itertools.zip_longest(a.stream(select), b.stream(select)):
            if left is None or right is None or tuple(left) != tuple(right):
                raise CopyMismatchError(_difference(table, columns, key, left, right, a, b))
            count += 1
        out.append((table, count))
    return tuple(out)


def _difference(
    table: str,
    columns: tuple[str, ...],
    key: tuple[str, ...],
    left: tuple | None,
    right: tuple | None,
    a: HistoryDB,
    b: HistoryDB,
) -> str:
    row = left if left is not None else right
    assert row is not None
    where = ", ".join(f"{k}={row[columns.index(k)]!r}" for k in key)
    if left is None or right is None:
        missing = a.location if left is None else b.location
        return f"history copy: {table} ({where}) is not in {missing}; nothing was copied"
    said = "; ".join(
        f"{c}: {x!r} in the source, {y!r} in the copy"
        for c, x, y in zip(columns, left, right, strict=True)
        if x != y
    )
    return f"history copy: {table} ({where}) differs: {said}; nothing was copied"
