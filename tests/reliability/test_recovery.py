"""Issue 16, point 1: a run killed past the commit point is finished by the next run only
onto the exact content its journal recorded; and the finishing run's summary says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.reliability.cli import cli, timeless

pytestmark = pytest.mark.slow

BINARY_OPS = "aten/src/ATen/native/mps/operations/BinaryOps.mm"


def test_a_change_made_after_a_killed_commit_is_never_rolled_over(tmp_path: Path) -> None:
    state = tmp_path / "state"
    killed = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state), kill_at=("replace", 2))
    assert killed.returncode == 9, killed.stderr
    tree = state / "sandbox"
    journal = tree / ".git/mps-pipeline/journal.json"
    assert journal.is_file()
    mine = (tree / BINARY_OPS).read_text() + "// the user's line\n"
    (tree / BINARY_OPS).write_text(mine)

    again = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert again.returncode == 2, again.stdout + again.stderr
    # the stage's error is one line on stderr, in our words
    line = next(x for x in again.stderr.splitlines() if "was changed after" in x)
    error = line.split(": ", 2)[2]  # "error: <the stage>: <why>"
    assert error.startswith(f"{BINARY_OPS} was changed after an interrupted edit")
    assert str(journal) in error and "nothing was rolled forward" in error
    assert (tree / BINARY_OPS).read_text() == mine
    assert journal.is_file()


def test_the_run_that_finishes_a_killed_edit_reports_that_edit(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    plain = cli(tmp_path / "a", "migrate", "atan2", "--state-dir", str(tmp_path / "a/state"))
    assert plain.returncode == 0, plain.stderr
    expected = timeless((tmp_path / "a/state/ops/atan2/summary.md").read_text())

    (tmp_path / "b").mkdir()
    state = tmp_path / "b/state"
    for step, nth in (("replace", 1), ("replace", 3), ("unlink", 1)):
        killed = cli(
            tmp_path / "b", "migrate", "atan2", "--state-dir", str(state), kill_at=(step, nth)
        )
        assert killed.returncode == 9, (step, nth, killed.stderr)
        again = cli(tmp_path / "b", "migrate", "atan2", "--state-dir", str(state))
        assert again.returncode == 0, (step, nth, again.stdout + again.stderr)
        assert "recovered: rolled forward" in again.stdout
        # the same summary, but for where the tree is (its "Next: git -C <tree> diff")
        got = (state / "ops/atan2/summary.md").read_text()
        got = got.replace(str(tmp_path / "b"), str(tmp_path / "a"))
        assert timeless(got) == expected, (step, nth)
        assert cli(tmp_path / "b", "migrate", "atan2", "--state-dir", str(state)).returncode == 0
        shutil.rmtree(state)  # back to the sandbox as shipped for the next kill point


def test_a_dry_run_after_a_killed_commit_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    killed = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state), kill_at=("replace", 2))
    assert killed.returncode == 9, killed.stderr
    tree = state / "sandbox"
    journal = tree / ".git/mps-pipeline/journal.json"
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts}
    preview = cli(tmp_path, "migrate", "atan2", "--dry-run", "--state-dir", str(state))
    assert preview.returncode in (0, 1), preview.stdout + preview.stderr
    after = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before and journal.is_file()
    assert cli(tmp_path, "migrate", "atan2", "--state-dir", str(state)).returncode == 0
