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

from collections.abc import Iterable, Iterator
from pathlib import Path


def iter_files(root: Path, patterns: Iterable[str]) -> Iterator[tuple[str, Path] | str]:
    """(relative posix path, file) for every match, or a warning string for empty patterns."""
    for pattern in patterns:
        matches = sorted(p for p in root.glob(pattern) if p.is_file())
        if not matches:
            yield f"no file matches {pattern} under {root}"
        for p in matches:
            yield p.relative_to(root).as_posix(), p


def files(root: Path, patterns: Iterable[str]) -> list[Path]:
    """Every existing file under ``root`` matching ``patterns``, in pattern then path order.

    Takes globs (a reader's ``PATTERNS`` or :mod:`pipeline.tree.paths`), not reader modules,
    so callers on doit's start-up path need not import the readers.
    """
    return [p for pat in patterns for p in sorted(root.glob(pat)) if p.is_file()]
