"""The history's seal: a night whose file is byte for byte what the last one left skips the
whole integrity_check (at most FULL_CHECK_EVERY - 1 nights in a row); any other file gets it."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pipeline import state as layout
from pipeline.config import load_settings
from pipeline.errors import DamagedHistoryError
from pipeline.results import history
from pipeline.workspace import prepare
from tests.results.nightly_runs import run


@pytest.fixture
def settings(tmp_path):
    return prepare(load_settings({"state_dir": str(tmp_path / "state")}))


@pytest.fixture
def checks(monkeypatch):
    """The thorough checks the nightlies ran."""
    calls: list[str] = []
    real = history.check

    def counted(path, *, thorough=False):
        if thorough:
            calls.append(str(path))
        return real(path, thorough=thorough)

    monkeypatch.setattr(history, "check", counted)
    return calls


def night(day: int) -> str:
    return f"2026-03-{day:02d}T03:17:00Z"


@pytest.mark.slow
def test_an_untouched_history_is_checked_whole_once_a_week(settings, nights, checks):
    path = settings.state_dir / layout.HISTORY
    run(settings, nights.results(), started=night(1))  # a new history: nothing to check
    assert checks == [] and json.loads(path.with_name(path.name + history.SEAL).read_text())
    for day in range(2, 2 + history.FULL_CHECK_EVERY + 1):
        run(settings, nights.results(), started=night(day))
    # nights 2..: sealed by the night before; every 7th the whole check is due again
    assert len(checks) == 1
    seal = json.loads(path.with_name(path.name + history.SEAL).read_text())
    assert seal["since_full"] == 1 and seal["size"] == path.stat().st_size


def test_a_history_changed_since_its_seal_is_checked_whole(settings, nights, checks):
    path = settings.state_dir / layout.HISTORY
    run(settings, nights.results(), started=night(1))
    raw = sqlite3.connect(path)  # another program writes to it between two nights
    with raw:
        raw.execute("UPDATE runs SET source = 'edited'")
    raw.close()
    assert not history.sealed(path)
    run(settings, nights.results(), started=night(2))
    assert checks == [str(path)]
    assert history.sealed(path)  # sealed again as this night left it
    run(settings, nights.results(), started=night(3))
    assert checks == [str(path)]


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_a_damaged_history_with_a_stale_seal_is_refused(settings, nights, checks):
    path = settings.state_dir / layout.HISTORY
    run(settings, nights.results(), started=night(1))
    data = bytearray(path.read_bytes())
    for page in range(4096, len(data), 4096):  # every b-tree page's header, damaged on disk
        data[page : page + 12] = b"\xff" * 12
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedHistoryError):
        run(settings, nights.results(), started=night(2))
    assert checks == [str(path)]
    assert path.read_bytes() == bytes(data)  # untouched


def test_no_seal_or_an_unreadable_one_means_the_whole_check(settings, nights, checks):
    path = settings.state_dir / layout.HISTORY
    run(settings, nights.results(), started=night(1))
    seal = path.with_name(path.name + history.SEAL)
    seal.write_text("{not json")
    run(settings, nights.results(), started=night(2))
    seal.unlink()
    run(settings, nights.results(), started=night(3))
    assert checks == [str(path), str(path)]
    # a field of the wrong type is no seal either, nor is an unknown one
    written = json.loads(seal.read_text())
    seal.write_text(json.dumps({**written, "since_full": str(written["since_full"])}))
    run(settings, nights.results(), started=night(4))
    seal.write_text(json.dumps({**json.loads(seal.read_text()), "checked": True}))
    run(settings, nights.results(), started=night(5))
    assert checks == [str(path)] * 4
