"""The one interface of the tree readers, and their registry.

Each reader is a module (as pre-commit's languages are) with the module-level names
:class:`Reader` gives; :data:`READERS` lists them once, by the format they read. mypy checks
every module here against the Protocol.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pipeline.tree import common_mps, decorations, dispatch, metal, native_yaml, objc, sources


class Reader(Protocol):
    """A reader of one file format of a PyTorch tree (see :mod:`pipeline.tree`)."""

    # globs relative to the tree root, of the files the reader reads
    PATTERNS: tuple[str, ...]

    def parse(self, text: str, path: str) -> object:
        """One file's text -> frozen dataclasses with spans; ParseError names file:line."""
        ...

    def read(self, root: Path) -> object:
        """Every matching file under ``root``; what cannot be read is a gap (a warning)."""
        ...


READERS: dict[str, Reader] = {
    "native_functions.yaml": native_yaml,
    "kernels (.metal)": metal,
    "host files (.mm)": objc,
    "common_mps.py": common_mps,
    "dispatch headers (.h)": dispatch,
    "shared implementations (.cpp)": sources,
    "MPS decorations (OpInfos, test files)": decorations,
}
