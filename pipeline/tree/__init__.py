"""Reading a PyTorch source tree.

One module per file format, all with the same module-level interface:

- ``PATTERNS``: tuple of globs, relative to the tree root, of the files the reader reads;
- ``parse(text, path)``: pure function from one file's text to frozen dataclasses that
  carry :class:`~pipeline.tree.span.Span` locations; raises
  :class:`~pipeline.errors.ParseError` naming file and line on malformed input;
- ``read(root)``: every matching file under ``root``; a missing file is a warning in the
  result's ``warnings``, never a crash.

``index`` joins the readers into one record per operator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def parse_each(
    root: Path, patterns: Iterable[str], parse: Callable[[str, str], T]
) -> tuple[list[T], list[str]]:
    """``parse(text, relative posix path)`` of every matching file, in pattern then path
    order, and a warning for each pattern that matches nothing (a partial tree)."""
    results: list[T] = []
    warnings: list[str] = []
    for pattern in patterns:
        matches = sorted(p for p in root.glob(pattern) if p.is_file())
        if not matches:
            warnings.append(f"no file matches {pattern} under {root}")
        for path in matches:
            results.append(
                parse(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())
            )
    return results, warnings


def files(root: Path, patterns: Iterable[str]) -> list[Path]:
    """Every existing file under ``root`` matching ``patterns``, in pattern then path order.

    Takes globs (a reader's ``PATTERNS`` or :mod:`pipeline.tree.paths`), not reader modules,
    so callers on doit's start-up path need not import the readers.
    """
    return [p for pat in patterns for p in sorted(root.glob(pat)) if p.is_file()]
