"""From changed files to the operators they affect, each with its reasons.

``analyze`` is a pure function of the changed files' texts, the tree's MPS sources (a
:class:`~pipeline.impact.view.TreeView`) and the OpInfo records. One rule per kind of
file; every rule either names operators, asks for the full sweep (saying why), or finds
nothing to do. When in doubt a rule errs towards testing more: a missed operator costs a
broken nightly, an extra test costs seconds.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import ParseError, PipelineError
from pipeline.impact import cscan, pyscan
from pipeline.impact.changes import (
    ChangedFile,
    Range,
    changed_files,
    changes_from_list,
    parse_changed,
    tree_path,
)
from pipeline.impact.view import (
    C10_METAL_DIR,
    KERNELS_DIR,
    MPS_DIR,
    NATIVE_YAML,
    OPERATIONS_DIR,
    Resolver,
    TreeView,
    is_kernel_header,
    load_view,
    view_from_texts,
)
from pipeline.tree import common_mps, dispatch, metal, native_yaml, objc, opinfo, paths
from pipeline.tree.common_mps import CommonMps
from pipeline.tree.metal import Functor, MetalFile
from pipeline.tree.native_yaml import NativeFunction, NativeFunctions
from pipeline.tree.objc import ObjcFile
from pipeline.tree.opinfo import OpInfoRecord
from pipeline.tree.span import Span

COMMON_MPS = paths.COMMON_MPS
OPINFO_DEFINITIONS = (
    "torch/testing/_internal/common_methods_invocations.py",
    "torch/testing/_internal/opinfo/",
)
TESTING_DIR = "torch/testing/"
# MPS runtime outside native/mps: allocator, streams, device; nothing op-specific
MPS_RUNTIME_DIR = "aten/src/ATen/mps/"
# structured kernels shared by every backend (BinaryOps.cpp...); cpu/, cuda/... are not
SHARED_NATIVE_DIR = paths.NATIVE_DIR + "/"
_YAML_COMMENT = re.compile(r"(^|\s)#.*$")
SCHEMA = 1  # of the affected --json document (docs/machine-output.md)
# What a reason's changed place is to its operator: its own code or entry (functor, kernel,
# stub, registration, dispatch row, structured kernel, xfail or OpInfo entry), or code it
# shares with others (a header, a macro, a helper, another operator's functor it uses)
OWN = "own"
SHARED = "shared"


@dataclass(frozen=True)
class AffectedOp:
    """An operator a change reaches, and every reason found for it.

    ``kinds`` runs parallel to ``reasons``: :data:`OWN` or :data:`SHARED` for each. ``keys``
    are the OpInfo keys the operator is limited to (None: every OpInfo matching its name).
    Neither is in ``to_dict()``: ``affected --json`` keeps its documented shape.
    """

    operator: str
    reasons: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    keys: frozenset[str] | None = None

    @property
    def own(self) -> bool:
        """Whether some reason is a change of the operator's own code or entry."""
        return OWN in self.kinds

    def matches(self, info: OpInfoRecord) -> bool:
        """Whether this operator's tests include ``info``'s (as the test selection has it)."""
        if self.keys is not None:
            return info.key in self.keys
        return self.operator in (info.name, info.aten_name) or self.operator in info.aliases


@dataclass(frozen=True)
class Impact:
    """What a diff affects and which consistency tests to run for it."""

    operators: tuple[AffectedOp, ...]
    full_sweep: bool
    full_sweep_reasons: tuple[str, ...]
    build_needed: bool
    ignored: tuple[str, ...]
    test_ids: tuple[str, ...]
    selected: int
    total: int
    warnings: tuple[str, ...] = ()

    @property
    def fraction(self) -> float:
        """Share of the consistency suite selected (0.0 for an empty suite)."""
        return self.selected / self.total if self.total else 0.0

    @property
    def operator_names(self) -> tuple[str, ...]:
        return tuple(op.operator for op in self.operators)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` and for the PR report."""
        return {
            "operators": [
                {"operator": o.operator, "reasons": list(o.reasons)} for o in self.operators
            ],
            "full_sweep": self.full_sweep,
            "full_sweep_reasons": list(self.full_sweep_reasons),
            "build_needed": self.build_needed,
            "ignored": list(self.ignored),
            "selected": self.selected,
            "total": self.total,
            "fraction": round(self.fraction, 6),
            "test_ids": list(self.test_ids),
            "warnings": list(self.warnings),
        }

    def to_json(self) -> dict[str, Any]:
        """The ``affected --json`` document: ``to_dict()`` with its schema version."""
        return {"schema": SCHEMA, **self.to_dict()}


@dataclass
class _Findings:
    # operator -> reason -> its kind (OWN wins when one reason is found both ways)
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)
    # operator -> OpInfo keys it is limited to (None: every OpInfo matching the operator)
    keys: dict[str, set[str] | None] = field(default_factory=dict)
    sweep: dict[str, None] = field(default_factory=dict)
    build: bool = False
    ignored: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # (operator, construct) pairs already given a reason: an edited functor shows up in
    # both versions of its file, and one reason is enough
    said: set[tuple[str, tuple]] = field(default_factory=set)

    def hit(
        self,
        op: str,
        reason: str,
        *,
        build: bool,
        keys: Iterable[str] | None = None,
        construct: tuple | None = None,
        shared: bool = False,
    ) -> None:
        if construct is None or (op, construct) not in self.said:
            kinds = self.reasons.setdefault(op, {})
            kinds[reason] = OWN if kinds.get(reason) == OWN or not shared else SHARED
        if construct is not None:
            self.said.add((op, construct))
        self.build |= build
        if keys is None:
            self.keys[op] = None
        elif op not in self.keys:
            self.keys[op] = set(keys)
        elif self.keys[op] is not None:
            self.keys[op] |= set(keys)  # type: ignore[operator]

    def full(self, reason: str, *, build: bool) -> None:
        self.sweep[reason] = None
        self.build |= build


@dataclass(frozen=True)
class _Side:
    """One version of a changed file: its text, the changed lines in it, and its tree."""

    path: str
    text: str
    ranges: tuple[Range, ...]
    view: TreeView
    old: bool

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    def where(self, line: int) -> str:
        """``Binary.metal:12 `` (``Binary.metal:12 (old) `` for a line of the old version)."""
        return f"{self.name}:{line} " + ("(old) " if self.old else "")

    def changed_code_lines(self, language: str) -> Iterator[int]:
        """Changed lines holding code (``language`` "c" or "python"), comments skipped."""
        if language == "python":
            return self.changed_lines(pyscan.code_line_numbers(self.text).__contains__)
        code = cscan.code_lines(self.text, self.path)
        return self.changed_lines(lambda n: cscan.is_code(code, n, n))

    def changed_lines(self, is_code: Callable[[int], bool]) -> Iterator[int]:
        for start, end in self.ranges:
            for line in range(start, end + 1):
                if is_code(line):
                    yield line


@dataclass
class _Context:
    old: TreeView
    new: TreeView
    resolver: Resolver
    opinfos: tuple[OpInfoRecord, ...]
    found: _Findings


def _sides(change: ChangedFile, ctx: _Context) -> list[_Side]:
    """The new version's changed lines, then the old one's (removed code counts too)."""
    sides = []
    if change.new_text is not None and change.new_ranges:
        sides.append(_Side(change.path, change.new_text, change.new_ranges, ctx.new, False))
    if change.old_text is not None and change.old_ranges:
        sides.append(_Side(change.path, change.old_text, change.old_ranges, ctx.old, True))
    return sides


# --- native_functions.yaml -------------------------------------------------------------


def _yaml_code(text: str) -> list[str]:
    return [_YAML_COMMENT.sub("", line).rstrip() for line in text.splitlines()]


def _entry_signature(entry: NativeFunction, code: list[str]) -> dict[str, Any]:
    body = [line for line in code[entry.span.start - 1 : entry.span.end] if line.strip()]
    return {
        "schema": entry.schema,
        "dispatch": tuple((row.keys, row.kernel) for row in entry.dispatch),
        "structured": (entry.structured, entry.structured_delegate, entry.structured_inherits),
        "autogen": entry.autogen,
        "definition": tuple(body),
    }


def _dispatch_detail(old: NativeFunction, new: NativeFunction) -> str:
    before, after = old.kernel_for("MPS"), new.kernel_for("MPS")
    if before != after:
        return f" (MPS: {before or 'none'} -> {after or 'none'})"
    return ""


def _parsed_yaml(view: TreeView, text: str | None) -> NativeFunctions | None:
    """The view's model when it was parsed from ``text`` (saves re-reading 15k lines)."""
    if not text:
        return None
    if view.native is not None and view.texts.get(NATIVE_YAML) == text:
        return view.native
    return native_yaml.parse(text, NATIVE_YAML)


def _rule_native_yaml(change: ChangedFile, ctx: _Context) -> None:
    name = posixpath.basename(change.path)
    if change.old_text is None:
        _yaml_lines_edited(change, ctx)
        return
    try:
        old = _parsed_yaml(ctx.old, change.old_text)
        new = _parsed_yaml(ctx.new, change.new_text)
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot compare native_functions.yaml entries", build=True)
        return
    old_entries = {e.full_name: e for e in (old.entries if old else ())}
    new_entries = {e.full_name: e for e in (new.entries if new else ())}
    old_code = _yaml_code(change.old_text or "")
    new_code = _yaml_code(change.new_text or "")
    for full_name, entry in new_entries.items():
        before = old_entries.get(full_name)
        line = entry.span.start
        if before is None:
            ctx.found.hit(entry.operator, f"{name}:{line} {full_name} added", build=True)
            continue
        a, b = _entry_signature(before, old_code), _entry_signature(entry, new_code)
        changed = [aspect for aspect in a if a[aspect] != b[aspect]]
        if not changed:
            continue
        # "definition" (the entry's text sans comments) is implied by any other aspect
        if len(changed) > 1:
            changed.remove("definition")
        detail = _dispatch_detail(before, entry) if "dispatch" in changed else ""
        aspects = " and ".join(changed)
        ctx.found.hit(
            entry.operator, f"{name}:{line} {aspects} of {full_name} changed{detail}", build=True
        )
    for full_name, entry in old_entries.items():
        if full_name not in new_entries:
            reason = f"{name}:{entry.span.start} {full_name} removed"
            ctx.found.hit(entry.operator, reason, build=True)


def _yaml_lines_edited(change: ChangedFile, ctx: _Context) -> None:
    """Without the previous version: the entries spanning edited (non-comment) lines."""
    native = ctx.new.native
    name = posixpath.basename(change.path)
    if native is None:
        ctx.found.full(f"{name}: could not be parsed, entries unknown", build=True)
        return
    code = _yaml_code(change.new_text or "")
    for entry in native.entries:
        for start, end in change.new_ranges:
            lines = [
                n
                for n in range(max(start, entry.span.start), min(end, entry.span.end) + 1)
                if n <= len(code) and code[n - 1].strip()
            ]
            if lines:
                reason = f"{name}:{lines[0]} entry {entry.full_name} edited"
                ctx.found.hit(entry.operator, reason, build=True)
                break


# --- .metal -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _MetalFile:
    """A .metal file's reader model joined with its top-level units."""

    path: str
    model: MetalFile
    units: tuple[cscan.Unit, ...]

    def functor_kernel(self, functor: Functor) -> str:
        return functor.name.removesuffix("_functor")

    def struct_name(self, functor: Functor) -> str:
        return self.functor_kernel(functor) + "_functor"

    def kernel_functions(self) -> set[str]:
        return {n for u in self.units if u.kind == "kernel" for n in u.defines}

    def unit_kernels(self, unit: cscan.Unit, seen: set[int] | None = None) -> set[str]:
        """Metal kernel names a unit defines, registers, or instantiates (through macros)."""
        seen = set() if seen is None else seen
        if unit.start in seen:
            return set()
        seen.add(unit.start)
        kernels = {
            self.functor_kernel(f)
            for f in self.model.functors
            if f.span.overlaps(unit.start, unit.end)
        }
        kernels |= {
            r.kernel for r in self.model.registrations if r.span.overlaps(unit.start, unit.end)
        }
        if unit.kind == "kernel":
            kernels |= set(unit.defines)
        if unit.kind in ("define", "statement"):
            if unit.kind == "define":
                kernels |= {
                    r.kernel for r in self.model.registrations if r.written_macro in unit.defines
                }
                kernels |= {
                    self.functor_kernel(f) for f in self.model.functors if f.macro in unit.defines
                }
            # what the macro body or invocation names: kernel functions, functors, macros
            kernels |= unit.mentions & self.kernel_functions()
            structs = {self.struct_name(f): self.functor_kernel(f) for f in self.model.functors}
            kernels |= {structs[m] for m in unit.mentions & set(structs)}
            for other in self.units:
                if other.kind == "define" and other.defines & unit.mentions:
                    kernels |= self.unit_kernels(other, seen)
        return kernels

    def reach(self, names: Iterable[str], exclude: cscan.Unit | None = None) -> set[str]:
        """Kernels of every unit that names ``names``, directly or through other units."""
        frontier = set(names)
        known = set(frontier)
        visited: set[int] = set() if exclude is None else {exclude.start}
        kernels: set[str] = set()
        while frontier:
            reached = [u for u in self.units if u.start not in visited and u.mentions & frontier]
            frontier = set()
            for unit in reached:
                visited.add(unit.start)
                kernels |= self.unit_kernels(unit)
                new = set(unit.defines) | {
                    self.struct_name(f)
                    for f in self.model.functors
                    if f.span.overlaps(unit.start, unit.end)
                }
                frontier |= new - known
                known |= new
        return kernels

    def all_kernels(self) -> set[str]:
        kernels = {self.functor_kernel(f) for f in self.model.functors}
        kernels |= {r.kernel for r in self.model.registrations}
        return kernels | self.kernel_functions()


def _metal_file(side_view: TreeView, path: str, text: str) -> _MetalFile | None:
    model = side_view.metal.get(path)
    if model is None or side_view.texts.get(path) != text:
        try:
            model = metal.parse(text, path)
        except ParseError:
            return None
    return _MetalFile(path, model, cscan.units(text, path))


def _hit_kernels(
    ctx: _Context,
    kernels: Iterable[str],
    reason: str,
    construct: tuple | None = None,
    *,
    shared: bool = False,
) -> None:
    for kernel in sorted(kernels):
        for op, how in ctx.resolver.ops_for_kernel(kernel):
            ctx.found.hit(op, reason + how, build=True, construct=construct, shared=shared)


def _file_wide(ctx: _Context, mfile: _MetalFile, reason: str) -> None:
    kernels = mfile.all_kernels()
    if not kernels:
        ctx.found.full(reason + f"; no kernel found in {mfile.path}", build=True)
        return
    name = posixpath.basename(mfile.path)
    reason = f"{reason}: every operator with Metal kernels in {name}"
    _hit_kernels(ctx, kernels, reason, ("file", mfile.path), shared=True)


def _rule_metal(change: ChangedFile, ctx: _Context) -> None:
    for side in _sides(change, ctx):
        mfile = _metal_file(side.view, side.path, side.text)
        if mfile is None:
            ctx.found.full(f"{side.name}: does not parse, its kernels are unknown", build=True)
            continue
        done: set[tuple[str, int]] = set()
        for line in side.changed_code_lines("c"):
            _metal_line(ctx, side, mfile, line, done)


def _metal_line(
    ctx: _Context, side: _Side, mfile: _MetalFile, line: int, done: set[tuple[str, int]]
) -> None:
    where = side.where(line)
    path = side.path
    # one line can register many kernels (a file-local macro instantiating a list of ops)
    regs = [r for r in mfile.model.registrations if r.span.contains(line)]
    if regs:
        key = ("reg", regs[0].span.start)
        if key not in done:
            done.add(key)
            for kernel in dict.fromkeys(r.kernel for r in regs):
                reason = f"{where}registration of {kernel} changed"
                _hit_kernels(ctx, [kernel], reason, ("reg", path, kernel))
        return
    functors = [f for f in mfile.model.functors if f.span.contains(line)]
    if functors:
        key = ("functor", functors[0].span.start)
        if key not in done:
            done.add(key)
            for functor in functors:
                kernel = mfile.functor_kernel(functor)
                construct: tuple = ("functor", path, kernel)
                _hit_kernels(ctx, [kernel], f"{where}functor {kernel}_functor changed", construct)
                unit = next((u for u in mfile.units if functor.span.overlaps(u.start, u.end)), None)
                users = mfile.reach([mfile.struct_name(functor)], exclude=unit) - {kernel}
                reason = f"{where}functor {kernel}_functor, used by {{}}, changed"
                for user in sorted(users):
                    _hit_kernels(ctx, [user], reason.format(user), construct, shared=True)
        return
    unit = next((u for u in mfile.units if u.start <= line <= u.end), None)
    key = ("unit", unit.start if unit else line)
    if key in done:
        return
    done.add(key)
    if unit is None or unit.kind == "directive":
        _file_wide(ctx, mfile, f"{where}shared code changed (outside any functor)")
        return
    kernels = mfile.unit_kernels(unit) | mfile.reach(unit.defines, exclude=unit)
    label = ", ".join(sorted(unit.defines)) or "top-level code"
    if not kernels:
        _file_wide(ctx, mfile, f"{where}{label} changed and no user of it was found")
        return
    what = "macro" if unit.kind == "define" else "kernel" if unit.kind == "kernel" else "helper"
    construct = ("unit", path, unit.kind, unit.defines or unit.mentions)
    reason = f"{where}shared {what} {label} changed"
    # a kernel function is its own kernels' code; what reaches it through it shares it
    own = set(unit.defines) & kernels if unit.kind == "kernel" else set()
    _hit_kernels(ctx, own, reason, construct)
    _hit_kernels(ctx, kernels - own, reason, construct, shared=True)


# --- headers under kernels/ and c10/metal/ ----------------------------------------------


def _host_ops(ctx: _Context, model: ObjcFile) -> set[str]:
    ops = {ctx.resolver.stub_operator(s.stub)[0] for s in model.stubs}
    for impl in model.implementations:
        ops |= set(ctx.resolver.ops_for_impl(impl.name)) or {ctx.resolver.operator(impl.name)[0]}
    return ops | {inc.op for inc in model.includes}


def _rule_header(change: ChangedFile, ctx: _Context) -> None:
    name = posixpath.basename(change.path)
    try:
        lines = [line for side in _sides(change, ctx) for line in side.changed_code_lines("c")]
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot tell its code from its comments", build=True)
        return
    if not lines and change.status != "D" and (change.new_ranges or change.old_ranges):
        return  # comments only
    where = f"{name}:{lines[0] if lines else 1}"
    includers = sorted(ctx.old.includers(change.path) | ctx.new.includers(change.path))
    if not includers:
        if change.status != "A":  # a new header nobody includes cannot change a kernel
            ctx.found.full(f"{where} header changed and no file including it was found", build=True)
        return
    for includer in includers:
        inc_name = posixpath.basename(includer)
        view = ctx.new if includer in ctx.new.texts else ctx.old
        reason = f"{where} header changed (included by {inc_name})"
        if includer.endswith(".metal"):
            mfile = _metal_file(view, includer, view.texts[includer])
            if mfile is None:
                ctx.found.full(reason + f"; {inc_name} does not parse", build=True)
            else:
                _hit_kernels(ctx, mfile.all_kernels(), reason, shared=True)
        elif includer.startswith(OPERATIONS_DIR) and includer in view.host:
            ops = _host_ops(ctx, view.host[includer])
            for op in sorted(ops):
                ctx.found.hit(op, reason, build=True, shared=True)
            if not ops:
                ctx.found.full(reason + f"; no operator found in {inc_name}", build=True)
        elif not is_kernel_header(includer):
            ctx.found.full(reason + ": shared MPS infrastructure", build=True)


# --- .mm host files ---------------------------------------------------------------------


def _rule_host(change: ChangedFile, ctx: _Context) -> None:
    for side in _sides(change, ctx):
        model = side.view.host.get(side.path)
        if model is None or side.view.texts.get(side.path) != side.text:
            try:
                model = objc.parse(side.text, side.path)
            except ParseError as exc:
                ctx.found.full(f"{exc}: its stubs are unknown", build=True)
                continue
        done: set[tuple[str, int]] = set()
        for line in side.changed_code_lines("c"):
            _host_line(ctx, side, model, line, done)


def _host_line(ctx: _Context, side: _Side, model: ObjcFile, line: int, done: set) -> None:
    where = side.where(line)
    res = ctx.resolver
    path = side.path
    for stub in model.stubs:
        if stub.span.contains(line):
            if ("stub", stub.span.start) not in done:
                done.add(("stub", stub.span.start))
                op, how = res.stub_operator(stub.stub)
                reason = f"{where}registration of {stub.stub} changed{how}"
                ctx.found.hit(op, reason, build=True, construct=("stub", path, stub.stub))
            return
    for fn in model.functions:
        if fn.span.contains(line):
            if ("fn", fn.span.start) not in done:
                done.add(("fn", fn.span.start))
                reason = f"{where}stub kernel {fn.name} changed"
                construct = ("fn", path, fn.name)
                stubs = res.stubs_registering(fn.name)
                found = [(*res.stub_operator(stub), f" (registered as {stub})") for stub in stubs]
                if not stubs and fn.kernel_name:
                    found = [(op, how, "") for op, how in res.ops_for_kernel(fn.kernel_name)]
                elif not stubs:
                    found = [(*res.operator(fn.name), "")]
                for op, how, via in found:
                    ctx.found.hit(op, reason + via + how, build=True, construct=construct)
            return
    for impl in model.implementations:
        if impl.span.contains(line):
            if ("impl", impl.span.start) not in done:
                done.add(("impl", impl.span.start))
                reason = f"{where}MPSGraph implementation {impl.name} changed"
                construct = ("impl", path, impl.name)
                ops = res.ops_for_impl(impl.name)
                for op in ops:
                    ctx.found.hit(
                        op, f"{reason} (MPS kernel of {op})", build=True, construct=construct
                    )
                if not ops:
                    op, how = res.operator(impl.name)
                    ctx.found.hit(op, reason + how, build=True, construct=construct)
            return
    for inc in model.includes:
        if inc.span.contains(line):
            reason = f"{where}include of {inc.op}_native.h changed"
            ctx.found.hit(inc.op, reason, build=True, construct=("include", path, inc.op))
            return
    if ("shared", 0) not in done:
        done.add(("shared", 0))
        ctx.found.full(
            f"{where}shared host code changed (outside any stub, kernel or MPSGraph "
            "implementation)",
            build=True,
        )


# --- common_mps.py ----------------------------------------------------------------------


def _xfail_signature(model: CommonMps) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    table: dict[tuple[str, str, str], list[Any]] = {}
    for entry in model.entries:
        value = (entry.dtypes, entry.raw)
        table.setdefault((entry.list, entry.function, entry.key), []).append(value)
    for member in model.sets:
        table.setdefault((member.list, member.function, member.key), []).append("member")
    return {k: tuple(v) for k, v in table.items()}


def _key_hit(ctx: _Context, key: str, reason: str, *, build: bool = False) -> None:
    infos = [i for i in ctx.opinfos if i.key == key]
    if infos:
        ctx.found.hit(infos[0].name, reason, build=build, keys={key})
    else:
        ctx.found.hit(key, reason + " (no OpInfo has this key)", build=build, keys=set())


def _spans_of(model: CommonMps) -> list[Span]:
    spans = []
    for entry in model.entries:
        spans.append(entry.span)
        if entry.comment_span is not None:
            spans.append(entry.comment_span)
    return spans + [member.span for member in model.sets]


def _rule_common_mps(change: ChangedFile, ctx: _Context) -> None:
    name = posixpath.basename(change.path)
    try:
        old = common_mps.parse(change.old_text, change.path) if change.old_text else None
        new = common_mps.parse(change.new_text, change.path) if change.new_text else None
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot compare xfail entries", build=False)
        return
    if change.old_text is not None and old is not None and new is not None:
        before, after = _xfail_signature(old), _xfail_signature(new)
        lines = {}
        for parsed, label in ((old, " (old)"), (new, "")):
            keyed: tuple[common_mps.XfailEntry | common_mps.SetEntry, ...]
            keyed = (*parsed.entries, *parsed.sets)
            for item in keyed:
                lines[(item.list, item.function, item.key)] = f"{name}:{item.span.start}{label}"
        for k in dict.fromkeys([*after, *before]):
            if before.get(k) == after.get(k):
                continue
            verb = "added" if k not in before else "removed" if k not in after else "changed"
            _key_hit(ctx, k[2], f"{lines[k]} {k[0]} entry {k[2]!r} {verb}")
    # code changed outside every entry: the modifier's logic itself
    for side in _sides(change, ctx):
        model = old if side.old else new
        if model is None:
            continue
        spans = _spans_of(model)
        for line in side.changed_code_lines("python"):
            inside = [s for s in model.entries if s.span.contains(line)] + [
                s for s in model.sets if s.span.contains(line)
            ]
            if change.old_text is None and inside:
                for item in inside:
                    _key_hit(
                        ctx, item.key, f"{side.where(line)}{item.list} entry {item.key!r} edited"
                    )
                continue
            if not any(span.contains(line) for span in spans):
                ctx.found.full(
                    f"{side.where(line)}code outside the xfail entries changed", build=False
                )
                break


# --- OpInfo definitions -----------------------------------------------------------------


def _info_keys(ctx: _Context, call: pyscan.InfoCall) -> set[str]:
    return {
        i.key
        for i in ctx.opinfos
        if i.name == call.name and (call.variant is None or i.variant_test_name == call.variant)
    }


def _rule_opinfo_definitions(change: ChangedFile, ctx: _Context) -> None:
    for side in _sides(change, ctx):
        source = pyscan.scan_opinfo_source(side.text)
        if source is None:
            ctx.found.full(f"{side.name}: not valid Python, OpInfos unknown", build=False)
            continue
        done: set[int] = set()
        for line in side.changed_lines(source.code.__contains__):
            call = pyscan.innermost_call(source, line)
            if call is not None:
                if call.start not in done:
                    done.add(call.start)
                    variant = f" ({call.variant})" if call.variant else ""
                    reason = f"{side.where(line)}OpInfo {call.name}{variant} definition changed"
                    construct = ("opinfo", side.path, call.name, call.variant)
                    keys = _info_keys(ctx, call)
                    ctx.found.hit(call.name, reason, build=False, keys=keys, construct=construct)
                continue
            top = pyscan.enclosing_def(source, line)
            key = top.start if top else -line
            if key in done:
                continue
            done.add(key)
            users = pyscan.users(source, top) if top is not None and top.names else ()
            if not users:
                what = ", ".join(sorted(top.names)) if top and top.names else "module-level code"
                ctx.found.full(
                    f"{side.where(line)}{what} changed and is not used by one OpInfo",
                    build=False,
                )
                continue
            label = ", ".join(sorted(top.names))  # type: ignore[union-attr]
            for user in users:
                ctx.found.hit(
                    user.name,
                    f"{side.where(line)}{label}, used by OpInfo {user.name}, changed",
                    build=False,
                    keys=_info_keys(ctx, user),
                    construct=("def", side.path, top.names),  # type: ignore[union-attr]
                    shared=True,
                )


# --- shared structured kernels (aten/src/ATen/native/*.cpp) -------------------------------

_STRUCTURED = re.compile(r"^\s*TORCH_(IMPL|META)_FUNC2?\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")
_DEFINE_DISPATCH = re.compile(r"^\s*DEFINE_DISPATCH\s*\(\s*(\w+)\s*\)")


def _mps_ops_of_unit(ctx: _Context, text: str) -> dict[str, str]:
    """Operators whose MPS path runs this top-level unit of a shared .cpp, with what it is.

    ``TORCH_IMPL_FUNC(k)`` and plain functions count when a yaml entry dispatches MPS to
    ``k``; ``TORCH_META_FUNC(op)`` when ``op`` has any MPS kernel; ``DEFINE_DISPATCH(s)``
    when MPS registers stub ``s``.
    """
    res = ctx.resolver
    first = text.lstrip().split("\n", 1)[0]
    if match := _STRUCTURED.match(first):
        kind, name = match.group(1), match.group(2)
        if kind == "IMPL":
            return {op: f"structured kernel {name}" for op in sorted(res.mps_kernels.get(name, ()))}
        op = res.operator(name)[0]
        return {op: f"structured meta function of {name}"} if op in res.mps_ops else {}
    if match := _DEFINE_DISPATCH.match(first):
        stub = match.group(1)
        registered = any(
            s.stub == stub
            for view in (ctx.new, ctx.old)
            for m in view.host.values()
            for s in m.stubs
        )
        return {res.stub_operator(stub)[0]: f"dispatch stub {stub}"} if registered else {}
    return {}


def _rule_shared_cpp(change: ChangedFile, ctx: _Context) -> None:
    """A backend-shared .cpp: only the structured kernels, meta functions and stubs MPS runs
    (and helpers they name) count; the rest is other backends' business."""
    attributed = False
    for side in _sides(change, ctx):
        try:
            units = cscan.units(side.text, side.path)
            changed = side.changed_code_lines("c")
        except ParseError as exc:
            ctx.found.full(f"{exc}: its MPS code is unknown", build=True)
            attributed = True
            continue
        lines = side.text.splitlines()
        text_of = {u.start: "\n".join(lines[u.start - 1 : u.end]) for u in units}
        done: set[int] = set()
        for line in changed:
            unit = next((u for u in units if u.start <= line <= u.end), None)
            if unit is None or unit.start in done:
                continue
            done.add(unit.start)
            found = _mps_ops_of_unit(ctx, text_of[unit.start])
            label = ""
            if not found and unit.defines:
                # a helper: the structured kernels that name it, directly or not
                users = _cpp_users(units, unit)
                for user in users:
                    for op, what in _mps_ops_of_unit(ctx, text_of[user.start]).items():
                        found.setdefault(op, what)
                label = ", ".join(sorted(unit.defines)) + ", used by "
            for op, what in found.items():
                reason = f"{side.where(line)}{label}{what} changed (MPS shares it)"
                ctx.found.hit(
                    op,
                    reason,
                    build=True,
                    construct=("cpp", side.path, unit.defines, what),
                    shared=bool(label),  # a helper the structured kernel uses
                )
                attributed = True
    if not attributed:
        ctx.found.ignored.append(change.path)


def _cpp_users(units: Sequence[cscan.Unit], start: cscan.Unit) -> list[cscan.Unit]:
    names, frontier, seen, users = set(start.defines), set(start.defines), {start.start}, []
    while frontier:
        reached = [u for u in units if u.start not in seen and u.mentions & frontier]
        frontier = set()
        for unit in reached:
            seen.add(unit.start)
            users.append(unit)
            frontier |= unit.defines - names
            names |= unit.defines
    return users


# --- stub declarations in shared headers (aten/src/ATen/native/*.h) ----------------------

_STUB_WORD = re.compile(r"\b\w+_stub\b")


def _declared_with(decl: dispatch.StubDecl, alias: str, model: dispatch.DispatchHeader) -> bool:
    """Whether ``decl``'s type is ``alias``, directly or through the file's other aliases."""
    table = {a.name: a for a in reversed(model.aliases)}
    current, seen = decl.fn_type.rsplit("::", 1)[-1], set()
    while current not in seen:
        if current == alias:
            return True
        seen.add(current)
        found = table.get(current)
        if found is None:
            return False
        current = found.target.rsplit("::", 1)[-1]
    return False


def _line_stubs(model: dispatch.DispatchHeader, line: int) -> list[tuple[str, str, bool]]:
    """(stub, what changed, shared) for each stub whose declared type a header line is part
    of; shared: a type alias other stubs may be declared with too, not the stub's own line."""
    found = [
        (d.stub, f"declaration of {d.stub}", False) for d in model.decls if d.span.contains(line)
    ]
    for u in model.unrecognised:  # a declaration whose type the reader could not resolve
        if u.span.contains(line):
            found += [(s, f"declaration of {s}", False) for s in _STUB_WORD.findall(u.text)]
    for alias in model.aliases:
        if alias.span.contains(line):
            found += [
                (d.stub, f"type alias {alias.name} of {d.stub}", True)
                for d in model.decls
                if _declared_with(d, alias.name, model)
            ]
    return found


def _rule_shared_header(change: ChangedFile, ctx: _Context) -> None:
    """A backend-shared native header. A changed ``DECLARE_DISPATCH`` of a stub MPS registers,
    or a type alias it is declared with, changes what the MPS kernel function must take: a
    build, and the stub's operator. Other code (helpers, CPU prototypes) is treated like a
    shared .cpp's unattributed code: other backends' business."""
    registered = {
        s.stub for view in (ctx.new, ctx.old) for model in view.host.values() for s in model.stubs
    }
    attributed = False
    for side in _sides(change, ctx):
        try:
            model = dispatch.parse(side.text, side.path)
            changed = list(side.changed_code_lines("c"))
        except ParseError as exc:
            ctx.found.full(f"{exc}: its stub declarations are unknown", build=True)
            attributed = True
            continue
        for line in changed:
            for alias in model.aliases:
                if (
                    alias.params is not None
                    and alias.span.contains(line)
                    and not any(_declared_with(d, alias.name, model) for d in model.decls)
                ):
                    ctx.found.warnings.append(
                        f"{side.where(line)}function type {alias.name} changed; stubs other "
                        "headers declare with it are not followed"
                    )
            for stub, what, shared in _line_stubs(model, line):
                if stub not in registered:
                    continue
                ctx.found.hit(
                    ctx.resolver.stub_operator(stub)[0],
                    f"{side.where(line)}{what} changed (MPS registers it)",
                    build=True,
                    construct=("stub type", side.path, stub),
                    shared=shared,
                )
                attributed = True
    if not attributed:
        ctx.found.ignored.append(change.path)


# --- dispatch ---------------------------------------------------------------------------


def classify(path: str, test_file: str = paths.TEST_MPS) -> str:
    """Which rule handles ``path``: yaml, metal, header, host, mps_other, shared_cpp,
    shared_header, common_mps, opinfo, test_mps, testing or ignored. ``test_file`` is the
    ``test.file`` setting: the file whose change may affect every consistency test."""
    if path == NATIVE_YAML:
        return "yaml"
    if path.startswith(KERNELS_DIR) and path.endswith(".metal"):
        return "metal"
    if is_kernel_header(path):
        return "header"
    if path.startswith(OPERATIONS_DIR) and path.endswith(".mm"):
        return "host"
    if path.startswith((MPS_DIR, C10_METAL_DIR, MPS_RUNTIME_DIR)):
        return "mps_other"
    rest = path.removeprefix(SHARED_NATIVE_DIR)
    if rest != path and rest.endswith(".cpp") and "/" not in rest:
        return "shared_cpp"
    if rest != path and rest.endswith(".h") and "/" not in rest:
        return "shared_header"
    if path == COMMON_MPS:
        return "common_mps"
    if path.endswith(".py") and (
        path == OPINFO_DEFINITIONS[0] or path.startswith(OPINFO_DEFINITIONS[1])
    ):
        return "opinfo"
    if path == test_file:
        return "test_mps"
    if path.startswith(TESTING_DIR) and path.endswith(".py"):
        return "testing"
    return "ignored"


def _rule_simple(kind: str) -> Callable[[ChangedFile, _Context], None]:
    def rule(change: ChangedFile, ctx: _Context) -> None:
        if kind == "mps_other":
            ctx.found.full(f"{change.path} changed: shared MPS infrastructure", build=True)
        elif kind == "test_mps":
            ctx.found.full(f"{change.path} changed: every consistency test may differ", build=False)
        elif kind == "testing":
            ctx.found.full(f"{change.path} changed: shared test infrastructure", build=False)
        else:
            ctx.found.ignored.append(change.path)

    return rule


_RULES: dict[str, Callable[[ChangedFile, _Context], None]] = {
    "yaml": _rule_native_yaml,
    "metal": _rule_metal,
    "header": _rule_header,
    "host": _rule_host,
    "common_mps": _rule_common_mps,
    "opinfo": _rule_opinfo_definitions,
    "shared_cpp": _rule_shared_cpp,
    "shared_header": _rule_shared_header,
}


def _tests_for(
    ops: dict[str, set[str] | None], opinfos: Sequence[OpInfoRecord], kinds: Sequence[str]
) -> tuple[str, ...]:
    wanted = []
    for info in opinfos:
        for op, keys in ops.items():
            if keys is None:
                if op in (info.name, info.aten_name) or op in info.aliases:
                    break
            elif info.key in keys:
                break
        else:
            continue
        wanted.append(info)
    return tuple(t for info in wanted for kind in kinds for t in info.test_ids(kind))


def _frozen(keys: set[str] | None) -> frozenset[str] | None:
    return None if keys is None else frozenset(keys)


def analyze(
    changes: Iterable[ChangedFile],
    *,
    opinfos: Iterable[OpInfoRecord],
    view: TreeView | None = None,
    kinds: Sequence[str] = ("output_match",),
    test_file: str = paths.TEST_MPS,
) -> Impact:
    """The operators ``changes`` affect, why, and which consistency tests cover them.

    ``view`` holds the tree's MPS sources at the new version (``load_view``); without it
    only the changed files themselves are known, so kernel-to-stub lookups fall back to
    names. ``kinds`` are the test kinds configured (``output_match``, ...): the suite total
    counts every OpInfo x dtype x kind.
    """
    changes = tuple(changes)
    opinfos = tuple(opinfos)
    if view is None:
        view = view_from_texts({c.path: c.new_text for c in changes if c.new_text is not None})
    new = view.with_texts({c.path: c.new_text for c in changes})
    old = new.with_texts({c.path: c.old_text for c in changes if c.old_text is not None})
    found = _Findings(warnings=list(dict.fromkeys([*new.warnings, *old.warnings])))
    ctx = _Context(old, new, Resolver([new, old], opinfos), opinfos, found)
    for change in changes:
        kind = classify(change.path, test_file)
        _RULES.get(kind, _rule_simple(kind))(change, ctx)

    everything = tuple(t for info in opinfos for kind in kinds for t in info.test_ids(kind))
    full = bool(found.sweep)
    test_ids = everything if full else _tests_for(found.keys, opinfos, kinds)
    return Impact(
        operators=tuple(
            AffectedOp(op, tuple(reasons), tuple(reasons.values()), _frozen(found.keys.get(op)))
            for op, reasons in sorted(found.reasons.items())
        ),
        full_sweep=full,
        full_sweep_reasons=tuple(found.sweep),
        build_needed=found.build,
        ignored=tuple(sorted(found.ignored)),
        test_ids=test_ids,
        selected=len(test_ids),
        total=len(everything),
        warnings=tuple(found.warnings),
    )


def affected(
    root: Path,
    base: str,
    head: str | None = None,
    *,
    opinfos: Sequence[OpInfoRecord],
    kinds: Sequence[str] = ("output_match",),
    test_file: str = paths.TEST_MPS,
) -> Impact:
    """Analyse ``git diff base..head`` (the work tree when ``head`` is None) under ``root``."""
    changes = changed_files(root, base, head)
    view = load_view(root, head)
    return analyze(changes, opinfos=opinfos, view=view, kinds=kinds, test_file=test_file)


# -- with the settings: the tree, its OpInfos and the test kinds ------------------------


def diff_impact(settings: Settings, base: str, head: str | None = None) -> Impact:
    """The impact of ``git diff base..head`` (the work tree when ``head`` is None)."""
    return affected(
        settings.root,
        base,
        head,
        opinfos=opinfo.load_opinfos(settings.tree),
        kinds=settings.test_kinds,
        test_file=settings.test_file,
    )


def listed_impact(settings: Settings, specs: Sequence[str], *, cwd: Path | None = None) -> Impact:
    """The impact of changed lines given as ``PATH[:A-B,...]`` specs, against the tree on disk.

    A path may be relative to the tree root, relative to ``cwd`` (default: the current
    directory) or absolute (:func:`~pipeline.impact.changes.tree_path`). A path outside the
    tree or naming no file in it contributes nothing but a warning (first in
    ``warnings``); when no spec names a file in the tree, PipelineError (exit 2) says why.
    """
    root = settings.root
    files: list[tuple[str, list[Range]]] = []
    rejected: list[tuple[str, str]] = []
    for spec in specs:
        path, ranges = parse_changed(spec)
        rel, why = tree_path(root, path, cwd)
        if rel is None:
            rejected.append((path, why or ""))
        else:
            files.append((rel, ranges))
    if not files:
        raise PipelineError(
            "affected: no --changed path is a file in the tree; "
            + "; ".join(f"{path}: {why}" for path, why in rejected)
            + ". Give a path relative to the tree root or to the current directory, or an "
            "absolute path inside the tree"
        )
    warnings = [f"--changed {path} ignored: {why}" for path, why in rejected]
    changes = changes_from_list(root, files)
    for change in changes:
        count = len((change.new_text or "").splitlines())
        past = [f"{a}-{b}" if a != b else str(a) for a, b in change.new_ranges if a > count]
        if past:
            warnings.append(
                f"--changed {change.path}: line(s) {','.join(past)} past its end "
                f"({count} lines); those lines contribute nothing"
            )
    impact = analyze(
        changes,
        opinfos=opinfo.load_opinfos(settings.tree),
        view=load_view(root),
        kinds=settings.test_kinds,
        test_file=settings.test_file,
    )
    return replace(impact, warnings=(*warnings, *impact.warnings))


def selected_opinfos(
    impact: Impact, opinfos: Sequence[OpInfoRecord], kinds: Sequence[str]
) -> tuple[OpInfoRecord, ...]:
    """The OpInfos whose tests ``impact`` selected (whole OpInfos: every dtype and kind)."""
    if impact.full_sweep:
        return tuple(opinfos)
    wanted = set(impact.test_ids)
    return tuple(
        info for info in opinfos if any(t in wanted for k in kinds for t in info.test_ids(k))
    )
