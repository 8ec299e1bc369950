"""Edits of the Metal kernel files: a new functor plus the registrations of its dtype pairs.

The caller says what the operator returns for each input dtype (``outputs``: torch input
dtype -> torch output dtype, as PyTorch promotes them). The functor's overloads follow the
guide: one ``T``-returning template when every input keeps its type (or all give one type,
as comparisons give ``bool``), else one overload per kind of input, e.g. a floating one
returning ``T`` and an integral one returning ``float`` for int -> float ops (atan2).

Its registrations follow the file: a line in the body of a file-local list macro
(UnaryKernel.metal's ``INSTANTIATE_UNARY_KERNELS2``) when that macro's invocations register
only wanted pairs, the file's convenience macros (``REGISTER_INT2FLOAT_BINARY_OP``) when all
of their pairs are wanted, and one core-macro line per remaining pair. What a macro
registers is what the metal reader reads after expanding it, never what its name suggests.

The math of a functor is the contributor's: :func:`functor_skeleton` and
:func:`functor_skeleton_edit` only show what to fill in, and :func:`add_functor` writes a
functor only around a body the contributor wrote (``return ...;`` using the parameter
names ``x`` for unary, ``a, b`` for binary and ``a, b, c`` for ternary functors).
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.dtypes import COMPLEX, DTYPE_TO_METAL, sort_key
from pipeline.edit.atomic import FileEdit, unplaced
from pipeline.errors import EditVerificationError, ParseError
from pipeline.tree import cpp, metal

Pair = tuple[str, str]  # (input dtype, output dtype), canonical names

FLOATING: frozenset[str] = frozenset({"float32", "float16", "bfloat16"})
INTEGRAL: frozenset[str] = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool"})
# the kinds of input a functor may need an overload for, in the order overloads are written
_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("floating", FLOATING),
    ("integral", INTEGRAL),
    ("complex", COMPLEX),
)
# c10/metal's traits tell scalars from vectors (float2 is complex); metal's own do not
_SCALAR_TRAITS = {
    "floating": "is_scalar_floating_point_v",
    "integral": "is_scalar_integral_v",
    "complex": "is_complex_v",
}
_METAL_TRAITS = {"floating": "is_floating_point_v", "integral": "is_integral_v"}

_PARAMS = {1: ("x",), 2: ("a", "b"), 3: ("a", "b", "c")}
_CORE = {1: "REGISTER_UNARY_OP", 2: "REGISTER_BINARY_OP", 3: "REGISTER_TERNARY_OP"}
# Core macros a registration macro may emit beside the plain one: the castout companion
# of REGISTER_COMPARISON_OP. (The opmath variants compute in a wider type: choosing them
# is the contributor's call.)
_COMPANIONS = {1: frozenset(), 2: frozenset({"REGISTER_BINARY_CASTOUT_OP"}), 3: frozenset()}
_COLUMNS = 80  # clang-format's limit in aten/src/ATen/native/mps
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
_SCALAR_TRAIT_USE = re.compile(r"\bis_scalar_\w+_v\b")
_USES_C10_METAL = re.compile(r"\busing\s+namespace\s+c10::metal\s*;")


def _check_args(kernel: str, arity: int, outputs: Mapping[str, str]) -> dict[str, str]:
    """``outputs`` in dtype order, after refusing a bad kernel name, arity or dtype."""
    if not _IDENT.match(kernel):
        raise ValueError(f"kernel name {kernel!r} is not a C identifier")
    if arity not in _PARAMS:
        raise ValueError(f"arity must be 1 (unary), 2 (binary) or 3 (ternary), not {arity}")
    if not outputs:
        raise ValueError("no dtypes given: a functor nobody registers is never compiled")
    unknown = sorted({d for pair in outputs.items() for d in pair} - DTYPE_TO_METAL.keys())
    if unknown:
        raise ValueError(
            f"no Metal type for {', '.join(sorted(unknown, key=sort_key))}; MPS kernels "
            f"support {', '.join(sorted(DTYPE_TO_METAL, key=sort_key))}"
        )
    return {d: outputs[d] for d in sorted(outputs, key=sort_key)}


def expected_pairs(outputs: Mapping[str, str]) -> set[Pair]:
    """The (input, output) dtype pairs a functor for ``outputs`` gets registered for."""
    return set(outputs.items())


def _describe(pairs: Iterable[Pair]) -> str:
    return ", ".join(i if i == o else f"{i}->{o}" for i, o in sorted(pairs, key=_pair_key))


def _pair_key(pair: Pair) -> tuple[tuple[int, str], tuple[int, str]]:
    return sort_key(pair[0]), sort_key(pair[1])


# --- registration macros, read through the metal reader --------------------------------


def _probe(
    base: str, path: str, calls: list[str]
) -> list[tuple[tuple[metal.Registration, ...], bool]]:
    """What the reader makes of each of ``calls`` at the end of ``base``, one per call.

    One parse for all: each call gets its own line, so the registrations of that line are
    its own; the flag says the line was read cleanly (nothing unrecognised).
    """
    sep = "\n" if base and not base.endswith("\n") else ""
    first = (base + sep).count("\n") + 1
    parsed = metal.parse(base + sep + "\n".join(calls) + "\n", path)
    return [
        (
            tuple(r for r in parsed.registrations if r.span.start == first + k),
            not any(u.span.start == first + k for u in parsed.unrecognised),
        )
        for k in range(len(calls))
    ]


def _groups(
    text: str | None, path: str, kernel: str, arity: int
) -> list[tuple[str, set[Pair], bool]]:
    """The convenience macros able to register ``kernel``: name, pairs, whether plain.

    The candidates are the file's one-parameter ``#define``s (``text`` None: the reader's
    fallback definitions of the well-known ones, as BinaryKernel.metal has them). Each is
    called with the kernel name and read back: it counts when all it expands to is usable
    core calls of this arity (plain: nothing but ``_CORE[arity]``; else with companions)
    registering ``kernel`` with Metal dtypes, so lists of other ops taking a dtype parameter
    (``INSTANTIATE_UNARY_KERNELS_VEC2(DTYPE)``) and opmath ones do not.
    """
    if text is None:
        base, names = "", list(metal.CONVENIENCE_MACROS)
    else:
        local, _ = cpp.collect_macros(cpp.lex(text, path))
        base = text
        names = [n for n, m in local.items() if m.params is not None and len(m.params) == 1]
    groups = []
    probes = _probe(base, path, [f"{n}({kernel});" for n in names])
    for name, (regs, clean) in zip(names, probes, strict=True):
        if (
            regs
            and clean
            and all(r.kernel == kernel for r in regs)
            and {r.core_macro for r in regs} - _COMPANIONS[arity] == {_CORE[arity]}
        ):
            plain = all(r.core_macro == _CORE[arity] for r in regs)
            groups.append((name, {(r.input, r.output) for r in regs}, plain))
    return groups


def registration_lines(
    kernel: str,
    arity: int,
    outputs: Mapping[str, str],
    *,
    text: str | None = None,
    path: str = "<metal>",
) -> list[str]:
    """Registration lines (one call each) covering exactly the pairs of ``outputs``.

    A convenience macro defined in ``text`` (None: the well-known ones, as in
    BinaryKernel.metal) is used when every pair it registers is wanted, the largest first
    (one emitting castout kernels too, like REGISTER_COMPARISON_OP, only when it registers
    exactly the wanted pairs); each pair left gets one core-macro line. List macros (a line
    in a ``#define`` body) are :func:`add_functor`'s: a line of its own cannot extend one.
    """
    every = set(_check_args(kernel, arity, outputs).items())
    wanted = set(every)
    chosen: list[tuple[str, set[Pair]]] = []
    # the largest group first, so REGISTER_INTEGER_BINARY_OP wins over its _NO_BOOL part
    groups = sorted(_groups(text, path, kernel, arity), key=lambda g: -len(g[1]))
    for name, pairs, plain in groups:
        # A group with companion kernels must cover every pair alone: beside core lines,
        # some dtypes would get the castout kernels and others not.
        if pairs <= wanted and (plain or pairs == every):
            chosen.append((name, pairs))
            wanted -= pairs
    # in dtype order, as the guide writes them: REGISTER_FLOAT_BINARY_OP before INT2FLOAT
    chosen.sort(key=lambda g: min(_pair_key(p) for p in g[1]))
    lines = [f"{name}({kernel});" for name, _ in chosen]
    for i, o in sorted(wanted, key=_pair_key):
        lines.append(f"{_CORE[arity]}({kernel}, {DTYPE_TO_METAL[i]}, {DTYPE_TO_METAL[o]});")
    return lines


# The words a general list macro's name is made of: what it does and for which dtypes
# (INSTANTIATE_UNARY_KERNELS2, INSTANTIATE_UNARY_KERNELS_VEC2). Any other word names what its
# members have in common (REGISTER_ROUNDING_OPS: floor, ceil, trunc): not a list for others.
_GENERAL_WORDS = frozenset(
    (  # noqa: SIM905 - a list of words reads as one
        "REGISTER INSTANTIATE DEFINE UNARY BINARY TERNARY KERNEL KERNELS OP OPS FUNC FUNCS "
        "FUNCTOR FUNCTORS FLOAT FLOATING INT INTEGER INTEGRAL INT2FLOAT COMPLEX VEC NO BOOL "
        "OPMATH ALL TYPE TYPES DTYPE DTYPES HALF BFLOAT SCALAR REAL"
    ).split()
)


def is_general_list(name: str) -> bool:
    """Whether the list macro ``name`` is a general one that any operator with its dtype
    pairs may join: its name says only what it registers and for which dtypes."""
    words = [re.sub(r"\d+\Z", "", w) for w in name.upper().split("_") if w]
    return all(not w or w in _GENERAL_WORDS for w in words)


def _list_macros(
    source: cpp.CppText, parsed: metal.MetalFile, arity: int
) -> list[tuple[str, cpp.Directive, str]]:
    """The file's list macros: name, ``#define``, the arguments (after NAME) of a new line.

    A list macro is a ``#define`` the file invokes for registrations whose body calls this
    arity's core macro with an op's name written out (``REGISTER_UNARY_OP(exp, DTYPE1,
    DTYPE0)``); a new line copies the arguments of its last such call. Only general lists
    (:func:`is_general_list`): a dtype match never makes an operator a rounding one. In
    file order.
    """
    invoked = {r.written_macro for r in parsed.registrations}
    found = []
    for d in source.directives:
        macro = cpp.parse_define(d.text, d.line)
        if macro is None or macro.params is None or macro.name not in invoked:
            continue
        if not is_general_list(macro.name):
            continue
        calls, _ = metal.core_calls(list(macro.body))
        named = [
            c for c in calls if c.macro == _CORE[arity] and c.args and c.args[0] not in macro.params
        ]
        if named:
            found.append((macro.name, d, ", ".join(named[-1].args[1:])))
    return found


def _extend_macro(text: str, directive: cpp.Directive, line: str) -> str:
    """``text`` with ``line`` as the new last line of ``directive``'s body.

    The body keeps its style: the old last line gets the ``;`` it lacked, the new one ends
    as the old one did (upstream: without ``;``, the invocation supplies it), and the ``\\``
    stay in one column, moved right only when a line would not fit before it.
    """
    rows = text[directive.start : directive.end].split("\n")
    last = rows[-1].rstrip()
    indent = last[: len(last) - len(last.lstrip())] if len(rows) > 1 else "  "
    new_last = indent + line + (";" if last.endswith(";") else "")
    contents = [r.rstrip()[:-1].rstrip() for r in rows[:-1]] + [last.removesuffix(";") + ";"]
    column = max([len(r.rstrip()) - 1 for r in rows[:-1]] + [max(len(c) for c in contents) + 1])
    body = "\n".join([c.ljust(column) + "\\" for c in contents] + [new_last])
    return text[: directive.start] + body + text[directive.end :]


@dataclass(frozen=True)
class _Plan:
    """Where a new functor's registrations go in one file."""

    text: str  # the file with the list macros' bodies extended
    macro_lines: tuple[tuple[str, str], ...]  # (list macro, the line added to its body)
    lines: tuple[str, ...]  # registration lines for the end of the file
    anchor: int | None  # the functor goes after this line; None: at the end, before ``lines``


def _plan(text: str, path: str, kernel: str, arity: int, outputs: dict[str, str]) -> _Plan:
    """List macros first (the file's own way), then :func:`registration_lines` for the rest."""
    current = text
    parsed = metal.parse(text, path)
    left = set(outputs.items())
    macro_lines: list[tuple[str, str]] = []
    # from the end of the file, so an edit never moves a directive still to be looked at
    for name, directive, args in reversed(_list_macros(cpp.lex(text, path), parsed, arity)):
        line = f"{_CORE[arity]}({kernel}, {args})"
        candidate = _extend_macro(current, directive, line)
        try:
            read = metal.parse(candidate, path)
        except ParseError:
            continue
        new = unplaced(r for r in read.registrations if r.kernel == kernel) - unplaced(
            r for r in parsed.registrations if r.kernel == kernel
        )
        pairs = {(r.input, r.output) for r in new}
        if (
            pairs
            and pairs <= left
            and len(read.unrecognised) == len(parsed.unrecognised)
            and len(read.warnings) == len(parsed.warnings)
        ):
            current, parsed, left = candidate, read, left - pairs
            macro_lines.insert(0, (name, line))
    lines = registration_lines(kernel, arity, dict(left), text=current, path=path) if left else []
    anchor = None
    if macro_lines:
        # before the first invocation that instantiates it, after the functors above it
        first = min(r.span.start for r in parsed.registrations if r.kernel == kernel)
        ends = [f.span.end for f in parsed.functors if f.span.end < first]
        anchor = max(ends) if ends else first - 1
    return _Plan(current, tuple(macro_lines), tuple(lines), anchor)


# --- the functor ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Overload:
    trait: str | None  # the type trait enabling it (``is_integral_v``); None: every T
    returns: str  # ``T`` or a Metal type


def one_template(outputs: Mapping[str, str]) -> bool:
    """Whether one unconstrained ``template <typename T>`` operator() serves every input of
    ``outputs`` (all keep their type, or all give one type): the body is then the same math
    for real and complex inputs, else each kind of input has an overload of its own."""
    try:
        return len(_overloads(outputs, None, 1)) == 1
    except ValueError:
        return False


def _overloads(outputs: Mapping[str, str], code: str | None, arity: int) -> list[_Overload]:
    """The operator() overloads ``outputs`` needs, with the traits the file spells.

    Each kind of input (floating, integral, complex) returns ``T`` or one fixed type; when
    all kinds agree one unconstrained template does. The traits are c10/metal's scalar ones
    where the file uses them (UnaryKernel.metal; the guide's unary example, when ``code`` is
    None) and wherever a complex overload must be told apart from a floating one; metal's
    own elsewhere (BinaryKernel.metal, the guide's atan2).
    """
    returns: dict[str, str] = {}
    for kind, members in _KINDS:
        outs = {i: o for i, o in outputs.items() if i in members}
        if not outs:
            continue
        if all(i == o for i, o in outs.items()):
            returns[kind] = "T"
        elif len(set(outs.values())) == 1:
            returns[kind] = DTYPE_TO_METAL[next(iter(outs.values()))]
        else:
            raise ValueError(
                f"{kind} inputs give {_describe(outs.items())}: one overload per kind of "
                "input returns T or one type, so split the registrations by hand"
            )
    if len(set(returns.values())) == 1:
        return [_Overload(None, next(iter(returns.values())))]
    uses_scalar = _SCALAR_TRAIT_USE.search(code) if code is not None else arity == 1
    if "complex" in returns or uses_scalar:
        prefix = "" if code is None or _USES_C10_METAL.search(code) else "c10::metal::"
        traits = {k: prefix + v for k, v in _SCALAR_TRAITS.items()}
    else:
        traits = _METAL_TRAITS
    return [_Overload(traits[kind], ret) for kind, ret in returns.items()]


def _todo(kernel: str, arity: int, returns: str) -> str:
    return f"// TODO: the math: return {kernel}({', '.join(_PARAMS[arity])}) as {returns}"


def _functor_text(kernel: str, arity: int, overloads: list[_Overload], body: str | None) -> str:
    """``struct KERNEL_functor`` with ``body`` (None: a TODO) in every overload."""
    params = ", ".join(f"const T {p}" for p in _PARAMS[arity])
    parts = [f"struct {kernel}_functor {{\n"]
    for o in overloads:
        if o.trait is None:
            parts.append("  template <typename T>\n")
        else:
            enable = f"enable_if_t<{o.trait}<T>, bool> = true>"
            head = f"  template <typename T, {enable}\n"
            # clang-format's break when it does not fit, as in div_true_functor
            parts.append(
                head
                if len(head) <= _COLUMNS + 1
                else f"  template <\n      typename T,\n      {enable}\n"
            )
        stmt = textwrap.indent(body or _todo(kernel, arity, o.returns), "    ")
        parts.append(f"  inline {o.returns} operator()({params}) {{\n{stmt}\n  }}\n")
    return "".join(parts) + "};\n"


def functor_skeleton(
    kernel: str, arity: int, outputs: Mapping[str, str], *, text: str | None = None
) -> str:
    """The functor and registrations a contributor fills in; shown, never written as is.

    With ``text`` (the .metal file) they follow that file: its traits, its list and
    convenience macros. :func:`functor_skeleton_edit` shows the same as a diff of the file.
    """
    wanted = _check_args(kernel, arity, outputs)
    code = None if text is None else cpp.lex(text, "<metal>").masked
    functor = _functor_text(kernel, arity, _overloads(wanted, code, arity), None)
    if text is None:
        lines = registration_lines(kernel, arity, wanted)
    else:
        plan = _plan(text, "<metal>", kernel, arity, wanted)
        lines = [f"// add to the body of #define {m}: {line}" for m, line in plan.macro_lines]
        lines += plan.lines
    return functor + "\n" + "\n".join(lines) + "\n"


def validate_body(body: str) -> str:
    """The stripped body if it can stand as an operator() body; ValueError saying why not."""
    stripped = textwrap.dedent(body).strip()
    if not stripped:
        raise ValueError("the functor body is empty: write the operator() statements")
    try:
        source = cpp.lex(stripped, "<body>")
    except ParseError as exc:
        raise ValueError(f"the functor body does not lex: {exc}") from None
    code = source.masked
    if source.directives:
        raise ValueError("the functor body holds a preprocessor directive; keep it to C++")
    stack: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in code:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            raise ValueError(f"unbalanced {ch!r} in the functor body")
    if stack:
        raise ValueError(f"unclosed {stack[-1]!r} in the functor body")
    if not code.rstrip().endswith((";", "}")):
        raise ValueError("the functor body must end with ';' or '}'")
    if not re.search(r"\breturn\b", code):
        raise ValueError("the functor body never returns a value")
    return stripped


def add_functor(
    text: str,
    path: str,
    kernel: str,
    arity: int,
    body: str,
    outputs: Mapping[str, str],
) -> FileEdit:
    """Add ``struct KERNEL_functor`` with ``body`` in every overload, and its registrations.

    Without a list macro to extend, the functor and its registration lines are appended to
    the file; with one, the functor goes after the functors above the macro's first
    invocation. Refuses (ValueError) a bad kernel name, arity, dtype or body, and
    (EditVerificationError) a functor or registration that already exists in the file.
    Kernel names are global to the metallib: the caller checks the other .metal files
    (``MetalKernels.functor``) first.
    """
    return _edit(text, path, kernel, arity, body, outputs)


def functor_skeleton_edit(
    text: str, path: str, kernel: str, arity: int, outputs: Mapping[str, str]
) -> FileEdit:
    """:func:`add_functor` with a ``// TODO: the math`` body: a dry-run's diff, never written."""
    return _edit(text, path, kernel, arity, None, outputs)


def add_registrations(
    text: str, path: str, kernel: str, arity: int, outputs: Mapping[str, str]
) -> FileEdit | None:
    """Register the contributor's own ``KERNEL_functor`` (in ``path``) for the pairs of
    ``outputs`` it lacks, in the file's way (:func:`add_functor`'s placement); None when
    every pair is registered already. The guide's order: the math is written first, by
    hand, and the registrations follow from the dtypes PyTorch computes.
    """
    wanted = _check_args(kernel, arity, outputs)
    before = metal.parse(text, path)
    if not any(f.name == kernel for f in before.functors):
        raise EditVerificationError(f"{path}: no {kernel}_functor to register; nothing was written")
    # an input registered already keeps what the contributor chose for it
    have = {r.input for r in before.registrations if r.kernel == kernel}
    left = {i: o for i, o in wanted.items() if i not in have}
    if not left:
        return None
    plan = _plan(text, path, kernel, arity, left)
    after = plan.text
    if plan.lines:
        sep = "" if after.endswith("\n\n") else "\n" if after.endswith("\n") else "\n\n"
        after += sep + "\n".join(plan.lines) + "\n"
    pairs = expected_pairs(left)
    _verify(before, after, path, kernel, pairs, new_functor=False)
    via = "".join(f" via {m}" for m, _ in plan.macro_lines)
    return FileEdit(
        path,
        text,
        after,
        f"register {kernel}_functor: {len(plan.lines) + len(plan.macro_lines)} registration "
        f"line(s){via} ({_describe(pairs)})",
    )


def _edit(
    text: str,
    path: str,
    kernel: str,
    arity: int,
    body: str | None,
    outputs: Mapping[str, str],
) -> FileEdit:
    wanted = _check_args(kernel, arity, outputs)
    stmt = None if body is None else validate_body(body)
    before = metal.parse(text, path)
    source = cpp.lex(text, path)
    pairs = expected_pairs(wanted)
    existing = next((f for f in before.functors if f.name == kernel), None)
    if existing is not None or re.search(rf"\bstruct\s+{kernel}_functor\b", source.masked):
        where = f" at {existing.span}" if existing else ""
        raise EditVerificationError(
            f"{path}: {kernel}_functor already exists{where}; edit it there instead of adding one"
        )
    clash = [r for r in before.registrations if r.kernel == kernel and (r.input, r.output) in pairs]
    if clash:
        raise EditVerificationError(
            f"{path}: {kernel} is already registered for {clash[0].input} at {clash[0].span}; "
            "a second registration of the same kernel name does not compile"
        )
    functor = _functor_text(kernel, arity, _overloads(wanted, source.masked, arity), stmt)
    plan = _plan(text, path, kernel, arity, wanted)
    after = plan.text
    if plan.anchor is not None:
        rows = after.splitlines(keepends=True)
        head, tail = rows[: plan.anchor], rows[plan.anchor :]
        before_gap = "\n" if head and head[-1].strip() else ""
        after_gap = "\n" if tail and tail[0].strip() else ""
        after = "".join([*head, before_gap, functor, after_gap, *tail])
    block = "\n".join(plan.lines) + "\n" if plan.lines else ""
    if plan.anchor is None:
        block = functor + "\n" + block
    if block:
        sep = (
            "" if after.endswith("\n\n") or not after else "\n" if after.endswith("\n") else "\n\n"
        )
        after += sep + block
    _verify(before, after, path, kernel, pairs)
    what = "skeleton of " if body is None else ""
    via = "".join(f" via {m}" for m, _ in plan.macro_lines)
    return FileEdit(
        path,
        text,
        after,
        f"add {what}{kernel}_functor and {len(plan.lines) + len(plan.macro_lines)} "
        f"registration line(s){via} ({_describe(pairs)})"
        + (" (TODO: the math)" if body is None else ""),
    )


def _verify(
    before: metal.MetalFile,
    after_text: str,
    path: str,
    kernel: str,
    pairs: set[Pair],
    *,
    new_functor: bool = True,
) -> None:
    """Re-read the edited file: one new functor (none with ``new_functor=False``), exactly
    ``pairs`` newly registered for it, and every other functor, registration and
    unrecognised line as it was (moved or not)."""
    try:
        after = metal.parse(after_text, path)
    except ParseError as exc:
        raise EditVerificationError(f"{path}: the edited file does not parse: {exc}") from None
    problems = []
    added = unplaced(after.functors) - unplaced(before.functors)
    if unplaced(before.functors) - unplaced(after.functors) or [
        f.name for f in added.elements()
    ] != ([kernel] if new_functor else []):
        problems.append(f"functors changed other than adding {kernel}_functor"
                        if new_functor else "functors changed")  # fmt: skip

    def others(f: metal.MetalFile) -> Counter:
        return unplaced(r for r in f.registrations if r.kernel != kernel)

    def own(f: metal.MetalFile) -> Counter:
        return unplaced(r for r in f.registrations if r.kernel == kernel)

    if others(after) != others(before) or own(before) - own(after):
        problems.append("existing registrations changed")
    new = own(after) - own(before)
    if {(r.input, r.output) for r in new} != pairs:
        got = sorted({(r.input, r.output) for r in new}, key=_pair_key)
        problems.append(
            f"new registrations {got} do not cover exactly {sorted(pairs, key=_pair_key)}"
        )
    if unplaced(after.unrecognised) != unplaced(before.unrecognised) or len(after.warnings) != len(
        before.warnings
    ):
        problems.append("the edit introduced unrecognised lines or warnings")
    if problems:
        raise EditVerificationError(f"{path}: {'; '.join(problems)}; nothing was written")
