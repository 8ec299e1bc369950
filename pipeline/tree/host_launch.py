"""Kernel launches read from the ``.mm`` host code, for check-kernel.

Where a launch follows the common host patterns, its buffers and grid need not be written in
the launch spec:

- the pipeline state from ``lib.getPipelineStateForFunc(NAME)``, NAME a literal, a
  concatenation of literals and ``scalarToMetalTypeString(t)`` (the kernel's type), or
  ``fmt::format`` of those;
- after ``[encoder setComputePipelineState:pso]``, the buffers from ``mtl_setArgs(encoder,
  ...)`` (``mtl_setArgs<N>`` from index N), ``mtl_setBuffer``/``mtl_setBytes(encoder, x, N)``;
- the grid from ``mtl_dispatch1DJob(encoder, pso, n)``, ``[encoder dispatchThreads:...
  threadsPerThreadgroup:...]`` or ``dispatchThreadgroups:``, of ``MTLSizeMake(...)``.

What is read here is the host's text: its arguments and sizes are C++ expressions over the
host's variables. :func:`complete` turns them into the spec's expressions over the entry's
inputs, or says why it cannot; a launch with anything else between the pipeline state and
the dispatch (``bind_iter_tensors``, a raw ``setBuffer:``, a condition) is kept with the
reason it is not read, never guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.tree import paths
from pipeline.tree.launch import ERROR_BUFFER, OUTPUT, GridKind, LaunchCase, StructArg

HOST_DIR = paths.MPS_DIR
TYPE_PART = "[A-Za-z0-9]+"  # scalarToMetalTypeString's part of a host name

_PSO = re.compile(r"(\w+)\s*=\s*(?:[\w:]+(?:\.|->))?getPipelineStateForFunc\(")
_SET_PSO = re.compile(r"\[\s*\w+\s+setComputePipelineState:\s*(\w+)\s*\]")
_DISPATCH = re.compile(
    r"mtl_dispatch1DJob\(|\[\s*\w+\s+dispatch(Threads|Threadgroups):\s*(.+?)\s+"
    r"threadsPerThreadgroup:\s*(.+?)\s*\]\s*;",
    re.S,
)
_SET_ARGS = re.compile(r"\b(?:detail::)?mtl_set(Args|Buffer|Bytes)\s*(?:<\s*(\w+)\s*>)?\s*\(")
# host code between the pipeline state and the dispatch that sets what is not read here
_UNREAD = re.compile(
    r"bind_iter_tensors|setBuffer:|setBytes:|setTexture|setThreadgroupMemoryLength|"
    r"\bmtl_setArg\b|\bif\s*\(|\?"
)
_LOCAL = (
    r"(?:const\s+|constexpr\s+|static\s+)*"
    r"(auto|u?int(?:8|16|32|64)?_t|uint|int|long|unsigned(?:\s+int)?|MTLSize|std::string)"
    r"\s+{name}\s*(?:=\s*([^;]+)|\{{([^;{{}}]+)\}})\s*;"
)
_SCALARS = {
    "uint32_t": "uint", "uint": "uint", "unsigned": "uint", "unsigned int": "uint",
    "int32_t": "int", "int": "int", "int64_t": "long", "long": "long", "uint64_t": "ulong",
}  # fmt: skip
_TOKEN = re.compile(r"\s*(\d+[uUlL]*|[A-Za-z_][\w:]*|->|.)")


@dataclass(frozen=True)
class HostLaunch:
    """One launch in a ``.mm`` file: its kernel's host names (a regular expression), its
    buffers by index and its sizes, as the host writes them (C++)."""

    path: Path
    line: int
    kernel: str
    pso: str
    args: tuple[str, ...]  # by buffer index
    grid_kind: GridKind | None
    grid: tuple[str, ...]
    tptg: tuple[str, ...]
    problem: str | None  # why the launch cannot be read: the kernel has no read launch
    scope: str  # the enclosing function's text before the launch, for its locals

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def read_launches(root: Path) -> tuple[HostLaunch, ...]:
    """Every launch of the tree's MPS host code (``.mm`` files under aten's mps folder)."""
    folder = root / HOST_DIR
    if not folder.is_dir():
        return ()
    found: list[HostLaunch] = []
    for path in sorted(folder.rglob("*.mm")):
        found += read_file(path)
    return tuple(found)


def read_file(path: Path) -> list[HostLaunch]:
    text = _uncommented(path.read_text(encoding="utf-8", errors="replace"))
    # pso variable -> (position, kernel pattern or "!why not")
    names: dict[str, list[tuple[int, str]]] = {}
    for m in _PSO.finditer(text):
        args, _ = _call_args(text, m.end() - 1)
        names.setdefault(m.group(1), []).append((m.start(), _name_pattern(args, text, m.start())))
    out = []
    for m in _SET_PSO.finditer(text):
        pso = m.group(1)
        known = [n for pos, n in names.get(pso, []) if pos < m.start()]
        if not known:
            continue  # a pipeline state made elsewhere: not a launch this file names
        pattern = known[-1]
        out.append(_launch(path, text, m, pso, pattern))
    return out


def _launch(path: Path, text: str, m: re.Match[str], pso: str, pattern: str) -> HostLaunch:
    line = text.count("\n", 0, m.start()) + 1
    kernel, problem = (pattern, None) if not pattern.startswith("!") else ("", pattern[1:])
    d = _DISPATCH.search(text, m.end())
    if d is None:
        return HostLaunch(path, line, kernel, pso, (), None, (), (), "no dispatch follows", "")
    between = text[m.end() : d.start()]
    scope = text[_function_start(text, m.start()) : d.start()]
    kind: GridKind | None = None
    grid: tuple[str, ...] = ()
    tptg: tuple[str, ...] = ()
    if d.group(0).startswith("mtl_dispatch1DJob"):
        job, _ = _call_args(text, d.end() - 1)
        if len(job) == 3 and job[1] == pso:
            # as upstream's mtl_dispatch1DJob: one thread per job, the kernel's most a group
            limit = f"std::min([{pso} maxTotalThreadsPerThreadgroup], {job[2]})"
            kind, grid, tptg = GridKind.THREADS, (job[2],), (limit,)
        else:
            problem = problem or f"mtl_dispatch1DJob({', '.join(job)}) is not of {pso}"
    else:
        kind = GridKind.THREADS if d.group(1) == "Threads" else GridKind.THREADGROUPS
        sizes = [_size(s, scope) for s in (d.group(2), d.group(3))]
        if sizes[0] is None or sizes[1] is None:
            problem = problem or f"sizes {d.group(2)}, {d.group(3)} are not MTLSizeMake(...)"
        else:
            grid, tptg = sizes[0], sizes[1]
    unread = _UNREAD.search(between)
    if unread is not None:
        problem = problem or f"`{unread.group(0)}` between the pipeline state and the dispatch"
    args, why = _buffers(between)
    return HostLaunch(path, line, kernel, pso, args, kind, grid, tptg, problem or why, scope)


def _buffers(between: str) -> tuple[tuple[str, ...], str | None]:
    slots: dict[int, str] = {}
    for m in _SET_ARGS.finditer(between):
        args, _ = _call_args(between, m.end() - 1)
        if m.group(1) == "Args":
            start = m.group(2) or "0"
            if not start.isdigit():
                return (), f"mtl_setArgs<{start}>"
            for k, a in enumerate(args[1:]):
                slots[int(start) + k] = a
        elif len(args) == 3 and args[2].isdigit():
            slots[int(args[2])] = args[1]
        else:
            return (), f"mtl_set{m.group(1)}({', '.join(args)}) has no buffer index"
    if sorted(slots) != list(range(len(slots))):
        return (), f"buffer indices {sorted(slots)} leave a gap"
    return tuple(slots[i] for i in range(len(slots))), None


def _size(text: str, scope: str) -> tuple[str, ...] | None:
    text = text.strip()
    if re.fullmatch(r"\w+", text):
        local = _local(text, scope)
        if local is None:
            return None
        text = local[1]
    m = re.fullmatch(r"MTLSizeMake\s*\((.*)\)", text, re.S)
    if m is None:
        return None
    args, _ = _call_args(text, text.index("("))
    return tuple(args) if len(args) == 3 else None


def _name_pattern(args: Sequence[str], text: str, pos: int) -> str:
    """The host names a getPipelineStateForFunc argument gives, as a regular expression;
    "!why" when it cannot be read."""
    if len(args) != 1:
        return f"!getPipelineStateForFunc({', '.join(args)})"
    expr = args[0]
    if re.fullmatch(r"\w+", expr):  # a name made just before
        local = _local(expr, text[_function_start(text, pos) : pos])
        if local is None or local[0] not in ("auto", "std::string"):
            return f"!the kernel name {expr} is not a local string"
        expr = local[1]
    fmt = re.fullmatch(r"fmt::format\s*\((.*)\)", expr, re.S)
    if fmt is not None:
        parts, _ = _call_args(expr, expr.index("("))
        pieces = re.split(r"\{\}", _literal(parts[0]) or "")
        if _literal(parts[0]) is None or len(pieces) != len(parts):
            return f"!the kernel name {expr}"
        out = re.escape(pieces[0])
        for arg, piece in zip(parts[1:], pieces[1:], strict=True):
            part = _part(arg)
            if part is None:
                return f"!the kernel name part {arg}"
            out += part + re.escape(piece)
        return out
    out = ""
    for arg in re.split(r"\s\+\s", expr):
        part = _part(arg)
        if part is None:
            return f"!the kernel name part {arg}"
        out += part
    return out


def _part(arg: str) -> str | None:
    arg = arg.strip()
    literal = _literal(arg)
    if literal is not None:
        return re.escape(literal)
    if re.fullmatch(r"(?:mps::)?scalarToMetalTypeString\(.*\)", arg, re.S):
        return TYPE_PART
    return None


def _literal(arg: str) -> str | None:
    m = re.fullmatch(r'(?:std::string\()?"([^"\\]*)"\)?', arg.strip())
    return m.group(1) if m else None


def _local(name: str, scope: str) -> tuple[str, str] | None:
    """(type, C++ expression) of the last definition of ``name`` in ``scope``."""
    found = list(re.finditer(_LOCAL.format(name=re.escape(name)), scope))
    if not found:
        return None
    m = found[-1]
    return re.sub(r"\s+", " ", m.group(1)), (m.group(2) or m.group(3)).strip()


def _function_start(text: str, pos: int) -> int:
    """The start of the function around ``pos``: the last line before it that begins in
    column 0 with neither a brace nor a preprocessor line (clang-format's shape)."""
    starts = [m.start() for m in re.finditer(r"^[A-Za-z_]", text[:pos], re.M)]
    return starts[-1] if starts else 0


def _uncommented(text: str) -> str:
    """``text`` with comments blanked, its offsets and lines kept."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.S)


def _call_args(text: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose ``(`` is at ``open_paren``, and the
    position after its ``)``."""
    depth, start, args = 0, open_paren + 1, list[str]()
    for i in range(open_paren, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                last = text[start:i].strip()
                if last or args:
                    args.append(last)
                return [re.sub(r"\s+", " ", a) for a in args], i + 1
        elif c == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
    return [], len(text)


# ---- the host's C++ as the spec's expressions ------------------------------------------


class NotReadError(Exception):
    """A host expression outside what is read here."""


def complete(case: LaunchCase, host: HostLaunch) -> LaunchCase:
    """``case`` with what its spec entry leaves out (buffers, grid, threadgroup size) taken
    from ``host``; what the entry gives wins. Raises NotReadError saying why not."""
    if host.problem is not None:
        raise NotReadError(f"{host.where}: {host.problem}")
    inputs = {i.name for i in case.inputs}
    translate = _Translator(inputs, host.pso, host.scope)
    buffers, structs = case.buffers, case.structs
    if not buffers:
        named = {s.name for s in structs}
        found, extra = [], []
        for i, arg in enumerate(host.args):
            if "getErrorBuffer()" in arg:
                found.append(ERROR_BUFFER)
            elif arg == case.output_host:
                found.append(OUTPUT)
            elif arg in inputs or arg in named:
                found.append(arg)
            else:
                extra.append(_scalar(arg, i, translate, host))
                found.append(arg)
        buffers, structs = tuple(found), structs + tuple(extra)
    kind, grid, tptg = case.grid_kind, case.grid, case.threads_per_threadgroup
    if kind is None or not grid:
        assert host.grid_kind is not None
        kind, grid = host.grid_kind, _three(translate.all(host.grid, host))
    if not tptg:
        tptg = _three(translate.all(host.tptg, host))
    return replace(
        case, buffers=buffers, structs=structs, grid_kind=kind, grid=grid,
        threads_per_threadgroup=tptg, launch_from=host.where,
    )  # fmt: skip


def _scalar(arg: str, index: int, translate: _Translator, host: HostLaunch) -> StructArg:
    local = _local(arg, host.scope) if re.fullmatch(r"\w+", arg) else None
    if local is None or local[0] not in _SCALARS:
        raise NotReadError(
            f"{host.where}: buffer {index} `{arg}` is no input, output or struct of the "
            "entry, nor an integer local"
        )
    return StructArg(arg, _SCALARS[local[0]], (("", translate.expr(local[1], host)),))


def _three(sizes: Sequence[str]) -> tuple[str, str, str]:
    padded = [*sizes, "1", "1", "1"]
    return (padded[0], padded[1], padded[2])


@dataclass(frozen=True)
class _Translator:
    # the output's sizes are not read: its shape is torch's result's, known only next to torch
    inputs: set[str]
    pso: str
    scope: str

    def all(self, exprs: Sequence[str], host: HostLaunch) -> tuple[str, ...]:
        return tuple(self.expr(e, host) for e in exprs)

    def expr(self, text: str, host: HostLaunch, depth: int = 0) -> str:
        try:
            return self._expr(text, depth)
        except NotReadError as exc:
            raise NotReadError(f"{host.where}: {exc} in `{text}`") from None

    def _expr(self, text: str, depth: int) -> str:
        tokens = [t for t in _TOKEN.findall(text) if t.strip()]
        out: list[str] = []
        i = 0
        while i < len(tokens):
            t = tokens[i]
            i += 1
            if t == "static_cast" and tokens[i : i + 1] == ["<"]:
                i = tokens.index(">", i) + 1
            elif (
                t == "("
                and i + 1 < len(tokens)
                and tokens[i + 1] == ")"
                and (tokens[i] in _SCALARS or tokens[i] in ("NSUInteger", "size_t"))
            ):
                i += 2  # a C cast
            elif t[0].isdigit():
                out.append(t.rstrip("uUlL"))
            elif t in ("ceil_div", "at::ceil_div", "c10::ceil_div"):
                out.append("ceil_div")
            elif t in ("std::min", "min", "std::max", "max"):
                out.append(t.removeprefix("std::"))
            elif t == "[" and tokens[i : i + 3] == [self.pso, "maxTotalThreadsPerThreadgroup", "]"]:
                out.append("max_threads")
                i += 3
            elif t == self.pso and tokens[i : i + 2] == [".", "maxTotalThreadsPerThreadgroup"]:
                out.append("max_threads")
                i += 2
            elif t in self.inputs:
                i = self._method(t, tokens, i, out)
            elif re.fullmatch(r"[A-Za-z_]\w*", t):
                local = _local(t, self.scope)
                if local is None or local[0] not in (*_SCALARS, "auto") or depth > 8:
                    raise NotReadError(f"`{t}` is no input nor integer local")
                out.append(f"({self._expr(local[1], depth + 1)})")
            elif t == "/":
                out.append("//")
            elif t in "+-*%(),":
                out.append(t)
            else:
                raise NotReadError(f"`{t}` is not read")
        return "".join(f" {t} " if t in ("+", "-", "*", "//", "%") else t for t in out).replace(
            ",", ", "
        )

    @staticmethod
    def _method(name: str, tokens: list[str], i: int, out: list[str]) -> int:
        """``name.size(k)``, ``.stride(k)``, ``.numel()``, ``.dim()`` and their
        ``sizes()[k]``/``strides()[k]``/``ndimension()`` spellings; the index after it."""
        rest = tokens[i : i + 6]
        indexed = rest[2:5] == ["(", ")", "["] and len(rest) == 6 and rest[5].isdigit()
        if rest[:1] == ["."] and rest[1] in ("sizes", "strides") and indexed:
            out.append(f"{name}.{rest[1][:-1]}({rest[5]})")
            return i + 7
        if rest[:1] == ["."] and len(rest) > 2 and rest[2] == "(":
            method = {"ndimension": "dim"}.get(rest[1], rest[1])
            if method in ("size", "stride", "numel", "dim"):
                out.append(f"{name}.{method}")
                return i + 2
        raise NotReadError(f"`{name}` used other than by size/stride/numel/dim")
