"""A source edit as data (:class:`FileEdit`), and git's view of a file; the writer is
:func:`pipeline.edit.transaction.commit`."""

from __future__ import annotations

import difflib
import subprocess
from dataclasses import dataclass
from pathlib import Path


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


def git_dirty(root: Path, rel: str) -> bool:
    """True when git reports uncommitted changes to ``rel``; False outside a git work tree."""
    proc = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", rel],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0 and bool(proc.stdout.strip())
