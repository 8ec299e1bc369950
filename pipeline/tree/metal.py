"""Reader for the Metal kernels (``aten/src/ATen/native/mps/kernels/*.metal``).

It finds functors (``struct NAME_functor {...}``, or one-line macros that generate one)
and registrations: every top-level macro call is expanded with the ``#define``s of the same
file (plus fallback definitions of the well-known convenience macros) down to the core
``REGISTER_*`` macros of ``c10/metal/indexing.h``, whose arguments give the dtype pairs.
Lexing, macro expansion and the namespace-scope scan are :mod:`pipeline.tree.cpp`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.dtypes import METAL_TO_DTYPE
from pipeline.tree import parse_each, paths
from pipeline.tree.cpp import (
    Macro,
    MacroError,
    MacroScope,
    Token,
    call_args,
    collect_args,
    detokenize,
    expand_tokens,
    lex,
    next_significant,
    parse_define,
    scan,
)
from pipeline.tree.span import Span, Unrecognised

PATTERNS: tuple[str, ...] = (paths.KERNELS_METAL,)


@dataclass(frozen=True)
class Functor:
    """``struct NAME_functor`` (``name`` is NAME); ``macro`` names the generating macro."""

    name: str
    span: Span
    macro: str | None


@dataclass(frozen=True)
class Registration:
    """One kernel instantiation by a core macro; dtypes canonical (``float32``...)."""

    kernel: str
    input: str
    output: str
    core_macro: str
    written_macro: str  # what the line says: REGISTER_INT2FLOAT_BINARY_OP
    span: Span


@dataclass(frozen=True)
class MetalFile:
    path: str
    functors: tuple[Functor, ...]
    registrations: tuple[Registration, ...]
    unrecognised: tuple[Unrecognised, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class MetalKernels:
    files: tuple[MetalFile, ...]
    warnings: tuple[str, ...]
    # what could not be read (also in warnings): kernels may be missing from ``files``
    gaps: tuple[str, ...] = ()
    _functors: dict[str, Functor] = field(default_factory=dict, compare=False, repr=False)

    def functor(self, name: str) -> Functor | None:
        """The functor ``NAME_functor`` of kernel ``name`` in any file (first wins)."""
        if not self._functors:
            for f in self.files:
                for fn in f.functors:
                    self._functors.setdefault(fn.name, fn)
        return self._functors.get(name)

    def registrations_for(self, kernel: str) -> tuple[Registration, ...]:
        """Every registration of ``kernel`` across files, in file order."""
        return tuple(r for f in self.files for r in f.registrations if r.kernel == kernel)


# core macro -> (argument count, index of input type, index of output type)
CORE_MACROS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "REGISTER_UNARY_OP": ((3, 1, 2),),
    "REGISTER_UNARY_ALPHA_OP": ((4, 1, 3),),
    "REGISTER_BINARY_OP": ((3, 1, 2),),
    "REGISTER_OPMATH_BINARY_OP": ((3, 1, 2),),
    # the current form carries the alpha type; older trees have (NAME, IN, OUT)
    "REGISTER_BINARY_ALPHA_OP": ((4, 1, 3), (3, 1, 2)),
    "REGISTER_TERNARY_OP": ((3, 1, 2),),
    "REGISTER_OPMATH_TERNARY_OP": ((3, 1, 2),),
    "REGISTER_BINARY_INDEXING_OP": ((2, 1, 1),),
    # newer indexing.h: the `_strided_castout_` variant of a binary op (comparisons)
    "REGISTER_BINARY_CASTOUT_OP": ((3, 1, 2),),
}

# Definitions used when a file calls a convenience macro it does not define itself (it
# comes from an included header). They are written from the type lists in FORMATS.md.
_INTEGERS = ("long", "int", "short", "uchar", "char")
_FLOATS = ("float", "half", "bfloat")


def _define(name: str, core: str, pairs: Iterable[tuple[str, str]]) -> str:
    calls = "; ".join(f"{core}(NAME, {i}, {o})" for i, o in pairs)
    return f"#define {name}(NAME) {calls}"


# convenience macro -> (core macro it calls, the (input, output) Metal type pairs it registers);
# the Metal editor picks its macros from this table too.
CONVENIENCE_MACROS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "REGISTER_FLOAT_BINARY_OP": ("REGISTER_BINARY_OP", tuple((t, t) for t in _FLOATS)),
    "REGISTER_OPMATH_FLOAT_BINARY_OP": (
        "REGISTER_OPMATH_BINARY_OP",
        tuple((t, t) for t in _FLOATS),
    ),
    "REGISTER_INT2FLOAT_BINARY_OP": (
        "REGISTER_BINARY_OP",
        tuple((t, "float") for t in (*_INTEGERS, "bool")),
    ),
    "REGISTER_INTEGER_BINARY_OP": (
        "REGISTER_BINARY_OP",
        tuple((t, t) for t in (*_INTEGERS, "bool")),
    ),
    "REGISTER_INTEGER_BINARY_OP_NO_BOOL": ("REGISTER_BINARY_OP", tuple((t, t) for t in _INTEGERS)),
    "REGISTER_COMPARISON_OP": (
        "REGISTER_BINARY_OP",
        tuple((t, "bool") for t in (*_FLOATS, *_INTEGERS, "bool")),
    ),
    "REGISTER_COMPLEX_EQ_OP": ("REGISTER_BINARY_OP", (("float2", "bool"), ("half2", "bool"))),
}

FALLBACK_DEFINES: tuple[str, ...] = (
    *(_define(name, core, pairs) for name, (core, pairs) in CONVENIENCE_MACROS.items()),
    # functor generators from c10/metal headers: only the generated name matters here
    "#define DEFINE_UNARY_FLOATING_FUNCTOR(NAME) struct NAME##_functor {}",
    "#define DEFINE_BINARY_COMPARISON_FUNCTOR(NAME, OP) struct NAME##_functor {}",
)
FALLBACK_MACROS: dict[str, Macro] = {
    m.name: m for m in (parse_define(d) for d in FALLBACK_DEFINES) if m is not None
}

_REGISTRATION_LIKE = re.compile(r"(?:REGISTER|INSTANTIATE)_\w+\Z")
_FUNCTOR_MACRO = re.compile(r"DEFINE_\w*FUNCTOR\Z")
_FUNCTOR_STRUCT = re.compile(r"\bstruct\s+([A-Za-z_]\w*)_functor\b\s*(?:[{:]|final\b)")
_FUNCTOR_HEADER = re.compile(r"(?:\btemplate\s*<[^{]*>\s*)?\bstruct\s+([A-Za-z_]\w*)_functor\b")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")


@dataclass(frozen=True)
class CoreCall:
    """A core registration call found in an expansion."""

    macro: str
    args: tuple[str, ...]


def core_calls(tokens: list[Token]) -> tuple[list[CoreCall], list[str]]:
    """Core macro calls in expanded tokens, and other registration-like calls left over."""
    calls: list[CoreCall] = []
    leftovers: list[str] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "ident" and (text in CORE_MACROS or _REGISTRATION_LIKE.match(text)):
            j = next_significant(tokens, i + 1)
            if j < len(tokens) and tokens[j][1] == "(":
                args, k = collect_args(tokens, j)
                if text in CORE_MACROS:
                    calls.append(CoreCall(text, tuple(detokenize(a).strip() for a in args)))
                else:
                    leftovers.append(text)
                i = k
                continue
        i += 1
    return calls, leftovers


def _registration(
    call: CoreCall, written: str, span: Span
) -> tuple[Registration | None, str | None]:
    """A Registration from a core call, or (None, reason) when its types are not dtypes."""
    forms = CORE_MACROS[call.macro]
    form = next((f for f in forms if f[0] == len(call.args)), None)
    if form is None:
        wanted = " or ".join(str(f[0]) for f in forms)
        return None, f"{call.macro} takes {wanted} arguments, got {len(call.args)}"
    _, i_in, i_out = form
    kernel = call.args[0]
    if not _IDENT.match(kernel):
        return None, f"{call.macro}: kernel name {kernel!r} is not an identifier"
    types = []
    for raw in (call.args[i_in], call.args[i_out]):
        metal_type = " ".join(raw.split())
        if metal_type not in METAL_TO_DTYPE:
            return None, (
                f"{call.macro}({kernel}, ...): type {metal_type!r} is not a Metal dtype "
                "(a template parameter or typedef?); dtypes cannot be known"
            )
        types.append(METAL_TO_DTYPE[metal_type])
    return Registration(kernel, types[0], types[1], call.macro, written, span), None


def parse(text: str, path: str) -> MetalFile:
    """Functors, registrations and unrecognised registration-like lines of one .metal file."""
    source = lex(text, path)
    items, _ = scan(source)
    # core macros are the terminals of expansion, even in a file that defines them
    scope = MacroScope(source, FALLBACK_MACROS, CORE_MACROS)
    functors: list[Functor] = []
    registrations: list[Registration] = []
    unrecognised: list[Unrecognised] = []
    for item in items:
        span = source.span(item.start, item.end)
        if item.kind == "block":
            header = _FUNCTOR_HEADER.search(item.header(source.masked))
            if header and "(" not in item.header(source.masked)[: header.start()]:
                functors.append(Functor(header.group(1), span, None))
            continue
        # a call item always has its name and parentheses
        if item.kind != "call" or item.name is None or item.args is None:
            continue
        macros = scope.at(item.start)
        name = item.name
        written = source.code[item.start : item.end].strip()
        if name not in macros and name not in CORE_MACROS:
            if _FUNCTOR_MACRO.match(name):
                args = call_args(source, item)
                if args and _IDENT.match(args[0]):
                    functors.append(Functor(args[0], span, name))
                    continue
            if _REGISTRATION_LIKE.match(name):
                unrecognised.append(
                    Unrecognised(
                        span,
                        written,
                        f"{name} is neither defined in this file nor a known registration macro",
                    )
                )
            continue
        call_text = source.code[item.start : item.args[1] + 1]
        try:
            tokens = expand_tokens(call_text, macros)
            calls, leftovers = core_calls(tokens)
        except MacroError as exc:
            unrecognised.append(Unrecognised(span, written, f"cannot expand {name}: {exc}"))
            continue
        expanded = detokenize(tokens) if ("ident", "struct") in tokens else ""
        for generated in _FUNCTOR_STRUCT.finditer(expanded):
            functors.append(Functor(generated.group(1), span, name))
        for call in calls:
            reg, reason = _registration(call, name, span)
            if reg is not None:
                registrations.append(reg)
            elif reason is not None:  # _registration gives a reason whenever no registration
                unrecognised.append(Unrecognised(span, written, reason))
        for left in dict.fromkeys(leftovers):
            unrecognised.append(
                Unrecognised(
                    span,
                    written,
                    f"{name} expands to a call of {left}, which is not a core registration "
                    "macro and cannot be expanded further (undefined or self-referential)",
                )
            )
        registers = _REGISTRATION_LIKE.match(name)
        if registers and not calls and not leftovers and not _FUNCTOR_STRUCT.search(expanded):
            unrecognised.append(
                Unrecognised(
                    span,
                    written,
                    f"{name} instantiates kernels directly, not through a core "
                    "REGISTER_* macro of c10/metal/indexing.h; dtypes not tracked",
                )
            )
    scope.at(len(text) + 1)
    warnings = scope.warnings + _duplicate_warnings(registrations)
    return MetalFile(
        path, tuple(functors), tuple(registrations), tuple(unrecognised), tuple(warnings)
    )


def _duplicate_warnings(registrations: list[Registration]) -> list[str]:
    seen: dict[tuple[str, str, str, str], Registration] = {}
    warnings = []
    for r in registrations:
        key = (r.kernel, r.input, r.output, r.core_macro)
        if key in seen:
            warnings.append(
                f"{r.span}: {r.core_macro}({r.kernel}, {r.input} -> {r.output}) is already "
                f"registered at {seen[key].span}: duplicate kernel names do not compile"
            )
        else:
            seen[key] = r
    return warnings


def read(root: Path, *, strict: bool = False) -> MetalKernels:
    """Parse every .metal kernel file under ``root``; one that cannot be read is a gap
    (see :func:`pipeline.tree.parse_each`)."""
    files, gaps = parse_each(root, PATTERNS, parse, strict=strict)
    warnings = gaps + [w for f in files for w in f.warnings]
    return MetalKernels(tuple(files), tuple(warnings), tuple(gaps))
