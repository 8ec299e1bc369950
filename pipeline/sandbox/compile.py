"""The sandbox's "compiler": what ``ninja -C build torch_cpu`` runs to build the simulated MPS
backend.

``python -m pipeline.sandbox.compile --root ROOT --out OUT [--depfile D]`` reads the tree with
the pipeline's own readers, checks it the way clang, the Metal compiler and the linker would
check the real one, and writes OUT: a JSON artifact saying, per operator, how MPS serves it.

How an overload reaches MPS is followed as in the real build:

- ``MPS: atan2_out_mps`` (an MPS-only kernel) needs that function in some ``.mm`` file;
  the operator is then served by MPSGraph.
- ``CPU, CUDA, MPS: atan2_out`` (a shared structured kernel) runs the CPU-side
  ``TORCH_IMPL_FUNC(atan2_out)`` of ``aten/src/ATen/native/*.cpp``, which calls dispatch stubs;
  each stub's MPS registration (``REGISTER_DISPATCH`` in a ``.mm``) either runs a native Metal
  kernel through ``lib.exec_*_kernel(iter, "name")``, whose registered (input, output) dtype
  pairs come from the ``.metal`` functor registrations, or an MPSGraph body. The registered
  function must take the iterator type the stub's ``DECLARE_DISPATCH`` in
  ``aten/src/ATen/native/*.h`` declares.

Diagnostics are printed as ``path:line:col: error: message`` (paths relative to ROOT); any
error means exit status 1 and an unchanged OUT, like a failed compile. The depfile lists every
file (and source directory) read, so ninja rebuilds exactly when one of them changes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.dtypes import sort_key
from pipeline.errors import ParseError
from pipeline.fsio import write_atomic
from pipeline.tree import dispatch, files, metal, native_yaml, objc, paths
from pipeline.tree.span import Span
from pipeline.tree.text import read_text

ARTIFACT_FORMAT = 1
# The CPU-side files holding the shared structured kernels that call dispatch stubs.
CPP_GLOB = paths.NATIVE_SOURCES
# Directories whose listing is itself an input: a new .metal or .mm file means a rebuild.
SOURCE_DIRS = (paths.NATIVE_DIR, paths.KERNELS_DIR, paths.OPERATIONS_DIR)

_IMPL_FUNC = re.compile(r"^TORCH_IMPL_FUNC\s*\(\s*(\w+)\s*\)", re.M)
# A plain function definition starting at column 0: `Tensor& logit_out(const Tensor& ...`
_FUNCTION = re.compile(r"^(?!namespace\b|using\b|#)[A-Za-z_][\w:<>,&*\s]*?[\s&*](\w+)\s*\(", re.M)
_STUB_CALL = re.compile(r"\b(\w+_stub)\s*\(")
_IMPL_FUNC_DEFINE = re.compile(r"TORCH_IMPL_FUNC\s*\(")
_AT_QUALIFIER = re.compile(r"(?<![\w:])(?:::)?at::(?:native::)?")


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message; ``str()`` is the clang form build logs are searched for."""

    path: str
    line: int
    col: int
    severity: str  # "error" | "warning"
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.severity}: {self.message}"


@dataclass(frozen=True)
class CppKernel:
    """A shared kernel defined in a CPU .cpp file and the dispatch stubs its body calls."""

    name: str
    stubs: tuple[str, ...]
    span: Span


@dataclass(frozen=True)
class BuildOutput:
    """What one compile produced: the artifact (None on error), diagnostics, inputs read."""

    artifact: dict | None
    diagnostics: tuple[Diagnostic, ...]
    inputs: tuple[Path, ...]

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


def parse_cpp(text: str, path: str) -> dict[str, CppKernel]:
    """Definitions at column 0 (``TORCH_IMPL_FUNC(x)`` or plain functions) and the stubs
    their brace-matched bodies call. Only the small, regular CPU files of the sandbox are
    read this way; it is not a C++ parser."""
    kernels: dict[str, CppKernel] = {}
    starts = [(m.start(), m.group(1)) for m in _IMPL_FUNC.finditer(text)]
    starts += [(m.start(), m.group(1)) for m in _FUNCTION.finditer(text)]
    for start, name in sorted(starts):
        if name in kernels:
            continue
        open_ = _body_open(text, start)
        if open_ is None:
            continue
        close = _match_brace(text, open_)
        body = text[open_:close]
        stubs = tuple(dict.fromkeys(_STUB_CALL.findall(body)))
        first = text.count("\n", 0, start) + 1
        kernels[name] = CppKernel(name, stubs, Span(path, first, text.count("\n", 0, close) + 1))
    return kernels


def _body_open(text: str, start: int) -> int | None:
    """The ``{`` opening the body of the definition at ``start`` (None for a declaration)."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch == ";":
            return None
        elif depth == 0 and ch == "{":
            return i
    return None


def _match_brace(text: str, open_: int) -> int:
    depth = 0
    for i in range(open_, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _arity(core_macro: str) -> str:
    """Which exec_*_kernel can run a core registration macro's kernels."""
    for kind in ("TERNARY", "UNARY", "BINARY"):
        if kind in core_macro:
            return kind.lower()
    return "unknown"


class _Tree:
    """Everything the compile reads, parsed once, plus helpers to locate diagnostics."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # strict: a compiler stops at a file it cannot read, where the pipeline's own
        # reading skips it with a warning
        self.yaml = native_yaml.read(root)
        self.metal = metal.read(root, strict=True)
        self.host = objc.read(root, strict=True)
        self.stubs = dispatch.read(root, strict=True)
        self.cpp: dict[str, CppKernel] = {}
        self.cpp_files = sorted(root.glob(CPP_GLOB))
        for file in self.cpp_files:
            rel = file.relative_to(root).as_posix()
            for name, kernel in parse_cpp(read_text(file, rel), rel).items():
                self.cpp.setdefault(name, kernel)
        self.by_full_name = {e.full_name: e for e in self.yaml.entries}
        self._lines: dict[str, list[str]] = {}

    def inputs(self) -> tuple[Path, ...]:
        inputs = files(self.root, paths.BUILD_PATTERNS)
        inputs += [self.root / d for d in SOURCE_DIRS]
        return tuple(dict.fromkeys(f for f in inputs if f.exists()))

    def lines(self, path: str) -> list[str]:
        if path not in self._lines:
            file = self.root / path
            text = read_text(file, path) if file.is_file() else ""
            self._lines[path] = text.splitlines()
        return self._lines[path]

    def find(self, span: Span, needle: str) -> tuple[int, int] | None:
        """(line, column) of ``needle`` as a whole word within ``span``, if it is there."""
        lines = self.lines(span.path)
        word = re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")
        for number in range(span.start, min(span.end, len(lines)) + 1):
            found = word.search(lines[number - 1])
            if found:
                return number, found.start() + 1
        return None

    def locate(self, span: Span, needle: str) -> tuple[int, int]:
        """Where ``needle`` is within ``span``, else the start of the span."""
        return self.find(span, needle) or (span.start, 1)


def _stub_record(tree: _Tree, stub: str, diags: list[Diagnostic]) -> dict | None:
    """How MPS serves one dispatch stub, or None when no .mm registers it."""
    registrations = tree.host.stubs_for(stub)
    if not registrations:
        return None
    reg = registrations[0]
    record: dict = {
        "native": reg.native,
        "function": reg.function,
        "macro": reg.macro,
        "at": str(reg.span),
    }
    if not reg.native:
        return record
    exec_kind = (reg.exec_kind or "").removeprefix("exec_").removesuffix("_kernel")
    record.update(kernel_name=reg.kernel_name, exec=exec_kind)
    found = tree.metal.registrations_for(reg.kernel_name or "")
    usable = [r for r in found if _arity(r.core_macro) == exec_kind]
    pairs = sorted({(r.input, r.output) for r in usable}, key=lambda p: tuple(map(sort_key, p)))
    record["pairs"] = [list(pair) for pair in pairs]  # as JSON will read them back
    if not usable:
        span = _function_span(tree, reg)
        name = reg.kernel_name or ""
        quoted = tree.find(span, f'"{name}"')
        # clang points inside the quotes, at the name; a macro's #NAME at its argument
        line, col = (quoted[0], quoted[1] + 1) if quoted else tree.locate(span, name)
        detail = ""
        if found:
            kinds = sorted({_arity(r.core_macro) for r in found})
            detail = f" for exec_{exec_kind}_kernel (it is registered as {', '.join(kinds)})"
        diags.append(
            Diagnostic(
                span.path,
                line,
                col,
                "error",
                f"no Metal kernel named '{reg.kernel_name}' is registered{detail}",
            )
        )
    return record


def _function_span(tree: _Tree, reg: objc.StubRegistration) -> Span:
    """The definition of the function a registration names (its own line when generated)."""
    for file in tree.host.files:
        if file.path != reg.span.path:
            continue
        for fn in file.functions:
            if fn.name == reg.function:
                return fn.span
    return reg.span


def _serving(tree: _Tree, entry: native_yaml.NativeFunction, seen: frozenset[str]) -> dict:
    """How MPS runs one overload, following structured_delegate to the kernel entry."""
    kind = entry.mps_kind
    if kind is native_yaml.MpsKind.DELEGATE:
        target = tree.by_full_name.get(entry.structured_delegate or "")
        if target is None or target.full_name in seen:
            return {"mps": None, "overload": entry.full_name}
        record = _serving(tree, target, seen | {entry.full_name})
        return {"via": target.full_name, **record}
    if kind is native_yaml.MpsKind.COMPOSITE:
        return {"mps": "composite"}
    kernel = entry.kernel_for("MPS")
    if kind is native_yaml.MpsKind.NONE or kernel is None:
        return {"mps": None, "overload": entry.full_name}
    if kind is native_yaml.MpsKind.MPS_SPECIFIC:
        impl = tree.host.implementation(kernel)
        return {
            "mps": "mpsgraph",
            "kernel": kernel,
            "at": str(impl.span) if impl else None,
        }
    cpp = tree.cpp.get(kernel)
    if cpp is None or not cpp.stubs:
        return {"mps": "shared", "kernel": kernel, "stubs": {}}
    # diagnostics about the stubs come from _check_host, once per registration
    stubs = {stub: _stub_record(tree, stub, []) for stub in cpp.stubs}
    if any(record is None for record in stubs.values()):
        served = "missing_stub"
    elif all(record is not None and record["native"] for record in stubs.values()):
        served = "native"
    else:
        served = "mpsgraph"
    return {"mps": served, "kernel": kernel, "stubs": stubs}


def _is_functional(entry: native_yaml.NativeFunction) -> bool:
    """Not in-place (``atan2_``) and not an out= variant (``atan2.out``)."""
    if entry.name.endswith("_") and not entry.name.endswith("__"):
        return False
    args = entry.schema.partition("(")[2].rpartition("->")[0]
    keyword_only = args.partition("*")[2] if "*" in args else ""
    return not re.search(r"\bTensor\([a-z]!\)", keyword_only)


def _summary(kinds: set[str | None]) -> str | None:
    kinds = kinds - {"composite"}
    if not kinds:
        return "composite"
    if kinds == {"native"}:
        return "native"
    if kinds == {None}:
        return None
    if "mpsgraph" in kinds and kinds <= {"mpsgraph", "native"}:
        return "mpsgraph"
    return "partial"


def _check_dispatch(tree: _Tree, diags: list[Diagnostic]) -> set[str]:
    """Link-time checks of every MPS dispatch row; returns the stubs reachable from MPS."""
    reachable: set[str] = set()
    yaml_path = tree.yaml.path
    for entry in tree.yaml.entries:
        kernel = entry.kernel_for("MPS")
        if kernel is None:
            continue
        row = next(r for r in reversed(entry.dispatch) if "MPS" in r.keys)
        col = row.text.find(kernel) + 1 if kernel in row.text else 1
        if entry.mps_kind is native_yaml.MpsKind.MPS_SPECIFIC:
            if tree.host.implementation(kernel) is None:
                diags.append(
                    Diagnostic(
                        yaml_path,
                        row.line,
                        col,
                        "error",
                        f"undefined symbol: at::native::{kernel} (the MPS kernel of "
                        f"{entry.full_name} is not defined in any "
                        f"{paths.OPERATIONS_MM} file)",
                    )
                )
            continue
        cpp = tree.cpp.get(kernel)
        if cpp is None:
            diags.append(
                Diagnostic(
                    yaml_path,
                    row.line,
                    col,
                    "error",
                    f"undefined symbol: at::native::{kernel} (the kernel {entry.full_name} "
                    f"shares with {', '.join(k for k in row.keys if k != 'MPS')} "
                    f"is not defined in any {CPP_GLOB} file)",
                )
            )
            continue
        for stub in cpp.stubs:
            reachable.add(stub)
            if not tree.host.stubs_for(stub):
                diags.append(
                    Diagnostic(
                        yaml_path,
                        row.line,
                        col,
                        "warning",
                        f"{entry.full_name} dispatches MPS to {kernel}, which calls {stub}, "
                        f"but no .mm file registers {stub} for MPS; calls will fail with "
                        "'DispatchStub: missing kernel for mps'",
                    )
                )
    return reachable


def _check_host(tree: _Tree, reachable: set[str], diags: list[Diagnostic]) -> None:
    """Compile-time checks of the .mm files: stubs, their kernels, stale implementations."""
    declared = {
        e.kernel_for("MPS")
        for e in tree.yaml.entries
        if e.mps_kind is native_yaml.MpsKind.MPS_SPECIFIC
    }
    callers: dict[str, list[str]] = {}
    for cpp in tree.cpp.values():
        for stub in cpp.stubs:
            callers.setdefault(stub, []).append(cpp.name)
    seen: dict[str, objc.StubRegistration] = {}
    for file in tree.host.files:
        for reg in file.stubs:
            first = seen.setdefault(reg.stub, reg)
            if first is not reg:
                line, col = tree.locate(reg.span, reg.stub)
                diags.append(
                    Diagnostic(
                        reg.span.path,
                        line,
                        col,
                        "error",
                        f"duplicate symbol: {reg.stub} is already registered for MPS at "
                        f"{first.span}",
                    )
                )
                continue
            _stub_record(tree, reg.stub, diags)
            _check_signature(tree, file, reg, diags)
            if reg.stub not in reachable:
                line, col = tree.locate(reg.span, reg.stub)
                kernels = callers.get(reg.stub)
                why = (
                    f"no native_functions.yaml entry dispatches MPS to {' or '.join(kernels)}"
                    if kernels
                    else f"no kernel in {CPP_GLOB} calls it"
                )
                diags.append(
                    Diagnostic(
                        reg.span.path,
                        line,
                        col,
                        "warning",
                        f"{reg.stub} is registered for MPS but is unreachable: {why}",
                    )
                )
        for impl in file.implementations:
            if impl.name in declared or not _declares_structured(tree, impl):
                continue
            line, col = tree.locate(impl.span, impl.name)
            diags.append(
                Diagnostic(
                    impl.span.path,
                    line,
                    col,
                    "error",
                    f"unknown type name 'structured_{impl.name}': no native_functions.yaml "
                    f"entry dispatches MPS to {impl.name}, so codegen does not declare it",
                )
            )


def _same_type(a: str, b: str) -> bool:
    """Whether two parameter types name the same type, ``at::``/``at::native::`` aside."""
    unqualified = [_AT_QUALIFIER.sub("", t).replace(" ", "") for t in (a, b)]
    return unqualified[0] == unqualified[1]


def _check_signature(
    tree: _Tree, file: objc.ObjcFile, reg: objc.StubRegistration, diags: list[Diagnostic]
) -> None:
    """A registered kernel function must take what the stub's DECLARE_DISPATCH says.

    Only the functions the reader sees are checked: one written in the file, not one a
    local macro generates (its registration names a function no file defines).
    """
    decl = tree.stubs.stub(reg.stub)
    name = re.sub(r"<.*", "", reg.function or "").rsplit("::", 1)[-1]
    fn = next((f for f in file.functions if f.name == name), None)
    if decl is None or fn is None:
        return
    if decl.params and _same_type(fn.param_type, decl.params[0]):
        return
    line, col = tree.locate(reg.span, fn.name)
    diags.append(
        Diagnostic(
            reg.span.path,
            line,
            col,
            "error",
            f"cannot register '{fn.name}' for {reg.stub}: it takes '{fn.param_type}', but "
            f"{reg.stub} is declared at {decl.span} as {decl.fn_type}, taking "
            f"({', '.join(decl.params)})",
        )
    )


def _declares_structured(tree: _Tree, impl: objc.Implementation) -> bool:
    """Whether an implementation defines a structured kernel's impl() (TORCH_IMPL_FUNC)."""
    if impl.kind == "TORCH_IMPL_FUNC":
        return True
    if impl.kind != "macro" or not impl.macro:
        return False
    text = "\n".join(tree.lines(impl.span.path))
    define = re.search(rf"^\s*#\s*define\s+{re.escape(impl.macro)}\b((?:.*\\\n)*.*)", text, re.M)
    return bool(define and _IMPL_FUNC_DEFINE.search(define.group(1)))


def _check_metal(tree: _Tree, diags: list[Diagnostic]) -> None:
    """Every registration instantiates its functor: a missing one does not compile."""
    for file in tree.metal.files:
        reported: set[str] = set()
        for reg in file.registrations:
            if reg.kernel in reported or tree.metal.functor(reg.kernel) is not None:
                continue
            reported.add(reg.kernel)
            line, col = tree.locate(reg.span, reg.kernel)
            diags.append(
                Diagnostic(
                    reg.span.path,
                    line,
                    col,
                    "error",
                    f"use of undeclared identifier '{reg.kernel}_functor' "
                    f"(in expansion of {reg.written_macro})",
                )
            )


def build(root: Path) -> BuildOutput:
    """Check the tree under ``root`` and compute the artifact (None when there are errors)."""
    try:
        tree = _Tree(root)
    except ParseError as exc:
        column = getattr(exc, "column", None) or 1
        diag = Diagnostic(exc.path, exc.line or 1, column, "error", str(exc).split(": ", 1)[-1])
        return BuildOutput(None, (diag,), _fallback_inputs(root))
    diags: list[Diagnostic] = []
    _check_metal(tree, diags)
    reachable = _check_dispatch(tree, diags)
    _check_host(tree, reachable, diags)
    diags = list(dict.fromkeys(diags))
    if any(d.severity == "error" for d in diags):
        return BuildOutput(None, tuple(diags), tree.inputs())

    operators: dict[str, dict] = {}
    for op, entries in tree.yaml.operators().items():
        overloads = {
            e.full_name: _serving(tree, e, frozenset()) for e in entries if _is_functional(e)
        }
        if not overloads:
            continue
        record: dict = {"mps": _summary({o["mps"] for o in overloads.values()})}
        native_inputs = [
            {pair[0] for pair in stub["pairs"]}
            for o in overloads.values()
            for stub in o.get("stubs", {}).values()
            if stub and stub.get("native")
        ]
        if native_inputs:
            record["native_dtypes"] = sorted(set.intersection(*native_inputs), key=sort_key)
        record["overloads"] = overloads
        operators[op] = record
    artifact = {
        "format": ARTIFACT_FORMAT,
        "target": "torch_cpu",
        "operators": operators,
        "warnings": [str(d) for d in diags],
    }
    return BuildOutput(artifact, tuple(diags), tree.inputs())


def _fallback_inputs(root: Path) -> tuple[Path, ...]:
    """Inputs when the tree could not even be read: every file the readers would read."""
    inputs = files(root, paths.BUILD_PATTERNS)
    inputs += [root / d for d in SOURCE_DIRS]
    return tuple(f for f in inputs if f.exists())


def write_depfile(depfile: Path, target: str, inputs: Iterable[Path]) -> None:
    """A Makefile-style depfile (``target: dep dep ...``) with paths relative to the cwd."""

    def escape(path: Path) -> str:
        rel = os.path.relpath(path)
        return rel.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")

    deps = " \\\n  ".join(escape(p) for p in inputs)
    depfile.parent.mkdir(parents=True, exist_ok=True)
    depfile.write_text(f"{target}: \\\n  {deps}\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pipeline.sandbox.compile``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.sandbox.compile",
        description="Build the sandbox's simulated torch_cpu (MPS backend) artifact.",
    )
    parser.add_argument("--root", required=True, type=Path, help="the sandbox tree")
    parser.add_argument("--out", required=True, type=Path, help="artifact to write (JSON)")
    parser.add_argument("--depfile", type=Path, help="Makefile-style depfile to write")
    args = parser.parse_args(argv)

    result = build(args.root.resolve())
    if args.depfile:
        write_depfile(args.depfile, args.out.as_posix(), result.inputs)
    for diag in result.diagnostics:
        print(diag, file=sys.stderr)
    if result.artifact is None:
        count = len(result.errors)
        print(f"{count} error{'s' if count != 1 else ''} generated.", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(result.artifact, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
