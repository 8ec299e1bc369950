"""Issue 16, point 10: hostile times, an immutable or locked history, a killed backup: the
real `nightly` CLI in a child process, on the `nights` reports of real pytest runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.results import history
from tests.reliability.cli import cli, env
from tests.reliability.test_permissions import immutable


def _nightly(tmp_path: Path, results: Path, *extra: str, **kw):
    return cli(tmp_path, "nightly", "--results", str(results), "--state-dir",
               str(tmp_path / "state"), "--history", str(tmp_path / "h/nightly.sqlite"),
               *extra, **kw)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("value", ["NaN", "inf", "-inf", "1e308", "-5"])
def test_hostile_times_are_unknown_durations_not_a_crash(
    tmp_path: Path, nights, value: str
) -> None:
    results = nights.results()
    for report in results.rglob("*.xml"):
        text = report.read_text()
        report.write_text(text.replace('time="', f'time="{value}" data-was="', 3))
    run = _nightly(tmp_path, results, "--json")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    summary = json.loads(run.stdout)  # valid JSON: no NaN, no Infinity
    assert summary["regressions"] == []
    assert "NaN" not in run.stdout and "Infinity" not in run.stdout


def test_an_immutable_history_is_exit_2_naming_it(tmp_path: Path, nights) -> None:
    assert _nightly(tmp_path, nights.results()).returncode == 0
    db = tmp_path / "h/nightly.sqlite"
    before = db.read_bytes()
    with immutable(db):
        run = _nightly(tmp_path, nights.results())
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-3000:]
    assert f"error: {db}: the history cannot be written: Operation not permitted" in run.stderr
    assert "Traceback" not in run.stderr
    assert db.read_bytes() == before


_LOCKER = """
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    db.execute("ROLLBACK")
"""


def _lock(db: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_LOCKER), str(db), str(seconds)],
        stdout=subprocess.PIPE, text=True, env=env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


@pytest.mark.slow
def test_a_history_locked_too_long_is_waited_for_then_exit_2(tmp_path: Path, nights) -> None:
    assert _nightly(tmp_path, nights.results()).returncode == 0
    db = tmp_path / "h/nightly.sqlite"
    locker = _lock(db, 20)
    try:
        start = time.monotonic()
        run = _nightly(
            tmp_path, nights.results(), timeout=60, extra_env={"MPS_PIPELINE_LOCK_WAIT": "2"}
        )
        took = time.monotonic() - start
    finally:
        locker.kill()
        locker.wait()
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-3000:]
    assert "waiting up to 2 s for the history's write lock, held by another process" in run.stderr
    assert f"error: {db}: the history is locked by another process (waited 2 s" in run.stderr
    assert "Traceback" not in run.stderr
    assert took < 20


@pytest.mark.slow
def test_a_history_locked_briefly_is_waited_for_and_recorded(tmp_path: Path, nights) -> None:
    assert _nightly(tmp_path, nights.results()).returncode == 0
    db = tmp_path / "h/nightly.sqlite"
    locker = _lock(db, 120)
    # the lock is let go once the nightly says it waits, however slowly it got there
    nightly = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "nightly", "--results", str(nights.results()),
         "--state-dir", str(tmp_path / "state"), "--history", str(db)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env(), "MPS_PIPELINE_LOCK_WAIT": "60"},
    )  # fmt: skip
    try:
        assert nightly.stderr is not None
        said = [nightly.stderr.readline() for _ in range(2)]
        assert any("waiting up to 60 s for the history's write lock" in s for s in said), said
    finally:
        locker.kill()
        locker.wait(timeout=30)
    out, err = nightly.communicate(timeout=120)
    assert nightly.returncode == 0, out[-2000:] + err[-3000:]
    with sqlite3.connect(db) as conn:
        assert len(history.nightlies(conn)) == 2


@pytest.mark.slow
def test_a_kill_during_the_backup_leaves_no_temp_for_good(tmp_path: Path, nights) -> None:
    assert _nightly(tmp_path, nights.results()).returncode == 0
    folder = tmp_path / "h" / history.BACKUPS
    # a backup killed mid-copy: its temp file (and journal) with the pid of a dead process
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    stale = folder / f".nightly-2026-01-01-000000.sqlite.{dead}.abcd1234.new"
    stale.write_bytes(b"half a copy")
    Path(f"{stale}-journal").write_bytes(b"")
    old = folder / ".nightly-2025-01-01-000000.sqlite.x1y2z3.new"  # an older run's name
    old.write_bytes(b"")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert _nightly(tmp_path, nights.results()).returncode == 0
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
