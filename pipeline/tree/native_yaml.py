"""Reader for ``native_functions.yaml``: every entry, its dispatch rows and where they sit.

The file is composed (not constructed) with libyaml's C loader so each node keeps its line;
the full 15k-line file composes in ~0.15 s, against ~1.7 s for the pure-Python loader.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pipeline.errors import ParseError
from pipeline.heap import collector_paused
from pipeline.tree import paths
from pipeline.tree.span import Span
from pipeline.tree.text import read_text

PATTERNS: tuple[str, ...] = (paths.NATIVE_YAML,)

# The C loader is optional in PyYAML builds; the Python one gives identical nodes, only slower.
_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# The line breaks YAML (and libyaml's marks) count; str.splitlines knows more, e.g. form feed.
_BREAK = re.compile("(\r\n|[\r\n\x85\u2028\u2029])")

_STR_TAG = "tag:yaml.org,2002:str"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"


class MpsKind(str, Enum):
    """How one native_functions.yaml entry serves MPS (a str, so JSON and tables show it)."""

    SHARED = "shared"  # MPS in a shared row: `CPU, CUDA, MPS: atan2_out` (native Metal)
    MPS_SPECIFIC = "mps_specific"  # a row of its own: `MPS: atan2_out_mps` (MPSGraph era)
    DELEGATE = "delegate"  # structured_delegate: served by the .out entry
    COMPOSITE = "composite"  # no dispatch, or a Composite* kernel: decomposes for MPS
    NONE = "none"  # explicit dispatch without MPS: no MPS support

    def __str__(self) -> str:
        return self.value


# Kinds whose entry still needs the guide's dispatch step (fold or add MPS).
PENDING_KINDS = frozenset({MpsKind.MPS_SPECIFIC, MpsKind.NONE})
# Kinds where MPS runs a kernel the entry names (shared or its own)
_SERVED_KINDS = frozenset({MpsKind.SHARED, MpsKind.MPS_SPECIFIC})


def adds_mps(kinds: Iterable[MpsKind]) -> bool:
    """The guide's add workflow: no entry of the operator names an MPS kernel yet. Only then
    does the dispatch step give MPS to entries without it; a migration never does."""
    return not _SERVED_KINDS & set(kinds)


@dataclass(frozen=True)
class DispatchRow:
    """One ``KEYS: kernel`` line of a ``dispatch:`` map, comma group expanded into ``keys``."""

    keys: tuple[str, ...]
    kernel: str
    line: int
    text: str  # the whole original line, without its newline


@dataclass(frozen=True)
class NativeFunction:
    """One ``- func:`` entry."""

    name: str
    operator: str
    overload: str
    schema: str
    structured: bool
    structured_delegate: str | None
    structured_inherits: str | None
    autogen: tuple[str, ...]
    dispatch: tuple[DispatchRow, ...]
    span: Span
    # `tags:` (pointwise, reduction...): what kind of kernel the operator is
    tags: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        """``name.overload`` as torchgen spells the operator (``atan2.out``; ``atan2``)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    def kernel_for(self, key: str) -> str | None:
        """The kernel explicitly dispatched for ``key``, or None.

        A key listed twice resolves to its last row, as torchgen's dict assignment does.
        The implicit CompositeImplicitAutograd kernel of a dispatch-less entry is not reported.
        """
        kernel = None
        for row in self.dispatch:
            if key in row.keys:
                kernel = row.kernel
        return kernel

    @property
    def mps_kind(self) -> MpsKind:
        """How MPS is served by this entry."""
        mps = self.kernel_for("MPS")
        if mps is not None:
            shared = any(
                row.kernel == mps and any(k != "MPS" for k in row.keys) for row in self.dispatch
            )
            return MpsKind.SHARED if shared else MpsKind.MPS_SPECIFIC
        if self.structured_delegate:
            return MpsKind.DELEGATE
        if not self.dispatch or any(
            k.startswith("Composite") for row in self.dispatch for k in row.keys
        ):
            return MpsKind.COMPOSITE
        return MpsKind.NONE


@dataclass(frozen=True)
class NativeFunctions:
    """Every entry of one native_functions.yaml, in file order."""

    path: str
    entries: tuple[NativeFunction, ...]
    warnings: tuple[str, ...] = ()

    def operators(self) -> dict[str, tuple[NativeFunction, ...]]:
        """Entries grouped by ``operator`` (functional, in-place and out together), file order."""
        groups: dict[str, list[NativeFunction]] = {}
        for entry in self.entries:
            groups.setdefault(entry.operator, []).append(entry)
        return {op: tuple(entries) for op, entries in groups.items()}


def operator_name(name: str) -> str:
    """``atan2_`` -> ``atan2``; dunder names such as ``__iand__`` are kept whole."""
    if name.startswith("__") and name.endswith("__"):
        return name
    return name[:-1] if name.endswith("_") and len(name) > 1 else name


def split_lines(text: str, *, keepends: bool = False) -> list[str]:
    """``text`` cut at the line breaks YAML counts, so index ``line - 1`` is a node's line."""
    parts = _BREAK.split(text)
    if keepends:
        lines = [a + b for a, b in zip(parts[::2], parts[1::2], strict=False)]
        return lines + [parts[-1]] if parts[-1] else lines
    return parts[::2] if parts[-1] else parts[:-2:2]


def parse(text: str, path: str) -> NativeFunctions:
    """Parse one native_functions.yaml text; ParseError names the line of anything malformed."""
    with collector_paused():  # its nodes and entries form no cycle (see pipeline.heap)
        return _parse(text, path, _LOADER)


# A pure function with a frozen result, so the last few texts' results are kept (keyed by the
# loader too): one text is parsed several times in a run (the edit's verification, the index
# read after the write, the next plan), at 0.18 s each for the real file's 15,789 lines.
@functools.lru_cache(maxsize=4)
def _parse(text: str, path: str, loader: type) -> NativeFunctions:
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise ParseError(path, mark.line + 1 if mark else None, f"invalid YAML: {reason}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a control one)
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character
        code = ord(char) if isinstance(char, str) and len(char) == 1 else char
        what = f"character #x{code:04x}" if isinstance(code, int) else "a character"
        raise ParseError(path, line, f"invalid YAML: {what}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        message = " ".join(str(exc).split())  # one line, whatever PyYAML put in it
        raise ParseError(path, None, f"invalid YAML: {message}") from None
    if root is None:
        return NativeFunctions(path, ())
    if not isinstance(root, SequenceNode):
        raise ParseError(path, root.start_mark.line + 1, "expected a list of `- func:` entries")
    lines = split_lines(text)
    entries = tuple(_entry(node, path, lines) for node in root.value)
    first: dict[str, int] = {}
    for entry in entries:
        # torchgen refuses a schema declared twice; an edit would fold only one of them
        seen = first.setdefault(entry.full_name, entry.span.start)
        if seen != entry.span.start:
            raise ParseError(
                path,
                entry.span.start,
                f"`{entry.full_name}` is declared twice (lines {seen} and {entry.span.start})",
            )
    return NativeFunctions(path, entries)


def read(root: Path) -> NativeFunctions:
    """Read the tree's native_functions.yaml: the core file, so a missing or unreadable one
    is an input error (:class:`~pipeline.errors.UnreadableFileError`), never an empty tree."""
    rel = PATTERNS[0]
    return parse(read_text(root / rel, rel), rel)


@dataclass(frozen=True)
class _Keys:
    """The keys of an entry this reader takes, as their YAML nodes (the others, such as
    ``variants:``, are torchgen's business)."""

    func: Node | None = None
    structured: Node | None = None
    structured_delegate: Node | None = None
    structured_inherits: Node | None = None
    autogen: Node | None = None
    dispatch: Node | None = None
    tags: Node | None = None


_TAKEN = frozenset(f.name for f in fields(_Keys))


def _entry(node: Node, path: str, lines: list[str]) -> NativeFunction:
    line = node.start_mark.line + 1
    if not isinstance(node, MappingNode):
        raise ParseError(path, line, "list item is not a mapping with a `func:` key")
    given: dict[str, Node] = {}
    for key, value in node.value:
        if isinstance(key, ScalarNode):
            if key.value in given:  # YAML keeps the last silently; the entry is ambiguous
                raise ParseError(
                    path,
                    key.start_mark.line + 1,
                    f"duplicate key `{key.value}:` in one entry (lines "
                    f"{_key_line(node, key.value)} and {key.start_mark.line + 1})",
                )
            given[key.value] = value
    keys = _Keys(**{k: v for k, v in given.items() if k in _TAKEN})

    def text_of(value: Node | None, name: str) -> str | None:
        if value is None or (isinstance(value, ScalarNode) and value.tag == _NULL_TAG):
            return None
        if not isinstance(value, ScalarNode):
            raise ParseError(path, line, f"`{name}:` is not a plain value")
        return value.value

    schema = text_of(keys.func, "func")
    if not schema:
        raise ParseError(path, line, "entry has no `func:` schema")
    head, paren, _ = schema.partition("(")
    if not paren or not head.strip():
        raise ParseError(path, line, f"func {schema!r} is not of the form `name.overload(args)`")
    name, _, overload = head.strip().partition(".")
    autogen = text_of(keys.autogen, "autogen") or ""
    return NativeFunction(
        name=name,
        operator=operator_name(name),
        overload=overload,
        schema=schema,
        structured=_flag(keys.structured, path, line),
        structured_delegate=text_of(keys.structured_delegate, "structured_delegate"),
        structured_inherits=text_of(keys.structured_inherits, "structured_inherits"),
        autogen=tuple(a.strip() for a in autogen.split(",") if a.strip()),
        dispatch=_dispatch(keys.dispatch, path, line, lines),
        span=Span(path, line, _last_line(node, lines)),
        tags=_tags(keys.tags),
    )


def _tags(node: Node | None) -> tuple[str, ...]:
    """``tags: pointwise`` or ``tags: [core, pointwise]``; anything else holds no tag."""
    if isinstance(node, ScalarNode) and node.tag == _STR_TAG:
        return (node.value,)
    if isinstance(node, SequenceNode):
        return tuple(v.value for v in node.value if isinstance(v, ScalarNode) and v.value)
    return ()


def _key_line(node: MappingNode, name: str) -> int:
    """The line of the first ``name:`` key of ``node``."""
    keys = (k for k, _ in node.value if isinstance(k, ScalarNode))
    return next(k.start_mark.line + 1 for k in keys if k.value == name)


def _flag(node: Node | None, path: str, line: int) -> bool:
    if node is None:
        return False
    value = node.value.lower() if isinstance(node, ScalarNode) and node.tag == _BOOL_TAG else None
    if value not in yaml.constructor.SafeConstructor.bool_values:
        raise ParseError(path, line, "`structured:` is not True or False")
    return yaml.constructor.SafeConstructor.bool_values[value]


def _dispatch(
    node: Node | None, path: str, entry_line: int, lines: list[str]
) -> tuple[DispatchRow, ...]:
    if node is None or (isinstance(node, ScalarNode) and node.tag == _NULL_TAG):
        return ()
    if not isinstance(node, MappingNode):
        raise ParseError(path, entry_line, "`dispatch:` is not a mapping of `KEYS: kernel` rows")
    rows = []
    first: dict[str, int] = {}
    for key, value in node.value:
        if not (isinstance(key, ScalarNode) and key.tag == _STR_TAG):
            raise ParseError(path, entry_line, "a dispatch key is not a name")
        keys = tuple(k.strip() for k in key.value.split(","))
        if not all(keys):
            raise ParseError(path, entry_line, f"dispatch key {key.value!r} has an empty name")
        if not (isinstance(value, ScalarNode) and value.tag == _STR_TAG and value.value):
            raise ParseError(path, entry_line, f"dispatch value for {key.value!r} is not a kernel")
        row_line = key.start_mark.line + 1
        for k in keys:
            seen = first.setdefault(k, row_line)
            if seen != row_line or keys.count(k) > 1:
                raise ParseError(
                    path,
                    row_line,
                    f"dispatch key {k} appears twice in one `dispatch:` (lines {seen} and "
                    f"{row_line})",
                )
        rows.append(DispatchRow(keys, value.value, row_line, lines[row_line - 1]))
    return tuple(rows)


def _last_line(node: Node, lines: list[str]) -> int:
    """Last line holding content of entry ``node``: trailing comments and blanks excluded."""
    start = node.start_mark.line + 1
    while isinstance(node, (MappingNode, SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(node, MappingNode) else last
    mark = node.end_mark
    # A mark at column 0 is the start of the line after the content (block scalars end so),
    # and a block scalar's end also takes in the blank lines that follow it.
    end = mark.line if mark.column == 0 else mark.line + 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end
