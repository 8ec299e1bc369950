"""Where something sits in the tree: every reader attaches one of these to what it finds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Span:
    """A 1-based, inclusive line range in a file given relative to the tree root."""

    path: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.path}:{self.start}"

    def contains(self, line: int) -> bool:
        return self.start <= line <= self.end

    def overlaps(self, start: int, end: int) -> bool:
        return self.start <= end and start <= self.end


@dataclass(frozen=True)
class Unrecognised:
    """A line a reader saw but could not interpret: surfaced in the audit, never dropped."""

    span: Span
    text: str
    reason: str
