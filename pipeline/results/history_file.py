"""The history's file: its schema, the checks, creation, migration and the seal (its
backups, temp files and locks: :mod:`pipeline.results.history_disk`).

Split from :mod:`pipeline.results.history` (which re-exports all of it, and records and
reads the nightlies): see that module's docstring for the schema and what each check means.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import DamagedHistoryError, DocumentError, PipelineError
from pipeline.fields import dump, read
from pipeline.fsio import write_atomic
from pipeline.results import history_schema as schema
from pipeline.results.history_db import SqliteDB
from pipeline.results.history_disk import (
    BACKUPS,
    backup_name,
    check_writable,
    install_backup,
    remove_stale_temps,
    rotate,
    temp_file,
    wait_for_write_lock,
)

_SQLITE_HEADER = b"SQLite format 3\x00"
_TABLES = schema.TABLES
_ADDED = schema.ADDED


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
            name: {row[1] for row in db.execute(f"PRAGMA table_info({name})")}
            for name in {*_TABLES, *(table for table, _ in _ADDED.values())}
        }
        if not any(tables[name] for name in _TABLES):
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
        if version > schema.SCHEMA_VERSION:
            raise DamagedHistoryError(
                path,
                f"schema version {version} is newer than this mps-pipeline understands "
                f"({schema.SCHEMA_VERSION}); upgrade mps-pipeline",
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
    runs, tests, results = counts
    return HistoryCheck(path, "ok", version, nights, runs, tests, results, first, last, size)


def _create(path: Path) -> None:
    """A new, empty history at ``path``: made under a temporary name, then renamed."""
    tmp = temp_file(path)
    try:
        db = sqlite3.connect(tmp)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            with db:
                db.executescript(schema.SQLITE)
                db.execute(
                    "INSERT INTO schema_version (version) VALUES (?)", (schema.SCHEMA_VERSION,)
                )
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
) -> SqliteDB:
    """Open (creating it and its directory if there is no file) the history at ``path``.

    An existing file is checked first (:func:`check`, quick): one that is not a valid
    history raises :class:`DamagedHistoryError` and is left as it was. ``checked``: the
    caller has just run :func:`check` itself (the nightly runs the thorough one), so it is
    not run twice: on 180 nights of a fleet (300 MB) each check reads the whole file, 1.3 s.
    A valid older file is then migrated (:func:`_migrate`). A file that cannot be written is
    a PipelineError; one whose write lock another process holds is waited for up to ``wait``
    seconds (``on_wait`` called when the waiting starts).
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
        _migrate(SqliteDB(db, path))
        with db:
            db.executescript(schema.SQLITE)  # indexes or views an older file may lack
    except PipelineError:
        db.close()
        raise
    except sqlite3.DatabaseError as exc:
        db.close()
        raise DamagedHistoryError(path, str(exc)) from exc
    except BaseException:
        db.close()
        raise
    return SqliteDB(db, path)


def writes_on_open(path: str | Path) -> bool:
    """Whether :func:`connect` would change the existing file at ``path`` before anything is
    recorded: a migration, or a switch to WAL (a backup copy is in rollback-journal mode).
    True too when that cannot be told (then the file is for :func:`check` to judge)."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
        if header[:16] != _SQLITE_HEADER or header[18:20] != b"\x02\x02":  # 2: WAL
            return True
        db = _read_only(Path(path))
        try:
            (version,) = db.execute("SELECT version FROM schema_version").fetchone()
        finally:
            db.close()
    except (OSError, sqlite3.Error, TypeError, ValueError):
        return True
    return bool(version != schema.SCHEMA_VERSION)


def _migrate(db: SqliteDB) -> None:
    """Bring a checked history to the schema's version in one transaction, or leave it as it
    was (:mod:`pipeline.results.history_schema` says what each step does). The version is
    read again under the write lock, so two processes opening one older file migrate it
    once; a step that fails names it.
    """
    (version,) = db.execute("SELECT version FROM schema_version").fetchone()
    if version == schema.SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")  # explicit: sqlite3 opens no transaction before DDL
    (start,) = db.execute("SELECT version FROM schema_version").fetchone()
    schema.migrate(db, start, (sqlite3.Error,))


SEAL = ".seal"  # appended to the history's path
# A nightly runs the whole integrity_check at least once in this many nights.
FULL_CHECK_EVERY = 7


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL)


@dataclass(frozen=True)
class _Seal:
    """``<path>.seal``: the history's digest and size as a nightly left it, and the nights
    since the last whole integrity_check."""

    sha256: str
    size: int
    since_full: int

    @classmethod
    def read(cls, path: Path) -> _Seal | None:
        """The seal beside the history at ``path``; None when there is none or it does not
        read (either way the next check is the whole one)."""
        try:
            return read(cls, json.loads(_seal_path(path).read_text()), SEAL)
        except (OSError, ValueError, DocumentError):
            return None

    def write(self, path: Path) -> None:
        write_atomic(_seal_path(path), json.dumps(dump(self)) + "\n")


# The digest is taken in a thread beside the night's work, and between reads the thread
# must get the GIL back from a busy main thread, each time up to its switch interval:
# hashlib.file_digest's 256 KiB reads made that 1,300 hand-overs for a 317 MB history (1.3 s
# for a 0.2 s digest), 16 MiB ones make it 20, for 16 MiB more memory.
_DIGEST_CHUNK = 16 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    chunk = bytearray(_DIGEST_CHUNK)
    view = memoryview(chunk)
    with open(path, "rb", buffering=0) as f:
        while size := f.readinto(chunk):
            digest.update(view[:size])  # the GIL is released meanwhile
    return digest.hexdigest()


def seal(path: str | Path, *, full: bool) -> None:
    """Record the digest of the history as a nightly leaves it (closed: its WAL merged),
    beside it (``<path>.seal``, which the CI cache carries with it): what :func:`sealed`
    compares the next night's file with. ``full``: tonight's check was the whole
    ``integrity_check`` (or the history is new); else one more night since the last."""
    path = Path(path)
    _write_seal(path, _sha256(path), full)


def _write_seal(path: Path, sha256: str, full: bool) -> None:
    since = 0
    if not full:
        last = _Seal.read(path)
        # unknown: the next night checks the whole file
        since = FULL_CHECK_EVERY if last is None else last.since_full + 1
    _Seal(sha256, path.stat().st_size, since).write(path)


def sealed(path: str | Path, *, wal: bool | None = None) -> bool:
    """True when the history is byte for byte what the last nightly left (its seal's
    digest; no -wal file since) and fewer than FULL_CHECK_EVERY nights have passed since a
    whole integrity_check: then nothing has changed that a check could find but the pages
    SQLite itself wrote, in a transaction, on the nights since that check.

    A file changed by anything else (restored from a cache, copied, edited, damaged on
    disk) differs from its seal, and gets the whole check. Reading the 317 MB of a 180-night
    fleet history for its digest takes about a seventh of what integrity_check takes.

    ``wal``: whether a -wal file was beside the history when the caller looked (None: look
    now). A caller that opens the history meanwhile, so making a -wal of its own, looks first.
    """
    path = Path(path)
    if wal is None:
        wal = Path(f"{path}-wal").exists()
    last = None if wal else _Seal.read(path)
    if last is None or last.since_full >= FULL_CHECK_EVERY - 1:
        return False
    try:
        return last.size == path.stat().st_size and last.sha256 == _sha256(path)
    except OSError:
        return False


def open_read_only(path: str | Path) -> SqliteDB:
    """The existing history at ``path``, checked (:func:`check`) and opened read-only: never
    migrated nor otherwise written (a version 1 file has no ``seconds``)."""
    path = Path(path)
    check(path)
    return SqliteDB(_read_only(path), path)


def backup_and_seal(path: str | Path, started: str, keep: int, *, full: bool | None) -> None:
    """The night's last step, on the closed history (its WAL merged): its backup (as
    :func:`backup` names and rotates them) and its seal (:func:`seal`; ``full`` None: none,
    the night was not checked), side by side.

    The backup is the file's bytes, copied by the kernel (``shutil.copyfile``: no pass
    through Python), then switched to rollback-journal mode so that it is one
    self-contained file; meanwhile a thread reads the file for the seal's digest (hashlib
    releases the GIL). On 180 nights of a fleet (317 MB) a loop that copied and hashed each
    MiB in turn took 0.77 s.
    """
    from concurrent.futures import ThreadPoolExecutor  # here: only the nightly's end uses it

    path = Path(path)
    folder = path.parent / BACKUPS
    remove_stale_temps(folder)  # of a backup a killed run left

    def copy(tmp: str) -> None:
        shutil.copyfile(path, tmp)

    with ThreadPoolExecutor(max_workers=1) as beside:  # leaving it waits for the digest
        digest = beside.submit(_sha256, path) if full is not None else None
        if keep > 0:
            folder.mkdir(parents=True, exist_ok=True)
            install_backup(backup_name(folder, started), copy)
        rotate(folder, keep)
    if digest is not None and full is not None:
        _write_seal(path, digest.result(), full)
