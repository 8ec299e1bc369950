"""Which path MPS takes for each operator and overload, read from the tree (issue 31).

pytorch#181213 asks for a way "to print out which ops will go through graph vs. metal
kernels"; pytorch#177747 found Metal kernels that existed while dispatch still went to
MPSGraph. The path of one ``native_functions.yaml`` entry follows its MPS dispatch:

- a row naming a shared kernel (``CPU, CUDA, MPS: atan2_out``): the shared implementation
  in ``native/*.cpp`` calls a stub, and the stub's MPS registration in ``operations/*.mm``
  runs ``exec_*_kernel`` (**metal**) or an MPSGraph body (**mpsgraph**); a shared kernel that
  calls no stub is a **composite** of the ATen operators it calls;
- a row of its own (``MPS: atan2_out_mps``): the ``*_mps`` definition's body builds a graph
  (``LookUpOrCreateCachedGraph``, ``MPSGraph``: **mpsgraph**) or runs a Metal pipeline;
- a ``structured_delegate``: the path of the entry it delegates to;
- no dispatch, or a ``Composite*`` kernel: a **composite**;
- a dispatch without MPS: **none** (CPU fallback with ``PYTORCH_ENABLE_MPS_FALLBACK=1``, else
  an error).

What cannot be read (no ``native/*.cpp`` in the tree, a definition not found, a body showing
neither a graph nor a kernel) is **unknown**, never guessed into a path.

``to_json`` is the ``paths --json`` document (docs/machine-output.md, ``SCHEMA_VERSION``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, TypedDict

from pipeline.errors import ParseError, UnreadableFileError
from pipeline.tree import objc, sources
from pipeline.tree.index import legacy_names
from pipeline.tree.native_yaml import MpsKind, NativeFunction, operator_name
from pipeline.tree.span import Span
from pipeline.tree.text import read_text

if TYPE_CHECKING:
    from pipeline.tree.index import OperatorRecord, TreeIndex

SCHEMA_VERSION = 1  # of the paths --json document

# What an MPSGraph body says, and what a body running its own Metal pipeline says.
_GRAPH = re.compile(r"\b(?:LookUpOrCreateCachedGraph|MPSGraph\w*|runMPSGraph|mpsGraph)\b")
_METAL = re.compile(
    r"\b(?:exec_\w+_kernel|getPipelineStateForFunc|MetalShaderLibrary|mtl_dispatch1DJob|"
    r"dispatchThreads)\b"
)
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_COMPOSITE_KEYS = (
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)


class ExecPath(str, Enum):
    """The path MPS takes for one overload (a str, so JSON and tables show it)."""

    METAL = "metal"  # a Metal kernel, through a registered stub or the host function's own
    GRAPH = "mpsgraph"  # an MPSGraph implementation
    COMPOSITE = "composite"  # other ATen operators, each on its own path
    NONE = "none"  # no MPS dispatch: CPU fallback (PYTORCH_ENABLE_MPS_FALLBACK=1) or an error
    UNKNOWN = "unknown"  # what the path rests on could not be read

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> ExecPath:
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown path {text!r} (one of {known})") from None


# the paths in their declared order: iterating an Enum runs a generator of its own, 16,000
# of them (a tenth of a second) for a whole tree's report
_PATHS = tuple(ExecPath)
# worst first: an overload reaching several stubs is reported by the worst of them
_ORDER = (ExecPath.UNKNOWN, ExecPath.NONE, ExecPath.GRAPH, ExecPath.COMPOSITE, ExecPath.METAL)


class FlagKind(str, Enum):
    """A half-done migration the paths show (pytorch#177747, pytorch#187827)."""

    # a functor registered for the operator's kernel name while its dispatch goes to the graph
    FUNCTOR_UNUSED = "functor-unused"
    # a graph implementation left beside a Metal registration of the same operator
    GRAPH_BESIDE_METAL = "graph-beside-metal"
    # an overload still on a `*_mps` function while the operator's others are on Metal
    MPS_OVERLOAD_LEFT = "mps-overload-left"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Callee:
    """An ATen operator a composite calls, and the paths its overloads take."""

    op: str
    paths: tuple[ExecPath, ...]


@dataclass(frozen=True)
class OverloadPath:
    """The path of one yaml entry, why (``via``), and where that was read (``evidence``)."""

    func: str  # atan2.out
    path: ExecPath
    via: str
    entry: Span
    evidence: Span | None = None
    callees: tuple[Callee, ...] = ()


@dataclass(frozen=True)
class Flag:
    kind: FlagKind
    span: Span
    text: str


@dataclass(frozen=True)
class OperatorPaths:
    op: str
    overloads: tuple[OverloadPath, ...]
    flags: tuple[Flag, ...] = ()

    @property
    def paths(self) -> tuple[ExecPath, ...]:
        """The distinct paths of its overloads, in :class:`ExecPath` order."""
        found = {o.path for o in self.overloads}
        return tuple(p for p in _PATHS if p in found)

    def counts(self) -> dict[ExecPath, int]:
        """Overloads per path, every path present (0 when none takes it)."""
        found = Counter(o.path for o in self.overloads)
        return {p: found.get(p, 0) for p in _PATHS}


@dataclass(frozen=True)
class PathsReport:
    operators: tuple[OperatorPaths, ...]
    warnings: tuple[str, ...] = ()

    def counts(self) -> dict[ExecPath, int]:
        """Overloads per path, every path present (0 when none takes it)."""
        total = Counter({p: 0 for p in _PATHS})
        for op in self.operators:
            total.update(op.counts())
        return dict(total)

    @property
    def flags(self) -> tuple[Flag, ...]:
        return tuple(f for op in self.operators for f in op.flags)


def counts_to_json(counts: dict[ExecPath, int]) -> dict[str, int]:
    return {p.value: n for p, n in counts.items()}


class CalleeJson(TypedDict):
    op: str
    paths: list[str]


class OverloadJson(TypedDict):
    func: str
    path: str
    via: str
    entry: str
    evidence: str | None
    callees: list[CalleeJson]


class FlagJson(TypedDict):
    kind: str
    where: str
    text: str


class OperatorJson(TypedDict):
    op: str
    paths: list[str]
    overloads: list[OverloadJson]
    flags: list[FlagJson]


class PathsJson(TypedDict):
    """The ``paths --json`` document."""

    schema: int
    counts: dict[str, int]
    operators: list[OperatorJson]
    warnings: list[str]


def to_json(report: PathsReport) -> PathsJson:
    """The ``paths --json`` document (docs/machine-output.md, "paths --json")."""

    def span(s: Span | None) -> str | None:
        return str(s) if s is not None else None

    return {
        "schema": SCHEMA_VERSION,
        "counts": counts_to_json(report.counts()),
        "operators": [
            {
                "op": op.op,
                "paths": [p.value for p in op.paths],
                "overloads": [
                    {
                        "func": o.func,
                        "path": o.path.value,
                        "via": o.via,
                        "entry": str(o.entry),
                        "evidence": span(o.evidence),
                        "callees": [
                            {"op": c.op, "paths": [p.value for p in c.paths]} for c in o.callees
                        ],
                    }
                    for o in op.overloads
                ],
                "flags": [
                    {"kind": f.kind.value, "where": str(f.span), "text": f.text} for f in op.flags
                ],
            }
            for op in report.operators
        ],
        "warnings": list(report.warnings),
    }


@dataclass
class _Texts:
    """Host files' texts, read once each, as they are asked for."""

    index: TreeIndex
    texts: dict[str, str | None] = field(default_factory=dict)
    defs: dict[str, dict[str, sources.Implementation]] = field(default_factory=dict)

    def lines(self, span: Span) -> str:
        text = self.text(span.path)
        if text is None:
            return ""
        return "\n".join(text.split("\n")[span.start - 1 : span.end])

    def text(self, path: str) -> str | None:
        if path not in self.texts:
            try:
                self.texts[path] = read_text(self.index.root / path, path)
            except UnreadableFileError:  # the index warns of it already
                self.texts[path] = None
        return self.texts[path]

    def definitions(self, path: str) -> dict[str, sources.Implementation]:
        """The functions ``path`` defines at namespace scope (helpers included), by name."""
        if path not in self.defs:
            text = self.text(path)
            try:
                parsed = sources.parse(text, path).implementations if text else ()
            except ParseError:
                parsed = ()
            self.defs[path] = {}
            for d in parsed:
                self.defs[path].setdefault(d.name, d)
        return self.defs[path]

    def with_helpers(self, path: str, body: str) -> str:
        """``body`` and the bodies of the same file's functions it calls, transitively: a
        ``*_mps`` function often hands its work to a static helper beside it."""
        defs = self.definitions(path)
        seen: set[str] = set()
        todo = [c for c in _CALLED.findall(body) if c in defs]
        texts = [body]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            texts.append(self.lines(defs[name].span))
            todo += [c for c in defs[name].calls if c in defs and c not in seen]
        return "\n".join(texts)

    def body(self, impl: objc.Implementation) -> str:
        """The definition's text; for one a local macro generates, the macro's too."""
        text = self.lines(impl.span)
        if impl.macro:
            whole = self.text(impl.span.path) or ""
            define = re.search(
                rf"#\s*define\s+{re.escape(impl.macro)}\b(?:[^\n]*\\\n)*[^\n]*", whole
            )
            text += "\n" + (define.group() if define else "")
        return text


class _Classifier:
    """Paths of entries, each computed once (a delegate's target is shared)."""

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self.texts = _Texts(index)
        self.by_name = {e.full_name: e for e in index.native.entries}
        self.entry_names = {e.name for e in index.native.entries}
        self.sources = (
            index.sources if index.sources is not None and index.sources.present else None
        )
        self.memo: dict[str, OverloadPath] = {}
        self.op_memo: dict[str, tuple[ExecPath, ...]] = {}

    def of(self, e: NativeFunction, depth: int = 0) -> OverloadPath:
        if e.full_name not in self.memo:
            self.memo[e.full_name] = self._of(e, depth)
        return self.memo[e.full_name]

    def _of(self, e: NativeFunction, depth: int) -> OverloadPath:
        kind = e.mps_kind
        if kind is MpsKind.DELEGATE and e.structured_delegate:
            target = self.by_name.get(e.structured_delegate)
            if target is None or depth > 4:
                return OverloadPath(
                    e.full_name, ExecPath.UNKNOWN,
                    f"structured_delegate {e.structured_delegate}: not an entry of the yaml",
                    e.span,
                )  # fmt: skip
            p = self.of(target, depth + 1)
            via = f"structured_delegate {target.full_name}: {p.via}"
            return OverloadPath(e.full_name, p.path, via, e.span, p.evidence, p.callees)
        if kind is MpsKind.NONE:
            keys = ", ".join(dict.fromkeys(k for row in e.dispatch for k in row.keys))
            return OverloadPath(
                e.full_name, ExecPath.NONE,
                f"dispatch has no MPS ({keys}): CPU fallback with PYTORCH_ENABLE_MPS_FALLBACK=1, "
                "else an error",
                e.span,
            )  # fmt: skip
        if kind is MpsKind.COMPOSITE:
            return self._composite(e)
        kernel = e.kernel_for("MPS") or ""
        if kind is MpsKind.SHARED:
            return self._shared(e, kernel)
        return self._own(e, kernel)

    def _composite(self, e: NativeFunction) -> OverloadPath:
        key = next((k for k in _COMPOSITE_KEYS if e.kernel_for(k)), None)
        kernel = e.kernel_for(key) if key else e.name
        how = f"{key}: {kernel}" if key else "no dispatch (CompositeImplicitAutograd)"
        if self.sources is None:
            return OverloadPath(
                e.full_name, ExecPath.COMPOSITE,
                f"{how}; the operators it calls are unknown (no native/*.cpp in the tree)",
                e.span,
            )  # fmt: skip
        impl = self.sources.find(kernel or e.name)
        if impl is None:
            return OverloadPath(
                e.full_name, ExecPath.COMPOSITE,
                f"{how}; the operators it calls are unknown (no native/*.cpp defines {kernel})",
                e.span,
            )  # fmt: skip
        callees = self._callees(impl.calls, e)
        return OverloadPath(
            e.full_name, ExecPath.COMPOSITE, f"{how}: calls {_named(callees)}", e.span,
            impl.span, callees,
        )  # fmt: skip

    def _callees(self, calls: Iterable[str], caller: NativeFunction) -> tuple[Callee, ...]:
        ops = self.index.entries_by_operator()
        found = []
        for name in dict.fromkeys(calls):
            op = operator_name(name)
            if name not in self.entry_names or op == caller.operator or op not in ops:
                continue
            found.append(Callee(op, self.op_paths(op)))
        return tuple(dict.fromkeys(found))

    def op_paths(self, op: str) -> tuple[ExecPath, ...]:
        """The distinct paths of ``op``'s overloads (a callee's paths)."""
        if op not in self.op_memo:
            self.op_memo[op] = ()  # a composite calling itself through another ends here
            entries = self.index.entries_by_operator().get(op, ())
            found = {self.of(x).path for x in entries}
            self.op_memo[op] = tuple(p for p in _PATHS if p in found)
        return self.op_memo[op]

    def _shared(self, e: NativeFunction, kernel: str) -> OverloadPath:
        if self.sources is None:
            stubs = tuple(dict.fromkeys(s.stub for s in self.index.stubs_by_name(e.operator)))
            if not stubs:
                return OverloadPath(
                    e.full_name, ExecPath.UNKNOWN,
                    f"shared kernel {kernel}: what it calls is unknown (no native/*.cpp in the "
                    f"tree, and no stub named after {e.operator} is registered for MPS)",
                    e.span,
                )  # fmt: skip
            p = self._stubs(e, kernel, stubs)
            guessed = f"{p.via} (stubs found by name: no native/*.cpp in the tree)"
            return OverloadPath(e.full_name, p.path, guessed, e.span, p.evidence)
        impl = self.sources.find(kernel)
        if impl is None:
            own = self.index.host.implementation(kernel)
            if own is not None:
                return self._own(e, kernel)
            return OverloadPath(
                e.full_name, ExecPath.UNKNOWN,
                f"shared kernel {kernel}: no native/*.cpp defines it", e.span,
            )  # fmt: skip
        if impl.stubs:
            return self._stubs(e, kernel, impl.stubs, impl.span)
        callees = self._callees(impl.calls, e)
        return OverloadPath(
            e.full_name, ExecPath.COMPOSITE,
            f"shared kernel {kernel} calls no stub: calls {_named(callees)}", e.span, impl.span,
            callees,
        )  # fmt: skip

    def _stubs(
        self, e: NativeFunction, kernel: str, stubs: Sequence[str], where: Span | None = None
    ) -> OverloadPath:
        paths: list[ExecPath] = []
        says: list[str] = []
        evidence = where
        for stub in stubs:
            regs = self.index.host.stubs_for(stub)
            if not regs:
                paths.append(ExecPath.NONE)
                says.append(f"{stub}: not registered for MPS (an error at run time)")
                continue
            reg = regs[0]
            evidence = reg.span
            if reg.native:
                paths.append(ExecPath.METAL)
                name = f" -> kernel {reg.kernel_name}" if reg.kernel_name else ""
                says.append(f"{stub}{name} ({reg.span})")
            elif self._graph_stub(reg):
                paths.append(ExecPath.GRAPH)
                says.append(f"{stub}: registered with an MPSGraph body ({reg.span})")
            else:
                paths.append(ExecPath.UNKNOWN)
                says.append(f"{stub}: registered ({reg.span}) with a body showing no kernel")
        path = next(p for p in _ORDER if p in paths)
        return OverloadPath(
            e.full_name, path, f"shared kernel {kernel} -> " + "; ".join(says), e.span, evidence
        )

    def _graph_stub(self, reg: objc.StubRegistration) -> bool:
        """A stub registration whose function (or generating macro) builds a graph."""
        text = self.texts.lines(reg.span)
        file = next((f for f in self.index.host.files if f.path == reg.span.path), None)
        name = (reg.function or "").rsplit("::", 1)[-1]
        for fn in file.functions if file else ():
            if fn.name == name:
                text += "\n" + self.texts.lines(fn.span)
        if reg.macro not in objc.DISPATCH_MACROS:
            whole = self.texts.text(reg.span.path) or ""
            define = re.search(
                rf"#\s*define\s+{re.escape(reg.macro)}\b(?:[^\n]*\\\n)*[^\n]*", whole
            )
            text += "\n" + (define.group() if define else "")
        return bool(_GRAPH.search(text))

    def _own(self, e: NativeFunction, kernel: str) -> OverloadPath:
        impl = self.index.host.implementation(kernel)
        if impl is None:
            return OverloadPath(
                e.full_name, ExecPath.UNKNOWN,
                f"MPS: {kernel}: no definition found in operations/*.mm", e.span,
            )  # fmt: skip
        body = self.texts.with_helpers(impl.span.path, self.texts.body(impl))
        if _GRAPH.search(body):
            return OverloadPath(
                e.full_name, ExecPath.GRAPH, f"MPS: {kernel}, an MPSGraph implementation",
                e.span, impl.span,
            )  # fmt: skip
        if _METAL.search(body):
            return OverloadPath(
                e.full_name, ExecPath.METAL, f"MPS: {kernel} runs a Metal kernel itself",
                e.span, impl.span,
            )  # fmt: skip
        called = [c for c in dict.fromkeys(_CALLED.findall(body)) if c in self.entry_names]
        if called:
            callees = self._callees(called, e)
            return OverloadPath(
                e.full_name, ExecPath.COMPOSITE, f"MPS: {kernel} calls {_named(callees)}",
                e.span, impl.span, callees,
            )  # fmt: skip
        return OverloadPath(
            e.full_name, ExecPath.UNKNOWN,
            f"MPS: {kernel}: its body shows neither an MPSGraph nor a Metal kernel (a helper "
            "of another file?)",
            e.span, impl.span,
        )  # fmt: skip


def _named(callees: Sequence[Callee]) -> str:
    if not callees:
        return "no ATen operator"
    return ", ".join(f"{c.op} ({'/'.join(p.value for p in c.paths) or '?'})" for c in callees)


def operator_paths(index: TreeIndex, ops: Iterable[str] | None = None) -> PathsReport:
    """The paths of ``ops`` (operators as native_functions.yaml names them, see
    :meth:`TreeIndex.resolve`; default: every operator of the yaml), with their flags."""
    classify = _Classifier(index)
    by_op = index.entries_by_operator()
    names = sorted(by_op) if ops is None else list(dict.fromkeys(ops))
    found = []
    for op in names:
        overloads = tuple(classify.of(e) for e in by_op.get(op, ()))
        found.append(OperatorPaths(op, overloads, _flags(index, classify, op, overloads)))
    return PathsReport(tuple(found), index.warnings)


def _flags(
    index: TreeIndex, classify: _Classifier, op: str, overloads: Sequence[OverloadPath]
) -> tuple[Flag, ...]:
    entries = index.entries_by_operator().get(op, ())
    paths = {o.path for o in overloads}
    flags: list[Flag] = []
    # the joined record finds functors and registrations by every name the operator's
    # kernels go by; read only where a flag can follow (a graph path, graph code left)
    left = [i for n in sorted(legacy_names(entries)) if (i := index.host.implementation(n))]
    if ExecPath.GRAPH in paths or left:
        record = index.record(op, find_references=False)
        flags += _functors_unused(index, record, overloads)
        flags += _graph_beside_metal(classify, record)
    on_metal = [o.func for o in overloads if o.path is ExecPath.METAL]
    for e in entries:
        kernel = e.kernel_for("MPS") or ""
        others = [f for f in on_metal if f != e.full_name]
        if others and e.mps_kind is MpsKind.MPS_SPECIFIC and objc.MPS_NAME.match(kernel):
            row = next(r for r in e.dispatch if kernel == r.kernel and "MPS" in r.keys)
            flags.append(
                Flag(
                    FlagKind.MPS_OVERLOAD_LEFT, Span(e.span.path, row.line, row.line),
                    f"{e.full_name} is still on {kernel} while {others[0]} runs a Metal "
                    "kernel: fold MPS into the shared row",
                )
            )  # fmt: skip
    return tuple(flags)


def _functors_unused(
    index: TreeIndex, record: OperatorRecord, overloads: Sequence[OverloadPath]
) -> list[Flag]:
    graph = [o for o in overloads if o.path is ExecPath.GRAPH]
    flags = []
    for functor in record.functors if graph else ():
        regs = index.kernels.registrations_for(functor.name)
        where = regs[0].span if regs else functor.span
        flags.append(
            Flag(
                FlagKind.FUNCTOR_UNUSED, where,
                f"{functor.name}_functor is {'registered' if regs else 'defined'} for Metal "
                f"but {graph[0].func} still dispatches to MPSGraph ({graph[0].via})",
            )
        )  # fmt: skip
    return flags


def _graph_beside_metal(classify: _Classifier, record: OperatorRecord) -> list[Flag]:
    metal_regs = [s for s in record.stubs if s.native]
    flags = []
    for impl in record.mpsgraph if metal_regs else ():
        if _GRAPH.search(classify.texts.body(impl)):
            flags.append(
                Flag(
                    FlagKind.GRAPH_BESIDE_METAL, impl.span,
                    f"MPSGraph implementation {impl.name} is left beside the Metal "
                    f"registration of {metal_regs[0].stub} ({metal_regs[0].span})",
                )
            )  # fmt: skip
    return flags
