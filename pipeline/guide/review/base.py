"""What every review check takes and returns.

A check is ``check(review: Review) -> Iterable[Finding]``: a pure function of the diff (the
changed files with both texts), the head tree's index and the ``c10/metal`` helpers. Each
check module has ``ID`` (stable: config and JSON use it), ``SEVERITY`` and ``TITLE``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from pipeline.errors import ParseError, UnknownOperatorError
from pipeline.tree import metal, objc, paths
from pipeline.tree.cpp import lex
from pipeline.tree.index import OperatorRecord, TreeIndex
from pipeline.tree.metal_functions import Function

Range = tuple[int, int]  # 1-based, inclusive


class Severity(str, Enum):
    ERROR = "error"  # what a reviewer would block on
    WARNING = "warning"  # worth a look; may be on purpose
    INFO = "info"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class Finding:
    """A finding as ``review --json`` (and results.json) hold it (read by
    :func:`pipeline.fields.read`; written by :meth:`to_dict`, in the document's key order)."""

    path: str
    line: int
    check: str
    severity: Severity
    reason: str  # one line

    def to_dict(self) -> dict[str, object]:
        return {
            "check": self.check,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class FileChange:
    """One changed file of the diff: ``new_text`` None when deleted; ``new_ranges`` the
    lines added or changed in the new version."""

    path: str
    old_text: str | None
    new_text: str | None
    new_ranges: tuple[Range, ...]

    def touches(self, start: int, end: int) -> bool:
        return any(a <= end and start <= b for a, b in self.new_ranges)


@dataclass(frozen=True)
class MathResult:
    """What ``check-math`` says of one functor: agreement with torch on CPU."""

    functor: str
    ok: bool
    reason: str  # the first disagreement (dtype, input, got, expected), or ""


@dataclass(frozen=True)
class ChangedFunctor:
    functor: metal.Functor
    change: FileChange
    code: str  # the functor's lines, comments and literals blanked (same line breaks)


@dataclass
class Review:
    """A check's input. ``math`` is None when check-math could not run (see check_math.py)."""

    changes: tuple[FileChange, ...]
    index: TreeIndex
    helpers: tuple[Function, ...] = ()
    math: Mapping[str, MathResult] | None = None
    _functors: list[ChangedFunctor] | None = field(default=None, repr=False)
    _records: dict[str, OperatorRecord | None] = field(default_factory=dict, repr=False)

    def metal_changes(self) -> Iterator[FileChange]:
        return (c for c in self.changes if c.path.endswith(".metal") and c.new_text is not None)

    def changed_functors(self) -> list[ChangedFunctor]:
        """The functors of the changed ``.metal`` files that the diff adds or changes."""
        if self._functors is None:
            out = []
            for change in self.metal_changes():
                assert change.new_text is not None
                model = metal.parse(change.new_text, change.path)
                try:
                    code = lex(change.new_text, change.path).plain.split("\n")
                except ParseError:  # a file the lexer refuses: no functor to judge
                    continue
                for fn in model.functors:
                    if change.touches(fn.span.start, fn.span.end):
                        text = "\n".join(code[fn.span.start - 1 : fn.span.end])
                        out.append(ChangedFunctor(fn, change, text))
            self._functors = out
        return self._functors

    def changed_operators(self) -> dict[str, tuple[OperatorRecord, str, int]]:
        """Operators whose kernel the diff adds or changes (a functor, a registration, a
        native stub) or whose yaml rows it edits: op -> (record, path, line of the change)."""
        found: dict[str, tuple[OperatorRecord, str, int]] = {}

        def add(record: OperatorRecord | None, path: str, line: int) -> None:
            if record is not None:
                found.setdefault(record.op, (record, path, line))

        for changed in self.changed_functors():
            add(self.record_of_kernel(changed.functor.name), changed.change.path,
                changed.functor.span.start)  # fmt: skip
        for change in self.metal_changes():
            assert change.new_text is not None
            for reg in metal.parse(change.new_text, change.path).registrations:
                if change.touches(reg.span.start, reg.span.end):
                    add(self.record_of_kernel(reg.kernel), change.path, reg.span.start)
        for change in self.changes:
            if change.new_text is None:
                continue
            if change.path.endswith(".mm"):
                for stub in objc.parse(change.new_text, change.path).stubs:
                    if stub.native and change.touches(stub.span.start, stub.span.end):
                        add(self.record_of_kernel(stub.stub.removesuffix("_stub")),
                            change.path, stub.span.start)  # fmt: skip
            elif change.path == paths.NATIVE_YAML:
                for op, entries in self.index.entries_by_operator().items():
                    for e in entries:
                        if e.span.path == change.path and change.touches(e.span.start, e.span.end):
                            add(self.record_of_kernel(op), change.path, e.span.start)
        return found

    def record_of_kernel(self, kernel: str) -> OperatorRecord | None:
        """The operator whose kernel is called ``kernel`` (``div_true`` -> div), if any."""
        if kernel not in self._records:
            record = None
            parts = kernel.split("_")
            for n in range(len(parts), 0, -1):
                try:
                    candidate = self.index.record("_".join(parts[:n]), find_references=False)
                except UnknownOperatorError:
                    continue
                if kernel in candidate.kernel_names:
                    record = candidate
                    break
            self._records[kernel] = record
        return self._records[kernel]


def lines_matching(
    pattern: re.Pattern[str], code: str, first_line: int
) -> Iterator[tuple[int, re.Match[str]]]:
    """(line number, match) of ``pattern`` in ``code``, whose first line is ``first_line``."""
    for offset, line in enumerate(code.split("\n")):
        for match in pattern.finditer(line):
            yield first_line + offset, match
