"""The one writer of source files: atomic, guarded against other people's uncommitted work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.edit.atomic import FileEdit, Journal, apply_edits, git_dirty
from pipeline.errors import DirtyFileError
from pipeline.fsio import write_atomic
from tests.conftest import git_init


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / "b.txt").write_text("two\n")
    git_init(root)
    return root


def _journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "state" / "journal.json")


def test_diff_and_changed() -> None:
    edit = FileEdit("x.yaml", "a\nb\n", "a\nc\n", "swap")
    assert edit.changed
    assert edit.diff().splitlines()[:2] == ["--- a/x.yaml", "+++ b/x.yaml"]
    assert "-b" in edit.diff() and "+c" in edit.diff()
    assert not FileEdit("x", "same", "same", "").changed


def test_write_atomic_keeps_mode_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "f.sh"
    path.write_text("old")
    os.chmod(path, 0o755)
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert path.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["f.sh"]


def test_apply_writes_and_journals(repo: Path, tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    written = apply_edits(repo, [FileEdit("a.txt", "one\n", "ONE\n", "up")], journal)
    assert [e.rel for e in written] == ["a.txt"]
    assert (repo / "a.txt").read_text() == "ONE\n"
    assert git_dirty(repo, "a.txt")
    # our own uncommitted edit is not "someone else's": a second edit goes through
    apply_edits(repo, [FileEdit("a.txt", "ONE\n", "One\n", "again")], _journal(tmp_path))
    assert (repo / "a.txt").read_text() == "One\n"


def test_refuses_someone_elses_uncommitted_change_and_writes_nothing(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "b.txt").write_text("two, edited by hand\n")
    edits = [
        FileEdit("a.txt", "one\n", "ONE\n", "fine"),
        FileEdit("b.txt", "two, edited by hand\n", "TWO\n", "refused"),
    ]
    with pytest.raises(DirtyFileError, match="b.txt has uncommitted changes.*force=1"):
        apply_edits(repo, edits, _journal(tmp_path))
    assert (repo / "a.txt").read_text() == "one\n"  # all-or-nothing
    apply_edits(repo, edits, _journal(tmp_path), force=True)
    assert (repo / "b.txt").read_text() == "TWO\n"


def test_refuses_when_the_file_changed_since_it_was_read(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(DirtyFileError):
        apply_edits(repo, [FileEdit("a.txt", "stale\n", "x\n", "")], _journal(tmp_path))
    assert (repo / "a.txt").read_text() == "one\n"


def test_outside_git_nothing_is_dirty(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert not git_dirty(tmp_path, "f")
