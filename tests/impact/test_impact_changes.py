"""git diff -> ChangedFile records: statuses, both texts, hunk ranges on each side."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.errors import PipelineError
from pipeline.impact.changes import (
    ChangedFile,
    changed_files,
    changes_from_list,
    parse_changed,
    parse_hunk_ranges,
    read_revision,
)


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (root / "gone.txt").write_text("x\ny\n")
    (root / "dir with space").mkdir()
    (root / "dir with space" / "f.txt").write_text("one\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def test_parse_hunk_ranges_handles_counts_and_pure_insertions() -> None:
    patch = "\n".join(
        [
            "@@ -3 +3 @@",  # one line replaced (counts omitted = 1)
            "@@ -7,2 +7,0 @@",  # two lines deleted
            "@@ -12,0 +11,3 @@ struct x_functor {",  # three inserted after old line 12
        ]
    )
    old, new = parse_hunk_ranges(patch)
    assert old == ((3, 3), (7, 8))
    assert new == ((3, 3), (11, 13))


def test_changed_files_between_commits(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    lines[1] = "changed 2\n"
    del lines[5:7]  # old lines 6-7
    (repo / "a.txt").write_text("".join(lines))
    (repo / "gone.txt").unlink()
    (repo / "new.txt").write_text("n1\nn2\n")
    (repo / "dir with space" / "f.txt").write_text("two\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "head")

    changes = {c.path: c for c in changed_files(repo, base, "HEAD")}
    assert set(changes) == {"a.txt", "gone.txt", "new.txt", "dir with space/f.txt"}
    a = changes["a.txt"]
    assert a.status == "M"
    assert a.old_ranges == ((2, 2), (6, 7))
    assert a.new_ranges == ((2, 2),)
    assert "line 6" in a.old_text and "line 6" not in a.new_text
    gone = changes["gone.txt"]
    assert (gone.status, gone.new_text, gone.old_text, gone.old_ranges) == (
        "D",
        None,
        "x\ny\n",
        ((1, 2),),
    )
    new = changes["new.txt"]
    assert (new.status, new.old_text, new.new_text, new.new_ranges) == (
        "A",
        "",
        "n1\nn2\n",
        ((1, 2),),
    )
    assert changes["dir with space/f.txt"].new_text == "two\n"


def test_changed_files_against_work_tree_includes_untracked(repo: Path) -> None:
    (repo / "a.txt").write_text((repo / "a.txt").read_text().replace("line 10", "line ten"))
    (repo / "untracked.txt").write_text("u\n")
    changes = {c.path: c for c in changed_files(repo, "HEAD")}
    assert changes["a.txt"].new_ranges == ((10, 10),)
    assert changes["a.txt"].new_text.endswith("line ten\n")
    assert changes["untracked.txt"] == ChangedFile("untracked.txt", "A", "", "u\n", (), ((1, 1),))


def test_no_changes_is_empty(repo: Path) -> None:
    assert changed_files(repo, "HEAD") == ()


def test_bad_revision_says_what_to_do(repo: Path) -> None:
    with pytest.raises(PipelineError, match="rev-parse"):
        changed_files(repo, "no-such-rev", "HEAD")


def test_read_revision_batches_and_reports_missing(repo: Path) -> None:
    texts = read_revision(repo, "HEAD", ["a.txt", "nope.txt", "gone.txt"])
    assert texts["nope.txt"] is None
    assert texts["gone.txt"] == "x\ny\n"
    assert texts["a.txt"].startswith("line 1\n")


def test_changes_from_list(repo: Path) -> None:
    changes = changes_from_list(repo, [("a.txt", [(2, 3)]), ("gone.txt", []), ("missing", [])])
    a, gone, missing = changes
    assert (a.status, a.old_text, a.new_ranges) == ("M", None, ((2, 3),))
    assert gone.new_ranges == ((1, 2),)  # no ranges: the whole file
    assert (missing.status, missing.new_text) == ("D", None)


def test_parse_changed_option() -> None:
    assert parse_changed("x/y.mm:3-5,9") == ("x/y.mm", [(3, 5), (9, 9)])
    assert parse_changed("x/y.mm") == ("x/y.mm", [])
