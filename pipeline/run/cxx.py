"""The host C++ compiler runner of ``check-math``: one shared object per Metal functor.

A functor's translation unit is the ``.metal`` file as it stands in the checkout, compiled
through our Metal shim (``metal_shim/``, package data) after the checkout's own
``c10/metal/indexing.h``, with only the core ``REGISTER_*`` macros redefined
(``metal_shim/mps_register.h``) so that the registrations of that one functor are recorded
and instantiated. ``metal_shim/mps_math_driver.cpp``, built once per compiler, loads such an
object and runs its registrations element by element (see there for the file formats).

**Cache.** An object is named by a digest of what selects it (compiler identity, flags,
.metal path, kernel name); next to it, a manifest lists every file the compiler read (its
``-MD`` depfile) with a digest of each file's bytes. A later build whose manifest still
matches, byte for byte, reuses the object without starting the compiler.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.fsio import write_atomic
from pipeline.run.build import CompilerError

SHIM_DIR = Path(__file__).with_name("metal_shim")
DRIVER_SOURCE = SHIM_DIR / "mps_math_driver.cpp"
# bump when the translation unit's shape or the manifest changes
CACHE_VERSION = "1"
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
)
_DIAGNOSTIC = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<message>.*)$"
)
_LOCATION = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+):(?:\d+:)? ")


class NoCompilerError(ConfigError):
    """No host C++ compiler to build functors with (exit 2)."""


@dataclass(frozen=True)
class Compiler:
    path: str
    identity: str  # the first line of ``--version``: part of every cache key

    @property
    def name(self) -> str:
        return Path(self.path).name


def find_compiler(setting: str | None) -> Compiler:
    """The ``math.cxx`` setting, else the first of clang++ / g++ on PATH."""
    names = (setting,) if setting else CANDIDATES
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        try:
            proc = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0:
            first = (proc.stdout.splitlines() or [""])[0]
            return Compiler(path, first)
    if setting:
        raise NoCompilerError(
            f"math.cxx={setting!r} is not a working C++ compiler on PATH; install clang or "
            "g++, or point math.cxx at one"
        )
    raise NoCompilerError(
        "check-math needs a host C++ compiler: install clang or g++ (apt-get install g++), "
        "or set math.cxx"
    )


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
    """One functor's object: ``error`` is set (and ``library`` missing) when it failed."""

    metal: Path
    kernel: str
    library: Path
    cached: bool
    seconds: float
    error: CompilerError | None = None
    log: str = ""


@dataclass
class Builder:
    """Builds functor objects under ``cache_dir`` with ``compiler`` (see the module doc)."""

    compiler: Compiler
    headers: Headers
    root: Path
    cache_dir: Path
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)

    def flags(self) -> list[str]:
        return [
            *FLAGS,
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
        start = time.monotonic()
        tu = translation_unit(metal, kernel)
        key = _digest(
            [CACHE_VERSION, self.compiler.path, self.compiler.identity, *self.flags(), tu]
        )
        base = self.cache_dir / f"{kernel}-{key[:20]}"
        library, manifest = base.with_suffix(".so"), base.with_suffix(".json")
        if library.is_file() and _manifest_matches(manifest):
            return FunctorBuild(metal, kernel, library, True, time.monotonic() - start)
        source, depfile = base.with_suffix(".cpp"), base.with_suffix(".d")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(source, tu)
        tmp = base.with_suffix(f".{os.getpid()}.so")
        command = [
            self.compiler.path,
            *self.flags(),
            "-shared",
            "-MD",
            "-MF",
            str(depfile),
            "-o",
            str(tmp),
            str(source),
        ]
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            error = CompilerError(self._rel(metal), 1, None, f"{kernel}: compile timed out")
            return FunctorBuild(metal, kernel, library, False, time.monotonic() - start, error)
        if proc.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            log = proc.stderr
            error = map_error(log.splitlines(), metal, self.root) or CompilerError(
                self._rel(metal), 1, None, f"{kernel}: the compiler failed without a message"
            )
            return FunctorBuild(metal, kernel, library, False, time.monotonic() - start, error, log)
        deps = read_depfile(depfile)
        os.replace(tmp, library)
        write_atomic(manifest, json.dumps({"deps": {str(p): _file_digest(p) for p in deps}}))
        return FunctorBuild(metal, kernel, library, False, time.monotonic() - start)

    def driver(self) -> Path:
        """The driver executable, built once per compiler and driver source."""
        key = _digest([CACHE_VERSION, self.compiler.identity, DRIVER_SOURCE.read_text()])
        exe = self.cache_dir / f"mps_math_driver-{key[:16]}"
        if exe.is_file():
            return exe
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_name(exe.name + f".{os.getpid()}")
        command = [self.compiler.path, "-std=c++17", "-O1", f"-I{SHIM_DIR}"]
        command += ["-o", str(tmp), str(DRIVER_SOURCE), "-ldl"]
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ConfigError(
                f"{self.compiler.name} cannot build the check-math driver: "
                + "\n".join(proc.stderr.strip().splitlines()[-3:])
            )
        os.replace(tmp, exe)
        return exe

    def _rel(self, path: Path) -> str:
        return _relative(path, self.root)


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


def _manifest_matches(manifest: Path) -> bool:
    try:
        deps = json.loads(manifest.read_text(encoding="utf-8"))["deps"]
    except (OSError, ValueError, KeyError):
        return False
    return all(_file_digest(Path(p)) == digest for p, digest in deps.items())


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "-"


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _relative(path: Path, root: Path) -> str:
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
    rel = _relative(metal, root)
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
                where = f"{_relative(Path(path), root)}:{m.group('line')}"
                return CompilerError(rel, int(loc.group("line")), None, f"{message} (at {where})")
        return CompilerError(_relative(Path(path), root), int(m.group("line")), None, message)
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
