"""Which history a command uses, and opening it on either backend.

The history is, first found: the command's ``--history`` (an SQLite file's path or a
``postgresql://`` URL), the ``history.url`` setting (``$MPS_PIPELINE_HISTORY_URL``), else
the state directory's file (``<state_dir>/history/nightly.sqlite``). Flows open it here and
never ask which backend it is; :mod:`pipeline.results.history` re-exports all of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pipeline import state
from pipeline.config import Settings
from pipeline.results import history_file, history_pg
from pipeline.results.history_db import HistoryDB, HistoryLocation


def locate(given: HistoryLocation | str | Path | None, settings: Settings) -> HistoryLocation:
    """The history a command uses (see the module docstring)."""
    if given:
        return HistoryLocation.of(given)
    if settings.history_url:
        return HistoryLocation.parse(settings.history_url, where="history.url")
    return HistoryLocation.parse(state.history_path(settings.state_dir))


def found(at: HistoryLocation) -> bool:
    """Whether there may be a history there: a file that exists (or a dangling link, for
    the checks to refuse); a server always (connecting says)."""
    return at.is_server or os.path.lexists(at.file)


def writer(
    at: HistoryLocation,
    *,
    checked: bool = False,
    wait: float = 0.0,
    on_wait: Callable[[], None] | None = None,
) -> HistoryDB:
    """The history for recording: made where there is none, migrated in place when older;
    another job's write lock waited for up to ``wait`` seconds (``on_wait`` said once)."""
    if at.is_server:
        return history_pg.connect(at, wait=wait, on_wait=on_wait)
    return history_file.connect(at.file, checked=checked, wait=wait, on_wait=on_wait)


def reader(at: HistoryLocation) -> HistoryDB:
    """The existing history, read-only: never migrated nor otherwise written."""
    if at.is_server:
        return history_pg.open_read_only(at)
    return history_file.open_read_only(at.file)


def for_comparing(at: HistoryLocation) -> HistoryDB:
    """The history a PR job compares with: a file as :func:`writer` opens it (an older one
    migrated first, as the next nightly would), a server read-only (the PR job's role
    cannot write, and need not)."""
    return reader(at) if at.is_server else writer(at)
