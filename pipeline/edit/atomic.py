"""A source edit as data (:class:`FileEdit`), and git's view of a file; the writer is
:func:`pipeline.edit.transaction.commit`."""

from __future__ import annotations

import dataclasses
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.tree.span import Span

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# the span of an entry compared regardless of where it sits
NOWHERE = Span("", 0, 0)


def unplaced(entries: Iterable[DataclassInstance]) -> Counter:
    """Entries with their spans blanked: what must survive an edit that moves lines."""
    return Counter(dataclasses.replace(e, span=NOWHERE) for e in entries)


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
        import difflib  # only to show one: the warm audit's hold imports this module

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
