"""The real CLI in a child process, optionally killed at an exact filesystem step of the
edit transaction: shared by the reliability tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]

_KILLED = """
    import os, sys
    import pipeline.edit.transaction as txn
    from pipeline.__main__ import main

    op, nth = sys.argv[1], int(sys.argv[2])
    real_step, seen = txn._fs_step, 0

    how = os.environ.get("RELIABILITY_FAULT", "kill")

    def step(kind, *args, **kwargs):
        global seen
        if kind == op:
            seen += 1
            if seen == nth and how == "kill":
                os._exit(9)
            if seen >= nth and how == "eio":  # a disk that keeps failing
                raise OSError(5, "Input/output error", str(args[0]))
        real_step(kind, *args, **kwargs)

    txn._fs_step = step
    sys.exit(main(sys.argv[3:]))
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(PROJECT), "COLUMNS": "200"}


def cli(
    cwd: Path,
    *argv: str,
    kill_at: tuple[str, int] | None = None,
    fault: str = "kill",
    timeout: float = 300,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``mps-pipeline ARGV`` run from ``cwd``; with ``kill_at=(step, n)`` the process kills
    itself right before the n-th transaction step of that kind (``"replace"``...), or with
    ``fault="eio"`` that step and every later one of its kind fail with EIO."""
    if kill_at is None:
        cmd = [sys.executable, "-m", "pipeline", *argv]
    else:
        step, nth = kill_at
        cmd = [sys.executable, "-c", textwrap.dedent(_KILLED), step, str(nth), *argv]
    return subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**env(), "RELIABILITY_FAULT": fault, **(extra_env or {})},
        timeout=timeout,
    )


def timeless(text: str) -> str:
    """``text`` without what differs from run to run: durations ("in 2.2s") and how many
    check-math objects came from the cache."""
    text = re.sub(r"\(\d+ from the cache\)", "(N from the cache)", text)
    return re.sub(r"in \d+(\.\d+)?s", "in Ns", text)


def git_status(root: Path) -> str:
    """``git status --porcelain`` of ``root``: empty when nothing was written."""
    return subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


def sandbox_copy(tmp_path: Path) -> Path:
    """The sandbox's working copy under ``tmp_path/state``, made by a first audit."""
    state = tmp_path / "state"
    assert cli(tmp_path, "audit", "atan2", "--state-dir", str(state)).returncode == 1
    return state / "sandbox"
