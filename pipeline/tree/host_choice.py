"""Which Metal kernel a host kernel function runs, and under what (issue 27).

A stub's kernel function in ``operations/*.mm`` runs ``lib.exec_KIND_kernel(iter, "NAME")``,
sometimes passing one of its own scalar parameters on (``exec_binary_kernel(iter, "huber",
delta)``: the functor's alpha), sometimes choosing the kernel under a condition
(``if (order == 1) { ... "trigamma" ... }``). What a launch's torch reference is follows from
that: the stub's operator, with that parameter where the host puts it.

Read here, from the host's text:

- ``PARAM == LITERAL`` (either side, or ``PARAM.equal(LITERAL)``, or ``PARAM.to<T>() ==
  LITERAL``) over one of the function's scalar parameters fixes that parameter for the
  launch under it;
- a condition that names no scalar parameter (``isFloatingType(iter.common_dtype())``)
  restricts the dtypes the kernel runs for, not the math: it changes no reference; so does
  a test of a parameter's own type (``!exp_scalar.isComplex()``);
- ``A && B`` is read part by part: restrictions and at most one pin per parameter
  (``!exp_scalar.isComplex() && exp_scalar.to<float>() == 2.0`` fixes the exponent at 2);
- where such a pin did not hold (an ``else`` after it, a branch after it, a launch after a
  branch that returned) and the launch passes that same parameter on as the functor's
  scalar, the launch's reference is the operator with the parameter as its alpha, and the
  pinned literal is a value this functor never gets: the check leaves it out of the alpha
  values it runs (``avoid``). Left out even where the pin came with a dtype restriction
  (so the value may reach the functor for other dtypes): a value fewer, never a result the
  host cannot produce;
- any other condition over a parameter (the negation of a pin on a parameter the launch
  does not pass on, ``order > 1``, a ``switch``) is one the tool cannot read: the launch's
  reference is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.tree.cpp import CppText, match_close, split_args

_EXEC_CALL = re.compile(r"\bexec_(\w+?)_kernel\s*\(")
_STRING_NAME = re.compile(r'"([A-Za-z_]\w*)"\Z')
_IF = re.compile(r"\b(else\s+)?if\s*\(")
_ELSE = re.compile(r"\belse\b(?!\s+if\b)")
_SWITCH = re.compile(r"\bswitch\s*\(")
_PARAM_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?:=[^,]*)?\Z")
_LITERAL = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)[fFlLuU]*"
# a parameter passed as it is, or wrapped: Scalar(order), static_cast<float>(beta)
_WRAPPED = re.compile(r"(?:[\w:]+(?:<[^<>]*>)?\s*\(\s*)?([A-Za-z_]\w*)\s*\)?\Z")
_RETURN = re.compile(r"\breturn\b")


@dataclass(frozen=True)
class KernelLaunch:
    """One ``exec_KIND_kernel(iter, NAME[, SCALAR])`` of a host kernel function.

    ``alpha``: the index, among the function's parameters, of the one passed as the
    kernel's scalar (None: none, or not a parameter). ``fixed``: (parameter index, literal)
    the conditions the launch is under fix. ``unread``: a condition over a parameter the
    tool cannot read (then the reference is unknown). ``avoid``: the literals a pin on the
    alpha's parameter held where the launch is not reached.
    """

    kind: str
    kernel: str | None
    alpha: int | None = None
    fixed: tuple[tuple[int, str], ...] = ()
    unread: str | None = None
    avoid: tuple[str, ...] = ()  # literals the alpha never is here (pins that did not hold)


def param_names(params: list[str]) -> tuple[str, ...]:
    """The names of a parameter list's parameters ("" where one has none)."""
    out = []
    for p in params:
        m = _PARAM_NAME.search(p.strip())
        out.append(m.group(1) if m and " " in p.strip() else "")
    return tuple(out)


def _branch_end(masked: str, start: int, path: str, source: CppText) -> int:
    """The end of the statement or block starting at (or after blanks from) ``start``."""
    i = start
    while i < len(masked) and masked[i].isspace():
        i += 1
    if i < len(masked) and masked[i] == "{":
        return match_close(masked, i, path, source)
    depth = 0
    while i < len(masked):
        ch = masked[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ";" and depth == 0:
            return i
        i += 1
    return i


def _chains(source: CppText, start: int, end: int) -> list[list[tuple[str | None, int, int]]]:
    """Every if/else-if/else chain in ``[start, end)``: (condition or None for a plain
    else, branch start, branch end) per branch; a switch is a chain of one unread branch."""
    masked, path = source.masked, source.path
    chains: list[list[tuple[str | None, int, int]]] = []
    for m in _IF.finditer(masked, start, end):
        if m.group(1):
            continue  # an else-if: part of the chain its first if starts
        chain: list[tuple[str | None, int, int]] = []
        open_ = m.end() - 1
        while True:
            close = match_close(masked, open_, path, source)
            cond = " ".join(source.code[open_ + 1 : close].split())
            stop = _branch_end(masked, close + 1, path, source)
            chain.append((cond, close + 1, stop))
            after = masked[stop + 1 : end]
            stripped = after.lstrip()
            base = stop + 1 + (len(after) - len(stripped))
            nxt = _IF.match(masked, base)
            if nxt and nxt.group(1):
                open_ = nxt.end() - 1
                continue
            if _ELSE.match(masked, base):
                branch = base + 4
                chain.append((None, branch, _branch_end(masked, branch, path, source)))
            break
        chains.append(chain)
    for m in _SWITCH.finditer(masked, start, end):
        close = match_close(masked, m.end() - 1, path, source)
        cond = "switch (" + " ".join(source.code[m.end() : close].split()) + ")"
        chains.append([(cond, close + 1, _branch_end(masked, close + 1, path, source))])
    return chains


def _fixes(cond: str, params: tuple[str, ...]) -> tuple[int, str] | None:
    """(parameter index, literal) when ``cond`` is ``PARAM == LITERAL`` or alike."""
    for i, name in enumerate(params):
        if not name:
            continue
        p = re.escape(name)
        value = rf"{p}(?:\s*\.\s*to\s*<[^<>]*>\s*\(\s*\))?"
        for form in (
            rf"{value}\s*==\s*({_LITERAL})",
            rf"({_LITERAL})\s*==\s*{value}",
            rf"{p}\s*\.\s*equal\s*\(\s*({_LITERAL})\s*\)",
        ):
            m = re.fullmatch(rf"\(?\s*{form}\s*\)?", cond)
            if m:
                return i, m.group(1).rstrip("fFlLuU")
    return None


def _names_param(cond: str, params: tuple[str, ...]) -> bool:
    return any(name and re.search(rf"\b{re.escape(name)}\b", cond) for name in params[1:])


def _conjuncts(cond: str) -> list[str]:
    """``cond``'s top-level ``&&`` parts (one part when it has none)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(cond):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif cond.startswith("&&", i) and depth == 0:
            parts.append(cond[start:i].strip())
            start = i + 2
    return [*parts, cond[start:].strip()]


def _type_test(part: str, params: tuple[str, ...]) -> bool:
    """Whether ``part`` tests a parameter's own type (``!exp_scalar.isComplex()``)."""
    return any(
        name
        and re.fullmatch(
            rf"\(?\s*!?\s*{re.escape(name)}\s*\.\s*is(?:Complex|FloatingPoint|Integral|Boolean)"
            r"\s*\([^()]*\)\s*\)?",
            part,
        )
        for name in params[1:]
    )


def _pins(cond: str, params: tuple[str, ...]) -> tuple[tuple[int, str], ...] | None:
    """The (parameter index, literal) pins of a condition whose every part over a parameter
    is a pin or a type test; None when a part is neither (the condition is not read)."""
    if cond.startswith("switch"):
        return None
    pins = []
    for part in _conjuncts(cond):
        if not _names_param(part, params) or _type_test(part, params):
            continue  # a restriction of the dtypes or of the parameter's type
        fix = _fixes(part, params)
        if fix is None:
            return None
        pins.append(fix)
    return tuple(pins)


def _not_taken(cond: str, params: tuple[str, ...]) -> tuple[int, str] | str | None:
    """What ``cond`` not holding says for a launch: nothing (None), a pin that did not
    hold (parameter, literal), or ``cond`` itself when that is not read."""
    if not _names_param(cond, params):
        return None
    pins = _pins(cond, params)
    if pins is None or len(pins) > 1:
        return cond  # not (A && P == 1 && Q == 2) tells no one parameter's value
    return pins[0] if pins else None


def launches(
    source: CppText, start: int, end: int, params: tuple[str, ...]
) -> tuple[KernelLaunch, ...]:
    """Every exec_*_kernel call in the body ``[start, end)`` of a function whose parameter
    names are ``params`` (the iterator first)."""
    chains = _chains(source, start, end)
    found = []
    for call in _EXEC_CALL.finditer(source.masked, start, end):
        close = match_close(source.masked, call.end() - 1, source.path, source)
        args = [a.strip() for a in split_args(source.code[call.end() : close])]
        name = _STRING_NAME.match(args[1]) if len(args) > 1 else None
        alpha = None
        passed = _WRAPPED.match(args[2]) if len(args) > 2 else None
        if passed and passed.group(1) in params[1:]:
            alpha = params.index(passed.group(1))
        fixed: list[tuple[int, str]] = []
        unread = None
        negated: list[str] = []  # the conditions that did not hold where the launch runs
        pos = call.start()
        for chain in chains:
            # an if that returned before the launch: the launch runs where it did not hold
            if chain[-1][2] < pos and any(
                _RETURN.search(source.masked, lo, hi) for _, lo, hi in chain
            ):
                negated += [cond for cond, _, _ in chain if cond is not None]
            for k, (cond, lo, hi) in enumerate(chain):
                if not lo <= pos <= hi:
                    continue
                # the branches before this one were not taken: their negations hold too
                negated += [before for before, _, _ in chain[:k] if before is not None]
                if cond is None or not _names_param(cond, params):
                    continue
                pins = _pins(cond, params)
                if pins is None:
                    unread = unread or cond
                else:
                    fixed += pins
        avoid: list[str] = []
        for cond in negated:
            held = _not_taken(cond, params)
            if isinstance(held, str) or (held is not None and held[0] != alpha):
                unread = unread or f"not ({cond})"
            elif held is not None and held[1] not in avoid:
                avoid.append(held[1])
        kernel = name.group(1) if name else None
        launch = KernelLaunch(call.group(1), kernel, alpha, tuple(fixed), unread, tuple(avoid))
        found.append(launch)
    return tuple(found)
