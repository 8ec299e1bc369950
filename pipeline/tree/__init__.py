"""Reading a PyTorch source tree.

One module per file format, all with the same module-level interface:

- ``PATTERNS``: tuple of globs, relative to the tree root, of the files the reader reads;
- ``parse(text, path)``: pure function from one file's text to frozen dataclasses that
  carry :class:`~pipeline.tree.span.Span` locations; raises
  :class:`~pipeline.errors.ParseError` naming file and line on malformed input;
- ``read(root)``: every matching file under ``root``, read with
  :func:`pipeline.tree.text.read_text`. What could not be read is a *gap*: for the kernel,
  host and header files (many per tree) a missing pattern or an unreadable file is a
  warning in the result's ``warnings`` and ``gaps`` and the file is skipped; for the core
  files it is an input error (a missing native_functions.yaml or an unreadable
  common_mps.py), except that a missing common_mps.py is a gap too. A gap makes the
  checklist items that depend on it unknown, never passed.

The interface is :class:`pipeline.tree.reader.Reader` and the readers are registered in
:data:`pipeline.tree.reader.READERS`; ``index`` joins them into one record per operator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar, cast

from pipeline.errors import UnreadableFileError
from pipeline.tree.text import read_text

T = TypeVar("T")


def parse_each(
    root: Path, patterns: Iterable[str], parse: Callable[[str, str], T], *, strict: bool = False
) -> tuple[list[T], list[str]]:
    """``parse(text, relative posix path)`` of every matching file, in pattern then path
    order, and the gaps: a pattern that matches nothing (a partial tree), and every match
    that cannot be read as UTF-8 text (skipped; with ``strict``, its UnreadableFileError is
    raised instead). A directory whose name matches is a gap too, not silently passed over."""
    results: list[T] = []
    gaps: list[str] = []
    for pattern in patterns:
        matches = sorted(root.glob(pattern))
        if not matches:
            gaps.append(f"no file matches {pattern} under {root}")
        for path in matches:
            rel = path.relative_to(root).as_posix()
            try:
                text = read_text(path, rel)
            except UnreadableFileError as exc:
                if strict:
                    raise
                gaps.append(f"{exc} (skipped)")
                continue
            results.append(cast(T, _parsed(parse, text, rel)))
    return results, gaps


# The readers' parses are pure and their results frozen, so a file whose text is unchanged
# is not parsed again: an edit changes two or three files of the hundreds an index reads,
# and the index is read again after it (the edit stage's re-check, a sweep over a backlog:
# its headers' lexing was a third of each rebuild). Keyed by text, never by path or mtime.
@functools.lru_cache(maxsize=1024)
def _parsed(parse: Callable[[str, str], object], text: str, rel: str) -> object:
    return parse(text, rel)


def files(root: Path, patterns: Iterable[str]) -> list[Path]:
    """Every existing file under ``root`` matching ``patterns``, in pattern then path order.

    Takes globs (a reader's ``PATTERNS`` or :mod:`pipeline.tree.paths`), not reader modules,
    so callers on doit's start-up path need not import the readers.
    """
    return [p for pat in patterns for p in sorted(root.glob(pat)) if p.is_file()]
