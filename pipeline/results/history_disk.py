"""The history's files beside the database: its backups, the temporary files a killed run
left, whether the file can be written, and waiting (bounded, announced) for its write lock.

Split from :mod:`pipeline.results.history` (the schema and its queries), which re-exports
:func:`backup` and :func:`backups`.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.results.history_db import SqliteDB

__all__ = [
    "BACKUPS",
    "backup",
    "backups",
    "check_writable",
    "remove_stale_temps",
    "temp_file",
    "wait_for_write_lock",
]

BACKUPS = "backups"  # beside the history file
# A temp file this old is a leftover whatever its name says (a pid can be reused).
STALE_AFTER = 3600.0
# .<name>.<pid>.<random>.new, and what SQLite keeps beside one (-journal, -wal, -shm)
_TEMP = re.compile(r"^\..+\.(?P<pid>\d+)\.[^.]+\.new(?:-journal|-wal|-shm)?$")
_OLD_TEMP = re.compile(r"^\..+\.new(?:-journal|-wal|-shm)?$")  # before the pid was in it
_POLL = 0.25  # seconds per attempt at the write lock


def temp_file(target: Path) -> str:
    """A new empty temp file beside ``target`` named after it and this process."""
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.{os.getpid()}.", suffix=".new", dir=target.parent
    )
    os.close(fd)
    return tmp


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temp files (and SQLite's companions) a killed history write or backup left
    in ``folder``: those of a process that is gone, or older than :data:`STALE_AFTER`."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    now = time.time()
    for path in folder.iterdir():
        match = _TEMP.match(path.name)
        if match is None and not _OLD_TEMP.match(path.name):
            continue
        try:
            old = now - path.stat().st_mtime > STALE_AFTER
        except FileNotFoundError:
            continue
        if old or (match is not None and not _alive(int(match[1]))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def check_writable(path: Path) -> None:
    """PipelineError naming ``path`` when the history there cannot be written (immutable,
    read-only, a read-only filesystem): SQLite would open it read-only and fail later."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as exc:
        hint = " (immutable? `lsattr` shows it)" if exc.errno == errno.EPERM else ""
        raise PipelineError(
            f"{path}: the history cannot be written: {exc.strerror}{hint}; the nightly "
            "records each night into it: make it writable, or pass --history FILE"
        ) from None
    if not os.access(path.parent, os.W_OK):
        raise PipelineError(
            f"{path.parent}: the history's folder cannot be written (SQLite keeps its -wal "
            "beside the file): make it writable, or pass --history FILE"
        )


# SQLite's primary result codes (the low byte of the extended one) that say "not now": a
# lock another connection holds, or a file made read-only. The environment, not a bug.
_NOT_NOW = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_READONLY})


def not_now(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused ``exc``'s statement for now (locked, busy, read-only), by its
    result code rather than its message's words."""
    return exc.sqlite_errorcode & 0xFF in _NOT_NOW


def wait_for_write_lock(
    db: sqlite3.Connection, path: Path, wait: float, on_wait: Callable[[], None] | None
) -> None:
    """Return once this connection could take the history's write lock, waiting up to
    ``wait`` seconds for another process that holds it (``on_wait`` called once, when the
    waiting starts); then PipelineError naming the lock. Later statements wait for it as long
    as what is left of ``wait`` (SQLite's busy timeout)."""
    deadline = time.monotonic() + max(wait, 0.0)
    announced = False
    while True:
        db.execute(f"PRAGMA busy_timeout = {int(_POLL * 1000)}")
        try:
            db.execute("BEGIN IMMEDIATE")
            db.rollback()
            break
        except sqlite3.OperationalError as exc:
            if not not_now(exc):
                raise
        if time.monotonic() >= deadline:
            raise PipelineError(
                f"{path}: the history is locked by another process (waited {wait:g} s for its "
                "write lock); wait for the other nightly to finish, or raise lock_wait"
            )
        if not announced and on_wait is not None:
            on_wait()
            announced = True
    left = max(deadline - time.monotonic(), _POLL)
    db.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")


def backup(db: SqliteDB, path: str | Path, started: str, keep: int) -> Path | None:
    """Copy the history (open as ``db``, at ``path``) to ``backups/nightly-<date>-<time>.sqlite``
    beside it, named after the nightly's ``started``; keep the newest ``keep`` of them.

    The copy is made with SQLite's backup API (a consistent snapshot of the live database,
    its WAL included), into a temporary file renamed into place, in rollback-journal mode
    so that it is one self-contained file. ``keep`` 0 makes and keeps none. Returns the
    new copy. Temp files a killed backup left are removed first.
    """
    folder = Path(path).parent / BACKUPS
    made = None
    remove_stale_temps(folder)
    if keep > 0:
        folder.mkdir(parents=True, exist_ok=True)
        made = backup_name(folder, started)

        def snapshot(tmp: str) -> None:
            copy = sqlite3.connect(tmp)
            try:
                db.backup(copy)
            finally:
                copy.close()

        install_backup(made, snapshot)
    rotate(folder, keep)
    return made


def install_backup(made: Path, fill: Callable[[str], None]) -> None:
    """``fill(tmp)`` a temporary file beside ``made``, make it one self-contained file
    (rollback-journal mode) and rename it to ``made``; on any failure the temp is removed."""
    tmp = temp_file(made)
    try:
        fill(tmp)
        copy = sqlite3.connect(tmp)
        try:
            copy.execute("PRAGMA journal_mode = DELETE")
        finally:
            copy.close()
        os.replace(tmp, made)
    except BaseException:
        discard(tmp)
        raise


def backup_name(folder: Path, started: str) -> Path:
    """``nightly-<date>-<time>.sqlite`` in ``folder``, after the nightly's ``started``."""
    stamp = started[:19].replace(":", "")  # 2026-03-01T031700
    return folder / f"nightly-{stamp[:10]}-{stamp[11:]}.sqlite"


def discard(tmp: str) -> None:
    """Remove a backup's temp file and its journal, as far as they were made."""
    for leftover in (tmp, f"{tmp}-journal"):
        if os.path.exists(leftover):
            os.unlink(leftover)


def rotate(folder: Path, keep: int) -> None:
    """Keep the newest ``keep`` backups in ``folder``."""
    if folder.is_dir():
        copies = sorted(folder.glob("nightly-*.sqlite"))
        for old in copies[: max(len(copies) - keep, 0)]:
            old.unlink()


def backups(path: str | Path) -> tuple[Path, ...]:
    """The backups of the history at ``path``, oldest first."""
    return tuple(sorted((Path(path).parent / BACKUPS).glob("nightly-*.sqlite")))
