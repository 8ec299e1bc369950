"""Join the readers into one record per operator: the model every command works from.

The joined index is cached on disk keyed by the size and mtime of every input file, so a
warm command stats a few hundred files and unpickles one object instead of re-parsing
15,000 lines of YAML.
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
import itertools
import pickle
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from pipeline.errors import UnknownOperatorError
from pipeline.fsio import write_atomic
from pipeline.tree import common_mps, dispatch, metal, native_yaml, objc, opinfo, paths, sources
from pipeline.tree import decorations as decorations_reader
from pipeline.tree.decorations import Decoration, Decorations
from pipeline.tree.reader import READERS
from pipeline.tree.source import TreeSource
from pipeline.tree.sources import Implementation, NativeSources
from pipeline.tree.span import Span, Unrecognised

# 3: OpInfoRecord.output_dtypes; 4: the readers' gaps; 5: yaml tags; 6: OpInfos by every
# name they go by; 7: the .cpp sources; 8: backward dtypes; 9: decorations outside
# common_mps.py; 10: the key pickled ahead of the index; 11: the stubs by name; 12: the
# host's launches (kernel, scalar, conditions) and the stubs' call arguments
CACHE_VERSION = 12
# Where to look for leftover references to an old `*_mps` name.
REFERENCE_DIRS = (paths.NATIVE_DIR, paths.TESTING_INTERNAL_DIR, "test")
REFERENCE_SUFFIXES = (".yaml", ".mm", ".h", ".metal", ".cpp", ".py")
NO_OPINFO = "no OpInfo found: its tests and xfails are unknown"


class TreePart(str, Enum):
    """A part of the tree the checklist is judged on that can be read incompletely (a gap):
    a missing folder or file, or a file that could not be read."""

    KERNELS = "kernels"  # kernels/*.metal
    HOST = "host"  # operations/*.mm
    HEADERS = "headers"  # native/*.h
    XFAILS = "xfails"  # common_mps.py
    # the operator's OpInfos: none found means its tests and xfails are unknown (a gap of
    # the one record, not of the tree)
    OPINFOS = "opinfos"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Overload:
    """One native_functions.yaml entry of an operator, with how MPS is served."""

    func: str
    schema: str
    kind: native_yaml.MpsKind
    kernel: str | None
    span: Span


@dataclass(frozen=True)
class OperatorRecord:
    """Everything the tree says about one operator."""

    op: str
    overloads: tuple[Overload, ...]
    functors: tuple[metal.Functor, ...]
    registrations: tuple[metal.Registration, ...]
    stubs: tuple[objc.StubRegistration, ...]
    mpsgraph: tuple[objc.Implementation, ...]
    includes: tuple[objc.OpInclude, ...]
    old_names: tuple[str, ...]
    old_name_refs: tuple[tuple[str, Span], ...]
    xfails: tuple[common_mps.XfailEntry, ...]
    complex_supported: bool
    opinfos: tuple[opinfo.OpInfoRecord, ...]
    tests: tuple[str, ...]
    unrecognised: tuple[Unrecognised, ...]
    # DECLARE_DISPATCH of `<op>_stub`: the type a new MPS kernel function must have
    stub_decl: dispatch.StubDecl | None = None
    # the Metal kernel names its functors and registrations were looked up by
    kernel_names: tuple[str, ...] = ()
    # `_native.h` includes of the op left in files that hold MPSGraph code
    leftover_includes: tuple[objc.OpInclude, ...] = ()
    # what the tree's readers could not read, by source, and OPINFOS when no OpInfo goes by
    # the operator: a check that depends on a source with a gap is unknown rather than
    # passed (see pipeline.guide.checklist)
    gaps: tuple[tuple[TreePart, str], ...] = ()
    # the stub the shared implementation calls (read in native/*.cpp; ``op_stub`` only when
    # the tree has no .cpp to read), and those implementations
    stub: str = ""
    implementations: tuple[Implementation, ...] = ()
    # shared kernels named by the yaml whose definition no native/*.cpp holds: unknown
    missing_implementations: tuple[str, ...] = ()
    # what torch gives on CPU for an operator with no OpInfo (a backward): (input, result)
    torch_dtypes: tuple[tuple[str, str], ...] = ()
    # MPS xfails, skips and tolerances outside common_mps.py: its OpInfos' DecorateInfos and
    # the test files' decorators that reach it
    decorations: tuple[Decoration, ...] = ()

    @property
    def composite_calls(self) -> tuple[str, ...] | None:
        """The ATen functions the shared implementation calls when it calls no stub (a
        composite); None when it calls a stub or was not read."""
        if not self.implementations or any(i.stubs for i in self.implementations):
            return None
        return tuple(dict.fromkeys(c for i in self.implementations for c in i.calls))

    @property
    def registered_dtypes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.input for r in self.registrations))

    @property
    def opinfo_dtypes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for info in self.opinfos for d in info.dtypes))

    @property
    def output_dtypes(self) -> dict[str, str]:
        """Input dtype -> the dtype PyTorch's result has, over the operator's OpInfos; where
        variants disagree (div's rounding modes) the first OpInfo wins, as in ``opinfos``."""
        merged: dict[str, str] = {}
        for info in self.opinfos:
            for dtype, result in info.output_dtypes:
                merged.setdefault(dtype, result)
        return merged

    @property
    def pending_overloads(self) -> tuple[Overload, ...]:
        """Overloads whose MPS dispatch still has to move to the shared kernel."""
        return tuple(o for o in self.overloads if o.kind in native_yaml.PENDING_KINDS)


@dataclass(frozen=True)
class TreeIndex:
    """The parsed tree. Build with :func:`load_index`."""

    root: Path
    native: native_yaml.NativeFunctions
    kernels: metal.MetalKernels
    host: objc.HostFiles
    dispatch: dispatch.DispatchDecls
    xfails: common_mps.CommonMps
    opinfos: tuple[opinfo.OpInfoRecord, ...]
    test_kinds: tuple[str, ...] = ("output_match",)
    sources: NativeSources | None = None
    # backward operator -> the (input, result) dtypes torch gives on CPU (no OpInfo of its own)
    backward_dtypes: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # (a tree without the OpInfo files has gaps there, kept apart from ``warnings``: the
    # sandbox reads its OpInfos from a table and has none)
    decorations: Decorations = Decorations(())
    _ops: dict[str, tuple[native_yaml.NativeFunction, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _infos: dict[str, list[opinfo.OpInfoRecord]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _stub_names: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def warnings(self) -> tuple[str, ...]:
        return (
            self.native.warnings
            + self.kernels.warnings
            + self.host.warnings
            + self.dispatch.warnings
            + self.xfails.warnings
            + self.decorations.warnings
        )

    @property
    def gaps(self) -> tuple[tuple[TreePart, str], ...]:
        """What could not be read, by source (each also one of :attr:`warnings`)."""
        return tuple(
            (source, gap)
            for source, model in (
                (TreePart.KERNELS, self.kernels),
                (TreePart.HOST, self.host),
                (TreePart.HEADERS, self.dispatch),
                (TreePart.XFAILS, self.xfails),
            )
            for gap in model.gaps
        )

    def operators(self) -> tuple[str, ...]:
        """Every operator named by the yaml or by an OpInfo, sorted."""
        names = set(self.entries_by_operator()) | {o.operator for o in self.opinfos}
        return tuple(sorted(names))

    def entries_by_operator(self) -> dict[str, tuple[native_yaml.NativeFunction, ...]]:
        if not self._ops:
            self._ops.update(self.native.operators())
        return self._ops

    def opinfos_for(self, op: str) -> tuple[opinfo.OpInfoRecord, ...]:
        """The OpInfos that go by ``op`` (:attr:`OpInfoRecord.names`), in op_db's order."""
        if not self._infos:
            for info in self.opinfos:
                for name in info.names:
                    self._infos.setdefault(name, []).append(info)
        return tuple(self._infos.get(op, ()))

    def resolve(self, name: str) -> str:
        """Map an operator name or OpInfo alias to the operator; suggest close names if none.

        The name is matched exactly first, then ignoring case when only one name matches
        that way (``ATAN2`` is ``atan2``); suggestions ignore case too.

        An OpInfo alias wins over the alias's own (composite) yaml entries: `arctan2` means
        the operator whose kernels implement it, `atan2`, and `special_erf` (the aten name of
        the alias `special.erf`) means `erf`. A name whose own entries have kernels is the
        operator itself, even when an OpInfo lists it as an alias: op_db's `min` (binary)
        has the alias `minimum`, but `minimum.out` is what MPS dispatches and
        `minimum_functor` is its kernel.
        """
        ops = self.entries_by_operator()
        if name in ops and any(e.mps_kind is not native_yaml.MpsKind.COMPOSITE for e in ops[name]):
            return name
        for info in self.opinfos:
            if name in info.alias_names:
                return info.operator
        if name in ops:
            return name
        for info in self.opinfos:
            if name == info.name:
                return info.operator
        candidates = set(ops) | {a for i in self.opinfos for a in {i.name, *i.alias_names}}
        # torch's operator names are lowercase: ATAN2 means atan2 when nothing else is
        # spelt that way; several spellings (Foo, foo) stay a question
        same = sorted(c for c in candidates if c.lower() == name.lower())
        if len(same) == 1 and same[0] != name:
            return self.resolve(same[0])
        # case-insensitive, so ATAN2 gets atan2
        by_lower = {c.lower(): c for c in sorted(candidates)}
        close = [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=5)]
        raise UnknownOperatorError(name, sorted(same) or close)

    def record(self, name: str, *, find_references: bool = True) -> OperatorRecord:
        """The joined record of one operator (``name`` may be an alias)."""
        op = self.resolve(name)
        entries = self.entries_by_operator().get(op, ())
        overloads = tuple(
            Overload(e.full_name, e.schema, e.mps_kind, e.kernel_for("MPS"), e.span)
            for e in entries
        )
        impls, missing = self._implementations(entries)
        stub = self._stub_called(op, impls)
        stubs = self._stubs_for(op, stub)
        kernel_names = self._kernel_names(op, stubs, stub)
        functors = tuple(f for k in kernel_names if (f := self.kernels.functor(k)))
        registrations = tuple(r for k in kernel_names for r in self.kernels.registrations_for(k))
        dispatched = [
            o.kernel for o in overloads if o.kind is native_yaml.MpsKind.MPS_SPECIFIC and o.kernel
        ]
        # MPSGraph code is found by the names it has or had, not only by the yaml rows that
        # still name it: a dispatch folded by hand leaves TORCH_IMPL_FUNC(NAME_out_mps) behind.
        legacy = set(dispatched) | legacy_names(entries)
        mpsgraph = tuple(
            impl for f in self.host.files for impl in f.implementations if impl.name in legacy
        )
        old_names = tuple(dict.fromkeys([*dispatched, *(i.name for i in mpsgraph)]))
        includes = tuple(i for f in self.host.files for i in f.includes if i.op == op)
        # The guide removes an op's include together with its MPSGraph code; in a file that
        # still holds MPSGraph code it is left over (a kernel file may need its own).
        leftover_includes = tuple(
            i for f in self.host.files if f.holds_mpsgraph for i in f.includes if i.op == op
        )
        infos = self.opinfos_for(op)
        # an entry is keyed by its OpInfo's name (special.erfcx): found by that spelling too,
        # without an OpInfo
        keys = {info.key for info in infos} | {op}
        keys |= {e.key for e in self.xfails.entries if opinfo.operator_spelling(e.key) == op}
        xfails = tuple(e for e in self.xfails.entries if e.key in keys)
        refs = self._references(old_names) if find_references and old_names else ()
        return OperatorRecord(
            op=op,
            overloads=overloads,
            functors=functors,
            registrations=registrations,
            stubs=stubs,
            mpsgraph=mpsgraph,
            includes=includes,
            old_names=old_names,
            old_name_refs=refs,
            xfails=xfails,
            # SUPPORTED_COMPLEX_OPS, or 2.15's UNSUPPORTED_COMPLEX_OPS; neither: not required
            complex_supported=bool(self.xfails.complex_supported(keys)),
            opinfos=infos,
            tests=tuple(
                t for info in infos for kind in self.test_kinds for t in info.test_ids(kind)
            ),
            unrecognised=self._unrecognised(kernel_names, stub),
            stub_decl=self.dispatch.stub(stub),
            kernel_names=kernel_names,
            leftover_includes=leftover_includes,
            gaps=self.gaps + (() if infos else ((TreePart.OPINFOS, NO_OPINFO),)),
            stub=stub,
            torch_dtypes=() if infos else self.backward_dtypes.get(op, ()),
            implementations=impls,
            missing_implementations=missing,
            decorations=self.decorations.for_operator(op, frozenset(keys)),
        )

    def _unrecognised(self, kernel_names: Iterable[str], stub: str) -> tuple[Unrecognised, ...]:
        """The lines the readers could not interpret that name one of the operator's kernels
        or its stub."""
        # Only lines that name one of the op's kernels, as a whole identifier: a real
        # BinaryKernel.metal holds dozens of ops, and "tan" must not claim atan2's lines.
        names = re.compile(
            r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, kernel_names)) + r")(?![A-Za-z0-9])"
        )
        unrecognised = tuple(
            u
            for fileset in (self.kernels.files, self.host.files)
            for f in fileset
            for u in f.unrecognised
            if names.search(u.text)
        )
        stub_word = re.compile(rf"\b{re.escape(stub)}\b")
        return unrecognised + tuple(
            u for f in self.dispatch.files for u in f.unrecognised if stub_word.search(u.text)
        )

    def _implementations(
        self, entries: Iterable[native_yaml.NativeFunction]
    ) -> tuple[tuple[Implementation, ...], tuple[str, ...]]:
        """The shared implementations MPS runs once its rows are folded (the kernel of each
        entry's row shared by CPU and CUDA), and the names no .cpp of the tree defines."""
        if self.sources is None or not self.sources.present:
            return (), ()
        names = []
        for e in entries:
            cpu = e.kernel_for("CPU")
            if cpu and cpu == e.kernel_for("CUDA"):
                names.append(cpu)
        found, missing = [], []
        for name in dict.fromkeys(names):
            impl = self.sources.find(name)
            (found.append(impl) if impl else missing.append(name))
        return tuple(found), tuple(missing)

    def _stub_called(self, op: str, impls: tuple[Implementation, ...]) -> str:
        """The stub the implementations call: ``op_stub`` among them, else the one they all
        call (special_xlog1py_out calls xlog1py_stub); ``op_stub`` when they call none or
        several (div's rounding modes: the refusal names them)."""
        called = list(dict.fromkeys(s for i in impls for s in i.stubs))
        own = f"{op}_stub"
        if own in called or len(called) != 1:
            return own
        return called[0]

    def _stub_of(self, op: str, stub: str, called: str = "") -> bool:
        """The stub its implementation calls, ``op_stub``, or ``op_<x>_stub`` when ``op_<x>``
        is not an operator (div_true_stub)."""
        base = stub.removesuffix("_stub")
        return (
            stub == called
            or base == op
            or (base.startswith(op + "_") and base not in self.entries_by_operator())
        )

    def stubs_by_name(self, op: str) -> tuple[objc.StubRegistration, ...]:
        """The MPS registrations of the stubs named after ``op`` (``op_stub``, or
        ``op_<x>_stub`` when ``op_<x>`` is not an operator): what a tree without native/*.cpp
        tells of the stubs its shared kernel calls."""
        return self._stubs_for(op, "")

    def _stubs_for(self, op: str, called: str) -> tuple[objc.StubRegistration, ...]:
        """The MPS registrations of the operator's stubs (see :meth:`_stub_of`)."""
        # `paths` asks for each of 300 operators: only the stubs whose name can match are
        # tested, found in the sorted names (``op``, ``op_*`` and ``called``)
        if not self._stub_names:
            self._stub_names.extend(sorted({s.stub for f in self.host.files for s in f.stubs}))
        names = self._stub_names
        start = bisect.bisect_left(names, op)
        near = set(itertools.takewhile(lambda n: n.startswith(op), names[start:]))
        wanted = {n for n in (*near, called) if self._stub_of(op, n, called)}
        if not wanted:
            return ()
        return tuple(s for f in self.host.files for s in f.stubs if s.stub in wanted)

    def _kernel_names(
        self, op: str, stubs: Iterable[objc.StubRegistration], called: str
    ) -> tuple[str, ...]:
        """The names the operator's functors and registrations go by, in lookup order.

        The aten name; the kernel string each registered MPS kernel passes to
        ``exec_*_kernel`` (``div_true_stub``'s kernel runs ``"div_true"``); and, so that a
        functor written before its stub is registered is found too, the names of the
        operator's declared stubs: ``div_true`` of ``div_true_stub``, and without the
        python_module prefix (``special_erfcx_stub`` -> ``erfcx``, as the CPU and Metal
        kernels are called) unless that is another operator. An OpInfo alias is never a
        kernel name: the record's ``op`` already is the alias's aten operator.
        """
        ops = self.entries_by_operator()
        names = [op, *(s.kernel_name for s in stubs if s.kernel_name)]
        declared = [d.stub for f in self.dispatch.files for d in f.decls]
        for stub in dict.fromkeys([*(s.stub for s in stubs), *declared]):
            if not stub.endswith("_stub") or not self._stub_of(op, stub, called):
                continue
            base = stub.removesuffix("_stub")
            names.append(base)
            short = _PYTHON_MODULE.sub("", base)
            if short != base and short not in ops:
                names.append(short)
        return tuple(dict.fromkeys(names))

    def _references(self, names: Iterable[str]) -> tuple[tuple[str, Span], ...]:
        return tuple(find_references(self.root, names))


# Prefixes of python_module operators (special_erfcx) that their kernels' names drop (erfcx).
_PYTHON_MODULE = re.compile(r"\A(?:special|linalg|fft)_")


def legacy_names(entries: Iterable[native_yaml.NativeFunction]) -> set[str]:
    """The MPSGraph-era names an operator's entries have or had.

    ``NAME_mps`` and ``NAME_OVERLOAD_mps`` for every entry (``atan2_out_mps``,
    ``atan2__mps``), and the other spellings of the 2.13.0 yaml's MPS rows: an out kernel
    ``OP_out_mps``/``OP_mps_out`` whatever the overload is called (``kthvalue.values:
    kthvalue_out_mps``, ``tril.out: tril_mps_out``, the old ``atan2_mps_out``) and an
    in-place one ``OP_mps_`` (``relu_: relu_mps_``).
    """
    names = set()
    for e in entries:
        names |= {f"{e.name}_mps", f"{e.operator}_out_mps", f"{e.operator}_mps_out"}
        if e.overload:
            names.add(f"{e.name}_{e.overload}_mps")
        if e.name != e.operator:
            names.add(f"{e.operator}_mps_")
    return names


def find_references(root: Path, names: Iterable[str]) -> list[tuple[str, Span]]:
    """Every whole-word occurrence of ``names`` under the reference dirs, as (name, span).

    Uses ``git grep`` (index-backed, fast on a 30,000-file checkout) and falls back to a
    Python scan outside a git work tree.
    """
    names = list(names)
    if not names:
        return []
    dirs = [d for d in REFERENCE_DIRS if (root / d).is_dir()]
    if not dirs:
        return []
    cmd = ["git", "-C", str(root), "grep", "-n", "-w", "-I", "--untracked", "--no-color"]
    for n in names:
        cmd += ["-e", n]
    # errors="replace": a matching line may hold bytes that are not UTF-8
    proc = subprocess.run(
        [*cmd, "--", *dirs], capture_output=True, text=True, errors="replace", check=False
    )
    word = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    hits: list[tuple[str, Span]] = []
    if proc.returncode in (0, 1) and "not a git repository" not in proc.stderr:
        for line in proc.stdout.splitlines():
            rel, number, text = line.split(":", 2)
            for m in word.finditer(text):
                hits.append((m.group(1), Span(rel, int(number), int(number))))
        return hits
    for d in dirs:
        for path in sorted((root / d).rglob("*")):
            if path.suffix not in REFERENCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            try:
                # a search, not a parse: as lenient as git grep (a latin-1 line still counts)
                found = path.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                continue  # unreadable: git grep skips it too
            for lineno, text in enumerate(found.splitlines(), 1):
                for m in word.finditer(text):
                    hits.append((m.group(1), Span(rel, lineno, lineno)))
    return hits


def _fingerprint(source: TreeSource, inputs: list[Path]) -> str:
    h = hashlib.sha256(
        f"{CACHE_VERSION}|{source.root}|{source.python}|{source.test_kinds}".encode()
    )
    for path in inputs:
        try:
            st = path.stat()
        except OSError:  # gone since the glob (or a dangling link): the build says so
            h.update(f"{path}|-\n".encode())
            continue
        # ctime too: a chmod that makes a file (un)readable changes what the readers see
        h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}\n".encode())
    return h.hexdigest()


def build_index(source: TreeSource) -> TreeIndex:
    """Parse every reader's files under ``source.root`` (no cache)."""
    root = source.root
    op_db = opinfo.load_op_db(source)
    return TreeIndex(
        root=root,
        native=native_yaml.read(root),
        kernels=metal.read(root),
        host=objc.read(root),
        dispatch=dispatch.read(root),
        xfails=common_mps.read(root),
        opinfos=op_db.records,
        test_kinds=source.test_kinds,
        sources=sources.read(root),
        backward_dtypes=dict(op_db.backward_dtypes),
        decorations=decorations_reader.read(root),
    )


def load_index(source: TreeSource) -> TreeIndex:
    """The tree's index, from the on-disk cache when no input file changed."""
    # every match, directories too: the readers report one named like a source file
    readers = [
        p for r in READERS.values() for pat in r.PATTERNS for p in sorted(source.root.glob(pat))
    ]
    key = _fingerprint(source, readers + opinfo.source_files(source))
    cache = source.cache_dir / "index.pickle"
    if cache.is_file():
        try:
            # the key is its own pickle ahead of the index's: a changed tree costs no
            # unpickling of the stale index (0.75 s for a real tree's)
            with cache.open("rb") as fh:
                if pickle.load(fh) == key:
                    return pickle.load(fh)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
            pass  # stale format from another version: rebuild below
    index = build_index(source)
    cache.parent.mkdir(parents=True, exist_ok=True)
    pickled = pickle.dumps(key, protocol=pickle.HIGHEST_PROTOCOL)
    write_atomic(cache, pickled + pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
    return index
