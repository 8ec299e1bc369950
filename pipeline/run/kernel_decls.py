"""The kernels of a ``.metal`` file, read from its preprocessed text, for check-kernel.

A file's kernels are its ``[[kernel]]`` (or ``kernel``) functions: the plain ones, and the
explicit instantiations of the templates (``template [[host_name("softmax_float")]]
[[kernel]] void softmax<float>(...);``), most of them written by a file-local macro. The
preprocessor expands those macros: the file is preprocessed through the shim with
``MPS_KERNEL_PARSE`` (which leaves ``kernel``, ``device``, ``constant`` and ``threadgroup``
as they are written) and its own lines, as the line markers say, are read here.

Each parameter is a buffer (``[[buffer(N)]]``, or the next index when it has no attribute),
a thread-position attribute, or something the runtime does not model (textures, samplers,
threadgroup memory set by the host, stage_in): a kernel with one of those is listed, not run.
An instantiation may leave its parameters unnamed and without attributes
(``fill<T>(device T*, constant T&, uint)``): each such one takes its primary template's.

:func:`rewrite_threadgroup` turns the threadgroup memory a kernel body declares into static
storage poisoned per threadgroup (see metal_shim/mps_kernel_runtime.h), keeping every line
where it was.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pipeline.tree.cpp import lex, match_close, split_args

# the thread-position attributes the runtime gives (metal_shim/mps_kernel_runtime.h's Attr)
ATTRIBUTES = (
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threads_per_grid",
    "threadgroups_per_grid",
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup",
    "simdgroups_per_threadgroup",
    "dispatch_threads_per_threadgroup",
)
# Metal spells some of them two ways
_ALIASES = {"thread_execution_width": "threads_per_simdgroup"}
_NOT_MODELLED_TYPE = re.compile(r"\b(texture\w*|sampler|depth\w*|imageblock\w*|tensor)\b")
# a line marker and the newline before it: `# 12 "/x/a.h" 2` (a literal first: the search
# skips ahead to it, where `^` with re.M would try every position)
_MARKER = re.compile(r'\n# (\d+) "([^"]*)"[^\n]*')
# a kernel's name may be qualified: c10/metal's REGISTER_UNARY_OP instantiates
# `::c10::metal::unary_dense<...>`
# `kernel void name(` or, as upstream's SpecialOps writes it, `void kernel name(`
_VOID = re.compile(r"\bvoid\s+(kernel\s+)?((?:::\s*)?(?:\w+\s*::\s*)*\w+)\s*")
_ATTRIBUTE = re.compile(r"\[\[\s*([\w:]+)\s*(?:\((.*?)\))?\s*\]\]", re.S)
_KERNEL = re.compile(r"\bkernel\b")
_HOST_NAME = re.compile(r'\[\[\s*host_name\s*\(((?:\s*"[^"]*")+)\s*\)\s*\]\]')
_LITERAL = re.compile(r'"([^"]*)"')
_MAX_THREADS = re.compile(r"\[\[\s*max_total_threads_per_threadgroup\s*\((.*?)\)\s*\]\]", re.S)
_LAST_NAME = re.compile(r"(\w+)\s*$")
# a parameter whose last word follows one of these, or is a built-in type, has no name
_TYPE_END = re.compile(
    r"(?:^|\s)(?:const|volatile|device|constant|thread|threadgroup|unsigned|signed)$"
)
_BUILTIN_TYPES = frozenset(
    ("bool", "char", "short", "int", "long", "float", "half", "bfloat", "double", "uchar")
    + ("ushort", "uint", "ulong")
)


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``kind`` is "buffer" (``index``), "attr" (``attr``) or
    "unmodelled" (``why``)."""

    type: str  # as written in the instantiation, address space included
    name: str
    kind: str
    index: int = -1
    attr: str = ""
    why: str = ""


@dataclass(frozen=True)
class KernelDecl:
    """One kernel a host can ask for by name."""

    host_name: str
    function: str  # the C++ function
    template_args: str | None  # "float, int" for an instantiation, None for a plain kernel
    params: tuple[Param, ...]
    line: int  # of the .metal file
    max_threads: str  # the [[max_total_threads_per_threadgroup]] expression, or "1024"

    @property
    def not_modelled(self) -> tuple[str, ...]:
        return tuple(p.why for p in self.params if p.kind == "unmodelled")

    @property
    def buffers(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "buffer")


@dataclass(frozen=True)
class Segment:
    """A run of a preprocessor's output between two line markers: lines of one file."""

    path: str
    line: int  # the file's line of its first
    start: int  # its offsets in the output; ``end`` is before the newline that ends it
    end: int

    def lines(self, preprocessed: str) -> list[str]:
        return preprocessed[self.start : self.end].split("\n")


def segments(preprocessed: str) -> list[Segment]:
    """The runs of lines of a preprocessor's output (GCC and clang line markers): found
    marker by marker, never line by line (most of a unit is system headers' lines)."""
    found, path, line, pos = [], "", 0, 0
    # offsets in "\n" + preprocessed: a match's start is its line's in the output
    for m in _MARKER.finditer("\n" + preprocessed):
        if m.start() > pos:  # the run ends with the newline before the marker
            found.append(Segment(path, line, pos, m.start() - 1))
        path, line, pos = m.group(2), int(m.group(1)), m.end()
    if pos < len(preprocessed):
        end = len(preprocessed) - preprocessed.endswith("\n")
        found.append(Segment(path, line, pos, end))
    return found


def own_lines(preprocessed: str, metal_path: str) -> list[tuple[int, str]]:
    """(line, text) of the lines of ``metal_path`` in a preprocessor's output."""
    return [
        (s.line + n, text)
        for s in segments(preprocessed)
        if s.path == metal_path
        for n, text in enumerate(s.lines(preprocessed))
    ]


@dataclass(frozen=True)
class _Head:
    """A `void NAME[<ARGS>](PARAMS)` of a kernel: where it starts, what precedes it."""

    start: int
    name: str
    template_args: str | None
    prefix: str
    params_text: str
    after: str  # the first character after the parameters


_NEXT_CHAR = re.compile(r"\s*(\S)")
_DECL_END = re.compile(r"[;{}]")


def _heads(text: str, path: str) -> Iterator[_Head]:
    masked = lex(text, path).masked
    # where each declaration may start: after a `;`, `{` or `}` (bisected for each head)
    ends = [m.start() for m in _DECL_END.finditer(masked)]
    for m in _VOID.finditer(masked):
        pos = m.end()
        template_args = None
        if masked.startswith("<", pos):
            close = _close_angle(masked, pos)
            if close < 0:
                continue
            template_args = text[pos + 1 : close].strip()
            pos = close + 1
            while pos < len(masked) and masked[pos].isspace():
                pos += 1
        if not masked.startswith("(", pos):
            continue
        before = bisect.bisect_left(ends, m.start())
        prefix = text[ends[before - 1] + 1 if before else 0 : m.start()]
        if not (m.group(1) or _KERNEL.search(prefix) or _HOST_NAME.search(prefix)):
            continue
        close = match_close(masked, pos, path)
        next_char = _NEXT_CHAR.match(masked, close + 1)
        after = next_char.group(1) if next_char else ""
        name = re.sub(r"\s+", "", m.group(2))
        yield _Head(m.start(), name, template_args, prefix, text[pos + 1 : close], after)


def _header_templates(preprocessed: str, metal_path: str) -> dict[str, list[_Head]]:
    """The kernel templates the file's own headers and c10/metal's define (not the system's
    nor the shim's), by unqualified name: the primaries of instantiations like c10/metal's
    REGISTER_UNARY_OP ones, which name `::c10::metal::unary_dense` and leave `uint index`
    without its attribute."""
    text = "\n".join(
        preprocessed[s.start : s.end]
        for s in segments(preprocessed)
        if s.path != metal_path and s.path.startswith("/") and not s.path.startswith("/usr/")
        and "/metal_shim/" not in s.path
    )  # fmt: skip
    found: dict[str, list[_Head]] = {}
    for head in _heads(text, "<headers>"):
        if re.search(r"\btemplate\s*<", head.prefix) and head.after == "{":
            found.setdefault(head.name.split("::")[-1], []).append(head)
    return found


def parse_kernels(preprocessed: str, metal_path: str) -> list[KernelDecl]:
    """The kernels of ``metal_path`` in its preprocessed text, in file order."""
    lines = own_lines(preprocessed, metal_path)
    text = "\n".join(t for _, t in lines)
    starts = [0]
    for _, t in lines:
        starts.append(starts[-1] + len(t) + 1)

    def line_at(offset: int) -> int:
        lo, hi = 0, len(lines) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lines[lo][0] if lines else 0

    templates = _header_templates(preprocessed, metal_path)
    found: list[KernelDecl] = []
    for head in _heads(text, metal_path):
        key = head.name.split("::")[-1]
        if re.search(r"\btemplate\s*<", head.prefix):
            # a primary template's definition (a declaration may leave the attributes out)
            if head.after == "{":
                templates.setdefault(key, []).append(head)
            continue
        host = _HOST_NAME.search(head.prefix)
        explicit = re.search(r"\btemplate\b", head.prefix) is not None
        if not explicit and head.after != "{":
            continue  # a declaration: its definition is the kernel
        primaries = templates.get(key, [])
        limit = _MAX_THREADS.search(head.prefix)
        if limit is not None:
            max_threads = limit.group(1).strip()
        else:
            max_threads = next(
                (x for x in (_primary_limit(p, head.template_args) for p in primaries) if x),
                "1024",
            )
        found.append(
            KernelDecl(
                host_name="".join(_LITERAL.findall(host.group(1))) if host else head.name,
                function=head.name,
                template_args=head.template_args,
                params=_params(head.params_text, tuple(p.params_text for p in primaries)),
                line=line_at(head.start),
                max_threads=max_threads,
            )
        )
    return found


_TEMPLATE_PARAMS = re.compile(r"\btemplate\s*<")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _primary_limit(primary: _Head, args: str | None) -> str | None:
    """The primary template's [[max_total_threads_per_threadgroup]] expression for an
    instantiation of ``args``: each template parameter it names (upstream's ReduceOps
    writes ``TG_X * TG_Y``) given the instantiation's argument, or the parameter's default,
    so that it reads outside the template."""
    limit = _MAX_THREADS.search(primary.prefix)
    if limit is None:
        return None
    opening = _TEMPLATE_PARAMS.search(primary.prefix)
    close = _close_angle(primary.prefix, opening.end() - 1) if opening else -1
    if opening is None or close < 0:
        return limit.group(1).strip()
    given = split_args(args or "", templates=True)
    values: dict[str, str] = {}

    def substituted(text: str) -> str:
        return _NAME.sub(
            lambda m: f"({values[m.group()]})" if m.group() in values else m.group(), text
        )

    for n, param in enumerate(split_args(primary.prefix[opening.end() : close], templates=True)):
        declared, _, default = param.partition("=")
        name = _LAST_NAME.match(declared, _last_word_start(declared))
        # a default may name the parameters before it (`uint TG_Y = TG_X`)
        value = given[n] if n < len(given) and given[n] else substituted(default.strip())
        if name and value:
            values[name.group(1)] = value
    return substituted(limit.group(1).strip())


@functools.lru_cache(maxsize=4096)
def _params(params_text: str, primaries: tuple[str, ...] = ()) -> tuple[Param, ...]:
    """``parse_params`` of texts: a template's instantiations mostly repeat their parameters
    (``device void* out``...) and its primary's, parsed once for them all."""
    return parse_params(params_text, [_params(p) for p in primaries])


def _close_angle(text: str, open_pos: int) -> int:
    depth = 0
    for i in range(open_pos, len(text)):
        ch = text[i]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return i
        elif ch in ";{}":
            return -1
    return -1


def _last_word_start(text: str) -> int:
    """Where ``text``'s last word starts (its end when it ends in no word): searched from
    the end, as ``(\\w+)\\s*$`` searched from the start tries every position."""
    end = len(text.rstrip())
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return start


def parse_params(text: str, primaries: Sequence[tuple[Param, ...]] = ()) -> tuple[Param, ...]:
    """The parameters of ``text``; one without attributes takes those of its place in the
    primary template of ``primaries`` with as many parameters."""
    raws = [r for r in split_args(" ".join(text.split()), templates=True) if r]
    primary = next((p for p in primaries if len(p) == len(raws)), None)
    params: list[Param] = []
    next_buffer = 0
    for i, raw in enumerate(raws):
        attrs = _ATTRIBUTE.findall(raw)
        decl = _ATTRIBUTE.sub(" ", raw).strip()
        m = _LAST_NAME.match(decl, _last_word_start(decl))
        ptype = decl[: m.start()].strip() if m else decl
        if m and (not ptype or _TYPE_END.search(ptype) or m.group(1) in _BUILTIN_TYPES):
            ptype, m = decl, None  # unnamed: the last word is the type's
        name = m.group(1) if m else ""
        if not attrs and primary is not None:
            p = primary[i]
            params.append(Param(ptype, name or p.name, p.kind, p.index, p.attr, p.why))
            next_buffer = max(next_buffer, p.index + 1)
            continue
        kinds = dict(attrs)
        attr = next((_ALIASES.get(a, a) for a in kinds if _ALIASES.get(a, a) in ATTRIBUTES), None)
        unmodelled = _NOT_MODELLED_TYPE.search(ptype)
        other = next((a for a in kinds if a != "buffer"), None)
        if attr is not None:
            params.append(Param(ptype, name, "attr", attr=attr))
        elif unmodelled or other:
            why = unmodelled.group(1) if unmodelled else other
            params.append(Param(ptype, name, "unmodelled", why=f"{name}: {why}"))
        else:
            # no attribute but [[buffer(n)]], whose n may be left out
            given = [n for n in kinds.values() if n]
            index = int(given[0], 0) if given else next_buffer
            next_buffer = max(next_buffer, index + 1)
            params.append(Param(ptype, name, "buffer", index=index))
    return tuple(params)


_TG_LOCAL = re.compile(
    r"\bthreadgroup\s+(?P<type>[\w:<>,\s]+?)\s+(?P<name>\w+)\s*(?P<dims>(?:\[[^\];{}]*\]\s*)*);"
)


def rewrite_threadgroup(text: str, path: str) -> str:
    """``text`` with each ``threadgroup T name[N];`` a kernel body declares made static and
    poisoned per threadgroup; line breaks kept."""
    masked = lex(text, path).masked
    out, pos = [], 0
    for m in _TG_LOCAL.finditer(masked):
        if "=" in m.group(0):
            continue
        name = m.group("name")
        decl = text[m.start() : m.end()]
        newlines = decl.count("\n")
        flat = " ".join(decl[len("threadgroup") :].split())
        guard = f"{name}__mps_tg"
        out.append(text[pos : m.start()])
        out.append(
            f"static {flat} static ::uint64_t {guard} = 0; "
            f"::mps_kernel::threadgroup_local(&{name}, &{guard});" + "\n" * newlines
        )
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


# a literal first: the search skips ahead to it (a leading \b would test every position)
_INSTANTIATION = re.compile(r"template\s*\[\[")
_BRACKET_OR_END = re.compile(r"[()\[\]{};]")


def strip_instantiations(preprocessed: str) -> str:
    """A preprocessed unit without the explicit instantiations of kernel templates
    (``template [[host_name("x")]] [[kernel]] void f<float>(...);``, one line each once
    expanded), blanked: the generated callers instantiate what they call, so an error in one
    template is "required from" its own kernels' callers, never from a macro line that
    instantiates other kernels too (and clang refuses those attributes on the host)."""
    out, pos = [], 0
    for m in _INSTANTIATION.finditer(preprocessed):
        before = preprocessed[m.start() - 1 : m.start()]
        if m.start() < pos or before.isalnum() or before == "_":
            continue
        end = _instantiation_end(preprocessed, m.end())
        text = preprocessed[m.start() : end + 1]
        blank = " " * len(text) if "\n" not in text else _BLANK.sub(" ", text)
        out += [preprocessed[pos : m.start()], blank]
        pos = end + 1
    out.append(preprocessed[pos:])
    return "".join(out)


_BLANK = re.compile(r"[^\n]")


def _instantiation_end(text: str, start: int) -> int:
    """Where the declaration from ``start`` ends: its ``;`` outside brackets. An
    instantiation's parameters hold no ``;``: the first one closes it when its brackets
    balance (looked at bracket by bracket only when they do not)."""
    first = text.find(";", start)
    head = text[start:first]
    if first >= 0 and all(head.count(a) == head.count(b) for a, b in ("()", "[]", "{}")):
        return first
    depth = 0
    for b in _BRACKET_OR_END.finditer(text, start):
        ch = b.group()
        if ch == ";" and depth <= 0:
            return b.start()
        depth += 1 if ch in "([{" else -1 if ch != ";" else 0
    return len(text) - 1
