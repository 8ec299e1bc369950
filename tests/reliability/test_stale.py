"""Issue 16, point 4: results never outlive the tree state they were computed from, and
concurrent runs on one tree serialize their whole chain."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import commit
from tests.reliability.cli import cli, env

pytestmark = pytest.mark.slow

COMMON_MPS = "torch/testing/_internal/common_mps.py"


def test_a_comment_committed_after_a_migration_leaves_it_done(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert first.returncode == 0, first.stdout + first.stderr
    tree = state / "sandbox"
    commit(tree, "migrated atan2")
    with (tree / COMMON_MPS).open("a") as fh:
        fh.write("# a comment\n")
    commit(tree, "a comment")
    again = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Every checklist item passes." in again.stdout
    assert "Failing tests" not in (state / "ops/atan2/summary.md").read_text()
    third = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert third.returncode == 0, third.stdout + third.stderr


def test_concurrent_runs_of_one_operator_all_end_done(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # the sandbox copy made once, so the runs race on the chain, not on its creation
    assert cli(tmp_path, "audit", "atan2", "--state-dir", str(state)).returncode == 1
    states = [state, tmp_path / "other-state", state]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline",
                "migrate",
                "atan2",
                "--state-dir",
                str(s),
                "--root",
                str(state / "sandbox"),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env(),
        )
        for s in states
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out
    for s in (state, tmp_path / "other-state"):
        again = cli(
            tmp_path, "migrate", "atan2", "--state-dir", str(s), "--root", str(state / "sandbox")
        )
        assert again.returncode == 0, again.stdout + again.stderr
    # what one sequential run leaves: no atan2 entry in common_mps.py, written once
    text = (state / "sandbox" / COMMON_MPS).read_text()
    assert "'atan2'" not in text and '"atan2"' not in text
