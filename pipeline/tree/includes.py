"""``#include`` lines, and the in-tree files a Metal shader reads through them.

A Metal shader is compiled (or, with the Command Line Tools, embedded as source) with the
include roots of upstream's cmake/Metal.cmake: the source root and ``aten/src``. Headers
found under neither (``<metal_stdlib>``) are not the tree's, so they are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.tree.text import read_text

INCLUDE_LINE = re.compile(r'^\s*#\s*(?:include|import)\s*[<"]([^>"]+)[>"]')
INCLUDE_ROOTS = ("", "aten/src")


def includes(text: str) -> tuple[str, ...]:
    """The targets of every ``#include``/``#import`` line, as written."""
    return tuple(m.group(1) for line in text.splitlines() if (m := INCLUDE_LINE.match(line)))


def _read(root: Path, path: Path) -> str:
    try:
        rel = path.relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = str(path)
    return read_text(path, rel)


def resolve(root: Path, target: str) -> Path | None:
    """The tree file an include target names, under the first include root that has it."""
    for base in INCLUDE_ROOTS:
        candidate = (root / base / target).resolve()
        if candidate.is_file():
            return candidate
    return None


def shader_sources(root: Path, shader: Path) -> tuple[Path, ...]:
    """``shader`` (resolved) and every in-tree header it includes, transitively."""
    first = shader.resolve()
    found: dict[Path, None] = {first: None}
    pending = [first]
    while pending:
        for target in includes(_read(root, pending.pop())):
            header = resolve(root, target)
            if header is not None and header not in found:
                found[header] = None
                pending.append(header)
    return tuple(found)


def embedded(root: Path, shader: Path) -> str:
    """The shader's source with each in-tree include replaced by the header's own text (once
    per header, as its include guard would), the way a source-embedding build ships it."""
    seen: set[Path] = set()

    def expand(path: Path) -> str:
        seen.add(path)
        out: list[str] = []
        for line in _read(root, path).splitlines():
            match = INCLUDE_LINE.match(line)
            header = resolve(root, match.group(1)) if match else None
            if header is None:
                out.append(line)
            elif header not in seen:
                out.append(expand(header))
        return "\n".join(out)

    return expand(shader.resolve()) + "\n"
