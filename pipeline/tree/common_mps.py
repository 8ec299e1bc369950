"""Reader for ``torch/testing/_internal/common_mps.py``: the MPS xfail/skip lists.

The file is read as text with :mod:`ast` (never imported: importing it needs torch and an
MPS device). What counts as a list is structural, not a fixed set of names: any dict literal
assigned to an UPPER_CASE name, anywhere in the file (``UNIMPLEMENTED_XFAILLIST``,
``XFAILLIST_GRAD``, macOS-version lists that come and go...), annotated or not, gives one
:class:`XfailEntry` per key; any set literal of strings assigned to an UPPER_CASE name
(``SUPPORTED_COMPLEX_OPS``, the error-inputs ``XFAILLIST``) gives one :class:`SetEntry` per
member. ``function`` is the innermost enclosing ``def`` (or class) name, ``""`` at module
level; the real file defines ``mps_ops_modifier`` twice (MPS available or not) and
``ON_MPS_XFAILLIST`` in two functions, so entries are told apart by ``(list, function, key)``
and, should the same triple occur twice, kept twice in file order.

Values are evaluated only in simple, known forms: ``None`` (all dtypes), a list/tuple/set of
``torch.<dtype>`` attributes (aliases such as ``torch.half`` are canonicalised), ``[]``, and
``+`` of such lists. Anything else (a name, a conditional such as
``[torch.int64] if MACOS_VERSION < 14.0 else []``, a comprehension) keeps the entry with
``dtypes=()`` and the value's source in ``raw``, plus a warning naming file and line: such an
entry is reported, never guessed at, and the editor refuses to rewrite it.

Declarations the reader cannot list entry by entry (``**spread`` inside a dict, dict
comprehensions, ``X["key"] = ...``, ``X.update({...})`` with a literal) become
:class:`~pipeline.tree.span.Unrecognised` items. ``X.update(OTHER)`` merges of two named
lists are not data: both lists are read where they are declared.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.dtypes import TORCH_ALIASES
from pipeline.errors import ParseError
from pipeline.tree import paths
from pipeline.tree.span import Span, Unrecognised
from pipeline.tree.text import read_text

PATTERNS: tuple[str, ...] = (paths.COMMON_MPS,)

_UPPER = re.compile(r"^[A-Z][A-Z0-9_]*$")
# Which operators' complex dtypes MPS supports: up to torch 2.14 the file lists them
# (an allow-list); from 2.15 it lists those it does not (every other OpInfo tested with
# complex dtypes is expected to pass them).
COMPLEX_ALLOWED = "SUPPORTED_COMPLEX_OPS"
COMPLEX_DENIED = "UNSUPPORTED_COMPLEX_OPS"
# A disabled entry (`# "kthvalue": None,`) is not a comment about the entry below it.
_COMMENTED_ENTRY = re.compile(r"""^#\s*(["'])[^"']*\1\s*:""")


@dataclass(frozen=True)
class XfailEntry:
    """One key of an xfail/skip dict; ``dtypes`` canonical, ``None`` meaning all dtypes.

    ``span`` runs from the key's line to the value's last line (where a trailing comment
    sits); ``comment_span`` is the block of comment lines directly above the key, if any.
    ``raw`` is the value's source when it is not a literal the reader evaluates (then
    ``dtypes`` is ``()`` and the entry must be handled by a person).
    """

    list: str
    function: str
    key: str
    dtypes: tuple[str, ...] | None
    span: Span
    comment_span: Span | None
    raw: str | None = None


@dataclass(frozen=True)
class SetEntry:
    """One member of an UPPER_CASE set literal such as ``SUPPORTED_COMPLEX_OPS``."""

    list: str
    function: str
    key: str
    span: Span


@dataclass(frozen=True)
class DictDecl:
    """Where a list is declared: the whole assignment statement. ``kind``: dict or set."""

    list: str
    function: str
    span: Span
    kind: str = "dict"


@dataclass(frozen=True)
class CommonMps:
    """Everything read from one common_mps.py, in file order."""

    path: str
    entries: tuple[XfailEntry, ...]
    sets: tuple[SetEntry, ...]
    warnings: tuple[str, ...]
    dicts: tuple[DictDecl, ...] = ()
    unrecognised: tuple[Unrecognised, ...] = ()
    # why no xfail lists could be read (the file is missing; also in warnings)
    gaps: tuple[str, ...] = ()

    def for_key(self, key: str) -> tuple[XfailEntry, ...]:
        """Every xfail/skip entry for an OpInfo key (``name + variant_test_name``)."""
        return tuple(e for e in self.entries if e.key == key)

    def set_members(self, list_name: str) -> frozenset[str]:
        """Members of the named set(s), e.g. ``set_members("SUPPORTED_COMPLEX_OPS")``."""
        return frozenset(s.key for s in self.sets if s.list == list_name)

    def complex_supported(self, keys: Iterable[str]) -> bool | None:
        """Whether MPS is expected to pass complex dtypes for an OpInfo known by ``keys``
        (``name + variant_test_name``): listed in SUPPORTED_COMPLEX_OPS, or not listed in
        UNSUPPORTED_COMPLEX_OPS, whichever the file declares (both: both must agree).
        None when it declares neither (a file of another shape): unknown, never a guess."""
        declared = {d.list for d in self.dicts}  # `= {}` too: an empty list, as Python has it
        if not {COMPLEX_ALLOWED, COMPLEX_DENIED} & declared:
            return None
        keys = set(keys)
        if COMPLEX_ALLOWED in declared and not keys & self.set_members(COMPLEX_ALLOWED):
            return False
        return not keys & self.set_members(COMPLEX_DENIED)


class _Unknown(Exception):
    """A value is not in a form the reader evaluates."""


def _dtypes_of(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out: list[str] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                inner = _dtypes_of(elt.value)
                if inner is None:
                    raise _Unknown
                out.extend(inner)
            elif (
                isinstance(elt, ast.Attribute)
                and isinstance(elt.value, ast.Name)
                and elt.value.id == "torch"
                and elt.attr in TORCH_ALIASES
            ):
                out.append(TORCH_ALIASES[elt.attr])
            else:
                raise _Unknown
        return tuple(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _dtypes_of(node.left), _dtypes_of(node.right)
        if left is None or right is None:
            raise _Unknown
        return left + right
    raise _Unknown


def _is_xfail_shaped(node: ast.expr) -> bool:
    """A value that builds a dict/set the reader cannot list entry by entry."""
    if isinstance(node, (ast.DictComp, ast.SetComp)):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in ("dict", "set", "frozenset") and bool(node.args or node.keywords)
    if isinstance(node, ast.BinOp):
        return any(isinstance(n, (ast.Dict, ast.Set)) for n in ast.walk(node))
    return False


def _is_empty_ctor(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("dict", "set")
        and not node.args
        and not node.keywords
    ):
        return node.func.id
    return None


class _Reader:
    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.lines = text.splitlines()
        self.entries: list[XfailEntry] = []
        self.sets: list[SetEntry] = []
        self.dicts: list[DictDecl] = []
        self.unrecognised: list[Unrecognised] = []
        self.warnings: list[str] = []

    def span(self, node: ast.AST) -> Span:
        return Span(self.path, node.lineno, node.end_lineno or node.lineno)  # type: ignore[attr-defined]

    def source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def unrecognise(self, node: ast.AST, reason: str) -> None:
        span = self.span(node)
        self.unrecognised.append(Unrecognised(span, self.source(node), reason))
        self.warnings.append(f"{span}: {reason}")

    def walk(self, node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.walk(child, child.name)
            elif isinstance(child, (ast.Assign, ast.AnnAssign)):
                self.assignment(child, scope)
            elif isinstance(child, ast.AugAssign):
                if self.upper_target(child.target) and _is_literal(child.value):
                    self.unrecognise(child, "entries merged with an augmented assignment")
            elif isinstance(child, ast.Expr):
                self.expression(child)
            else:
                self.walk(child, scope)

    def upper_target(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and _UPPER.match(node.id):
            return node.id
        return None

    def expression(self, stmt: ast.Expr) -> None:
        call = stmt.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in ("update", "add", "setdefault")
            and self.upper_target(call.func.value)
            and any(_is_literal(a) for a in call.args)
        ):
            self.unrecognise(stmt, f"entries added by .{call.func.attr}() of a literal")

    def assignment(self, stmt: ast.Assign | ast.AnnAssign, scope: str) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        if value is None:
            return
        for target in targets:
            if isinstance(target, ast.Subscript) and self.upper_target(target.value):
                self.unrecognise(stmt, "entry added by item assignment")
                return
        names = [n for n in (self.upper_target(t) for t in targets) if n]
        if not names:
            return
        span = self.span(stmt)
        for name in names:
            if isinstance(value, ast.Dict):
                self.dicts.append(DictDecl(name, scope, span, "dict"))
                self.dict_entries(value, name, scope)
            elif isinstance(value, ast.Set):
                self.dicts.append(DictDecl(name, scope, span, "set"))
                self.set_entries(value, name, scope)
            elif kind := _is_empty_ctor(value):
                self.dicts.append(DictDecl(name, scope, span, kind))
            elif _is_xfail_shaped(value):
                self.unrecognise(stmt, f"{name} is built by an expression, not a literal")

    def dict_entries(self, node: ast.Dict, name: str, scope: str) -> None:
        seen: dict[str, int] = {}
        where = f"{name} in {scope or 'module scope'}"
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                self.unrecognise(value, f"**-unpacking inside {where}: entries not listed")
                continue
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                self.unrecognise(key, f"key in {where} is not a string literal")
                continue
            span = Span(self.path, key.lineno, value.end_lineno or value.lineno)
            if key.value in seen:
                self.warnings.append(
                    f"{span}: {key.value!r} appears again in {where} (first at line "
                    f"{seen[key.value]}); Python keeps the last one"
                )
            seen.setdefault(key.value, key.lineno)
            try:
                dtypes, raw = _dtypes_of(value), None
            except _Unknown:
                dtypes, raw = (), self.source(value)
                self.warnings.append(
                    f"{span}: value of {key.value!r} in {where} is not a literal dtype list "
                    f"({raw.splitlines()[0] if raw else '?'}); kept unevaluated, edit it by hand"
                )
            self.entries.append(
                XfailEntry(name, scope, key.value, dtypes, span, self.comments_above(key), raw)
            )

    def set_entries(self, node: ast.Set, name: str, scope: str) -> None:
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                self.sets.append(SetEntry(name, scope, elt.value, self.span(elt)))
            else:
                self.unrecognise(elt, f"member of {name} is not a string literal")

    def comments_above(self, key: ast.expr) -> Span | None:
        line = key.lineno
        # col_offset counts UTF-8 bytes
        if self.lines[line - 1].encode()[: key.col_offset].strip():
            return None
        start = None
        above = line - 1
        while above >= 1:
            stripped = self.lines[above - 1].strip()
            if not stripped.startswith("#") or is_disabled_entry(stripped):
                break
            start = above
            above -= 1
        return Span(self.path, start, line - 1) if start is not None else None


def is_disabled_entry(line: str) -> bool:
    """True for a commented-out entry line such as ``# "kthvalue": None,``.

    A disabled entry is not a comment about the entry below it.
    """
    return bool(_COMMENTED_ENTRY.match(line.strip()))


def _is_literal(node: ast.expr) -> bool:
    return isinstance(node, (ast.Dict, ast.Set, ast.DictComp, ast.SetComp))


def parse(text: str, path: str) -> CommonMps:
    """Read every xfail/skip dict and UPPER_CASE string set of a common_mps.py text."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ParseError(path, exc.lineno, f"not valid Python: {exc.msg}") from exc
    except ValueError as exc:  # e.g. NUL bytes
        raise ParseError(path, None, f"not valid Python: {exc}") from exc
    reader = _Reader(text, path)
    reader.walk(tree, "")
    return CommonMps(
        path=path,
        entries=tuple(reader.entries),
        sets=tuple(reader.sets),
        warnings=tuple(reader.warnings),
        dicts=tuple(reader.dicts),
        unrecognised=tuple(reader.unrecognised),
    )


def read(root: Path) -> CommonMps:
    """Read the tree's common_mps.py. A missing file gives an empty model with a gap (the
    xfail checks are then unknown); one that cannot be read is an input error."""
    rel = PATTERNS[0]
    path = root / rel
    if not path.exists() and not path.is_symlink():
        gap = f"{rel}: missing; no xfail lists were read"
        return CommonMps(rel, (), (), (gap,), gaps=(gap,))
    return parse(read_text(path, rel), rel)
