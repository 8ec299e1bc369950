"""Operator families: which host and kernels files an operator's migration belongs in, which
operators migrate together, and which cannot be migrated by the guide's element-wise recipe.

A family is the stubs of one ``native/*.h`` header (Activation.h), the host file that
registers them (``operations/ActivationKernel.mm``) and the Metal library that host loads
(``#include <ATen/native/mps/ActivationKernel_metallib.h>``: ``kernels/ActivationKernel.metal``).
A host finds only the kernels of its own library when shaders are compiled per file, so a
functor is only ever written into the library of the host that runs it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from pipeline.edit.atomic import FileEdit
from pipeline.errors import UnknownImplementationError
from pipeline.guide.checklist import Status, checklist
from pipeline.guide.workflow import Workflow, of_record
from pipeline.tree import metal, native_yaml, objc, paths
from pipeline.tree.index import OperatorRecord, TreeIndex, TreePart, find_references
from pipeline.tree.objc import ExecKind
from pipeline.tree.span import Span

# exec kind -> (host file, kernels file) when the tree says nothing better (no declaration)
DEFAULT_FILES = {
    ExecKind.UNARY: (
        f"{paths.OPERATIONS_DIR}/UnaryKernel.mm",
        f"{paths.KERNELS_DIR}/UnaryKernel.metal",
    ),
    ExecKind.BINARY: (
        f"{paths.OPERATIONS_DIR}/BinaryKernel.mm",
        f"{paths.KERNELS_DIR}/BinaryKernel.metal",
    ),
}
# `#include <ATen/native/mps/NAME_metallib.h>`: the per-file library a host is compiled with
_METALLIB = re.compile(r"#\s*include\s*[<\"]ATen/native/mps/(\w+)_metallib\.h[>\"]")
# The checklist items the edit stage answers for; xfails and decorators go after the tests.
EDIT_ITEMS = ("dispatch", "functor", "dtypes", "stub", "mpsgraph", "old_names", "unrecognised")
# yaml tags of operators whose kernels are not element-wise even when a stub takes an iterator
_NOT_ELEMENTWISE_TAGS = ("reduction",)


@dataclass(frozen=True)
class Family:
    """Where an operator's stub and functor go."""

    header: str | None  # the native/*.h declaring its stub (None: not found)
    host: str  # operations/*.mm registering the header's stubs
    kernels: str  # kernels/*.metal: the library ``host`` loads
    host_exists: bool
    kernels_exists: bool


def loaded_library(text: str) -> str | None:
    """The Metal library a host file loads (``ActivationKernel``), from its
    ``#include <ATen/native/mps/NAME_metallib.h>``; None when it names none."""
    m = _METALLIB.search(text)
    return m.group(1) if m else None


def kernels_of_host(index: TreeIndex, host: str, text: str | None = None) -> str:
    """The kernels file of the library ``host`` loads (its ``_metallib.h`` include, else the
    .metal named like the host)."""
    if text is None:
        text = _host_text(index, host)
    lib = loaded_library(text or "") or PurePosixPath(host).stem
    return f"{paths.KERNELS_DIR}/{lib}.metal"


def _host_text(index: TreeIndex, rel: str) -> str:
    path = index.root / rel
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def family(index: TreeIndex, record: OperatorRecord, kind: ExecKind) -> Family:
    """The operator's family: the host file registering most of the other stubs of its
    header, and that host's library; for a header no host registers yet, the files to
    create, named after the header (``IndexKernel.h`` -> ``IndexKernel.mm``/``.metal``)."""
    # on disk, not in the index: a file the readers skipped (not UTF-8) still exists
    hosts = {f.path for f in index.host.files} | _on_disk(index, paths.OPERATIONS_MM)
    kernels = {f.path for f in index.kernels.files} | _on_disk(index, paths.KERNELS_METAL)
    default_host, default_kernels = DEFAULT_FILES[kind]
    decl = record.stub_decl
    if decl is None:
        return Family(
            None, default_host, default_kernels, default_host in hosts, default_kernels in kernels
        )
    header = next((f for f in index.dispatch.files if f.path == decl.span.path), None)
    siblings = {d.stub for d in header.decls} - {decl.stub} if header else set()
    counts = Counter(
        s.span.path for f in index.host.files for s in f.stubs if s.native and s.stub in siblings
    )
    if counts:
        host = counts.most_common(1)[0][0]
    else:
        stem = re.sub(r"(?:Ops|Kernels?)\Z", "", PurePosixPath(decl.span.path).stem)
        host = f"{paths.OPERATIONS_DIR}/{stem}Kernel.mm"
    kernels_file = (
        kernels_of_host(index, host)
        if host in hosts
        else f"{paths.KERNELS_DIR}/{PurePosixPath(host).stem}.metal"
    )
    return Family(decl.span.path, host, kernels_file, host in hosts, kernels_file in kernels)


def _on_disk(index: TreeIndex, pattern: str) -> set[str]:
    return {p.relative_to(index.root).as_posix() for p in index.root.glob(pattern) if p.is_file()}


# ----------------------------------------------------------------------- refusals


def _implemented_by(entries: Iterable[native_yaml.NativeFunction]) -> str:
    """What implements the operator for CPU, from its yaml entries, in a few words."""
    entries = list(entries)
    for e in entries:
        cpu = e.kernel_for("CPU")
        if cpu:
            return f"{cpu} (CPU, {e.full_name} at {e.span})"
    for e in entries:
        composite = [r for r in e.dispatch if any(k.startswith("Composite") for k in r.keys)]
        if composite:
            return f"a decomposition ({composite[0].keys[0]}: {composite[0].kernel}, {e.span})"
    for e in entries:
        if e.structured_delegate:
            return f"{e.structured_delegate} (structured delegate of {e.full_name})"
    for e in entries:
        if e.dispatch:
            row = e.dispatch[0]
            return f"backend kernels only ({', '.join(row.keys)}: {row.kernel}, {e.span})"
    first = entries[0] if entries else None
    where = f", {first.span}" if first else ""
    return f"a decomposition (CompositeImplicitAutograd{where})"


def refusal(index: TreeIndex, record: OperatorRecord) -> str | None:
    """Why the guide's element-wise recipe cannot migrate ``record``, in one line; None when
    it can (its shared kernel is a stub declared with DECLARE_DISPATCH taking an iterator).

    Never refused: an operator whose stub is already registered natively (what is left is
    clean-up), and one whose declaration may be in a header that could not be read or was
    not understood (the plan notes that instead).
    """
    op = record.op
    if any(s.native for s in record.stubs):
        return None
    if record.missing_implementations:
        raise UnknownImplementationError(
            f"{op}: its shared implementation is unknown: no TORCH_IMPL_FUNC or function "
            f"{', '.join(record.missing_implementations)} in {paths.NATIVE_SOURCES}; the stub "
            "or operators it runs cannot be read, and nothing was written"
        )
    if record.composite_calls is not None:
        return _composite_refusal(index, record, record.composite_calls)
    entries = index.entries_by_operator().get(op, ())
    stub = record.stub
    decl = record.stub_decl
    tail = "it needs a hand-written kernel; nothing was written"
    if decl is None:
        if any(source is TreePart.HEADERS for source, _ in record.gaps) or any(
            PurePosixPath(u.span.path).match(paths.NATIVE_HEADERS) for u in record.unrecognised
        ):
            return None
        # stubs named after a variant of the operator (div_true_stub, div_floor_stub)
        variants = [
            d.stub
            for f in index.dispatch.files
            for d in f.decls
            if d.stub.startswith(f"{op}_")
            and d.stub.endswith("_stub")
            and d.stub.removesuffix("_stub") not in index.entries_by_operator()
        ]
        if variants:
            return (
                f"{op}: its kernel is behind {', '.join(variants)}, not {stub}, which the "
                f"guide's one-stub recipe does not cover: {tail}"
            )
        cpu = any(e.kernel_for("CPU") for e in entries)
        if cpu and (index.sources is None or not index.sources.present):
            # {stub} is only the operator's name: the stub its CPU implementation calls
            # (huber_loss -> huber_stub) can be declared all the same
            raise UnknownImplementationError(
                f"{op}: its stub is unknown: no {paths.NATIVE_SOURCES} in the tree to read "
                f"its shared implementation from, and no header declares {stub}, the name "
                "guessed from the operator; nothing was written"
            )
        return (
            f"{op}: implemented by {_implemented_by(entries)}, not by a stub declared with "
            f"DECLARE_DISPATCH (no header declares {stub}): {tail}"
        )
    if decl.params and not re.search(r"\bTensorIterator(?:Base)?\s*&", decl.params[0]):
        return (
            f"{op}: {stub} ({decl.span}) takes ({', '.join(decl.params)}), not a "
            f"TensorIterator: not element-wise, {tail}"
        )
    outputs = max((_returned_tensors(e.schema) for e in entries), default=1)
    if outputs > 1:
        return (
            f"{op}: {stub} ({decl.span}) fills {outputs} tensors, and an element-wise Metal "
            f"kernel writes one: {tail}"
        )
    tags = sorted({t for e in entries for t in e.tags if t in _NOT_ELEMENTWISE_TAGS})
    if tags:
        return (
            f"{op}: {stub} ({decl.span}) runs a {tags[0]} (tags: {', '.join(tags)}), not an "
            f"element-wise kernel: {tail}"
        )
    return None


def _operator_of(index: TreeIndex, name: str) -> str | None:
    """The yaml operator a called function is (``mul_out`` -> ``mul``, ``exp_`` -> ``exp``)."""
    ops = index.entries_by_operator()
    for candidate in (name, name.removesuffix("_out"), name.removesuffix("_")):
        if candidate in ops:
            return candidate
    return None


def _serves_mps(index: TreeIndex, op: str) -> bool:
    """Whether MPS runs ``op``: a row with MPS, or a decomposition into other operators."""
    kinds = {e.mps_kind for e in index.entries_by_operator().get(op, ())}
    return bool(kinds) and native_yaml.MpsKind.NONE not in kinds


def _composite_refusal(
    index: TreeIndex, record: OperatorRecord, calls: tuple[str, ...]
) -> str | None:
    """A composite migrates by folding its dispatch alone when MPS runs every operator its
    implementation calls; else why not, naming the callees without MPS."""
    impl = record.implementations[0]
    callees = list(
        dict.fromkeys(o for c in calls if (o := _operator_of(index, c)) and o != record.op)
    )
    if not callees:
        raise UnknownImplementationError(
            f"{record.op}: its shared implementation {impl.name} ({impl.span}) calls no stub "
            "and no ATen operator the tool can name; what MPS would run is unknown, and "
            "nothing was written"
        )
    lacking = [c for c in callees if not _serves_mps(index, c)]
    if lacking:
        return (
            f"{record.op}: a composite ({impl.name}, {impl.span}, runs "
            f"{', '.join(callees)}), but MPS has no dispatch for {', '.join(lacking)}: add "
            "MPS to those first; nothing was written"
        )
    return None


def _returned_tensors(schema: str) -> int:
    """How many tensors a schema returns: ``-> (Tensor mantissa, Tensor exponent)`` is 2."""
    returns = schema.rsplit("->", 1)[-1]
    return len(re.findall(r"\bTensor\b", returns))


# ---------------------------------------------------------------------- the unit


def pending(index: TreeIndex, op: str) -> bool:
    """Whether ``op`` is still to migrate, by the backlog's rule."""
    record = index.record(op, find_references=False)
    flow = of_record(record)
    return not (flow is Workflow.DONE or (flow is Workflow.ADD and not record.opinfos))


def partners(index: TreeIndex, op: str) -> tuple[str, ...]:
    """The other operators migrating with ``op`` as one unit: a forward's backward
    (``hardshrink`` / ``hardshrink_backward``, ``log_sigmoid_forward`` / ``_backward``), those
    of them still to migrate, in that order. A backward named alone migrates alone, as
    upstream migrates them (:func:`forward_state` says where its forward stands)."""
    if op.endswith("_backward"):
        return ()
    ops = index.entries_by_operator()
    base = re.sub(r"_(?:backward|forward)\Z", "", op)
    names = [base, f"{base}_forward", f"{base}_backward"]
    return tuple(n for n in dict.fromkeys(names) if n != op and n in ops and pending(index, n))


def forward_state(index: TreeIndex, op: str) -> str | None:
    """For a backward, one line on its forward (``hardswish`` of ``hardswish_backward``):
    still to migrate, or done; None for an operator that is no backward or has no forward."""
    if not op.endswith("_backward"):
        return None
    ops = index.entries_by_operator()
    base = op.removesuffix("_backward")
    forward = next((n for n in (base, f"{base}_forward") if n in ops), None)
    if forward is None:
        return None
    flow = of_record(index.record(forward, find_references=False))
    if flow is Workflow.DONE:
        return f"{forward}, its forward, is on Metal already"
    return (
        f"{forward}, its forward, is left as it is ({flow} workflow still to do): "
        f"`migrate {forward}` migrates it with its backward"
    )


# ------------------------------------------------------------- after the edits


def index_after(
    index: TreeIndex,
    edits: Mapping[str, FileEdit],
    yaml_model: native_yaml.NativeFunctions | None = None,
) -> TreeIndex:
    """The index of the tree as the edits leave it: each edited file re-parsed with its
    reader, the rest as read. ``yaml_model``: the edited yaml, already parsed."""
    if not edits:
        return index
    native = index.native
    if paths.NATIVE_YAML in edits:
        native = yaml_model or native_yaml.parse(edits[paths.NATIVE_YAML].after, paths.NATIVE_YAML)

    def swap(files: tuple, parse, suffix: str) -> tuple:
        have = {f.path for f in files}
        new = [parse(edits[f.path].after, f.path) if f.path in edits else f for f in files]
        new += [
            parse(e.after, rel)
            for rel, e in edits.items()
            if rel.endswith(suffix) and rel not in have
        ]
        return tuple(new)

    kernels = metal.MetalKernels(
        swap(index.kernels.files, metal.parse, ".metal"),
        index.kernels.warnings,
        index.kernels.gaps,
    )
    host = objc.HostFiles(
        swap(index.host.files, objc.parse, ".mm"), index.host.warnings, index.host.gaps
    )
    return replace(index, native=native, kernels=kernels, host=host, _ops={})


def unresolved_kernels(
    index: TreeIndex, after: TreeIndex, edits: Mapping[str, FileEdit]
) -> list[str]:
    """The invariant of placement, checked on the edited tree: every stub an edited host
    registers natively names a kernel that has a functor in the library that host loads.
    Only what the edits broke or added is reported (the tree's own gaps are not the plan's)."""

    def problems(idx: TreeIndex, texts: Mapping[str, str]) -> set[str]:
        functors = {f.path: {fn.name for fn in f.functors} for f in idx.kernels.files}
        found = set()
        for f in idx.host.files:
            if f.path not in edits:
                continue
            text = texts[f.path] if f.path in texts else _host_text(idx, f.path)
            lib = kernels_of_host(idx, f.path, text)
            for s in f.stubs:
                if not s.native or not s.kernel_name:
                    continue
                if s.kernel_name not in functors.get(lib, set()):
                    elsewhere = [p for p, names in functors.items() if s.kernel_name in names]
                    where = f" (it is in {', '.join(elsewhere)})" if elsewhere else ""
                    found.add(
                        f"{s.stub} runs kernel {s.kernel_name!r}, which has no functor in "
                        f"{lib}, the library {f.path} loads{where}"
                    )
        return found

    texts = {rel: e.after for rel, e in edits.items()}
    return sorted(problems(after, texts) - problems(index, {}))


def audit_left(
    index: TreeIndex, after: TreeIndex, op: str, edits: Mapping[str, FileEdit]
) -> list[str]:
    """The edit stage's checklist items that would still fail for ``op`` on the edited tree,
    one line each with their first evidence: what the audit would say after the run."""
    record = after.record(op, find_references=False)
    # as the audit finds them: the old names the edited tree still has, on disk and in edits
    old = record.old_names
    refs = [(n, span) for n, span in find_references(index.root, old) if span.path not in edits]
    if old:
        word = re.compile(r"\b(" + "|".join(map(re.escape, old)) + r")\b")
        for rel, e in edits.items():
            for lineno, line in enumerate(e.after.splitlines(), 1):
                refs += [(m.group(1), Span(rel, lineno, lineno)) for m in word.finditer(line)]
    record = replace(record, old_name_refs=tuple(refs))
    # overloads that had no MPS keep none in a migration (the add workflow's, not the edit's)
    before = {o.func for o in index.record(op, find_references=False).pending_overloads
              if o.kind is native_yaml.MpsKind.NONE}  # fmt: skip
    only_unadded = all(o.func in before for o in record.pending_overloads)
    left = []
    for item in checklist(record):
        if item.id == "dispatch" and record.overloads and only_unadded:
            continue
        if item.id in EDIT_ITEMS and item.status is Status.FAIL:
            first = next((d for d in item.details if d.span or d.text), None)
            evidence = (
                f": {first.text}" + (f" ({first.span})" if first.span else "") if first else ""
            )
            left.append(f"{op}: {item.id} would still fail after the edit{evidence}")
    return left
