"""The C-family lexing, preprocessing and scanning shared by the ``.metal`` and ``.mm`` readers
and editors (:mod:`pipeline.tree.metal`, :mod:`pipeline.tree.objc`, :mod:`pipeline.edit`).

A lexer that blanks comments, literals and directives while keeping offsets, a subset of
the C preprocessor (object- and function-like macros, ``#``, ``##``, ``__VA_ARGS__``) and a
scanner of namespace-scope declarations. It is not a reader itself: no file patterns, no
``parse``/``read``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipeline.errors import ParseError
from pipeline.tree.span import Span

# --------------------------------------------------------------------------------------
# Lexing: blank what is not code, keep every offset and newline where it was.
# --------------------------------------------------------------------------------------

_NOT_NEWLINE = re.compile(r"[^\n]+")
_LINE_COMMENT = re.compile(r"//(?:[^\\\n]|\\[\s\S])*")
_STRING = re.compile(r'"(?:[^"\\\n]|\\[\s\S])*"')
_CHAR = re.compile(r"'(?:[^'\\\n]|\\[\s\S])*'")
_RAW_OPEN = re.compile(r'(?<![\w])(?:u8|[uUL])?R"([^\s()\\"]{0,16})\(')
# Everything that changes lexical state; in a directive an unescaped newline also does.
_CODE_EVENT = re.compile(r'//|/\*|(?<![\w])(?:u8|[uUL])?R"|"|\'|^[ \t]*#', re.M)
_DIRECTIVE_EVENT = re.compile(r"//|/\*|\"|'|(?<!\\)(?<!\\\r)\n")
_CONTINUATION = re.compile(r"\\\r?\n")


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where ``pattern`` ends when matched at ``pos``, for a pattern that cannot fail there."""
    m = pattern.match(text, pos)
    if m is None:
        raise AssertionError(f"{pattern.pattern!r} does not match at offset {pos}")
    return m.end()


def blank(text: str) -> str:
    """``text`` with every character but newlines replaced by a space."""
    return _NOT_NEWLINE.sub(lambda m: " " * len(m.group()), text)


@dataclass(frozen=True)
class Directive:
    """One preprocessor directive, continuation lines joined and comments removed."""

    start: int  # offset of the line holding the '#'
    end: int  # offset just past the directive (before its final newline)
    line: int
    end_line: int
    text: str  # "#define X(a) a + 1" — one line


@dataclass(frozen=True)
class CppText:
    """A C-family file in four aligned layers (same length, same line breaks).

    ``code`` has comments blanked; ``plain`` additionally blanks the contents of string and
    character literals (quotes stay); ``masked`` additionally blanks whole directives, so
    braces and parentheses in it are exactly the compiler's.
    """

    path: str
    text: str
    code: str
    plain: str
    masked: str
    directives: tuple[Directive, ...]
    line_starts: tuple[int, ...]

    def line_of(self, offset: int) -> int:
        """1-based line number of ``offset``."""
        return bisect.bisect_right(self.line_starts, offset)

    def span(self, start: int, end: int) -> Span:
        """Span of the half-open offset range ``[start, end)``."""
        return Span(self.path, self.line_of(start), self.line_of(max(start, end - 1)))


@dataclass
class _Lexer:
    """The layers of one file as :func:`lex` builds them, one lexical event at a time: each
    event's method appends the span it consumed to ``code`` and ``plain`` and returns its end."""

    text: str
    path: str
    line_starts: tuple[int, ...]
    code: list[str] = field(default_factory=list)
    plain: list[str] = field(default_factory=list)
    directives: list[tuple[int, int]] = field(default_factory=list)
    directive_start: int | None = None  # inside a directive: where its line starts

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)

    def keep(self, code: str, plain: str | None = None) -> None:
        self.code.append(code)
        self.plain.append(code if plain is None else plain)

    def event(self, m: re.Match[str]) -> int:
        start, token = m.start(), m.group()
        if token == "//":
            return self.line_comment(start)
        if token == "/*":
            return self.block_comment(start)
        if token.endswith('R"'):
            return self.raw_string(start)
        if token == '"':
            return self.string(start)
        if token == "'":
            return self.char(start)
        if token == "\n" and self.directive_start is not None:
            return self.end_directive(self.directive_start, start)
        # '#' opening a directive, possibly after indentation
        self.directive_start = start
        self.keep(token)
        return m.end()

    def line_comment(self, start: int) -> int:
        end = _end_of(_LINE_COMMENT, self.text, start)
        self.keep(blank(self.text[start:end]))
        return end

    def block_comment(self, start: int) -> int:
        close = self.text.find("*/", start + 2)
        if close < 0:
            raise ParseError(self.path, self.line(start), "unterminated /* comment")
        end = close + 2
        self.keep(blank(self.text[start:end]))
        return end

    def raw_string(self, start: int) -> int:
        text = self.text
        raw = _RAW_OPEN.match(text, start)
        if raw is None:
            raise ParseError(self.path, self.line(start), "malformed raw string literal")
        close = text.find(f'){raw.group(1)}"', raw.end())
        if close < 0:
            raise ParseError(self.path, self.line(start), "unterminated raw string literal")
        end = close + len(raw.group(1)) + 2
        inner = blank(text[raw.end() - 1 : end - 1])
        self.keep(text[start:end], blank(text[start : raw.end() - 1]) + inner + '"')
        return end

    def string(self, start: int) -> int:
        lit = _STRING.match(self.text, start)
        if lit is None:
            if self.directive_start is not None:  # `#error don"t` is the directive's business
                self.keep('"', " ")
                return start + 1
            raise ParseError(self.path, self.line(start), "unterminated string literal")
        end = lit.end()
        self.keep(self.text[start:end], '"' + blank(self.text[start + 1 : end - 1]) + '"')
        return end

    def char(self, start: int) -> int:
        end = _char_literal_end(self.text, start)
        inner = self.text[start + 1 : end - 1]
        self.keep(self.text[start:end], "'" + blank(inner) + "'" if end - start > 1 else " ")
        return end

    def end_directive(self, directive_start: int, start: int) -> int:
        self.directives.append((directive_start, start))
        self.directive_start = None
        self.keep("\n")
        return start + 1


def lex(text: str, path: str) -> CppText:
    """Split ``text`` into aligned layers; raise ParseError on unterminated comments/strings."""
    line_starts = (0, *(m.end() for m in re.finditer("\n", text)))
    lexer = _Lexer(text, path, line_starts)
    pos = 0
    while pos < len(text):
        pattern = _CODE_EVENT if lexer.directive_start is None else _DIRECTIVE_EVENT
        m = pattern.search(text, pos)
        if m is None:
            break
        lexer.keep(text[pos : m.start()])
        pos = lexer.event(m)
    lexer.keep(text[pos:])
    if lexer.directive_start is not None:
        lexer.directives.append((lexer.directive_start, len(text)))
    code_text = "".join(lexer.code)
    plain_text = "".join(lexer.plain)
    masked: list[str] = []
    pos = 0
    for s, e in lexer.directives:
        masked += [plain_text[pos:s], blank(plain_text[s:e])]
        pos = e
    masked.append(plain_text[pos:])
    dirs = tuple(
        Directive(
            s,
            e,
            lexer.line(s),
            lexer.line(max(s, e - 1)),
            " ".join(_CONTINUATION.sub(" ", code_text[s:e]).split()),
        )
        for s, e in lexer.directives
    )
    return CppText(path, text, code_text, plain_text, "".join(masked), dirs, line_starts)


def _char_literal_end(text: str, start: int) -> int:
    """End of the character literal at ``start``; a C++14 digit separator is one char."""
    back = start
    while back > 0 and (text[back - 1].isalnum() or text[back - 1] in "_."):
        back -= 1
    if back < start and text[back].isdigit():  # 1'000'000
        return start + 1
    lit = _CHAR.match(text, start)
    # An unterminated quote (prose in `#if 0`, an apostrophe in `#error`) is not fatal.
    return lit.end() if lit else start + 1


def match_close(masked: str, open_pos: int, path: str, source: CppText | None = None) -> int:
    """Offset of the bracket closing the one at ``open_pos`` in masked text (``({[``)."""
    opener = masked[open_pos]
    closer = {"(": ")", "{": "}", "[": "]"}[opener]
    depth = 0
    for m in _BRACKETS[opener].finditer(masked, open_pos):
        depth += 1 if m.group() == opener else -1
        if depth == 0:
            return m.start()
    line = source.line_of(open_pos) if source else None
    raise ParseError(path, line, f"unbalanced {opener!r}: no matching {closer!r}")


_BRACKETS = {"(": re.compile(r"[()]"), "{": re.compile(r"[{}]"), "[": re.compile(r"[\[\]]")}


def split_args(text: str, *, templates: bool = False) -> list[str]:
    """Split a (masked or code) argument list on top-level commas; strip each.

    ``templates``: also keep template arguments together (``std::array<bool, 3>``), right
    in a parameter list, wrong in a macro call where ``<`` may be an operator.
    """
    opening, closing = ("([{<", ")]}>") if templates else ("([{", ")]}")
    args: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    args.append(text[start:].strip())
    return args


# --------------------------------------------------------------------------------------
# A subset of the C preprocessor: enough for the registration and stub wrapper macros.
# --------------------------------------------------------------------------------------


class MacroError(Exception):
    """A macro could not be expanded (wrong argument count, runaway recursion...)."""


_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      |(?P<str>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      |(?P<ident>[A-Za-z_]\w*)
      |(?P<num>\.?\d(?:[eEpP][+-]|'(?=\w)|[\w.])*)
      |(?P<paste>\#\#)
      |(?P<hash>\#)
      |(?P<punct>.)""",
    re.S | re.X,
)

Token = tuple[str, str]  # (kind, text)
_SPACE: Token = ("ws", " ")
_PLACEMARKER: Token = ("placemarker", "")


def tokenize(text: str) -> list[Token]:
    """Preprocessing tokens of ``text``; runs of whitespace become one space token."""
    return [
        # every alternative of _TOKEN is a named group, so lastgroup is never None
        _SPACE if m.lastgroup == "ws" else (m.lastgroup or "punct", m.group())
        for m in _TOKEN.finditer(text)
    ]


def detokenize(tokens: Iterable[Token]) -> str:
    """The text of ``tokens``, concatenated."""
    return "".join(t for _, t in tokens)


@dataclass(frozen=True)
class Macro:
    """A ``#define``: ``params`` is None for an object-like macro."""

    name: str
    params: tuple[str, ...] | None
    body: tuple[Token, ...]
    line: int = 0


_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\(([^)]*)\))?\s?(.*)\Z", re.S)


def parse_define(text: str, line: int = 0) -> Macro | None:
    """The macro of a one-line ``#define`` directive text, or None if it is not one."""
    m = _DEFINE.match(text)
    if m is None:
        return None
    params = None
    if m.group(2) is not None:
        params = tuple(p.strip() for p in m.group(3).split(",")) if m.group(3).strip() else ()
        params = tuple("__VA_ARGS__" if p == "..." else p for p in params)
    body = tuple(_strip_ws(tokenize(m.group(4))))
    return Macro(m.group(1), params, body, line)


def _strip_ws(tokens: list[Token]) -> list[Token]:
    while tokens and tokens[0][0] == "ws":
        tokens = tokens[1:]
    while tokens and tokens[-1][0] == "ws":
        tokens = tokens[:-1]
    return tokens


class MacroScope:
    """The ``#define``s in effect at each point of a file, walked forward in file order.

    Starts from ``base`` (fallback definitions); ``terminals`` are never defined, so calls
    of them survive expansion (the core macros a reader looks for).
    """

    def __init__(
        self,
        source: CppText,
        base: Mapping[str, Macro] | None = None,
        terminals: Iterable[str] = (),
    ) -> None:
        self._source = source
        self._next = 0
        self._terminals = frozenset(terminals)
        self._local: set[str] = set()
        self.macros: dict[str, Macro] = {
            k: v for k, v in (base or {}).items() if k not in self._terminals
        }
        self.warnings: list[str] = []

    def at(self, offset: int) -> dict[str, Macro]:
        """Macros defined by the directives before ``offset`` (call in increasing order)."""
        directives = self._source.directives
        while self._next < len(directives) and directives[self._next].start < offset:
            self._apply(directives[self._next])
            self._next += 1
        return self.macros

    def _apply(self, d: Directive) -> None:
        undef = re.match(r"#\s*undef\s+(\w+)", d.text)
        if undef:
            self.macros.pop(undef.group(1), None)
            self._local.discard(undef.group(1))
            return
        macro = parse_define(d.text, d.line)
        if macro is None or macro.name in self._terminals:
            return
        old = self.macros.get(macro.name)
        if macro.name in self._local and old is not None and old.body != macro.body:
            self.warnings.append(
                f"{self._source.path}:{d.line}: #define {macro.name} redefines line "
                f"{old.line} without #undef; the later one is used from here on"
            )
        self.macros[macro.name] = macro
        self._local.add(macro.name)


def collect_macros(source: CppText) -> tuple[dict[str, Macro], list[str]]:
    """The ``#define``s in effect at the end of the file, and redefinition warnings."""
    scope = MacroScope(source)
    return dict(scope.at(len(source.text) + 1)), scope.warnings


_MAX_DEPTH = 64


def next_significant(tokens: list[Token], i: int) -> int:
    """Index of the first non-whitespace token at or after ``i`` (``len(tokens)`` if none)."""
    while i < len(tokens) and tokens[i][0] == "ws":
        i += 1
    return i


def collect_args(tokens: list[Token], open_index: int) -> tuple[list[list[Token]], int]:
    """Arguments of the call whose '(' is at ``open_index``; returns (args, index after ')').

    Raises MacroError when the parentheses do not balance.
    """
    args: list[list[Token]] = [[]]
    depth = 0
    for i in range(open_index, len(tokens)):
        kind, text = tokens[i]
        if text == "(":
            depth += 1
            if depth == 1:
                continue
        elif text == ")":
            depth -= 1
            if depth == 0:
                return [_strip_ws(a) for a in args], i + 1
        elif text == "," and depth == 1:
            args.append([])
            continue
        args[-1].append((kind, text))
    raise MacroError("unbalanced parentheses in macro call")


def _stringify(tokens: list[Token]) -> Token:
    text = detokenize(tokens).strip()
    return ("str", '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _substitute(
    macro: Macro,
    args: list[list[Token]],
    macros: Mapping[str, Macro],
    disabled: frozenset[str],
    depth: int,
) -> list[Token]:
    params = macro.params or ()
    if len(args) == 1 and not args[0] and not params:
        args = []
    if params and params[-1] == "__VA_ARGS__" and len(args) >= len(params):
        head, rest = args[: len(params) - 1], args[len(params) - 1 :]
        joined: list[Token] = []
        for k, a in enumerate(rest):
            joined += ([("punct", ","), _SPACE] if k else []) + a
        args = [*head, joined]
    if len(args) != len(params):
        raise MacroError(f"{macro.name} takes {len(params)} argument(s), {len(args)} given")
    index = {p: k for k, p in enumerate(params)}
    expanded: dict[int, list[Token]] = {}  # each argument is expanded once, used many times
    body = list(macro.body)
    out: list[Token] = []
    i = 0
    while i < len(body):
        kind, text = body[i]
        if kind == "hash" and params:
            j = next_significant(body, i + 1)
            if j < len(body) and body[j][1] in index:
                out.append(_stringify(args[index[body[j][1]]]))
                i = j + 1
                continue
        if kind == "ident" and text in index:
            arg = args[index[text]]
            prev = next((t for t in reversed(out) if t[0] != "ws"), None)
            nxt = next_significant(body, i + 1)
            pasted = (prev is not None and prev[0] == "paste") or (
                nxt < len(body) and body[nxt][0] == "paste"
            )
            if pasted:
                out += arg or [_PLACEMARKER]  # an empty argument still pastes as nothing
            else:
                k = index[text]
                if k not in expanded:
                    expanded[k] = _expand(arg, macros, disabled, depth + 1)
                out += expanded[k]
            i += 1
            continue
        out.append((kind, text))
        i += 1
    return _paste(out)


def _paste(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "paste":
            out.append(tokens[i])
            i += 1
            continue
        while out and out[-1][0] == "ws":
            out.pop()
        j = next_significant(tokens, i + 1)
        left = out.pop()[1] if out else ""
        right = tokens[j][1] if j < len(tokens) else ""
        out += tokenize(left + right)
        i = j + 1
    return [t for t in out if t is not _PLACEMARKER]


def _expand(
    tokens: list[Token], macros: Mapping[str, Macro], disabled: frozenset[str], depth: int
) -> list[Token]:
    if depth > _MAX_DEPTH:
        raise MacroError("macro expansion nests too deeply (recursive definition?)")
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        macro = macros.get(text) if kind == "ident" and text not in disabled else None
        if macro is None:
            out.append(tokens[i])
            i += 1
            continue
        inner = disabled | {text}
        if macro.params is None:
            out += _expand(list(macro.body), macros, inner, depth + 1)
            i += 1
            continue
        j = next_significant(tokens, i + 1)
        if j >= len(tokens) or tokens[j][1] != "(":
            out.append(tokens[i])  # a function-like macro's name without a call
            i += 1
            continue
        args, i = collect_args(tokens, j)
        out += _expand(_substitute(macro, args, macros, disabled, depth), macros, inner, depth + 1)
    return out


def expand_tokens(text: str, macros: Mapping[str, Macro]) -> list[Token]:
    """Fully macro-expand ``text`` into tokens; raise MacroError when it cannot be."""
    return _expand(tokenize(text), macros, frozenset(), 0)


def expand(text: str, macros: Mapping[str, Macro]) -> str:
    """Fully macro-expand ``text``; raise MacroError when it cannot be expanded."""
    return detokenize(expand_tokens(text, macros))


# --------------------------------------------------------------------------------------
# Namespace-scope scanner: declarations, definitions with bodies, and macro calls.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopItem:
    """Something at namespace scope.

    kind "call": an upper-case macro call statement ``NAME(args)`` with optional ``;``
    (``args`` are offsets of the parentheses); "block": a declaration with a braced body
    (``body`` are offsets of the braces; the header is everything before ``{``); "decl":
    a declaration ending in ``;``.
    """

    kind: str
    start: int
    end: int  # just past ')' / ';' / '}'
    name: str | None = None  # macro name of a call
    args: tuple[int, int] | None = None
    body: tuple[int, int] | None = None
    namespace: tuple[str, ...] = ()

    def header(self, text: str) -> str:
        return text[self.start : self.body[0]] if self.body else text[self.start : self.end]


@dataclass(frozen=True)
class Namespace:
    """A namespace block: ``name`` is "" when anonymous; offsets of its braces."""

    name: str
    open: int
    close: int


_CALL_START = re.compile(r"([A-Z_][A-Z0-9_]*)\s*\(")
_STATEMENT_END = re.compile(r"[;{}()\[\]]")
_NAMESPACE_HEADER = re.compile(r"\s*(?:inline\s+)?namespace\b\s*([\w:]*)\s*\Z")
_EXTERN_HEADER = re.compile(r'\s*extern\s*"\s*"\s*\Z')
_WS = re.compile(r"\s*")
_OBJC_END = re.compile(r"@end\b")
# Macros that are followed by a declarator rather than ending a statement.
_DECLARATOR_MACROS = frozenset({"TORCH_IMPL_FUNC"})


def scan(source: CppText) -> tuple[list[TopItem], list[Namespace]]:
    """Namespace-scope items of ``source`` in order; raise ParseError on unbalanced braces."""
    m = source.masked
    n = len(m)
    items: list[TopItem] = []
    namespaces: list[Namespace] = []
    stack: list[tuple[str, int]] = []
    pos = 0
    while True:
        pos = _end_of(_WS, m, pos)
        if pos >= n:
            break
        ch = m[pos]
        if ch == "}":
            if not stack:
                raise ParseError(source.path, source.line_of(pos), "unmatched '}'")
            name, open_ = stack.pop()
            namespaces.append(Namespace(name, open_, pos))
            pos += 1
            continue
        if ch == ";":
            pos += 1
            continue
        objc_end = _OBJC_END.match(m, pos)
        if objc_end:  # closes @interface/@implementation and, unlike C, takes no ';'
            pos = objc_end.end()
            continue
        ns = tuple(s[0] for s in stack)
        call = _CALL_START.match(m, pos)
        if call and call.group(1) not in _DECLARATOR_MACROS:
            open_ = call.end() - 1
            close = match_close(m, open_, source.path, source)
            after = _end_of(_WS, m, close + 1)
            nxt = m[after] if after < n else ""
            if nxt not in ("(", "{"):
                end = after + 1 if nxt == ";" else close + 1
                items.append(TopItem("call", pos, end, call.group(1), (open_, close), None, ns))
                pos = end
                continue
        end_pos = pos
        while True:
            hit = _STATEMENT_END.search(m, end_pos)
            if hit is None:
                raise ParseError(source.path, source.line_of(pos), "declaration never ends")
            c = hit.group()
            if c in "([":
                end_pos = match_close(m, hit.start(), source.path, source) + 1
                continue
            if c in ")]":
                raise ParseError(source.path, source.line_of(hit.start()), f"unmatched {c!r}")
            break
        at = hit.start()
        if c == ";":
            items.append(TopItem("decl", pos, at + 1, namespace=ns))
            pos = at + 1
        elif c == "}":
            items.append(TopItem("decl", pos, at, namespace=ns))
            pos = at
        else:
            header = m[pos:at]
            named = _NAMESPACE_HEADER.match(header)
            if named or _EXTERN_HEADER.match(header):
                stack.append((named.group(1) if named else 'extern "C"', at))
                pos = at + 1
                continue
            close = match_close(m, at, source.path, source)
            items.append(TopItem("block", pos, close + 1, body=(at, close), namespace=ns))
            pos = close + 1
    if stack:
        raise ParseError(
            source.path, source.line_of(stack[-1][1]), f"namespace {stack[-1][0]!r} never closes"
        )
    return items, namespaces


def call_args(source: CppText, item: TopItem, layer: str = "code") -> list[str]:
    """The arguments of a call item, from the ``code`` (default) or ``masked`` layer."""
    text = source.code if layer == "code" else source.masked
    if item.args is None:
        raise ValueError(f"the {item.kind} item at offset {item.start} is not a call")
    open_, close = item.args
    inner = text[open_ + 1 : close]
    return [] if not inner.strip() else split_args(inner)


# --------------------------------------------------------------------------------------
# Declarations: what a parameter's type is, shared by the .mm and DECLARE_DISPATCH readers.
# --------------------------------------------------------------------------------------

_LAST_WORD = re.compile(r"\A(.*?)\b([A-Za-z_]\w*)\s*\Z", re.S)
_DEFAULT = re.compile(r"\s*=.*\Z", re.S)
_TYPE_WORDS = frozenset(
    ("bool", "char", "double", "float", "int", "long", "short", "signed", "unsigned", "void")
)
_CV_WORDS = frozenset(("const", "volatile", "struct", "class", "enum", "typename"))


def param_type(param: str) -> str:
    """The type of one declared parameter: its name and default dropped, spacing normalised.

    ``const Scalar& alpha`` -> ``const Scalar&``; ``const double`` and ``int64_t`` stay (a
    trailing built-in type word, or a lone word after cv-qualifiers, is the type itself).
    """
    text = _DEFAULT.sub("", " ".join(param.split()))
    named = _LAST_WORD.match(text)
    if named:
        prefix, word = named.group(1).rstrip(), named.group(2)
        words = prefix.replace("&", " ").replace("*", " ").split()
        is_name = bool(prefix) and (
            prefix.endswith(("&", "*", ">"))
            or (word not in _TYPE_WORDS and any(w not in _CV_WORDS for w in words))
        )
        if is_name and not prefix.endswith("::"):
            text = prefix
    return re.sub(r"\s+([&*])", r"\1", text).strip()
