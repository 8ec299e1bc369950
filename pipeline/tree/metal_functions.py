"""Namespace-scope function definitions of a Metal file or header, with a comparable shape.

The review's "helper written anew" check compares the functions a change adds to a
``.metal`` file with those ``c10/metal/*.h`` already provides (``utils.h``,
``special_math.h``...): by name, or by signature and body shape. A body's *shape* is its
token sequence with identifiers and numbers replaced by placeholders (keywords and
punctuation kept), so a copy with renamed parameters still matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.errors import ParseError
from pipeline.tree.cpp import lex, scan
from pipeline.tree.span import Span

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|::|->|&&|\|\||[<>=!]=|\S")
_KEYWORDS = frozenset({
    "return", "if", "else", "for", "while", "do", "const", "constexpr", "static_cast",
    "reinterpret_cast", "auto", "bool", "float", "half", "bfloat", "int", "long", "short",
    "char", "uchar", "void", "true", "false", "thread", "device", "constant", "template",
    "typename", "inline", "static", "struct", "using",
})  # fmt: skip
_NAME_BEFORE = re.compile(r"(~?[A-Za-z_]\w*)\s*\Z")


@dataclass(frozen=True)
class Function:
    name: str
    params: int  # how many parameters it takes
    shape: tuple[str, ...]  # the body's tokens, names and numbers as placeholders
    span: Span
    namespace: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        return "::".join((*self.namespace, self.name))


def shape(code: str) -> tuple[str, ...]:
    """``code``'s tokens with identifiers as ``$`` and numbers as ``0`` (keywords kept)."""
    out = []
    for token in _TOKEN.findall(code):
        if token[0].isdigit():
            out.append("0")
        elif token[0].isalpha() or token[0] == "_":
            out.append(token if token in _KEYWORDS else "$")
        else:
            out.append(token)
    return tuple(out)


def _signature(header: str) -> tuple[str, str] | None:
    """(name, parameter list) of a function header ``... NAME(PARAMS) [const]``, or None."""
    text = header.rstrip()
    text = re.sub(r"\s*\bconst\s*\Z", "", text)
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            name = _NAME_BEFORE.search(text[:i])
            if not name or name.group(1) in _KEYWORDS or re.search(r"\bstruct\b", text[:i]):
                return None
            return name.group(1), text[i + 1 : -1]
    return None


def functions(text: str, path: str) -> tuple[Function, ...]:
    """Every function defined at namespace scope in ``text`` (structs and macros are not)."""
    try:
        source = lex(text, path)
        items, _ = scan(source)
    except ParseError:
        return ()
    found = []
    for item in items:
        if item.kind != "block" or item.body is None:
            continue
        signature = _signature(source.masked[item.start : item.body[0]])
        if signature is None:
            continue
        name, params = signature
        count = 0 if not params.strip() or params.strip() == "void" else params.count(",") + 1
        # commas inside template arguments of a parameter type are rare in Metal helpers
        body = source.plain[item.body[0] + 1 : item.body[1]]
        found.append(
            Function(name, count, shape(body), source.span(item.start, item.end), item.namespace)
        )
    return tuple(found)


def helpers(headers: Mapping[str, str]) -> tuple[Function, ...]:
    """The functions of ``c10/metal`` headers (path -> text): what a kernel should reuse."""
    return tuple(f for path, text in sorted(headers.items()) for f in functions(text, path))


def by_name(found: Iterable[Function]) -> dict[str, list[Function]]:
    out: dict[str, list[Function]] = {}
    for f in found:
        out.setdefault(f.name, []).append(f)
    return out
