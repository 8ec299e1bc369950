"""Reader of the MPS expected failures and skips that live outside common_mps.py (issue 31).

pytorch#177747 removed an expected failure of test_ops (``test_python_ref__refs_clamp_max``
on MPS) that no common_mps.py list held. Two places hold such entries:

- the OpInfos of ``common_methods_invocations.py`` and ``opinfo/definitions/*.py``: a
  ``DecorateInfo(decorator, cls_name, test_name, device_type=..., dtypes=..., active_if=...)``
  in an OpInfo's ``skips=``/``decorators=`` reaches MPS when its ``device_type`` is
  ``"mps"``, or when it names no device and its ``active_if`` tests MPS or macOS
  (``IS_MACOS``, ``MACOS_VERSION``, ``TEST_MPS``);
- the test files: decorators such as ``@skipMPS`` and ``@expectedFailureMPS`` on a test
  method. One on an ``@ops(...)`` test covers every OpInfo that test runs; one on a plain
  test covers the operators its name spells (``test_clamp_max_mps``).

The files are read with :mod:`ast` (a 25,000-line ``common_methods_invocations.py`` parses
in a fraction of a second); edits go through libcst (:mod:`pipeline.edit.decorations`), which
finds an entry again by its line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import TypeVar

from pipeline.dtypes import TORCH_ALIASES
from pipeline.errors import ParseError
from pipeline.tree import parse_each, paths
from pipeline.tree.span import Span

# the OpInfo files, then the test files that instantiate OpInfo tests on MPS and test_mps.py
PATTERNS: tuple[str, ...] = paths.DECORATION_PATTERNS
TEST_FILES = paths.DECORATED_TESTS

# `active_if=` conditions that hold only on a Mac or with MPS
_MPS_CONDITION = re.compile(r"\b(?:IS_MACOS|MACOS_VERSION|TEST_MPS|IS_APPLE_M1|\w*MPS\w*)\b")
# test-file decorators that xfail or skip on MPS
_MPS_DECORATOR = re.compile(r"\A(?:skip\w*MPS\w*|expectedFailure\w*MPS\w*|xfail\w*MPS\w*)\Z")


class DecorationKind(str, Enum):
    """What a decoration does to the tests it reaches (a str, so JSON shows it)."""

    XFAIL = "xfail"
    SKIP = "skip"
    TOLERANCE = "tolerance"  # toleranceOverride / precisionOverride: the test still runs
    OTHER = "other"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, decorator: str) -> DecorationKind:
        """The kind of a decorator expression (``unittest.expectedFailure``, ``skipMPS``)."""
        name = decorator.split("(", 1)[0].rsplit(".", 1)[-1].lower()
        if "expectedfailure" in name or name.startswith("xfail"):
            return cls.XFAIL
        if "skip" in name:
            return cls.SKIP
        if "override" in name:
            return cls.TOLERANCE
        return cls.OTHER

    @property
    def expects_failure(self) -> bool:
        """An xfail or skip: what an audit counts as an xfail living outside common_mps.py."""
        return self in (DecorationKind.XFAIL, DecorationKind.SKIP)


class Place(str, Enum):
    """Where a decoration is written."""

    OPINFO = "opinfo"  # a DecorateInfo of an OpInfo
    TEST_FILE = "test_file"  # a decorator on a test method

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decoration:
    """One MPS xfail, skip or tolerance outside common_mps.py.

    ``key`` is the OpInfo's (name + variant, as common_mps.py keys it) for an OpInfo entry,
    ``""`` for a test-file one. ``test`` is ``Class.test`` with ``*`` for a part not named
    (``None``: every test). ``dtypes`` are canonical (``None``: every dtype); ``raw_dtypes``
    is the text when they are not a literal list of torch dtypes. ``all_ops``: a test-file
    decorator on an ``@ops`` test, which reaches every OpInfo that test runs.
    """

    place: Place
    kind: DecorationKind
    decorator: str
    key: str
    test: str | None
    dtypes: tuple[str, ...] | None
    span: Span
    device_type: str | None = None
    active_if: str | None = None
    raw_dtypes: str | None = None
    all_ops: bool = False
    # a PythonRefInfo's ``torch_opinfo_name`` (+ variant): the OpInfo whose operator it tests
    refers_to: str | None = None


@dataclass(frozen=True)
class DecorationFile:
    path: str
    decorations: tuple[Decoration, ...]


@dataclass(frozen=True)
class Decorations:
    """``warnings``: files that are not valid Python (skipped); ``gaps``: OpInfo files the
    tree does not have, so what they would hold is unknown."""

    files: tuple[DecorationFile, ...]
    warnings: tuple[str, ...] = ()
    gaps: tuple[str, ...] = ()

    @property
    def entries(self) -> tuple[Decoration, ...]:
        return tuple(d for f in self.files for d in f.decorations)

    def for_operator(self, op: str, keys: frozenset[str]) -> tuple[Decoration, ...]:
        """What reaches the operator: its OpInfos' entries (by ``keys``), and the test-file
        decorators on ``@ops`` tests or on tests whose name spells ``op`` (``_op_``)."""
        word = re.compile(rf"(?:^|_){re.escape(op)}(?:_|$)")
        return tuple(
            d
            for d in self.entries
            if (d.place is Place.OPINFO and (d.key in keys or d.refers_to in keys))
            or (d.place is Place.TEST_FILE and (d.all_ops or bool(word.search(d.test or ""))))
        )


def _text(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _dtypes(node: ast.AST | None) -> tuple[tuple[str, ...] | None, str | None]:
    """(canonical dtypes, None) of a literal ``(torch.float32, torch.cfloat)``, else
    (None, the text) for anything else; (None, None) without the argument."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return None, None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        names = [_text(e).removeprefix("torch.") for e in node.elts]
        if all(n in TORCH_ALIASES for n in names):
            return tuple(dict.fromkeys(TORCH_ALIASES[n] for n in names)), None
    return None, _text(node)


def callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


@dataclass(frozen=True)
class _InfoCall:
    """The arguments of an ``...Info('name', ...)`` call the key is made of (the name is its
    first argument, else ``name=``; a PythonRefInfo names the OpInfo it refers to)."""

    name: ast.expr | None = None
    variant_test_name: ast.expr | None = None
    torch_opinfo_name: ast.expr | None = None
    torch_opinfo_variant_name: ast.expr | None = None


@dataclass(frozen=True)
class _DecorateInfoCall:
    """A ``DecorateInfo(decorators, cls_name, test_name, device_type=, dtypes=,
    active_if=)`` call's arguments, bound as Python binds them (``dtypes`` may come fifth)."""

    decorators: ast.expr | None = None
    cls_name: ast.expr | None = None
    test_name: ast.expr | None = None
    device_type: ast.expr | None = None
    dtypes: ast.expr | None = None
    active_if: ast.expr | None = None


_INFO_POSITIONAL = ("name",)
_DECORATE_INFO_POSITIONAL = ("decorators", "cls_name", "test_name", "", "dtypes")
C = TypeVar("C", _InfoCall, _DecorateInfoCall)


def _bound(kind: type[C], call: ast.Call, positional: tuple[str, ...]) -> C:
    """``call``'s arguments ``kind`` models, by parameter name: its keywords, and its
    positional arguments in ``positional``'s order ("" for one not read)."""
    known = {f.name for f in fields(kind)}
    found = {k.arg: k.value for k in call.keywords if k.arg in known}
    for name, value in zip(positional, call.args, strict=False):
        if name:
            found.setdefault(name, value)
    return kind(**found)


def _opinfo_key(call: ast.Call) -> tuple[str, str | None] | None:
    """``name + variant_test_name`` of an ``...Info('name', ..., variant_test_name=...)``, and
    for a PythonRefInfo the key of the OpInfo it refers to (``torch_opinfo_name``)."""
    info = _bound(_InfoCall, call, _INFO_POSITIONAL)
    name = _string(info.name)
    if name is None:
        return None
    refers = _string(info.torch_opinfo_name)
    if refers is not None:
        refers += _string(info.torch_opinfo_variant_name) or ""
    return name + (_string(info.variant_test_name) or ""), refers


def _decorate_info(call: ast.Call, owner: tuple[str, str | None], path: str) -> Decoration | None:
    """The Decoration of one ``DecorateInfo(...)`` call when it reaches MPS, else None."""
    info = _bound(_DecorateInfoCall, call, _DECORATE_INFO_POSITIONAL)
    device = _string(info.device_type)
    active_text = _text(info.active_if) if info.active_if is not None else None
    mps_condition = bool(active_text and _MPS_CONDITION.search(active_text))
    if not (device == "mps" or (device is None and mps_condition)):
        return None
    decorator = _text(info.decorators or ast.Constant(""))
    cls_name, test_name = _string(info.cls_name), _string(info.test_name)
    test = f"{cls_name or '*'}.{test_name or '*'}" if cls_name or test_name else None
    dtypes, raw = _dtypes(info.dtypes)
    end = call.end_lineno or call.lineno
    return Decoration(
        Place.OPINFO, DecorationKind.parse(decorator), decorator, owner[0], test, dtypes,
        Span(path, call.lineno, end), device, active_text, raw, refers_to=owner[1],
    )  # fmt: skip


def _opinfo_decorations(tree: ast.AST, path: str) -> list[Decoration]:
    found: list[Decoration] = []

    def visit(node: ast.AST, owner: tuple[str, str | None] | None) -> None:
        if isinstance(node, ast.Call):
            name = callee(node)
            if name == "DecorateInfo":
                if owner is not None and (d := _decorate_info(node, owner, path)):
                    found.append(d)
                return
            if name.endswith("Info") and (own := _opinfo_key(node)) is not None:
                owner = own
        for child in ast.iter_child_nodes(node):
            visit(child, owner)

    visit(tree, None)
    return found


def _test_decorations(tree: ast.AST, path: str) -> list[Decoration]:
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = {
                callee(d) if isinstance(d, ast.Call) else _text(d).rsplit(".", 1)[-1]: d
                for d in fn.decorator_list
            }
            dtype_arg = names.get("dtypes")
            dtypes = None
            raw = None
            if isinstance(dtype_arg, ast.Call) and dtype_arg.args:
                dtypes, raw = _dtypes(ast.Tuple(elts=list(dtype_arg.args)))
            for name, d in names.items():
                if not _MPS_DECORATOR.match(name):
                    continue
                found.append(
                    Decoration(
                        Place.TEST_FILE, DecorationKind.parse(name), _text(d), "",
                        f"{cls.name}.{fn.name}", dtypes,
                        Span(path, d.lineno, d.end_lineno or d.lineno), "mps", None, raw,
                        all_ops="ops" in names,
                    )
                )  # fmt: skip
    return found


def parse(text: str, path: str) -> DecorationFile:
    """The MPS decorations of one file: DecorateInfos in OpInfo files, decorators in tests."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ParseError(path, exc.lineno, f"not valid Python: {exc.msg}") from None
    return from_tree(tree, path)


def from_tree(tree: ast.AST, path: str) -> DecorationFile:
    """:func:`parse` of an already parsed file (an editor parses it once for both uses)."""
    if path.startswith("test/"):
        return DecorationFile(path, tuple(_test_decorations(tree, path)))
    return DecorationFile(path, tuple(_opinfo_decorations(tree, path)))


def _parse_or_warning(text: str, path: str) -> tuple[DecorationFile, str]:
    """:func:`parse`, or an empty file and the warning saying why (module-level, so that
    :func:`pipeline.tree.parse_each` keeps its result for an unchanged text)."""
    try:
        return parse(text, path), ""
    except ParseError as exc:
        return DecorationFile(path, ()), f"{exc} (skipped)"


def read(root: Path) -> Decorations:
    """Every file of ``PATTERNS`` under ``root``; a missing test file is no gap (a wheel
    ships none), a missing OpInfo file is; one that is not valid Python is a warning."""
    found, gaps = parse_each(root, PATTERNS, _parse_or_warning)
    gaps = [g for g in gaps if not any(t in g for t in TEST_FILES)]
    files = tuple(f for f, _ in found)
    return Decorations(files, tuple(w for _, w in found if w), tuple(gaps))
