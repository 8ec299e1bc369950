"""A light scan of C-family sources (.metal, .h, .mm) for impact analysis.

The readers in ``pipeline.tree`` find functors, registrations and stubs; deciding what a
change to *other* code reaches needs a coarser view: which lines are code at all (a
comment edit affects nothing), the top-level definitions and the names each one defines
and mentions (a helper reaches every definition that names it), and the ``#include``s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.tree import cpp
from pipeline.tree.includes import INCLUDE_LINE

_IDENT = re.compile(r"[A-Za-z_]\w*")
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)")
_MACRO_CALL = re.compile(r"^\s*[A-Z_][A-Z0-9_]*\s*\(")
_TEMPLATE_PREFIX = re.compile(r"^\s*template\s*<")
_STRUCT = re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+([A-Za-z_]\w*)")
_ASSIGNED = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*=")
_USING_ALIAS = re.compile(r"^\s*using\s+([A-Za-z_]\w*)\s*=")
_NAMESPACE = re.compile(r"^\s*(?:inline\s+)?namespace\b[^{]*$|^\s*extern\s+\"C\"\s*$")
_KERNEL = re.compile(r"\bkernel\b")
# words that are never the name of what a declaration defines
_KEYWORD_LIST = (
    "if for while switch return sizeof alignof decltype static_assert operator template"
    " typename constexpr const inline static kernel device constant thread threadgroup"
    " void auto using namespace struct class"
)
_KEYWORDS = frozenset(_KEYWORD_LIST.split())


def code_lines(text: str, path: str = "<text>") -> list[str]:
    """Each line of ``text`` with comments blanked (the ``code`` layer of :func:`cpp.lex`).

    Index 0 is line 1; offsets are kept, so spans found on the result are spans in the
    original. Literals stay: a line inside one, such as a shader in a multi-line raw string,
    is code. Raises ParseError (naming ``path``) on an unterminated comment or literal.
    """
    return cpp.lex(text, path).code.split("\n")


def is_code(lines: list[str], start: int, end: int) -> bool:
    """True if any of lines ``start..end`` (1-based) holds code, not just comments/blanks."""
    return any(lines[i - 1].strip() for i in range(max(start, 1), min(end, len(lines)) + 1))


def include_matches(target: str, header: str) -> bool:
    """Whether an include target (``c10/metal/utils.h``, ``"Pooling.h"``) can name ``header``.

    Matching is by path suffix, so an ambiguous short name matches every candidate: when
    in doubt an include counts, which errs towards testing more.
    """
    return header == target or header.endswith("/" + target)


@dataclass(frozen=True)
class Unit:
    """A top-level construct: a definition, a declaration, a macro call or a preprocessor
    directive, with its 1-based inclusive line range."""

    start: int
    end: int
    kind: str  # "define" | "directive" | "kernel" | "definition" | "statement"
    defines: frozenset[str]
    mentions: frozenset[str]


def _definition_name(header: str) -> str | None:
    """The name a braced definition's header introduces (``struct X``, ``T f(...)``)."""
    text = header
    if _TEMPLATE_PREFIX.match(text):
        depth, i = 0, text.index("<")
        while i < len(text):
            depth += {"<": 1, ">": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        text = text[i:]
    text = re.sub(r"\[\[.*?\]\]", " ", text)
    if struct := _STRUCT.search(text.split("(")[0]):
        return struct.group(1)
    if "(" in text:
        before = text[: text.index("(")]
        names = [w for w in _IDENT.findall(before) if w not in _KEYWORDS]
        return names[-1] if names else None
    return None


def _statement_names(text: str) -> set[str]:
    """Names a ``;``-terminated top-level declaration introduces (constants, aliases)."""
    if _MACRO_CALL.match(text) or re.match(r"^\s*template\s*\[\[", text):
        return set()  # a macro call or an explicit instantiation defines nothing new
    if alias := _USING_ALIAS.match(text):
        return {alias.group(1)}
    if re.match(r"^\s*using\b", text):
        return set()
    if re.match(r"^\s*typedef\b", text):
        words = _IDENT.findall(text)
        return {words[-1]} if words else set()
    if struct := _STRUCT.search(text.split("=")[0]):
        return {struct.group(1)}
    head = text.split("{")[0]
    if (assigned := _ASSIGNED.search(head)) and "(" not in head[: assigned.start()]:
        return {assigned.group(1)}
    if "(" in head:
        name = _definition_name(head)
        return {name} if name else set()
    return set()


def units(text: str, path: str = "<text>") -> tuple[Unit, ...]:
    """Split a C-family file into top-level units.

    Namespace blocks are transparent (their contents are top level). A macro call on its
    own line ends at its closing parenthesis even without a ``;``, as real files write
    ``REGISTER_DISPATCH(...)`` both ways. Raises ParseError (naming ``path``) on an
    unterminated comment or literal.
    """
    # comments and literal contents blanked: braces and words in them are neither
    # structure nor names
    lines = cpp.lex(text, path).plain.split("\n")
    result: list[Unit] = []
    transparent = 0  # open namespace braces
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or stripped == ";":
            i += 1
        elif stripped.startswith("}") and transparent:
            transparent -= 1
            lines[i] = lines[i].replace("}", " ", 1)
        elif stripped.startswith("#"):
            first = i
            while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
            result.append(_directive(lines, first, i))
            i += 1
        else:
            end, opens_namespace = _unit_end(lines, i)
            if opens_namespace is not None:
                transparent += 1
                # drop the namespace header and its brace; the body is scanned as top level
                for j in range(i, opens_namespace[0]):
                    lines[j] = ""
                row, col = opens_namespace
                lines[row] = " " * (col + 1) + lines[row][col + 1 :]
                continue
            result.append(_unit(lines, i, end))
            i = end + 1
    return tuple(result)


def _directive(lines: list[str], first: int, last: int) -> Unit:
    body = "\n".join(lines[first : last + 1])
    define = _DEFINE.match(lines[first])
    defines = frozenset({define.group(1)}) if define else frozenset()
    names = frozenset(_IDENT.findall(body))
    mentions = frozenset() if INCLUDE_LINE.match(body) else names - defines
    return Unit(first + 1, last + 1, "define" if define else "directive", defines, mentions)


def _unit_end(lines: list[str], first: int) -> tuple[int, tuple[int, int] | None]:
    """Index of the last line of the unit starting at ``first``, or the position of the
    opening brace when the unit is a namespace header."""
    depth = paren = 0
    header: list[str] = []
    for row in range(first, len(lines)):
        line = lines[row]
        for col, ch in enumerate(line):
            if ch == "{":
                if depth == 0 and paren == 0:
                    head = " ".join(" ".join([*header, line[:col]]).split())
                    if _NAMESPACE.match(head):
                        return row, (row, col)
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and paren == 0 and _next_char(lines, row, col + 1) != ";":
                    return row, None
            elif ch == "(":
                paren += 1
            elif ch == ")":
                paren -= 1
            elif ch == ";" and depth == 0 and paren == 0:
                return row, None
        header.append(line)
        if depth == 0 and paren == 0:
            body = "\n".join(lines[first : row + 1])
            if (
                _MACRO_CALL.match(body)
                and body.rstrip().endswith(")")
                and not _continues(lines, row + 1)
            ):
                return row, None
    return len(lines) - 1, None


def _next_char(lines: list[str], row: int, col: int) -> str:
    rest = lines[row][col:].strip()
    if rest:
        return rest[0]
    for line in lines[row + 1 :]:
        if line.strip():
            return line.strip()[0]
    return ""


def _unit(lines: list[str], first: int, last: int) -> Unit:
    body = "\n".join(lines[first : last + 1])
    if "{" in body and not _MACRO_CALL.match(body):
        header = body.split("{", 1)[0]
        if "=" in header.split("(")[0]:
            # `constant int table[] = {...};` is data, not a function body
            defines = _statement_names(body)
            kind = "definition"
        else:
            name = _definition_name(header)
            defines = {name} if name else set()
            kind = "kernel" if _KERNEL.search(header) and "(" in header else "definition"
    else:
        defines = _statement_names(body)
        kind = "definition" if defines else "statement"
    mentions = frozenset(_IDENT.findall(body)) - frozenset(defines)
    return Unit(first + 1, last + 1, kind, frozenset(defines), mentions)


def _continues(lines: list[str], index: int) -> bool:
    """Whether the next code line continues the current construct: ``{``, ``;``, ``:``, or
    ``(`` (``TORCH_IMPL_FUNC(x)`` with its parameters on the next line)."""
    for line in lines[index:]:
        stripped = line.strip()
        if stripped:
            return stripped[0] in "{;:,.()" or stripped.startswith("->")
    return False
