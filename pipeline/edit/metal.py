"""Edits of the Metal kernel files: a new functor plus the registrations covering its dtypes.

The math of a functor is the contributor's: :func:`functor_skeleton` only shows what to
fill in, and :func:`add_functor` writes a functor only around a body the contributor wrote
(``return ...;`` using the parameter names ``x`` for unary, ``a, b`` for binary and
``a, b, c`` for ternary functors).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from pipeline.dtypes import DTYPE_TO_METAL, METAL_TO_DTYPE, sort_key
from pipeline.edit.atomic import FileEdit
from pipeline.errors import EditVerificationError, ParseError
from pipeline.tree import cpp, metal

INTEGRAL: frozenset[str] = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool"})

_PARAMS = {1: ("x",), 2: ("a", "b"), 3: ("a", "b", "c")}
_CORE = {1: "REGISTER_UNARY_OP", 2: "REGISTER_BINARY_OP", 3: "REGISTER_TERNARY_OP"}
# convenience macro -> (dtypes it registers, whether integral inputs produce float), for the
# reader's macros that call the binary core macro with each input type mapped to itself or to
# float (not the opmath or bool-output ones), in the reader's order
_CONVENIENCE: tuple[tuple[str, frozenset[str], bool], ...] = tuple(
    (name, frozenset(METAL_TO_DTYPE[i] for i, _ in pairs), any(o != i for i, o in pairs))
    for name, (core, pairs) in metal.CONVENIENCE_MACROS.items()
    if core == _CORE[2] and all(o in (i, "float") for i, o in pairs)
)
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")


def _check_args(kernel: str, arity: int, dtypes: Iterable[str]) -> list[str]:
    if not _IDENT.match(kernel):
        raise ValueError(f"kernel name {kernel!r} is not a C identifier")
    if arity not in _PARAMS:
        raise ValueError(f"arity must be 1 (unary), 2 (binary) or 3 (ternary), not {arity}")
    wanted = sorted(set(dtypes), key=sort_key)
    if not wanted:
        raise ValueError("no dtypes given: a functor nobody registers is never compiled")
    unknown = [d for d in wanted if d not in DTYPE_TO_METAL]
    if unknown:
        raise ValueError(
            f"no Metal type for {', '.join(unknown)}; MPS kernels support "
            f"{', '.join(sorted(DTYPE_TO_METAL, key=sort_key))}"
        )
    return wanted


def expected_pairs(
    dtypes: Iterable[str], *, integral_to_float: bool = False
) -> set[tuple[str, str]]:
    """The (input, output) dtype pairs a functor for ``dtypes`` gets registered for."""
    return {(d, "float32" if integral_to_float and d in INTEGRAL else d) for d in set(dtypes)}


def registration_lines(
    kernel: str,
    arity: int,
    dtypes: Iterable[str],
    *,
    integral_to_float: bool = False,
    available: Iterable[str] | None = None,
) -> list[str]:
    """Registration macro lines covering exactly ``dtypes`` (canonical names).

    For binary kernels a convenience macro is used when its dtype group is wholly wanted
    and it is ``available`` (None: all of them, as in BinaryKernel.metal); everything else
    gets one core-macro line per dtype.
    """
    wanted = _check_args(kernel, arity, dtypes)
    usable = set(c[0] for c in _CONVENIENCE) if available is None else set(available)
    lines: list[str] = []
    left = set(wanted)
    if arity == 2:
        for macro, group, to_float in _CONVENIENCE:
            if macro not in usable or not group <= left:
                continue
            if group & INTEGRAL and to_float != integral_to_float:
                continue
            lines.append(f"{macro}({kernel});")
            left -= group
    for d in sorted(left, key=sort_key):
        out = "float32" if integral_to_float and d in INTEGRAL else d
        lines.append(f"{_CORE[arity]}({kernel}, {DTYPE_TO_METAL[d]}, {DTYPE_TO_METAL[out]});")
    return lines


def _functor_text(kernel: str, arity: int, body: str, integral_to_float: bool) -> str:
    params = ", ".join(f"const T {p}" for p in _PARAMS[arity])
    floats = ", ".join(f"float({p})" for p in _PARAMS[arity])
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    if not integral_to_float:
        return (
            f"struct {kernel}_functor {{\n"
            "  template <typename T>\n"
            f"  inline T operator()({params}) {{\n"
            f"{body}\n"
            "  }\n"
            "};\n"
        )
    return (
        f"struct {kernel}_functor {{\n"
        "  template <\n"
        "      typename T,\n"
        "      ::metal::enable_if_t<!::metal::is_integral_v<T>, bool> = true>\n"
        f"  inline T operator()({params}) {{\n"
        f"{body}\n"
        "  }\n"
        "  // integral inputs are computed, and returned, in float\n"
        "  template <\n"
        "      typename T,\n"
        "      ::metal::enable_if_t<::metal::is_integral_v<T>, bool> = true>\n"
        f"  inline float operator()({params}) {{\n"
        f"    return {kernel}_functor{{}}({floats});\n"
        "  }\n"
        "};\n"
    )


def functor_skeleton(
    kernel: str, arity: int, dtypes: Iterable[str], *, integral_to_float: bool = False
) -> str:
    """The functor and registrations a contributor fills in; shown, never written as is."""
    lines = registration_lines(kernel, arity, dtypes, integral_to_float=integral_to_float)
    args = ", ".join(_PARAMS[arity])
    todo = f"// TODO: return {kernel}({args}) as a T"
    return _functor_text(kernel, arity, todo, integral_to_float) + "\n" + "\n".join(lines) + "\n"


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
    dtypes: Iterable[str],
    *,
    integral_to_float: bool = False,
) -> FileEdit:
    """Append ``struct KERNEL_functor`` with ``body`` and its registrations to a .metal file.

    Convenience macros are used only when the file defines them. Refuses (ValueError) a bad
    kernel name, arity, dtype or body, and (EditVerificationError) a functor or registration
    that already exists in the file. Kernel names are global to the metallib: the caller
    checks the other .metal files (``MetalKernels.functor``) first.
    """
    wanted = _check_args(kernel, arity, dtypes)
    stmt = validate_body(body)
    before = metal.parse(text, path)
    source = cpp.lex(text, path)
    pairs = expected_pairs(wanted, integral_to_float=integral_to_float)
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
    local, _ = cpp.collect_macros(source)
    lines = registration_lines(
        kernel, arity, wanted, integral_to_float=integral_to_float, available=local
    )
    block = _functor_text(kernel, arity, stmt, integral_to_float) + "\n" + "\n".join(lines) + "\n"
    sep = "" if text.endswith("\n\n") or not text else ("\n" if text.endswith("\n") else "\n\n")
    after = text + sep + block
    _verify(before, after, path, kernel, pairs)
    return FileEdit(
        path,
        text,
        after,
        f"add {kernel}_functor and {len(lines)} registration line(s) "
        f"({', '.join(sorted({d for d, _ in pairs}, key=sort_key))})",
    )


def _verify(
    before: metal.MetalFile, after_text: str, path: str, kernel: str, pairs: set[tuple[str, str]]
) -> None:
    try:
        after = metal.parse(after_text, path)
    except ParseError as exc:
        raise EditVerificationError(f"{path}: the edited file does not parse: {exc}") from None
    n_f, n_r = len(before.functors), len(before.registrations)
    new_functors = after.functors[n_f:]
    new_regs = after.registrations[n_r:]
    problems = []
    if after.functors[:n_f] != before.functors or [f.name for f in new_functors] != [kernel]:
        problems.append(f"functors changed other than adding {kernel}_functor")
    if after.registrations[:n_r] != before.registrations:
        problems.append("existing registrations changed")
    if (
        any(r.kernel != kernel for r in new_regs)
        or {(r.input, r.output) for r in new_regs} != pairs
    ):
        got = sorted((r.input, r.output) for r in new_regs)
        problems.append(f"new registrations {got} do not cover exactly {sorted(pairs)}")
    if after.unrecognised != before.unrecognised or after.warnings != before.warnings:
        problems.append("the edit introduced unrecognised lines or warnings")
    if problems:
        raise EditVerificationError(f"{path}: {'; '.join(problems)}; nothing was written")
