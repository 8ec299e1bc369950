"""The host C++ compiler runner of ``check-math``: one shared object per Metal functor.

A functor's translation unit is the ``.metal`` file as it stands in the checkout, compiled
through our Metal shim (``metal_shim/``, package data) after the checkout's own
``c10/metal/indexing.h``, with only the core ``REGISTER_*`` macros redefined
(``metal_shim/mps_register.h``) so that the registrations of that one functor are recorded
and instantiated. ``metal_shim/mps_math_driver.cpp``, built once per compiler, loads such an
object and runs its registrations element by element (see there for the file formats).

One functor that does not compile never hides the others of its file: the parts of the
file that an error belongs to, when they are not the functor's own, are set aside and the
build retried (:mod:`pipeline.run.cxx_parts`). A functor that reaches a Metal function the
shim does not model (SIMD-group, threadgroup) is reported as such, never run.

**Compiler.** g++ >= 12 or clang >= 15: Metal's ``half`` is ``_Float16``, which older
clang lacks on x86-64 (Debian 12's default ``clang`` is 14; its ``clang-19`` works).

**bfloat.** The shim's bfloat is a class, for which ``c ? bfloat : float`` (Metal's float)
is ambiguous. clang >= 17's ``__bf16`` is an arithmetic type that gives that float, and
rounds every operation with ``-fbfloat16-excess-precision=none`` (its float-to-bfloat
conversion comes from compiler-rt's builtins where libgcc has none), but clang refuses any
conversion between it and ``_Float16``, which c10's ``cast_to`` makes (half <-> bfloat
outputs). Neither model builds everything, and each refuses, never miscompiles, what it
cannot model: a build is made with the class, and made again with the built-in type
(:mod:`pipeline.run.cxx_bfloat`, probed by building and running a program) only when the
class left something uncompiled; the one that built more is kept and named in the output.

**Cache.** An object is named by a digest of what selects it (compiler identity, flags,
.metal path, kernel name); next to it, a manifest lists every file the compiler read (its
``-MD`` depfile, and the .metal file itself when parts of it were set aside) with a digest
of each file's bytes. A later build whose manifest still matches, byte for byte, reuses the
object without starting the compiler. The folder (``math.cache``) is by default the user's,
which every checkout and state dir shares: two runs may build one object at once, each
compiling into names of its own, and the object and its manifest are renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from pipeline import fields
from pipeline.errors import ConfigError, DocumentError, NoCompilerError
from pipeline.fsio import write_atomic
from pipeline.run import cxx_parts
from pipeline.run.build import CompilerError

SHIM_DIR = Path(__file__).with_name("metal_shim")
DRIVER_SOURCE = SHIM_DIR / "mps_math_driver.cpp"
# bump when the translation unit's shape or the manifest changes
CACHE_VERSION = "2"
COMPILE_TIMEOUT = 300.0
CANDIDATES = ("clang++", "g++")
FLAGS: tuple[str, ...] = (
    "-std=c++17",
    "-O1",
    "-fPIC",
    # Metal has no double: an unsuffixed floating constant is a float
    "-fsingle-precision-constant",
    "-fno-fast-math",
    # [[buffer(0)]], [[host_name(...)]] and #pragma unroll mean nothing here
    "-Wno-attributes",
    "-Wno-unknown-pragmas",
    "-Wno-unknown-attributes",
    "-Wno-ignored-attributes",
    # only what the registrations reach is linked: the rest of the file cannot fail the link
    "-fvisibility=hidden",
    "-ffunction-sections",
    "-fdata-sections",
)
# an undefined symbol (an unmodelled Metal function) fails the link, naming it
LINK_FLAGS: tuple[str, ...] = ("-shared", "-Wl,--gc-sections", "-Wl,--no-undefined")
LIBS: tuple[str, ...] = ("-lm",)
# set-aside rounds before a functor's build gives up
MAX_ATTEMPTS = 6
# Metal's half; a compiler without it cannot build the shim
HALF_PROBE = "_Float16 half_probe = 1;\n"
_DIAGNOSTIC = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<message>.*)$"
)
_LOCATION = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+):(?:\d+:)? ")


@dataclass(frozen=True)
class Compiler:
    path: str
    identity: str  # the first line of ``--version``: part of every cache key
    # cxx_bfloat.BFLOAT_FLAGS when the probe found a built-in bfloat, else nothing (the class)
    bfloat_flags: tuple[str, ...] = ()
    bfloat_libs: tuple[str, ...] = ()  # where __bf16's conversions come from, if not libgcc

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def native_bfloat(self) -> bool:
        return bool(self.bfloat_flags)

    @property
    def label(self) -> str:
        """The compiler and how Metal's bfloat is modelled, for the output."""
        model = "built-in __bf16" if self.native_bfloat else "the shim's class"
        return f"{self.identity} (bfloat: {model})"


def find_compiler(setting: str | None) -> Compiler:
    """The ``math.cxx`` setting, else the first of clang++ / g++ on PATH that has
    ``_Float16`` (see the module doc); it builds with the shim's bfloat class."""
    names = (setting,) if setting else CANDIDATES
    skipped = []
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        identity = version_line(path)
        if identity is None:
            continue
        if not has_half(path):
            skipped.append(f"{name} ({identity}) has no _Float16, Metal's half")
            continue
        return Compiler(path, identity)
    why = f" ({'; '.join(skipped)})" if skipped else ""
    if setting:
        raise NoCompilerError(
            f"math.cxx={setting!r} is not a working C++ compiler on PATH{why}; install clang or "
            "g++ (clang >= 15, g++ >= 12), or point math.cxx at one"
        )
    raise NoCompilerError(
        f"check-math needs a host C++ compiler{why}: install clang or g++ (clang >= 15, "
        "g++ >= 12; apt-get install g++), or set math.cxx"
    )


def version_line(path: str) -> str | None:
    try:
        proc = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return (proc.stdout.splitlines() or [""])[0]


def has_half(path: str) -> bool:
    try:
        proc = subprocess.run(
            [path, "-std=c++17", "-fsyntax-only", "-x", "c++", "-"],
            input=HALF_PROBE,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@dataclass(frozen=True)
class Headers:
    """Where ``#include <c10/metal/...>`` comes from: the checkout's own, else the wheel's."""

    include_root: Path  # the folder holding c10/metal/
    origin: str


def find_c10_headers(root: Path, torch_package: Path | None) -> Headers:
    if (root / "c10" / "metal" / "indexing.h").is_file():
        return Headers(root, "the checkout's c10/metal")
    if torch_package is not None:
        include = torch_package / "include"
        if (include / "c10" / "metal" / "indexing.h").is_file():
            return Headers(include, f"the torch wheel's {include / 'c10' / 'metal'}")
    raise ConfigError(
        f"no c10/metal/indexing.h in {root} nor in the interpreter's torch package; "
        "check-math compiles the functors against the real headers"
    )


@dataclass(frozen=True)
class FunctorBuild:
    """One functor's object. ``library`` is missing when ``error`` is set (it does not
    compile) or ``not_modelled`` is (it reaches Metal functions the shim does not model);
    ``set_aside`` names the other parts of its file that were left out to build it."""

    metal: Path
    kernel: str
    library: Path
    cached: bool
    seconds: float
    error: CompilerError | None = None
    log: str = ""
    not_modelled: tuple[str, ...] = ()
    set_aside: tuple[str, ...] = ()
    # the compiler's label when the builder's bfloat compiler built it, not its own
    built_with: str | None = None

    @property
    def built(self) -> bool:
        return self.error is None and not self.not_modelled


@dataclass(frozen=True)
class _Attempt:
    """One compile and link: whether an object came out, and what the compiler said."""

    ok: bool
    log: str
    not_modelled: tuple[str, ...] = ()
    timed_out: bool = False


@dataclass
class Builder:
    """Builds functor objects under ``cache_dir`` with ``compiler`` (see the module doc)."""

    compiler: Compiler
    headers: Headers
    root: Path
    cache_dir: Path
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    # a compiler with the built-in bfloat, for what the class does not compile (module doc)
    bfloat: Compiler | None = None
    # (metal path, text) -> parts found not to compile, shared by the parallel builds
    _bad: dict[tuple[str, str], set[int]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _bfloat_builder: Builder | None = field(default=None, repr=False)

    def flags(self) -> list[str]:
        return [
            *FLAGS,
            *self.compiler.bfloat_flags,
            f"-I{SHIM_DIR}",
            f"-I{self.headers.include_root}",
            f"-I{self.root / 'aten' / 'src'}",
            f"-I{self.root}",
        ]

    def build_all(
        self,
        targets: Sequence[tuple[Path, str]],
        on_done: Callable[[FunctorBuild], None] | None = None,
    ) -> list[FunctorBuild]:
        """Build every (metal file, kernel) in parallel, in input order."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)

        def one(target: tuple[Path, str]) -> FunctorBuild:
            result = self.build(*target)
            if on_done is not None:
                on_done(result)
            return result

        if len(targets) <= 1 or self.jobs <= 1:
            return [one(t) for t in targets]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(one, targets))

    def build(self, metal: Path, kernel: str) -> FunctorBuild:
        """``kernel``'s object, built with the class bfloat, else with the built-in one."""
        first = self._build(metal, kernel)
        if first.error is None or self.bfloat is None:
            return first
        with self._lock:
            if self._bfloat_builder is None:
                self._bfloat_builder = Builder(
                    self.bfloat, self.headers, self.root, self.cache_dir, self.jobs
                )
        second = self._bfloat_builder.build(metal, kernel)
        return replace(second, built_with=self.bfloat.label) if second.built else first

    def _build(self, metal: Path, kernel: str) -> FunctorBuild:
        start = time.monotonic()
        key = digest(
            [CACHE_VERSION, self.compiler.path, self.compiler.identity, *self.flags()]
            + [translation_unit(metal, kernel)]
        )
        base = self.cache_dir / f"{kernel}-{key[:20]}"
        library, manifest = base.with_suffix(".so"), base.with_suffix(".json")
        if library.is_file() and (kept := read_manifest(manifest, Manifest)):
            return FunctorBuild(
                metal, kernel, library, True, time.monotonic() - start, set_aside=kept.set_aside
            )
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        layout = cxx_parts.layout(metal)
        drop = set(self._known_bad(metal, layout) - layout.own(kernel))
        for _ in range(MAX_ATTEMPTS):
            attempt = self._compile(metal, kernel, base, layout, drop)
            names = _part_names(layout, drop)
            seconds = time.monotonic() - start
            if attempt.ok or attempt.not_modelled or attempt.timed_out:
                error = (
                    CompilerError(self._rel(metal), 1, None, f"{kernel}: compile timed out")
                    if attempt.timed_out
                    else None
                )
                return FunctorBuild(
                    metal, kernel, library, False, seconds, error, attempt.log,
                    attempt.not_modelled, names,
                )  # fmt: skip
            own, others = cxx_parts.attribute(
                cxx_parts.diagnostics(attempt.log), layout, kernel, metal
            )
            if own is not None or not others - drop:
                break
            drop |= others
            self._remember_bad(metal, layout, others)
        error = self._own_error(metal, kernel, attempt.log, own, names)
        return FunctorBuild(
            metal, kernel, library, False, time.monotonic() - start, error, attempt.log,
            set_aside=names,
        )  # fmt: skip

    def _compile(
        self, metal: Path, kernel: str, base: Path, layout: cxx_parts.Layout, drop: set[int]
    ) -> _Attempt:
        """One compile and link of ``kernel``, with the ``drop`` parts of its file blanked."""
        library, manifest = base.with_suffix(".so"), base.with_suffix(".json")
        # Another run may build the same object at once (the cache is shared): what it
        # writes is named by its content (the set-aside copy, the translation unit naming
        # it) or its thread's own (the depfile, the object until renamed into place).
        named = base
        source_metal = metal
        if drop:
            pruned = layout.pruned(drop)
            named = base.with_name(f"{base.name}.{digest([pruned])[:12]}")
            source_metal = named.with_name(named.name + ".set_aside.metal")
            write_atomic(source_metal, pruned)
        source = named.with_name(named.name + ".cpp")
        write_atomic(source, translation_unit(source_metal, kernel))
        own = f"{base.name}.{os.getpid()}.{threading.get_ident()}"
        depfile, tmp = base.with_name(own + ".d"), base.with_name(own + ".so")
        command = [self.compiler.path, *self.flags(), f"-iquote{metal.parent}", *LINK_FLAGS]
        command += ["-MD", "-MF", str(depfile), "-o", str(tmp), str(source), *LIBS]
        command += self.compiler.bfloat_libs
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False
            )
            # the set-aside copy has the file's own line numbers: its diagnostics are the file's
            log = proc.stderr.replace(str(source_metal), str(metal.resolve()))
            if proc.returncode == 0 and tmp.is_file():
                deps = [*read_depfile(depfile), metal.resolve()]
                os.replace(tmp, library)
                kept = Manifest({str(p): file_digest(p) for p in deps}, _part_names(layout, drop))
                write_manifest(manifest, kept)
                return _Attempt(True, log)
        except subprocess.TimeoutExpired:
            return _Attempt(False, "", timed_out=True)
        finally:
            tmp.unlink(missing_ok=True)
            depfile.unlink(missing_ok=True)
        return _Attempt(False, log, cxx_parts.not_modelled(log))

    def _own_error(
        self,
        metal: Path,
        kernel: str,
        log: str,
        own: cxx_parts.Diagnostic | None,
        set_aside: tuple[str, ...],
    ) -> CompilerError:
        """The functor's own error, saying which other parts of the file were set aside."""
        error = map_error(own.lines if own is not None else log.splitlines(), metal, self.root)
        if error is None:
            undefined = cxx_parts.undefined(log)
            why = f"undefined: {undefined[0]}" if undefined else "the compiler failed silently"
            error = CompilerError(self._rel(metal), 1, None, f"{kernel}: {why}")
        if set_aside:
            note = f" (with {', '.join(set_aside)} of the file set aside: not compiled on the host)"
            error = CompilerError(error.path, error.line, error.column, error.message + note)
        return error

    def _known_bad(self, metal: Path, layout: cxx_parts.Layout) -> set[int]:
        with self._lock:
            return set(self._bad.get((str(metal.resolve()), layout.text), ()))

    def _remember_bad(self, metal: Path, layout: cxx_parts.Layout, parts: Collection[int]) -> None:
        """Parts another functor's build found broken: later builds of the file start
        without them (never without their own parts, see build)."""
        with self._lock:
            self._bad.setdefault((str(metal.resolve()), layout.text), set()).update(parts)

    def driver(self) -> Path:
        """The driver executable, built once per compiler and driver source."""
        return build_driver(
            self.compiler, self.cache_dir, DRIVER_SOURCE, CACHE_VERSION, "check-math"
        )

    def _rel(self, path: Path) -> str:
        return relative(path, self.root)


def build_driver(
    compiler: Compiler, cache_dir: Path, source: Path, version: str, tool: str
) -> Path:
    """``source`` built into an executable in ``cache_dir``, once per compiler and source
    text (``version``: its cache's); a ConfigError with the compiler's last lines if not."""
    key = digest([version, compiler.identity, source.read_text()])
    exe = cache_dir / f"{source.stem}-{key[:16]}"
    if exe.is_file():
        return exe
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(exe.name + f".{os.getpid()}")
    command = [compiler.path, "-std=c++17", "-O1", f"-I{SHIM_DIR}", "-o", str(tmp), str(source)]
    proc = subprocess.run([*command, "-ldl"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ConfigError(
            f"{compiler.name} cannot build the {tool} driver: "
            + "\n".join(proc.stderr.strip().splitlines()[-3:])
        )
    os.replace(tmp, exe)
    return exe


def _part_names(layout: cxx_parts.Layout, parts: Collection[int]) -> tuple[str, ...]:
    """The names of ``parts``, each once (one macro may instantiate several)."""
    return tuple(dict.fromkeys(layout.parts[i].name for i in sorted(parts)))


def translation_unit(metal: Path, kernel: str) -> str:
    """The generated source that builds ``kernel``'s functor out of ``metal`` as it stands."""
    return (
        "// generated by mps-pipeline check-math: one functor of a .metal file\n"
        '#include "mps_shim.h"\n'
        f"#define MPS_MATH_WANT_{kernel} ~, 1\n"
        "#include <c10/metal/indexing.h>\n"
        '#include "mps_register.h"\n'
        f'#include "{metal.resolve()}"\n'
        '#include "mps_export.h"\n'
    )


def read_depfile(path: Path) -> list[Path]:
    """The prerequisites of a make-style depfile (``out: a.h b.h \\``)."""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    _, _, rest = text.partition(": ")
    return [Path(p) for p in rest.split()]


@dataclass(frozen=True)
class Manifest:
    """What a library next to it was built from: every file the compiler read, by its
    digest, and the parts of the .metal file set aside so the rest would build."""

    deps: dict[str, str]  # path -> file_digest
    set_aside: tuple[str, ...] = ()

    def matches(self) -> bool:
        """Whether every file it lists is, byte for byte, as it was then."""
        return all(file_digest(Path(p)) == digest for p, digest in self.deps.items())


M = TypeVar("M", bound=Manifest)


def read_manifest(path: Path, kind: type[M]) -> M | None:
    """The ``kind`` of manifest at ``path`` while it :meth:`~Manifest.matches`; None when
    there is none, it is damaged (a build then starts over) or a file changed since."""
    try:
        kept = fields.read(kind, json.loads(path.read_text(encoding="utf-8")), path.name)
    except (OSError, ValueError, DocumentError):
        return None
    return kept if kept.matches() else None


def write_manifest(path: Path, manifest: Manifest) -> None:
    write_atomic(path, json.dumps(fields.dump(manifest)))


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "-"


def digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def relative(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def map_error(lines: Sequence[str], metal: Path, root: Path) -> CompilerError | None:
    """The first error, placed at a line of the ``.metal`` file.

    An error inside a header (c10/metal, the shim) is placed where the .metal file led to it:
    the nearest ``metal:LINE`` of the same diagnostic (``required from here``, ``In file
    included from``), with the header's own place in the message.
    """
    target = str(metal.resolve())
    rel = relative(metal, root)
    for i, line in enumerate(lines):
        m = _DIAGNOSTIC.match(line)
        if not m:
            continue
        message = m.group("message").strip()
        path = m.group("path")
        if Path(path).resolve().as_posix() == Path(target).as_posix():
            col = m.group("col")
            return CompilerError(rel, int(m.group("line")), int(col) if col else None, message)
        # the diagnostic's notes come before (instantiation context) and after (required
        # from here); the first that names the .metal file is the place to show
        for j in [*range(i - 1, -1, -1), *range(i + 1, len(lines))]:
            if j > i and _DIAGNOSTIC.match(lines[j]):
                break
            loc = _LOCATION.match(lines[j].strip().removeprefix("In file included from "))
            if loc and Path(loc.group("path")).resolve().as_posix() == target:
                where = f"{relative(Path(path), root)}:{m.group('line')}"
                return CompilerError(rel, int(loc.group("line")), None, f"{message} (at {where})")
        return CompilerError(relative(Path(path), root), int(m.group("line")), None, message)
    return None


# ---- running a functor's registrations -------------------------------------------------


@dataclass(frozen=True)
class Registered:
    """One registration as the compiled object recorded it (Metal type names)."""

    index: int
    kernel: str
    input: str
    output: str
    result: str  # the functor's real return type for ``input``
    alpha: str  # "?" unless an ALPHA op
    arity: int
    in_size: int
    out_size: int
    alpha_size: int
    line: int


def list_registrations(driver: Path, library: Path) -> list[Registered]:
    listing = library.with_suffix(".registrations")
    if listing.is_file() and listing.stat().st_mtime_ns >= library.stat().st_mtime_ns:
        text = listing.read_text(encoding="utf-8")
    else:
        proc = subprocess.run(
            [str(driver), str(library), "--list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise ConfigError(f"cannot list the registrations of {library}: {proc.stderr.strip()}")
        text = proc.stdout
        write_atomic(listing, text)
    out = []
    for i, line in enumerate(text.splitlines()):
        f = line.split("\t")
        out.append(Registered(i, f[0], f[1], f[2], f[3], f[4], *(int(x) for x in f[5:10])))
    return out


@dataclass(frozen=True)
class Job:
    """Run registration ``index`` on ``n`` elements: ``inputs`` holds one block per tensor
    input (n * in_size bytes each), ``alpha`` the alpha value's bytes (b"" without)."""

    index: int
    n: int
    inputs: tuple[bytes, ...]
    alpha: bytes = b""


@dataclass(frozen=True)
class JobResult:
    output: bytes
    status: bytes  # per element: 0, or the signal number that stopped it


@dataclass(frozen=True)
class RunOutcome:
    results: list[JobResult]
    # set when the driver itself died (a fault outside the per-element guard, a hang)
    failure: str | None = None


def run_jobs(
    driver: Path,
    library: Path,
    registrations: Sequence[Registered],
    jobs: Sequence[Job],
    scratch: Path,
    timeout: float = 120.0,
) -> RunOutcome:
    """Run ``jobs`` in a driver subprocess: a crash is a finding, never a dead checker."""
    scratch.mkdir(parents=True, exist_ok=True)
    request = scratch / f"{library.stem}.{os.getpid()}.req"
    response = scratch / f"{library.stem}.{os.getpid()}.out"
    chunks = [len(jobs).to_bytes(4, "little")]
    for job in jobs:
        chunks += [job.index.to_bytes(4, "little"), job.n.to_bytes(4, "little")]
        chunks += [*job.inputs, job.alpha]
    request.write_bytes(b"".join(chunks))
    try:
        proc = subprocess.run(
            [str(driver), str(library), str(request), str(response)],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return RunOutcome([], f"the functor did not finish within {timeout:.0f} s")
    finally:
        request.unlink(missing_ok=True)
    if proc.returncode != 0:
        response.unlink(missing_ok=True)
        why = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [
            f"exit {proc.returncode}"
        ]
        return RunOutcome([], f"the driver died: {why[0]}")
    data = response.read_bytes()
    response.unlink(missing_ok=True)
    results, pos = [], 0
    for job in jobs:
        size = job.n * registrations[job.index].out_size
        output = data[pos : pos + size]
        status = data[pos + size : pos + size + job.n]
        pos += size + job.n
        results.append(JobResult(output, status))
    return RunOutcome(results)
