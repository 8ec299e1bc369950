"""The MPS sources of one version of the tree, parsed once, for lookups across files.

A change in one file is attributed with facts from others: which stub runs a Metal
kernel, which yaml entry dispatches to an MPSGraph function, which ``.metal`` files
include a header. :class:`TreeView` holds those files' texts and reader models;
``with_texts`` derives the other side of a diff by swapping in only the changed files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

from pipeline.errors import ParseError
from pipeline.impact import cscan
from pipeline.impact.changes import _read_disk, list_revision, read_revision
from pipeline.tree import metal, native_yaml, objc, paths
from pipeline.tree.includes import includes
from pipeline.tree.inductor import InductorMetal
from pipeline.tree.inductor import parse as parse_inductor
from pipeline.tree.metal import MetalFile
from pipeline.tree.native_yaml import NativeFunctions
from pipeline.tree.objc import ObjcFile
from pipeline.tree.opinfo import OpInfoRecord

NATIVE_YAML = paths.NATIVE_YAML
# directory prefixes of tree-relative paths, "/"-terminated for startswith()
MPS_DIR = paths.MPS_DIR + "/"
KERNELS_DIR = paths.KERNELS_DIR + "/"
OPERATIONS_DIR = paths.OPERATIONS_DIR + "/"
C10_METAL_DIR = paths.C10_METAL_DIR + "/"
INDUCTOR_MPS_CODEGEN = paths.INDUCTOR_MPS_CODEGEN
VIEW_PREFIXES = (NATIVE_YAML, MPS_DIR, C10_METAL_DIR, INDUCTOR_MPS_CODEGEN)
_SOURCE_SUFFIXES = (".metal", ".h", ".mm", ".yaml")
# name endings that separate an implementation/stub/kernel name from its operator
_SUFFIXES = ("_functor", "_stub", "_mps_kernel", "_kernel", "_out_mps", "_mps", "_out")


def is_metal_source(path: str) -> bool:
    """A ``.metal`` file the metal reader parses (directly under ``kernels/``)."""
    return (
        path.startswith(KERNELS_DIR)
        and path.endswith(".metal")
        and "/" not in path[len(KERNELS_DIR) :]
    )


def is_host_source(path: str) -> bool:
    """A ``.mm`` file the objc reader parses (directly under ``operations/``)."""
    return (
        path.startswith(OPERATIONS_DIR)
        and path.endswith(".mm")
        and "/" not in path[len(OPERATIONS_DIR) :]
    )


def is_kernel_header(path: str) -> bool:
    """A header shared by Metal sources: under ``kernels/`` or ``c10/metal/``."""
    return path.endswith(".h") and path.startswith((KERNELS_DIR, C10_METAL_DIR))


def _wanted(path: str) -> bool:
    if path == INDUCTOR_MPS_CODEGEN:
        return True
    return path.startswith(VIEW_PREFIXES) and path.endswith(_SOURCE_SUFFIXES)


@dataclass(frozen=True)
class TreeView:
    """Texts and reader models of the tree's MPS sources at one version.

    ``native`` is None when native_functions.yaml is absent or does not parse (the reason
    is in ``warnings``).
    """

    texts: Mapping[str, str]
    native: NativeFunctions | None
    metal: Mapping[str, MetalFile]
    host: Mapping[str, ObjcFile]
    warnings: tuple[str, ...] = ()

    def with_texts(self, replaced: Mapping[str, str | None]) -> TreeView:
        """This view with some files replaced (None deletes); only those files are re-parsed."""
        if not any(self.texts.get(p) != t for p, t in replaced.items() if _wanted(p)):
            return self
        texts = dict(self.texts)
        for path, text in replaced.items():
            if not _wanted(path):
                continue
            if text is None:
                texts.pop(path, None)
            else:
                texts[path] = text
        changed = {p for p in replaced if _wanted(p)}
        return _build(texts, self, changed)

    @cached_property
    def include_graph(self) -> Mapping[str, frozenset[str]]:
        """For each header in the view, the files that ``#include`` it directly."""
        headers = [p for p in self.texts if p.endswith(".h")]
        graph: dict[str, set[str]] = {h: set() for h in headers}
        for path, text in self.texts.items():
            if path.endswith((".yaml", ".py")):
                continue
            for target in includes(text):
                for header in headers:
                    if header != path and cscan.include_matches(target, header):
                        graph[header].add(path)
        return MappingProxyType({h: frozenset(s) for h, s in graph.items()})

    @cached_property
    def inductor(self) -> InductorMetal | None:
        """What Inductor's generated Metal code uses of c10/metal (None: no codegen file)."""
        text = self.texts.get(INDUCTOR_MPS_CODEGEN)
        return None if text is None else parse_inductor(text, INDUCTOR_MPS_CODEGEN)

    def includers(self, header: str) -> frozenset[str]:
        """Every file that includes ``header``, directly or through other headers."""
        graph = self.include_graph
        seen: set[str] = set()
        todo = [header]
        while todo:
            for includer in graph.get(todo.pop(), ()):
                if includer not in seen:
                    seen.add(includer)
                    todo.append(includer)
        return frozenset(seen)


def _parse_all(
    texts: Mapping[str, str], paths: Iterable[str]
) -> tuple[NativeFunctions | None, dict[str, MetalFile], dict[str, ObjcFile], list[str], bool]:
    native = None
    native_seen = False
    metal_models: dict[str, MetalFile] = {}
    host_models: dict[str, ObjcFile] = {}
    warnings: list[str] = []
    for path in paths:
        text = texts.get(path)
        if text is None:
            continue
        try:
            if path == NATIVE_YAML:
                native_seen = True
                native = native_yaml.parse(text, path)
            elif is_metal_source(path):
                metal_models[path] = metal.parse(text, path)
            elif is_host_source(path):
                host_models[path] = objc.parse(text, path)
        except ParseError as exc:
            warnings.append(str(exc))
    return native, metal_models, host_models, warnings, native_seen


def _build(texts: dict[str, str], base: TreeView | None, changed: set[str]) -> TreeView:
    paths = sorted(texts) if base is None else sorted(changed)
    native, metal_models, host_models, warnings, native_seen = _parse_all(texts, paths)
    if base is not None:
        if not native_seen and NATIVE_YAML not in changed:
            native = base.native
        metal_models = {
            **{p: m for p, m in base.metal.items() if p not in changed},
            **metal_models,
        }
        host_models = {**{p: m for p, m in base.host.items() if p not in changed}, **host_models}
        stale = tuple(w for w in base.warnings if not any(w.startswith(p) for p in changed))
        warnings = [*stale, *warnings]
    return TreeView(
        texts=MappingProxyType(dict(texts)),
        native=native,
        metal=MappingProxyType(metal_models),
        host=MappingProxyType(host_models),
        warnings=tuple(warnings),
    )


def view_from_texts(texts: Mapping[str, str]) -> TreeView:
    """A view over the given ``{path: text}`` (paths outside the MPS sources are dropped)."""
    return _build({p: t for p, t in texts.items() if _wanted(p)}, None, set())


def load_view(root: Path, rev: str | None = None) -> TreeView:
    """The MPS sources of ``root`` at ``rev`` (the work tree when None).

    Outside a git work tree only the work tree can be read: the files are listed from disk.
    """
    if rev is None and not (root / ".git").exists():
        found = [
            p.relative_to(root).as_posix()
            for prefix in VIEW_PREFIXES
            # a single file (the yaml, the Inductor codegen) or a directory's files
            for p in (
                [root / prefix]
                if prefix.endswith((".yaml", ".py"))
                else sorted((root / prefix).rglob("*"))
            )
            if p.is_file()
        ]
        paths = [p for p in found if _wanted(p)]
        return view_from_texts({p: t for p in paths if (t := _read_disk(root, p)) is not None})
    paths = [p for p in list_revision(root, rev, VIEW_PREFIXES) if _wanted(p)]
    if rev is None:
        texts = {p: t for p in paths if (t := _read_disk(root, p)) is not None}
    else:
        texts = {p: t for p, t in read_revision(root, rev, paths).items() if t is not None}
    return view_from_texts(texts)


def strip_suffixes(name: str) -> str:
    """``atan2_out_mps`` -> ``atan2``; ``div_true_stub`` -> ``div_true``."""
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


class Resolver:
    """Maps kernel, stub and implementation names to operators, across both versions."""

    def __init__(self, views: Iterable[TreeView], opinfos: Iterable[OpInfoRecord]) -> None:
        unique: list[TreeView] = []
        for view in views:
            if all(view is not seen for seen in unique):
                unique.append(view)
        self.views = tuple(unique)
        self.opinfos = tuple(opinfos)
        yaml_ops: set[str] = set()
        # kernel name -> operators whose yaml entries dispatch MPS to it
        self.mps_kernels: dict[str, set[str]] = {}
        for view in self.views:
            if view.native is None:
                continue
            for entry in view.native.entries:
                yaml_ops.add(entry.operator)
                if kernel := entry.kernel_for("MPS"):
                    self.mps_kernels.setdefault(kernel, set()).add(entry.operator)
        self.mps_ops = frozenset(op for ops in self.mps_kernels.values() for op in ops)
        self.yaml_ops = frozenset(yaml_ops)
        info_names = {i.name for i in self.opinfos} | {a for i in self.opinfos for a in i.aliases}
        aten = {i.aten_name for i in self.opinfos if i.aten_name}
        self.known = frozenset(yaml_ops | info_names | aten)
        # prefix matching only on names that look like aten operators (no dotted OpInfo names)
        self._prefixable = sorted((yaml_ops | aten), key=len, reverse=True)

    def operator(self, name: str) -> tuple[str, str]:
        """The operator ``name`` most likely belongs to, with how it was found.

        Exact operator name, then the name without implementation suffixes, then the
        longest operator it starts with (``div_true`` -> ``div``), else the name itself.
        """
        if name in self.known:
            return name, ""
        stem = strip_suffixes(name)
        if stem in self.known:
            return stem, ""
        for op in self._prefixable:
            if stem.startswith(op + "_"):
                return op, f" ({name} taken as {op})"
        return stem, f" ({stem} is not a known operator; name used as is)"

    def stub_operator(self, stub: str) -> tuple[str, str]:
        """The operator of dispatch stub ``stub`` (``div_true_stub`` -> ``div``)."""
        return self.operator(stub.removesuffix("_stub"))

    def ops_for_impl(self, name: str) -> tuple[str, ...]:
        """Operators of the yaml entries that dispatch any key to ``name`` (MPS rows first)."""
        found = dict.fromkeys(sorted(self.mps_kernels.get(name, ())))
        return tuple(found) if found else tuple(self._dispatched.get(name, ()))

    @cached_property
    def _dispatched(self) -> dict[str, dict[str, None]]:
        """Kernel name -> operators of the yaml entries dispatching any key to it, in order
        (built once: a host file asks for each of its implementations)."""
        table: dict[str, dict[str, None]] = {}
        for view in self.views:
            if view.native is None:
                continue
            for entry in view.native.entries:
                for row in entry.dispatch:
                    table.setdefault(row.kernel, {})[entry.operator] = None
        return table

    def stubs_registering(self, function: str) -> tuple[str, ...]:
        """Stubs whose REGISTER_DISPATCH names host function ``function``."""
        found: dict[str, None] = {}
        for view in self.views:
            for model in view.host.values():
                for stub in model.stubs:
                    if stub.function == function:
                        found[stub.stub] = None
        return tuple(found)

    def ops_for_kernel(self, kernel: str) -> tuple[tuple[str, str], ...]:
        """Operators whose host code runs Metal kernel ``kernel``, with how each was found.

        In order: stubs that run it (directly, or through the function they register); host
        functions and MPSGraph-era implementations naming it in a string literal
        (``"smooth_l1"``, ``"lerp_tensor_dense_" + dtype``); the kernel name resolved as an
        operator name; operators whose name extends it (``smooth_l1`` -> ``smooth_l1_loss``).
        """
        stubs: dict[str, None] = {}
        for view in self.views:
            for model in view.host.values():
                for registration in model.stubs:
                    if registration.kernel_name == kernel:
                        stubs[registration.stub] = None
                for fn in model.functions:
                    if fn.kernel_name == kernel:
                        stubs.update(dict.fromkeys(self.stubs_registering(fn.name)))
        if stubs:
            result: dict[str, str] = {}
            for stub in stubs:
                op, _ = self.stub_operator(stub)
                result.setdefault(op, "" if op == kernel else f" (kernel {kernel} run by {stub})")
            return tuple(result.items())
        if users := self._literal_users(kernel):
            return users
        op, how = self.operator(kernel)
        longer = [o for o in self._prefixable if o.startswith(kernel + "_")]
        if op not in self.known and longer:
            return tuple((o, f" (kernel {kernel} taken as {o})") for o in sorted(longer))
        return ((op, how),)

    def _literal_users(self, kernel: str) -> tuple[tuple[str, str], ...]:
        literal = re.compile('"' + re.escape(kernel) + '["_]')
        found: dict[str, str] = {}
        for view in self.views:
            for path, model in view.host.items():
                text = view.texts.get(path, "")
                if '"' + kernel not in text:
                    continue
                for number, line in enumerate(text.splitlines(), 1):
                    if not literal.search(line):
                        continue
                    for fn in model.functions:
                        if fn.span.contains(number):
                            for stub in self.stubs_registering(fn.name):
                                op = self.stub_operator(stub)[0]
                                found.setdefault(op, f" (kernel {kernel} run by {fn.name})")
                    for impl in model.implementations:
                        if impl.span.contains(number):
                            ops = self.ops_for_impl(impl.name) or (self.operator(impl.name)[0],)
                            for op in ops:
                                found.setdefault(op, f" (kernel {kernel} run by {impl.name})")
        return tuple((op, "" if op == kernel else how) for op, how in found.items())
