"""check-kernel's builds: one shared object per ``.metal`` file, holding every kernel of it
that compiles on the host, with the runtime that runs whole threadgroups
(``metal_shim/mps_kernel_*.h``).

The file's kernels are read from its preprocessed text (:mod:`pipeline.run.kernel_decls`).
The translation unit is the shim (with ``MPS_KERNEL_THREADS``: barriers and SIMD-group
functions modelled), the ``.metal`` file as it stands with its threadgroup memory made
static, and one generated line per kernel that calls it with its buffers and attributes.

Only the kernels a check runs need machine code: the rest are compiled by the compiler's
front end alone (``-fsyntax-only``: every template instantiated, every error reported, no
code generated), which is what makes a large file's whole check cheap (Sort.metal's 700
kernels: 30 compiler CPU-s at -O1 as one object, 1.3-2.1 checked; docs/performance.md).
A build is so at most two passes over the same generated unit: the object, with the
kernels to run (``run``), then the check of the others.

One kernel that does not compile never hides the others: an error is attributed to the
kernel whose generated line leads to it, else to the parts of the file it names
(:mod:`pipeline.run.cxx_parts`); those are set aside and the build retried, and each kernel
set aside so carries the error. An error naming a Metal feature the runtime does not model
(simdgroup matrices, textures, function constants, Metal 4 tensors) is "not modelled".

The object is cached like check-math's (:mod:`pipeline.run.cxx`): named by a digest of what
selects it, reused while every file its manifest lists is byte for byte the same.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline.errors import ConfigError, ParseError
from pipeline.fsio import write_atomic
from pipeline.run import cxx, cxx_parts
from pipeline.run.build import CompilerError
from pipeline.run.kernel_decls import (
    KernelDecl,
    parse_kernels,
    rewrite_threadgroup,
    strip_instantiations,
)
from pipeline.run.kernel_record import FileBuild, KernelBuild, cached, record
from pipeline.run.kernel_unit import (
    FIRST,
    Probe,
    blanked,
    kernel_of_line,
    probe_failures,
    split_headers,
    translation_unit,
)

DRIVER_SOURCE = cxx.SHIM_DIR / "mps_kernel_driver.cpp"
CACHE_VERSION = "6"
_TIMED_OUT = "error: the compiler did not finish"
# a kernel left out of a build for some kernels of its file (``KernelBuilder.build(only=)``)
NOT_ASKED = "not compiled: the check asked for other kernels of the file"
# a kernel of a build that ran out of rounds before any error was placed on it
GAVE_UP = (
    "not known to compile: the build ran out of rounds (cxx.MAX_ATTEMPTS) setting aside "
    "other kernels' errors before any was this kernel's"
)
# the runtime switches fibers with _longjmp, which _FORTIFY_SOURCE refuses between stacks;
# a simd function's call site is its return address: no sibling calls to blur it
FLAGS = ("-U_FORTIFY_SOURCE", "-fno-optimize-sibling-calls", "-DMPS_KERNEL_THREADS=1")
_NOT_MODELLED = re.compile(
    r"\b(simdgroup_(?:float|half|bfloat)\w*|simdgroup_matrix\w*|simdgroup_(?:load|store|"
    r"multiply\w*)|texture\w*|sampler|function_constant|mpp|tensor_\w+|quad_\w+|"
    r"make_filled_simdgroup_matrix|MetalPerformancePrimitives)\b"
)


@dataclass
class KernelBuilder:
    compiler: cxx.Compiler
    headers: cxx.Headers
    root: Path
    cache_dir: Path
    # a compiler with the built-in bfloat, for what the class does not compile (cxx's doc)
    bfloat: cxx.Compiler | None = None
    # the compilers run at once by a check of a file of many kernels (``_check``)
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _bfloat_builder: KernelBuilder | None = field(default=None, repr=False)

    def flags(self) -> list[str]:
        base = cxx.Builder(self.compiler, self.headers, self.root, self.cache_dir).flags()
        extra = ["-ferror-limit=0"] if "clang" in self.compiler.identity else []
        return [*base, *FLAGS, *extra]

    def build(
        self,
        metal: Path,
        probes: Sequence[Probe] = (),
        only: frozenset[str] = frozenset(),
        run: frozenset[str] | None = None,
    ) -> FileBuild:
        """Build ``metal``'s kernels, with the layout of each struct of ``probes``: with the
        class bfloat, else with the built-in one when that builds more of them. With
        ``only``, just the kernels of those host names (a check of a few kernels: the
        compiler instantiates nothing else, the rest carry NOT_ASKED). The object holds the
        kernels of ``run`` (None: every one); the others are checked, not generated."""
        start = time.monotonic()
        bfloat = self._bfloat()
        with ThreadPoolExecutor(1) as beside:
            early: dict[frozenset[str], Future[FileBuild]] = {}

            def alone(names: frozenset[str], decls: Sequence[KernelDecl]) -> None:
                # none of them is to run: the bfloat compiler builds them alone (checked,
                # not generated; the file's kernels as the first build read them) while
                # the first build checks the rest again
                if bfloat is not None and run is not None and names and not names & run:
                    early[names] = beside.submit(
                        bfloat._build, metal, (), names, frozenset(), decls=decls
                    )

            first = self._build(metal, probes, only, run, failing=alone)
            failed = frozenset(k.decl.host_name for k in first.kernels if _failed_here(k))
            if bfloat is None or not failed:
                return first
            if run is not None and not failed & run:
                decls = [k.decl for k in first.kernels]
                if not early and first.first_round:  # read from the cache: as it was built
                    alone(frozenset(first.first_round), decls)
                builds = [f.result() for f in early.values()]
                later = failed.difference(*early)  # failed after the first round
                if later:
                    builds.append(bfloat._build(metal, (), later, frozenset(), decls=decls))
                for build in builds:
                    first = _merged(first, build, bfloat.compiler.label)
                return replace(first, seconds=time.monotonic() - start)
        # a retry that has failed more kernels than the first left unbuilt cannot build more
        second = bfloat._build(metal, probes, only, run, first.built_count)
        if second.built_count > first.built_count:
            return replace(second, built_with=bfloat.compiler.label)
        return first

    def _bfloat(self) -> KernelBuilder | None:
        """The builder of the compiler with the built-in bfloat, made once."""
        if self.bfloat is None:
            return None
        with self._lock:
            if self._bfloat_builder is None:
                self._bfloat_builder = KernelBuilder(
                    self.bfloat, self.headers, self.root, self.cache_dir, jobs=self.jobs
                )
            return self._bfloat_builder

    def _build(
        self,
        metal: Path,
        probes: Sequence[Probe],
        only: frozenset[str],
        run: frozenset[str] | None,
        beat: int = -1,
        failing: Callable[[frozenset[str], Sequence[KernelDecl]], None] | None = None,
        decls: Sequence[KernelDecl] | None = None,
    ) -> FileBuild:
        """The build, stopped (its undecided kernels GAVE_UP) once it cannot build more
        than ``beat`` kernels; -1: never. ``failing`` is told the kernels that failed once
        the check's first round has placed its errors, and the file's kernels; ``decls``,
        those kernels when another build has read them."""
        start = time.monotonic()
        metal = metal.resolve()
        text = metal.read_text(encoding="utf-8")
        key = cxx.digest(
            [CACHE_VERSION, self.compiler.identity, *self.flags(), str(metal), text, repr(probes)]
            + sorted(only) + ["run:", *(["*"] if run is None else sorted(run)), f"beat:{beat}"]
            # the chunks a check is split into decide which kernels a gave-up build reached
            + [f"jobs:{self.jobs}"]
        )  # fmt: skip
        base = self.cache_dir / f"{metal.stem}-{key[:20]}"
        known = cached(metal, base, start)
        if known is not None:
            return known
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        try:
            decls = list(decls) if decls is not None else self._declarations(metal, base)
        except ConfigError as exc:
            error = CompilerError(cxx.relative(metal, self.root), 1, None, str(exc))
            return FileBuild(metal, None, (), False, time.monotonic() - start, error=error)
        try:
            layout = cxx_parts.layout(metal)
        except ParseError:  # e.g. a last macro line with no `;`: errors go to kernels only
            layout = cxx_parts.Layout(text, (), (), {})
        found = _Found({i: d.not_modelled for i, d in enumerate(decls) if d.not_modelled})
        found.beat, found.failing = beat, failing
        if only:
            where = cxx.relative(metal, self.root)
            found.failed.update(
                (i, CompilerError(where, d.line, None, NOT_ASKED))
                for i, d in enumerate(decls)
                if d.host_name not in only
            )
        every = set(range(len(decls)))
        asked = every - set(found.failed) - set(found.unmodelled)
        wanted = {i for i in asked if run is None or decls[i].host_name in run}
        in_object: set[int] = set()
        # the object first: the check of the others then starts without what it set aside
        if wanted:
            skip = self._pass(metal, base, layout, decls, every - wanted, probes, found)
            if skip is None:
                return self._failed(metal, base, decls, found, start)
            in_object = wanted - skip
        checked = asked - wanted
        unit = base.with_name(f"{base.name}-check")
        if checked and not self._check(metal, unit, layout, decls, checked, found):
            return self._failed(metal, base, decls, found, start, in_object)
        return self._done(metal, base, decls, layout, in_object, found, start)

    def _pass(
        self,
        metal: Path,
        base: Path,
        layout: cxx_parts.Layout,
        decls: Sequence[KernelDecl],
        outside: set[int],
        probes: Sequence[Probe],
        found: _Found,
    ) -> set[int] | None:
        """Compile the kernels not ``outside`` into the object, setting aside what fails
        until the rest compiles: the kernels the unit that did left out, or None if none
        did."""
        for _ in range(cxx.MAX_ATTEMPTS):
            skip = outside | set(found.failed) | set(found.unmodelled)
            skip |= _in_parts(decls, layout, found.drop)
            kept = [p for p in probes if p.type not in found.probe_errors]
            ok, found.log = self._compile(metal, base, layout, found.drop, decls, skip, kept)
            found.timed_out |= _TIMED_OUT in found.log
            if ok:
                return skip
            progress = self._attribute(
                metal, base, layout, decls, found.log, found.drop, found.failed, found.unmodelled
            )
            progress |= probe_failures(found.log, base, kept, found.probe_errors, len(decls))
            if self._beaten(decls, found):
                return None
            if not progress:
                return None
        found.gave_up = True
        return None

    def _check(
        self,
        metal: Path,
        base: Path,
        layout: cxx_parts.Layout,
        decls: Sequence[KernelDecl],
        kernels: set[int],
        found: _Found,
    ) -> bool:
        """Check ``kernels`` through the compiler's front end (``-fsyntax-only``), setting
        aside what fails until the rest compiles; whether it did. A file of many kernels is
        checked in chunks, as many at once as there are CPUs, each from the one preprocessed
        unit with the other chunks' callers blanked: a round compiles again only the chunks
        that failed, split again (UnaryKernel.metal: 8 failing kernels of 3,066 cost a
        quarter of it)."""
        todo, expanded, drop = set(kernels), None, set(found.drop)
        with ThreadPoolExecutor(self.jobs) as pool:
            for _ in range(cxx.MAX_ATTEMPTS):
                out = set(found.failed) | set(found.unmodelled)
                out |= _in_parts(decls, layout, found.drop)
                if expanded is None or drop != found.drop:
                    drop = set(found.drop)
                    outside = set(range(len(decls))) - kernels
                    expanded, log = self._expand(metal, base, layout, drop, decls, outside | out)
                    unit = self._headers_apart(metal, expanded)
                if expanded is None:
                    logs = [log]  # the unit itself did not preprocess
                else:
                    futures = [
                        (chunk, pool.submit(self._syntax, metal, base, unit, c, chunk))
                        for c, chunk in enumerate(_chunks(sorted(todo - out), self.jobs))
                    ]
                    done = [(chunk, *f.result()) for chunk, f in futures]
                    logs = [log for _, ok, log in done if not ok]
                    todo = set().union(*(chunk for chunk, ok, _ in done if not ok))
                    found.passed.update(*(chunk for chunk, ok, _ in done if ok))
                found.timed_out |= any(_TIMED_OUT in log for log in logs)
                if not logs:
                    return True
                progress = False
                for found.log in logs:
                    progress |= self._attribute(
                        metal, base, layout, decls, found.log, found.drop, found.failed,
                        found.unmodelled,
                    )  # fmt: skip
                if not found.first_round:
                    tried = (i for i, e in found.failed.items() if e.message != NOT_ASKED)
                    found.first_round = tuple(sorted(decls[i].host_name for i in tried))
                    if found.first_round and found.failing is not None:
                        found.failing(frozenset(found.first_round), decls)
                if self._beaten(decls, found) or not progress:
                    return False
        found.gave_up = True
        return False

    def _beaten(self, decls: Sequence[KernelDecl], found: _Found) -> bool:
        """Whether the build can no longer build more than ``found.beat`` kernels (it then
        gives up on the rest)."""
        if len(decls) - len(found.failed.keys() | found.unmodelled.keys()) <= found.beat:
            found.gave_up = True
        return found.gave_up

    def _headers_apart(self, metal: Path, expanded: str | None) -> tuple[Path | None, str]:
        """``expanded`` as a chunk compiles it: with clang, the headers the file includes
        first (the shim's and c10's: most of a small check's time) precompiled once, kept
        by their text, and the rest; else (g++, or nothing to precompile) the whole text."""
        apart = split_headers(expanded, str(metal)) if expanded else None
        if apart is None or "clang" not in self.compiler.identity:
            return None, expanded or ""
        headers, rest = apart
        pch = self.cache_dir / f"headers-{cxx.digest([*self._command(metal), headers])[:20]}.pch"
        if not pch.is_file():
            # the header it is built from stays beside it, named by its text as it is
            source = pch.with_suffix(".hh")
            write_atomic(source, headers)
            tmp = pch.with_suffix(f".{os.getpid()}.{threading.get_ident()}.pch")
            proc = self._run(metal, ["-x", "c++-header", str(source), "-o", str(tmp)])
            if proc is None or proc.returncode != 0 or not tmp.is_file():
                tmp.unlink(missing_ok=True)
                return None, expanded or ""  # checked whole, as without clang
            os.replace(tmp, pch)
        return pch, rest

    def _syntax(
        self, metal: Path, base: Path, unit: tuple[Path | None, str], chunk: int, keep: set[int]
    ) -> tuple[bool, str]:
        """One chunk's check: the unit with only the callers of ``keep``, through the front
        end (its headers precompiled, when ``unit`` has them). Whether it compiled, and the
        log."""
        pch, text = unit
        source = base.with_suffix(f".{chunk}.ii" if pch is None else f".{chunk}.rest.cpp")
        write_atomic(source, blanked(text, str(base.with_suffix(".cpp")), keep))
        args = ["-fsyntax-only"]
        if pch is not None:
            # named by its text, it needs no check of its header's time (which a second
            # build writing the same header again would change)
            args += ["-include-pch", str(pch), "-Xclang", "-fno-validate-pch", "-x", "c++"]
        proc = self._run(metal, [*args, str(source)])
        if proc is None:
            return False, _TIMED_OUT
        log = proc.stderr.replace(str(base.with_suffix(".kernel.metal")), str(metal))
        return proc.returncode == 0, log

    def _failed(
        self,
        metal: Path,
        base: Path,
        decls: Sequence[KernelDecl],
        found: _Found,
        start: float,
        in_object: set[int] | None = None,
    ) -> FileBuild:
        """The build whose last errors could not be attributed: every kernel not already
        failed, nor built (into the object, ``in_object``, or checked in a chunk that
        compiled), carries the first of them, or, when the rounds ran out while errors were
        still being placed, is not known to compile (GAVE_UP: no error was its own). It is
        recorded as a built one is (the same inputs fail the same way, and a large file's
        failing passes are its slowest), but for a compile that timed out, which says
        nothing of the file."""
        error = cxx.map_error(found.log.splitlines(), metal, self.root) or CompilerError(
            cxx.relative(metal, self.root), 1, None, "the compiler failed"
        )
        where = cxx.relative(metal, self.root)
        rows = {i: row for row, i in enumerate(sorted(in_object or ()))}
        kernels = tuple(
            KernelBuild(d, rows[i]) if i in rows
            else KernelBuild(d) if i in found.passed
            else KernelBuild(
                d,
                error=found.failed.get(
                    i, CompilerError(where, d.line, None, GAVE_UP) if found.gave_up else error
                ),
                not_modelled=found.unmodelled.get(i, ()),
            )
            for i, d in enumerate(decls)
        )  # fmt: skip
        library = base.with_suffix(".so") if rows else None
        if not found.timed_out:
            record(metal, base, kernels, (), library, found.probe_errors, found.first_round)
        return FileBuild(
            metal, library, kernels, False, time.monotonic() - start, log=found.log,
            first_round=found.first_round,
        )  # fmt: skip

    def _command(self, metal: Path) -> list[str]:
        """The compiler with the build's flags, for a unit of ``metal``."""
        return [self.compiler.path, *self.flags(), f"-iquote{metal.parent}"]

    def _run(self, metal: Path, args: list[str]) -> subprocess.CompletedProcess[str] | None:
        """The compiler on ``args`` (a unit of ``metal``); None when it did not finish."""
        try:
            return subprocess.run(
                [*self._command(metal), *args], capture_output=True, text=True,
                timeout=cxx.COMPILE_TIMEOUT, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None

    def _declarations(self, metal: Path, base: Path) -> list[KernelDecl]:
        """The file's kernels, from its text preprocessed in parse mode."""
        unit = base.with_suffix(".parse.cpp")
        write_atomic(unit, f'#include "mps_shim.h"\n#include "{metal}"\n')
        # its depfile: what the record depends on when no kernel is left to compile
        depfile = base.with_suffix(".parse.d")
        command = [self.compiler.path, *self.flags(), "-DMPS_KERNEL_PARSE=1", "-E"]
        command += ["-MD", "-MF", str(depfile), f"-iquote{metal.parent}", str(unit)]
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=cxx.COMPILE_TIMEOUT, check=False
        )
        if proc.returncode != 0:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr)
            raise ConfigError(f"cannot preprocess: {first.strip()}")
        return parse_kernels(proc.stdout, str(metal))

    def _expand(
        self,
        metal: Path,
        base: Path,
        layout: cxx_parts.Layout,
        drop: set[int],
        decls: Sequence[KernelDecl],
        skip: set[int],
        probes: Sequence[Probe] | None = None,
    ) -> tuple[str | None, str]:
        """The unit of the kernels not ``skip`` (without the ``drop`` parts), preprocessed,
        its explicit instantiations blanked: the object's with its table and the layout of
        ``probes``; None, a check's (callers only). The text, or None and the log."""
        source_metal = base.with_suffix(".kernel.metal")
        text = layout.pruned(drop)
        # __FILE__ (TORCH_REPORT_ERROR's) and the diagnostics name the file itself
        line_one = f'#line 1 "{metal}"\n'
        write_atomic(source_metal, line_one + rewrite_threadgroup(text, str(metal)))
        source, depfile = base.with_suffix(".cpp"), base.with_suffix(".d")
        write_atomic(source, translation_unit(source_metal, decls, skip, probes))
        pre = self._run(metal, ["-E", "-MD", "-MF", str(depfile), str(source)])
        if pre is None:
            return None, _TIMED_OUT
        if pre.returncode != 0:
            return None, pre.stderr.replace(str(source_metal), str(metal))
        return strip_instantiations(pre.stdout), ""

    def _compile(
        self,
        metal: Path,
        base: Path,
        layout: cxx_parts.Layout,
        drop: set[int],
        decls: Sequence[KernelDecl],
        skip: set[int],
        probes: Sequence[Probe],
    ) -> tuple[bool, str]:
        """One compile of the object without the ``skip`` kernels. Whether it compiled,
        and the log."""
        expanded, log = self._expand(metal, base, layout, drop, decls, skip, probes)
        if expanded is None:
            return False, log
        source = base.with_suffix(".ii")
        write_atomic(source, expanded)
        tmp = base.with_suffix(f".{os.getpid()}.{threading.get_ident()}.so")
        args = [*cxx.LINK_FLAGS, "-o", str(tmp), str(source), *cxx.LIBS]
        proc = self._run(metal, [*args, *self.compiler.bfloat_libs])
        if proc is None:
            return False, _TIMED_OUT
        log = proc.stderr.replace(str(base.with_suffix(".kernel.metal")), str(metal))
        if proc.returncode == 0 and tmp.is_file():
            os.replace(tmp, base.with_suffix(".so"))
            return True, log
        tmp.unlink(missing_ok=True)
        return False, log

    def _attribute(
        self,
        metal: Path,
        base: Path,
        layout: cxx_parts.Layout,
        decls: Sequence[KernelDecl],
        log: str,
        drop: set[int],
        failed: dict[int, CompilerError],
        unmodelled: dict[int, tuple[str, ...]],
    ) -> bool:
        """Set aside what the errors of ``log`` belong to; whether anything new was."""
        unit = str(base.with_suffix(".cpp"))
        progress = False
        for d in cxx_parts.diagnostics(log):
            lines = [line for path, line in d.places if Path(path).as_posix() == unit]
            kernel = next((kernel_of_line(line) for line in lines if line >= FIRST), None)
            parts = {
                p
                for p in (layout.part_at(line) for line in cxx_parts.metal_lines(d, metal))
                if p is not None
            }
            if kernel is not None and kernel < len(decls):
                if kernel not in failed and kernel not in unmodelled:
                    self._fail(kernel, d, metal, failed, unmodelled)
                    _share(kernel, d, decls, failed, unmodelled)
                    progress = True
            elif parts - drop:
                for i in _in_parts(decls, layout, parts - drop):
                    self._fail(i, d, metal, failed, unmodelled)
                drop |= parts
                progress = True
        return progress

    def _fail(
        self,
        kernel: int,
        d: cxx_parts.Diagnostic,
        metal: Path,
        failed: dict[int, CompilerError],
        unmodelled: dict[int, tuple[str, ...]],
    ) -> None:
        found = _NOT_MODELLED.findall("\n".join(d.lines))
        if found:
            unmodelled[kernel] = tuple(dict.fromkeys(found))
            return
        error = cxx.map_error(list(d.lines), metal, self.root)
        failed[kernel] = error or CompilerError(
            cxx.relative(metal, self.root), 1, None, d.lines[-1] if d.lines else "error"
        )

    def _done(
        self,
        metal: Path,
        base: Path,
        decls: Sequence[KernelDecl],
        layout: cxx_parts.Layout,
        in_object: set[int],
        found: _Found,
        start: float,
    ) -> FileBuild:
        kernels = []
        rows = {i: row for row, i in enumerate(sorted(in_object))}
        set_aside = _in_parts(decls, layout, found.drop)
        for i, d in enumerate(decls):
            error = found.failed.get(i)
            if error is None and i not in found.unmodelled and i not in rows and i in set_aside:
                where = cxx.relative(metal, self.root)
                error = CompilerError(where, d.line, None, "set aside with its part")
            index = rows.get(i, -1)
            kernels.append(KernelBuild(d, index, error, found.unmodelled.get(i, ())))
        names = tuple(dict.fromkeys(layout.parts[i].name for i in sorted(found.drop)))
        library = base.with_suffix(".so") if in_object else None
        record(metal, base, kernels, names, library, found.probe_errors, found.first_round)
        return FileBuild(
            metal, library, tuple(kernels), False, time.monotonic() - start, names, found.log,
            probe_errors=found.probe_errors, first_round=found.first_round,
        )  # fmt: skip

    def driver(self) -> Path:
        """The driver executable, built once per compiler and driver source."""
        return cxx.build_driver(
            self.compiler, self.cache_dir, DRIVER_SOURCE, CACHE_VERSION, "check-kernel"
        )


@dataclass
class _Found:
    """What a build's passes found so far, each pass adding to it (so not frozen)."""

    unmodelled: dict[int, tuple[str, ...]]
    failed: dict[int, CompilerError] = field(default_factory=dict)
    drop: set[int] = field(default_factory=set)  # the file's parts set aside
    probe_errors: dict[str, str] = field(default_factory=dict)
    log: str = ""
    # the rounds ran out while errors were still being placed, or it could not build
    # more than ``beat`` kernels (a retry's bound: it is kept only if it builds more)
    gave_up: bool = False
    beat: int = -1
    failing: Callable[[frozenset[str], Sequence[KernelDecl]], None] | None = None  # _build's
    first_round: tuple[str, ...] = ()  # FileBuild's
    passed: set[int] = field(default_factory=set)  # checked in a chunk that compiled
    timed_out: bool = False  # a compile did not finish: the build says nothing of the file


# a check of fewer kernels is one unit: a chunk's own cost (the headers and the file parsed
# again, ~0.2 CPU-s with g++) is only worth paying for this many
_CHUNK = 500


def _chunks(kernels: Sequence[int], jobs: int) -> list[set[int]]:
    """``kernels`` in runs of neighbours, one for each CPU when there are enough of them:
    a functor's kernels are neighbours, so one that fails mostly fails a single chunk."""
    count = max(1, min(jobs, len(kernels) // _CHUNK))
    size = max(1, -(-len(kernels) // count))
    return [set(kernels[i : i + size]) for i in range(0, len(kernels), size)]


_WORD = re.compile(r"\w+")
# the classes a name is qualified by: ``angle_functor`` of ``T angle_functor::operator()(T)``
_QUALIFIER = re.compile(r"(\w+)(?:<[^<>]*>)?::")


def _share(
    kernel: int,
    d: cxx_parts.Diagnostic,
    decls: Sequence[KernelDecl],
    failed: dict[int, CompilerError],
    unmodelled: dict[int, tuple[str, ...]],
) -> None:
    """Give ``kernel``'s error to every kernel its failing specialization is reached by too.

    The compiler reports a failing specialization once per compile, through the first
    kernel that instantiates it: the others would each cost a round. A specialization of a
    member of a class the kernel is given as a template argument (``angle_functor::
    operator()`` for ``bfloat``, from ``unary_dense<bfloat, angle_functor>``) is reached
    alike by every kernel template given the same arguments (``unary_strided<bfloat,
    angle_functor>``); one of the kernel's own template (``first_lane<float>``) is not.
    """
    spec = cxx_parts.specialization(d)
    args = decls[kernel].template_args
    if spec is None or args is None:
        return
    same = " ".join(_WORD.findall(args))
    if not set(_QUALIFIER.findall(spec.split(" [with ")[0])) & set(same.split()):
        return
    host = decls[kernel].host_name
    for i, other in enumerate(decls):
        if i in failed or i in unmodelled or other.template_args is None:
            continue
        if " ".join(_WORD.findall(other.template_args)) != same:
            continue
        if kernel in unmodelled:
            unmodelled[i] = unmodelled[kernel]
        else:
            e = failed[kernel]
            note = f" (the same failing specialization as {host}: {spec.split(' [with ')[0]})"
            failed[i] = CompilerError(e.path, e.line, e.column, e.message + note)


def _failed_here(k: KernelBuild) -> bool:
    """Whether the build tried ``k`` and it did not compile (not a kernel left out)."""
    return k.error is not None and k.error.message != NOT_ASKED


def _merged(first: FileBuild, alone: FileBuild, label: str) -> FileBuild:
    """``first`` with each kernel it failed that ``alone`` (the bfloat compiler's build of
    those kernels) compiled taken from it; one that failed both keeps its error, with the
    other's beside it."""
    again = {k.decl.host_name: k for k in alone.kernels if k.error is None or _failed_here(k)}
    kernels, retried = [], []
    for k in first.kernels:
        other = again.get(k.decl.host_name) if _failed_here(k) else None
        if other is not None and other.built:
            kernels.append(other)
            retried.append(k.decl.host_name)
        elif other is not None and other.error is not None and k.error is not None:
            if k.error.message == GAVE_UP:  # not known either way: it stays unknown
                kernels.append(k)
                continue
            note = f" (nor with {label}: {other.error.message})"
            kernels.append(replace(k, error=replace(k.error, message=k.error.message + note)))
        else:
            kernels.append(k)
    return replace(
        first, kernels=tuple(kernels), cached=first.cached and alone.cached,
        retried=first.retried + tuple(retried),
    )  # fmt: skip


def _in_parts(decls: Sequence[KernelDecl], layout: cxx_parts.Layout, parts: set[int]) -> set[int]:
    return {i for i, d in enumerate(decls) if layout.part_at(d.line) in parts}
