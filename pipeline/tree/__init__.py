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
from types import ModuleType


def iter_files(root: Path, patterns: Iterable[str]) -> Iterator[tuple[str, Path] | str]:
    """(relative posix path, file) for every match, or a warning string for empty patterns."""
    for pattern in patterns:
        matches = sorted(p for p in root.glob(pattern) if p.is_file())
        if not matches:
            yield f"no file matches {pattern} under {root}"
        for p in matches:
            yield p.relative_to(root).as_posix(), p


def reader_files(root: Path, *readers: ModuleType) -> list[Path]:
    """Every existing file under ``root`` that ``readers`` read, in reader then path order."""
    return [p for r in readers for pat in r.PATTERNS for p in sorted(root.glob(pat)) if p.is_file()]
