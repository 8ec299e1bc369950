"""Under what a statement of a host function runs, read from its text (issue 27).

A launch deep in an MPS implementation runs under the conditions of the ``if``s around it
and of the earlier ones that ``return``: ``if (!is_bwd && reduction != Reduction::None)
{ ...; return out; }`` before ``if (!is_bwd) { binary_op_kernel(op, ...); }`` means the
launch runs where ``reduction == Reduction::None`` and not ``is_bwd``. :func:`reach` gives
that condition as a tree over the conditions' texts, in the function's own words;
:func:`parse` reads an expression (after the caller put its arguments in) into the same
tree; :func:`decide` says which values of the operator's scalar arguments the launch runs
for.

Read here: ``if``/``else if``/``else`` chains, ``return``, ``&&``, ``||``, ``!``, ``?:``,
``==``/``!=`` against a literal (a number, ``true``/``false`` or an enum constant such as
``Reduction::None``), ``X.has_value()``. A condition over an argument in any other form
(``order > 1``, a call taking it) is unread: whoever asks gets it back, never a guess. A
condition over none of the operator's scalars (a tensor's dtype, size or layout, a local)
chooses the path, not the math, and is left free. Returns inside lambdas and ObjC blocks
are no returns of the function; a loop's body counts as run under an unread-or-free
condition of its own.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from pipeline.tree.cpp import CppText, match_close

# a parameter of the entry (the operator's own): scalars and tensors, as substituted
SCALAR = "@"
TENSOR = "%"
OTHER = "<other>"  # a value unlike every literal the conditions compare an argument with
_MAX_FREE = 12  # free conditions enumerated; beyond, the launch's condition is unread

_KEYWORD = re.compile(r"\b(if|for|while|switch|return|do)\b")
_ELSE = re.compile(r"\s*else\b")
_ELSE_IF = re.compile(r"\s*else\s+if\s*\(")
_LITERAL = re.compile(
    r"(?:[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)[fFlLuU]*|true|false|(?:\w+::)+\w+)\Z"
)
_HAS_VALUE = re.compile(r"(.*?)\s*(?:\.|->)\s*has_value\s*\(\s*\)\Z", re.S)


@dataclass(frozen=True)
class Text:
    """A condition as written, in the frame whose text it is."""

    text: str


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Not:
    item: Cond


@dataclass(frozen=True)
class AllOf:
    items: tuple[Cond, ...]


@dataclass(frozen=True)
class AnyOf:
    items: tuple[Cond, ...]


Cond = Text | Const | Not | AllOf | AnyOf
TRUE, FALSE = Const(True), Const(False)


def conj(*items: Cond) -> Cond:
    kept = tuple(i for i in items if i != TRUE)
    if FALSE in kept:
        return FALSE
    return kept[0] if len(kept) == 1 else (AllOf(kept) if kept else TRUE)


def disj(*items: Cond) -> Cond:
    kept = tuple(i for i in items if i != FALSE)
    if TRUE in kept:
        return TRUE
    return kept[0] if len(kept) == 1 else (AnyOf(kept) if kept else FALSE)


def neg(item: Cond) -> Cond:
    if isinstance(item, Const):
        return Const(not item.value)
    return item.item if isinstance(item, Not) else Not(item)


# ---- statements ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Branch:
    guard: Cond  # this branch's own condition (TRUE for a plain else)
    lo: int
    hi: int


@dataclass(frozen=True)
class _Stmt:
    start: int
    end: int  # just past the statement
    kind: str  # "chain", "loop", "return", "block", "other"
    branches: tuple[_Branch, ...] = ()


def _skip_ws(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i


def _simple_end(src: CppText, i: int, end: int) -> int:
    """Just past the ``;`` ending the statement at ``i`` (groups skipped)."""
    m = src.masked
    while i < end:
        ch = m[i]
        if ch in "([{":
            i = match_close(m, i, src.path, src) + 1
            continue
        if ch == ";":
            return i + 1
        if ch == "}":
            return i
        i += 1
    return end


def _body_end(src: CppText, i: int, end: int) -> tuple[int, int, int]:
    """(start, end, just past) the statement or block that is a branch's body, from ``i``."""
    i = _skip_ws(src.masked, i, end)
    if i < end and src.masked[i] == "{":
        close = match_close(src.masked, i, src.path, src)
        return i + 1, close, close + 1
    stmt = _statement(src, i, end)
    return i, stmt.end, stmt.end


def _guarded(src: CppText, open_: int) -> tuple[Cond, int]:
    close = match_close(src.masked, open_, src.path, src)
    return Text(" ".join(src.code[open_ + 1 : close].split())), close + 1


def _statement(src: CppText, i: int, end: int) -> _Stmt:
    m = src.masked
    kw = _KEYWORD.match(m, i)
    if m[i] == "{":
        close = match_close(m, i, src.path, src)
        return _Stmt(i, close + 1, "block", (_Branch(TRUE, i + 1, close),))
    if kw is None:
        return _Stmt(i, _simple_end(src, i, end), "other")
    word = kw.group(1)
    if word == "return":
        return _Stmt(i, _simple_end(src, i, end), "return")
    if word == "do":
        lo, hi, past = _body_end(src, kw.end(), end)
        return _Stmt(i, _simple_end(src, past, end), "loop", (_Branch(Text("do"), lo, hi),))
    open_ = m.index("(", kw.end())
    guard, after = _guarded(src, open_)
    if word != "if":
        shown = Text(f"{word} ({guard.text})") if isinstance(guard, Text) else guard
        lo, hi, past = _body_end(src, after, end)
        return _Stmt(i, past, "loop", (_Branch(shown, lo, hi),))
    branches = []
    while True:
        lo, hi, nxt = _body_end(src, after, end)
        branches.append(_Branch(guard, lo, hi))
        elif_ = _ELSE_IF.match(m, nxt)
        if elif_ is not None and elif_.end() <= end:
            guard, after = _guarded(src, elif_.end() - 1)
            continue
        else_ = _ELSE.match(m, nxt)
        if else_ is not None and else_.end() <= end:
            lo, hi, nxt = _body_end(src, else_.end(), end)
            branches.append(_Branch(TRUE, lo, hi))
        return _Stmt(i, nxt, "chain", tuple(branches))


def _statements(src: CppText, lo: int, hi: int) -> list[_Stmt]:
    out = []
    i = _skip_ws(src.masked, lo, hi)
    while i < hi:
        stmt = _statement(src, i, hi)
        out.append(stmt)
        i = _skip_ws(src.masked, max(stmt.end, i + 1), hi)
    return out


def _exits(src: CppText, lo: int, hi: int) -> Cond:
    """Under what running ``[lo, hi)`` returns from the function."""
    found: list[Cond] = []
    for stmt in _statements(src, lo, hi):
        if stmt.kind == "return":
            return disj(*found, TRUE)
        if stmt.kind == "other":
            continue  # a return in a lambda or block argument is the lambda's
        taken: list[Cond] = []
        for b in stmt.branches:
            found.append(conj(*taken, b.guard, _exits(src, b.lo, b.hi)))
            taken.append(neg(b.guard))
    return disj(*found)


def reach(src: CppText, lo: int, hi: int, pos: int) -> Cond:
    """Under what running ``[lo, hi)`` from its start gets to offset ``pos``."""
    before: list[Cond] = []
    for stmt in _statements(src, lo, hi):
        if stmt.end <= pos:
            before.append(neg(_exits(src, stmt.start, stmt.end)) if stmt.kind != "other" else TRUE)
            if stmt.kind == "return":
                return FALSE
            continue
        if stmt.start > pos:
            break
        taken: list[Cond] = []
        for b in stmt.branches:
            if b.lo <= pos <= b.hi:
                return conj(*before, *taken, b.guard, reach(src, b.lo, b.hi, pos))
            taken.append(neg(b.guard))
        return conj(*before, _inside(src, stmt.start, stmt.end, pos))
    return conj(*before)


def _inside(src: CppText, lo: int, hi: int, pos: int) -> Cond:
    """Within one plain statement: the group (a lambda, a block argument) holding ``pos``."""
    m = src.masked
    i = lo
    while i < min(hi, pos):
        if m[i] in "([{":
            close = match_close(m, i, src.path, src)
            if i < pos <= close:
                return reach(src, i + 1, close, pos)
            i = close
        i += 1
    return TRUE


# ---- expressions ---------------------------------------------------------------------


def top_level(text: str, ops: tuple[str, ...]) -> list[tuple[int, str]]:
    """Offsets of ``ops`` in ``text`` outside brackets and string literals."""
    out, depth, i = [], 0, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = text.index('"', i + 1) + 1 if '"' in text[i + 1 :] else len(text)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            op = next((o for o in ops if text.startswith(o, i)), None)
            if op is not None:
                out.append((i, op))
                i += len(op)
                continue
        i += 1
    return out


def unwrap(text: str) -> str:
    """``text`` without blanks and the parentheses around all of it."""
    text = text.strip()
    while text.startswith("(") and _closing(text) == len(text) - 1:
        text = text[1:-1].strip()
    return text


def _closing(text: str) -> int:
    """The offset of the bracket closing ``text[0]`` (-1: none)."""
    depth, i = 0, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = text.find('"', i + 1)
            if i < 0:
                return -1
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def ternary(text: str) -> tuple[str, str, str] | None:
    """(condition, then, else) of a top-level ``?:``."""
    text = unwrap(text)
    marks = top_level(text, ("::", "?", ":"))
    depth = 0
    q = None
    for at, op in marks:
        if op == "?":
            q = at if q is None else q
            depth += 1
        elif op == ":" and q is not None:
            depth -= 1
            if depth == 0:
                return text[:q].strip(), text[q + 1 : at].strip(), text[at + 1 :].strip()
    return None


def parse(text: str) -> Cond:
    """A boolean expression's tree; its leaves are ``Text`` (comparisons, calls, names)."""
    text = unwrap(text)
    if text in ("true", "false"):
        return Const(text == "true")
    t = ternary(text)
    if t is not None:
        c = parse(t[0])
        return disj(conj(c, parse(t[1])), conj(neg(c), parse(t[2])))
    for op, join in (("||", disj), ("&&", conj)):
        cuts = [at for at, o in top_level(text, (op,)) if o == op]
        if cuts:
            parts = [
                text[a + len(op) : b]
                for a, b in zip([-len(op), *cuts], [*cuts, len(text)], strict=True)
            ]
            return join(*(parse(p) for p in parts))
    if text.startswith("!") and not text.startswith("!="):
        return neg(parse(text[1:]))
    return Text(text)


# ---- deciding ------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """For which values of the operator's scalar arguments a launch runs.

    ``fixed``: (argument, literal as written) each run has. ``unread``: a condition over an
    argument the tool cannot read. ``runs``: False when no value runs it.
    """

    runs: bool
    fixed: tuple[tuple[str, str], ...] = ()
    unread: str | None = None


def _normal(literal: str) -> str:
    literal = literal.strip()
    if "::" in literal:
        return "::".join(literal.split("::")[-2:])
    try:
        return repr(float(literal.rstrip("fFlLuU")))
    except ValueError:
        return literal


@dataclass(frozen=True)
class _Leaf:
    kind: str  # "scalar", "free", "unread", "const"
    param: str = ""
    literal: str = ""
    equal: bool = True
    value: bool = False


def _leaf(text: str, optional: frozenset[str]) -> _Leaf:
    text = unwrap(text)
    has = _HAS_VALUE.match(text)
    if has is not None:
        of = unwrap(has.group(1))
        if of in ("std::nullopt", "c10::nullopt", "nullopt"):
            return _Leaf("const", value=False)
        if of.startswith(TENSOR) and re.fullmatch(r"%\w+", of):
            return _Leaf("free") if of[1:] in optional else _Leaf("const", value=True)
    if re.fullmatch(r"@\w+", text):
        return _Leaf("scalar", text[1:], "true")
    for at, op in top_level(text, ("==", "!=")):
        left, right = unwrap(text[:at]), unwrap(text[at + 2 :])
        for p, lit in ((left, right), (right, left)):
            if re.fullmatch(r"@\w+", p) and _LITERAL.match(lit) and SCALAR not in lit:
                return _Leaf("scalar", p[1:], _normal(lit), op == "==")
        break
    return _Leaf("unread") if SCALAR in text else _Leaf("free")


def _leaves(c: Cond, out: list[str]) -> None:
    if isinstance(c, Text):
        out.append(c.text)
    elif isinstance(c, Not):
        _leaves(c.item, out)
    elif isinstance(c, AllOf | AnyOf):
        for i in c.items:
            _leaves(i, out)


def _value(c: Cond, leaf: dict[str, _Leaf], env: dict[str, str], free: dict[str, bool]) -> bool:
    if isinstance(c, Const):
        return c.value
    if isinstance(c, Not):
        return not _value(c.item, leaf, env, free)
    if isinstance(c, AllOf):
        return all(_value(i, leaf, env, free) for i in c.items)
    if isinstance(c, AnyOf):
        return any(_value(i, leaf, env, free) for i in c.items)
    f = leaf[c.text]
    if f.kind == "const":
        return f.value
    if f.kind in ("free", "unread"):
        return free[c.text]
    return (env[f.param] == f.literal) == f.equal


def decide(c: Cond, optional: frozenset[str] = frozenset()) -> Decision:
    """Which values of the entry's scalars (``@name`` in the leaves) ``c`` holds for.
    ``optional``: the entry's parameters that are optional tensors (may hold no value)."""
    texts: list[str] = []
    _leaves(c, texts)
    leaf = {t: _leaf(t, optional) for t in dict.fromkeys(texts)}
    # an unread condition may still be what decides the launch never runs: left free first
    unread = next((t for t, f in leaf.items() if f.kind == "unread"), None)
    free = [t for t, f in leaf.items() if f.kind in ("free", "unread")]
    if len(free) > _MAX_FREE:
        return Decision(True, unread=f"{len(free)} conditions at once")
    values: dict[str, list[str]] = {}
    for f in leaf.values():
        if f.kind == "scalar" and f.literal not in values.setdefault(f.param, []):
            values[f.param].append(f.literal)
    params = sorted(values)
    runs = []
    for combo in itertools.product(*([*values[p], OTHER] for p in params)):
        env = dict(zip(params, combo, strict=True))
        if any(
            _value(c, leaf, env, dict(zip(free, bits, strict=True)))
            for bits in itertools.product((False, True), repeat=len(free))
        ):
            runs.append(combo)
    if not runs:
        return Decision(False)
    if unread is not None:
        return Decision(True, unread=unread)
    fixed = []
    for k, p in enumerate(params):
        seen = {combo[k] for combo in runs}
        if len(seen) == len(values[p]) + 1:
            continue  # every value runs it: the argument does not choose
        if len(seen) != 1 or OTHER in seen:
            if OTHER in seen:
                shown = "not " + " nor ".join(v for v in values[p] if v not in seen)
            else:
                shown = " or ".join(sorted(seen))
            return Decision(True, unread=f"{p} is {shown}: no one value fixes it")
        fixed.append((p, next(iter(seen))))
    total = 1
    for k in range(len(params)):
        total *= len({combo[k] for combo in runs})
    if total != len(runs):
        return Decision(True, unread="the arguments' values depend on one another")
    return Decision(True, tuple(fixed))
