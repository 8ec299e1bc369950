"""One functor's build kept apart from the rest of its ``.metal`` file.

A functor is compiled with its whole file (what Metal compiles is the file). Something else
of the file that does not compile on the host, with these headers, would then hide the
functor: another functor calling a header function this release lacks, a kernel template
and its explicit instantiations. The compiler's diagnostics say where each error is and
through which lines of the ``.metal`` file it was reached; an error that none of the
functor's own parts (its ``struct``, the lines registering it) leads to belongs to the
parts it names, which are set aside (blanked, line numbers kept) and the build retried.
An error that the functor's own parts lead to, or that no line of the file does (a
header's own), is the functor's; but one reached through some of its registration lines
alone, never its ``struct`` (a registration for a type this release's headers lack:
``REGISTER_FP8_EQ_OP(eq)`` on a release without ``float8.h``), sets those lines aside
too, when others are left: the functor is built and checked for its other types.

A functor that reaches a Metal function the shim declares but does not model (SIMD-group
and threadgroup functions, ``metal_shim/mps_shim_sync.h``) fails to link, naming
``metal::mps_not_modelled::NAME``: :func:`not_modelled` reads those names.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.tree import metal as metal_reader
from pipeline.tree.cpp import blank, lex, scan
from pipeline.tree.span import Span

_ERROR = re.compile(r"(?:^|: )(?:fatal )?error: ")
_NOTE = re.compile(r"^[^:\n]+:\d+:(?:\d+:)? note: ")
# the source lines and carets under a diagnostic ("   11 |   x = v.x;", "      |   ~^~"):
# they must not part clang's "in instantiation ... requested here" notes from their error
_SNIPPET = re.compile(r"^\s*\d*\s*\|")
# a file:line anywhere a diagnostic names one: the error, its notes, "required from",
# "In file included from" (GCC and clang spell them alike)
_PLACE = re.compile(
    r"^(?:In file included from |\s+from )?(?P<path>[^:\s][^:\n]*):(?P<line>\d+)[:,]"
)
_NOT_MODELLED = re.compile(r"mps_not_modelled::(\w+)")
_UNDEFINED = re.compile(r"undefined reference to [`'](?P<symbol>[^'\n]+)'")
# an instantiation context line: GCC's "In instantiation of 'SPEC':" (innermost first),
# clang's "note: in instantiation of function template specialization 'SPEC' requested here"
_INSTANTIATION = re.compile(
    r"[Ii]n instantiation of (?:[a-z ]+ )?[\u2018'](?P<spec>.+?)[\u2019'](?::\s*$| requested here)"
)


@dataclass(frozen=True)
class Part:
    """A namespace-scope item of the file: a functor, a template, a registration line."""

    name: str
    start: int  # offsets into the file's text
    end: int
    first_line: int
    last_line: int


@dataclass(frozen=True)
class Layout:
    """The parts of one ``.metal`` file and which of them are each functor's own."""

    text: str
    parts: tuple[Part, ...]
    directives: tuple[tuple[int, int], ...]  # offsets: kept when a part is blanked
    owners: dict[str, frozenset[int]]  # kernel -> indices of its struct and registrations
    # kernel -> indices of the parts that register it and are no part of its struct (a
    # part may register several kernels)
    registering: dict[str, frozenset[int]] = field(default_factory=dict)

    def own(self, kernel: str) -> frozenset[int]:
        return self.owners.get(kernel, frozenset())

    def registrations(self, kernel: str) -> frozenset[int]:
        return self.registering.get(kernel, frozenset())

    def part_at(self, line: int) -> int | None:
        i = bisect.bisect_right(self._first_lines, line) - 1
        return i if i >= 0 and line <= self.parts[i].last_line else None

    @functools.cached_property
    def _first_lines(self) -> list[int]:
        """The parts' first lines, ascending (the parts are in file order, apart)."""
        return [part.first_line for part in self.parts]

    def pruned(self, drop: Collection[int]) -> str:
        """The text with the ``drop`` parts blanked (directives and line breaks kept)."""
        text = self.text
        for i in sorted(drop, reverse=True):
            part = self.parts[i]
            cuts = [part.start]
            for start, end in self.directives:
                if part.start <= start < part.end:
                    cuts += [start, end]
            cuts.append(part.end)
            pieces = [text[: part.start]]
            for k in range(0, len(cuts), 2):
                pieces.append(blank(text[cuts[k] : cuts[k + 1]]))
                if k + 2 < len(cuts):
                    pieces.append(text[cuts[k + 1] : cuts[k + 2]])
            pieces.append(text[part.end :])
            text = "".join(pieces)
        return text


def layout(path: Path) -> Layout:
    """The parts of ``path`` (read as it stands)."""
    text = path.read_text(encoding="utf-8")
    source = lex(text, path.name)
    items, _ = scan(source)
    parsed = metal_reader.parse(text, path.name)
    parts = []
    for item in items:
        first, last = source.line_of(item.start), source.line_of(max(item.start, item.end - 1))
        name = item.name or _declared_name(source.masked[item.start : item.end]) or "?"
        parts.append(Part(name, item.start, item.end, first, last))
    directives = tuple((d.start, d.end) for d in source.directives)
    layout_ = Layout(text, tuple(parts), directives, {})
    structs: dict[str, set[int]] = {}
    registering: dict[str, set[int]] = {}
    for functor in parsed.functors:
        structs.setdefault(functor.name, set()).update(_parts_in(layout_, functor.span))
    for reg in parsed.registrations:
        registering.setdefault(reg.kernel, set()).update(_parts_in(layout_, reg.span))
    kernels = structs.keys() | registering.keys()
    return Layout(
        layout_.text,
        layout_.parts,
        layout_.directives,
        {k: frozenset(structs.get(k, set()) | registering.get(k, set())) for k in kernels},
        {k: frozenset(v - structs.get(k, set())) for k, v in registering.items()},
    )


def _parts_in(layout_: Layout, span: Span) -> set[int]:
    return {
        i
        for i, p in enumerate(layout_.parts)
        if p.first_line <= span.end and span.start <= p.last_line
    }


_DECLARED = re.compile(r"\b(?:struct|class)\s+(\w+)|(\w+)\s*(?:<[^<>(]*>)?\s*\(")


def _declared_name(header: str) -> str | None:
    m = _DECLARED.search(header)
    return (m.group(1) or m.group(2)) if m else None


@dataclass(frozen=True)
class Diagnostic:
    """One error with its context and notes, and every file:line they name."""

    lines: tuple[str, ...]
    places: tuple[tuple[str, int], ...]


def diagnostics(log: str) -> list[Diagnostic]:
    """The errors of a compiler's output. Lines before an error that are neither an error
    nor a note (GCC's "In instantiation of", "required from", "In file included from")
    are its context; the notes after it (clang's "in instantiation ... requested here")
    and the source lines shown under them are its own."""
    blocks: list[list[str]] = []
    pending: list[str] = []
    for line in log.splitlines():
        if _ERROR.search(line) and _PLACE.match(line):
            blocks.append([*pending, line])
            pending = []
        elif (_NOTE.match(line) or _SNIPPET.match(line)) and blocks and not pending:
            blocks[-1].append(line)
        else:
            pending.append(line)
    out = []
    for block in blocks:
        places = []
        for line in block:
            m = _PLACE.match(line)
            if m:
                places.append((m.group("path"), int(m.group("line"))))
        out.append(Diagnostic(tuple(block), tuple(places)))
    return out


def metal_lines(diagnostic: Diagnostic, metal: Path) -> list[int]:
    """The lines of ``metal`` that ``diagnostic`` names."""
    target = metal.resolve()
    return [line for path, line in diagnostic.places if Path(path).resolve() == target]


def specialization(diagnostic: Diagnostic) -> str | None:
    """The innermost function or class template specialization whose instantiation the
    error is in, as the compiler names it (None for an error outside any instantiation)."""
    for line in diagnostic.lines:
        m = _INSTANTIATION.search(line)
        if m:
            return m.group("spec")
    return None


def not_modelled(log: str) -> tuple[str, ...]:
    """Names of the unmodelled Metal functions a link (or compile) error names."""
    return tuple(dict.fromkeys(_NOT_MODELLED.findall(log)))


def undefined(log: str) -> list[str]:
    """Symbols a link error says are undefined."""
    return [m.group("symbol") for m in _UNDEFINED.finditer(log)]


def attribute(
    found: Sequence[Diagnostic], layout_: Layout, kernel: str, metal: Path
) -> tuple[Diagnostic | None, frozenset[int]]:
    """(the first error that is ``kernel``'s own, None if none is; the parts the others
    name). An error naming no line of the file is the functor's: nothing can set it aside.
    One naming only some of its registration parts sets them aside, while others remain."""
    own = layout_.own(kernel)
    spare = layout_.registrations(kernel)
    others: set[int] = set()
    for d in found:
        parts = {
            p for p in (layout_.part_at(line) for line in metal_lines(d, metal)) if p is not None
        }
        mine = parts & own
        if not parts or mine - spare or (mine and not spare - others - mine):
            return d, frozenset(others)
        others |= parts
    return None, frozenset(others)
