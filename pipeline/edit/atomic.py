"""The one way source files are written: guarded, atomic, journaled."""

from __future__ import annotations

import difflib
import hashlib
import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import DirtyFileError
from pipeline.fsio import write_atomic


@dataclass(frozen=True)
class FileEdit:
    """A whole-file replacement, computed and verified before anything is written."""

    rel: str  # path relative to the tree root, posix
    before: str
    after: str
    summary: str  # one line for humans: "fold MPS into shared dispatch of atan2.out"

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff (``a/`` ``b/`` prefixes, as git shows it)."""
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=f"a/{self.rel}",
                tofile=f"b/{self.rel}",
            )
        )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Journal:
    """Hashes of what the pipeline itself last wrote, so its own edits don't count as dirty.

    Stored as JSON in the state directory; one small file, read once per run.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}

    def wrote(self, rel: str, text: str) -> bool:
        return self._written.get(rel) == _sha(text)

    def record(self, rel: str, text: str) -> None:
        self._written[rel] = _sha(text)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(self._written, indent=1, sort_keys=True))


def git_dirty(root: Path, rel: str) -> bool:
    """True when git reports uncommitted changes to ``rel``; False outside a git work tree."""
    proc = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", rel],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0 and bool(proc.stdout.strip())


def apply_edits(
    root: Path, edits: Iterable[FileEdit], journal: Journal, *, force: bool = False
) -> list[FileEdit]:
    """Write every changed edit, refusing files with someone else's uncommitted changes.

    All guards are checked before the first write, so a refusal leaves the tree untouched.
    A file whose content changed on disk since ``before`` was read is also refused.
    Returns the edits that were written.
    """
    todo = [e for e in edits if e.changed]
    for edit in todo:
        path = root / edit.rel
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != edit.before:
            raise DirtyFileError(edit.rel)
        if not force and git_dirty(root, edit.rel) and not journal.wrote(edit.rel, current):
            raise DirtyFileError(edit.rel)
    for edit in todo:
        write_atomic(root / edit.rel, edit.after)
        journal.record(edit.rel, edit.after)
    return todo
