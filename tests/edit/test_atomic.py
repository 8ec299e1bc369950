"""FileEdit, git_dirty and the single-file writer; the guarded commit is in test_transaction."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.edit.atomic import FileEdit, git_dirty
from pipeline.fsio import write_atomic


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


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_write_atomic_interrupted_removes_its_temp_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # Ctrl-C after the temp exists (during fsync) or just before the rename.
    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    path = tmp_path / "cache.json"
    path.write_text("old")
    monkeypatch.setattr(os, where, interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, b"new")
    monkeypatch.undo()
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]


def test_outside_git_nothing_is_dirty(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert not git_dirty(tmp_path, "f")
