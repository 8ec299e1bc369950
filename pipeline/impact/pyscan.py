"""Python sources for impact analysis: which lines are code, and where OpInfos are defined.

OpInfo definition files are read with :mod:`ast` (exact line ranges of every
``OpInfo('name', ...)``-style constructor call and of every top-level definition, and the
names each one mentions), so a change to a sample-inputs function reaches exactly the
OpInfos that use it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field

# constructor calls named *Info that do not define an operator
_NOT_OPINFO = frozenset({"DecorateInfo", "SkipInfo", "ErrorInputs"})
_NON_CODE = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
)


def code_line_numbers(text: str) -> frozenset[int]:
    """1-based numbers of lines holding Python code (not only comments or blanks).

    A line inside a multi-line string or bracket counts; when the text does not tokenize
    every non-blank line counts, which errs towards testing more.
    """
    lines: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _NON_CODE or tok.type == tokenize.ENDMARKER:
                continue
            lines.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return frozenset(i for i, line in enumerate(text.splitlines(), 1) if line.strip())
    return frozenset(lines)


@dataclass(frozen=True)
class InfoCall:
    """An ``OpInfo(...)``/``UnaryUfuncInfo(...)``/... constructor call with a literal name."""

    name: str
    variant: str | None  # None: not a literal, so any variant of ``name``
    start: int
    end: int
    node: ast.AST = field(compare=False, repr=False)


@dataclass(frozen=True)
class TopDef:
    """A module-level statement (function, class, assignment...) and the names it binds."""

    names: frozenset[str]
    start: int
    end: int
    node: ast.AST = field(compare=False, repr=False)


@dataclass(frozen=True)
class OpInfoSource:
    calls: tuple[InfoCall, ...]
    defs: tuple[TopDef, ...]
    code: frozenset[int]  # lines holding code (comment-only and blank lines excluded)


def _callee(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _mentions(node: ast.AST) -> frozenset[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
    return frozenset(names)


def _info_call(node: ast.Call) -> InfoCall | None:
    callee = _callee(node)
    if not callee or not callee.endswith("Info") or callee in _NOT_OPINFO:
        return None
    keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg}
    name = _literal(node.args[0]) if node.args else None
    name = name or _literal(keywords.get("name"))
    if name is None:
        return None
    variant = _literal(keywords.get("variant_test_name"))
    if "variant_test_name" not in keywords:
        variant = ""
    return InfoCall(name, variant, node.lineno, node.end_lineno or node.lineno, node)


def _bound_names(node: ast.stmt) -> frozenset[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return frozenset({node.name})
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    names = set()
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return frozenset(names)


def scan_opinfo_source(text: str) -> OpInfoSource | None:
    """Every OpInfo constructor call and top-level definition; None if ``text`` is not
    valid Python (the caller then falls back to a full sweep)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    calls = []
    # lines inside multi-line strings are code even when they start with '#'
    code = {
        i for i, line in enumerate(text.splitlines(), 1) if line.strip() and line.lstrip()[0] != "#"
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (call := _info_call(node)):
            calls.append(call)
        elif isinstance(node, (ast.Constant, ast.JoinedStr)) and node.end_lineno != node.lineno:
            code.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    defs = []
    for stmt in tree.body:
        decorators = getattr(stmt, "decorator_list", [])
        start = min([stmt.lineno, *(d.lineno for d in decorators)])
        defs.append(TopDef(_bound_names(stmt), start, stmt.end_lineno or stmt.lineno, stmt))
    return OpInfoSource(tuple(calls), tuple(defs), frozenset(code))


def innermost_call(source: OpInfoSource, line: int) -> InfoCall | None:
    """The innermost OpInfo constructor call whose source spans ``line``."""
    best: InfoCall | None = None
    for call in source.calls:
        if call.start <= line <= call.end and (
            best is None or call.end - call.start < best.end - best.start
        ):
            best = call
    return best


def enclosing_def(source: OpInfoSource, line: int) -> TopDef | None:
    for top in source.defs:
        if top.start <= line <= top.end:
            return top
    return None


def users(source: OpInfoSource, top: TopDef) -> tuple[InfoCall, ...]:
    """The OpInfo calls that reach ``top`` through names, directly or via other definitions
    (``sample_inputs_func=partial(sample_inputs_foo, ...)`` -> ``sample_inputs_foo``)."""
    mentions = {id(d): _mentions(d.node) - d.names for d in source.defs if d.names}
    names = set(top.names)
    frontier = set(top.names)
    seen = {id(top)}
    while frontier:
        reached = [
            d for d in source.defs if id(d) not in seen and d.names and mentions[id(d)] & frontier
        ]
        frontier = set()
        for d in reached:
            seen.add(id(d))
            new = d.names - names
            names |= new
            frontier |= new
    return tuple(call for call in source.calls if _mentions(call.node) & names)
