"""The kernel flow: build a ``.metal`` file's kernels on the host, run each on inputs built to
expose reduction bugs under several thread schedules, and compare with torch on CPU (see
``mps-pipeline check-kernel``).

Steps: read the file's launch spec (:mod:`pipeline.tree.launch`), its entries' buffers and
sizes completed from the ``.mm`` host code where they leave them out
(:mod:`pipeline.tree.host_launch`); build the file's object
with the layout of the spec's parameter structs (:mod:`pipeline.run.kernel_build`); ask the
interpreter for every launched kernel's inputs, launch sizes, struct values and references
at once (``kernel_torch.py``); run each kernel's inputs under every schedule in a driver
process of its own (:mod:`pipeline.run.kernel_run`); judge
(:func:`pipeline.results.kernel.judge`). The runners come in as parameters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import NoKernelFileError
from pipeline.results.kernel import (
    Finding,
    KernelCheck,
    KernelFileReport,
    KernelStatus,
    ScheduledRun,
    judge,
)
from pipeline.run import cxx, cxx_bfloat, kernel_run, reference
from pipeline.run.kernel_build import GAVE_UP, KernelBuilder
from pipeline.run.kernel_record import FileBuild, KernelBuild
from pipeline.run.kernel_run import SCHEDULES, Dispatch, Listing, Run, schedule_name
from pipeline.run.kernel_unit import Probe
from pipeline.run.reference import KernelAnswer
from pipeline.tree import host_launch, launch
from pipeline.tree.host_launch import HostLaunch
from pipeline.tree.launch import ERROR_BUFFER, OUTPUT, GridKind, LaunchCase, LaunchSpec

MAX_SAMPLES = 4  # OpInfo samples per kernel, on top of the bug-exposing inputs
POISON = 0xFF  # an output's bytes before the kernel writes it: NaN, or -1


@dataclass(frozen=True)
class KernelCase:
    """One kernel and dtype asked of kernel_torch.py (its docstring has the request's shape):
    its launch entry, and the kernel's limit on threads per threadgroup."""

    id: str  # the kernel's host name
    dtype: str
    launch: LaunchCase
    max_threads: int

    @property
    def opinfo(self) -> str | None:
        return self.launch.opinfo

    def to_json(self) -> dict[str, object]:
        case = self.launch
        return {
            "id": self.id,
            "dtype": self.dtype,
            "reference": case.reference,
            "opinfo": case.opinfo,
            "inputs": [
                {
                    "name": i.name,
                    "rank": i.rank,
                    "dtype": i.dtype,
                    "range": list(i.range) if i.range else None,
                    "strided": i.strided,
                }
                for i in case.inputs
            ],  # fmt: skip
            "output_like": case.output_like,
            "output_dtype": case.output_dtype,
            "output_shape": list(case.output_shape) if case.output_shape else None,
            "structs": [
                {"name": s.name, "fields": [list(f) for f in s.fields]} for s in case.structs
            ],
            "grid": list(case.grid),
            "tptg": list(case.threads_per_threadgroup),
            "max_threads": self.max_threads,
            "max_samples": MAX_SAMPLES,
        }


# kernel_torch.py's answers for cases, by case id (:func:`pipeline.run.reference.kernel_references`)
ReferenceFn = Callable[[list[KernelCase]], Mapping[str, tuple[KernelAnswer, ...]]]


@dataclass(frozen=True)
class KernelRunners:
    builder: KernelBuilder
    references: ReferenceFn
    run: Callable[[Path, Path, Sequence[Run], Path], kernel_run.Outcome] = kernel_run.run


# a kernel's launch entry, completed from the host code, and its dtype; else why there is none
Resolved = Mapping[str, tuple[LaunchCase, str] | str]


def resolve(spec: LaunchSpec | None, launches: Sequence[HostLaunch]) -> Resolved:
    """Each host name the spec's entries launch -> (entry, dtype), the entry's buffers and
    sizes completed from the host code where it leaves them out; or why they cannot be."""
    out: dict[str, tuple[LaunchCase, str] | str] = {}
    for case in spec.cases if spec else ():
        for dtype in case.dtypes:
            name = case.host_name(dtype)
            if name not in out:
                out[name] = _completed(case, dtype, name, launches)
    return out


def _completed(
    case: LaunchCase, dtype: str, name: str, launches: Sequence[HostLaunch]
) -> tuple[LaunchCase, str] | str:
    if case.launched:
        return case, dtype
    hosts = [h for h in launches if h.kernel and re.fullmatch(h.kernel, name)]
    if not hosts:
        return "its entry gives no buffers and sizes, and no .mm launch of it was read"
    done: list[LaunchCase] = []
    for h in hosts:
        try:
            done.append(host_launch.complete(case, h))
        except host_launch.NotReadError as exc:
            return f"its launch in the host code is not read: {exc}"
    if len({(c.buffers, c.structs, c.grid_kind, c.grid, c.threads_per_threadgroup)
            for c in done}) > 1:  # fmt: skip
        where = ", ".join(h.where for h in hosts)
        return f"the host code launches it in more than one way ({where})"
    return done[0], dtype


def _probes(resolved: Resolved) -> tuple[Probe, ...]:
    found: dict[str, set[str]] = {}
    for entry in resolved.values():
        if isinstance(entry, str):
            continue
        for s in entry[0].structs:
            found.setdefault(s.type, set()).update(f for f, _ in s.fields if f)
    return tuple(Probe(t, tuple(sorted(f))) for t, f in sorted(found.items()))


def check_file(
    metal: Path,
    spec: LaunchSpec | None,
    spec_path: Path,
    runners: KernelRunners,
    *,
    root: Path,
    scratch: Path,
    kernels: Sequence[str] = (),
    launches: Sequence[HostLaunch] = (),
) -> KernelFileReport:
    builder = runners.builder
    resolved = resolve(spec, launches)
    # a check of some kernels compiles only those, and only the kernels it can run are
    # generated into the object, the others checked by the front end: the code generation
    # of a large file's every instantiation would cost most of its compile
    launched = frozenset(name for name, entry in resolved.items() if not isinstance(entry, str))
    build = builder.build(metal, _probes(resolved), frozenset(kernels), launched)
    chosen = [k for k in build.kernels if not kernels or k.decl.host_name in kernels]
    runnable = []
    checks: dict[str, KernelCheck] = {}
    for k in chosen:
        early = _not_run(k, resolved, spec_path)
        if early is not None:
            checks[k.decl.host_name] = early
        else:
            runnable.append(k)
    if runnable and build.library is not None:
        listing = kernel_run.list_object(builder.driver(), build.library)
        checks.update(_run_all(build, runnable, resolved, listing, runners, scratch))
    ordered = tuple(checks[k.decl.host_name] for k in chosen if k.decl.host_name in checks)
    compiler = build.built_with or builder.compiler.label
    if build.retried and builder.bfloat is not None:
        compiler += f"; {builder.bfloat.label} for {len(build.retried)} the class did not build"
    return KernelFileReport(
        cxx.relative(metal, root), ordered, compiler, builder.headers.origin, build.seconds,
        build.cached, str(spec.path) if spec else None, build.set_aside,
    )  # fmt: skip


def _not_run(k: KernelBuild, resolved: Resolved, spec_path: Path) -> KernelCheck | None:
    name, line = k.decl.host_name, k.decl.line
    if k.not_modelled:
        return KernelCheck(name, line, KernelStatus.NOT_MODELLED, detail=", ".join(k.not_modelled))
    if k.error is not None and k.error.message == GAVE_UP:
        return KernelCheck(name, line, KernelStatus.UNKNOWN, detail=GAVE_UP)
    if not k.built:
        return KernelCheck(name, line, KernelStatus.COMPILE_ERROR, detail=str(k.error))
    entry = resolved.get(name)
    if entry is None:
        return KernelCheck(
            name, line, KernelStatus.NO_LAUNCH_SPEC,
            detail=f"add it to {spec_path} (docs/check-kernel.md): grid, buffers, reference",
        )  # fmt: skip
    if isinstance(entry, str):
        detail = f"{entry}; give buffers and sizes in {spec_path} (docs/check-kernel.md)"
        return KernelCheck(name, line, KernelStatus.NO_LAUNCH_SPEC, detail=detail)
    return None


def _run_all(
    build: FileBuild,
    kernels: Sequence[KernelBuild],
    resolved: Resolved,
    listing: Listing,
    runners: KernelRunners,
    scratch: Path,
) -> dict[str, KernelCheck]:
    assert build.library is not None
    entries = {}
    for k in kernels:
        entry = resolved[k.decl.host_name]
        assert not isinstance(entry, str)
        entries[k.decl.host_name] = entry
    cases = [
        KernelCase(name, dtype, case, listing.kernels[name][1])
        for name, (case, dtype) in entries.items()
    ]
    answers = runners.references(cases)
    out = {}
    driver = runners.builder.driver()
    for k in kernels:
        case, _ = entries[k.decl.host_name]
        out[k.decl.host_name] = _check_kernel(
            k, case, listing, answers[k.decl.host_name], build, driver, runners, scratch
        )
    return out


def _check_kernel(
    k: KernelBuild,
    case: LaunchCase,
    listing: Listing,
    answers: Sequence[KernelAnswer],
    build: FileBuild,
    driver: Path,
    runners: KernelRunners,
    scratch: Path,
) -> KernelCheck:
    name, line = k.decl.host_name, k.decl.line
    for s in case.structs:
        if s.type in build.probe_errors or s.type not in listing.structs:
            why = build.probe_errors.get(s.type, "its layout is unknown")
            return KernelCheck(name, line, KernelStatus.FAILED, (
                Finding("launch spec", f"struct {s.name} ({s.type}): {why}"),))  # fmt: skip
    index = listing.kernels[name][0]
    runs: list[Run] = []
    for answer in answers:
        for schedule, seed in SCHEDULES:
            runs.append(_run_of(case, listing, answer, index, schedule, seed))
    outcome = runners.run(driver, build.library or Path(), runs, scratch)
    if outcome.failure is not None:
        return KernelCheck(name, line, KernelStatus.FAILED, (Finding("all", outcome.failure),))
    findings, reported = [], []
    out_slot = case.buffers.index(OUTPUT) if OUTPUT in case.buffers else 0
    results = iter(outcome.results)
    for answer in answers:
        scheduled = [
            ScheduledRun(schedule_name(s, seed), r.status, r.why, r.reported, r.buffers[out_slot])
            for (s, seed), r in zip(SCHEDULES, [next(results) for _ in SCHEDULES], strict=True)
        ]
        finding, message = judge(
            answer.label, scheduled, reference=answer.reference or None,
            torch_error=answer.error, dtype=answer.output_dtype,
        )  # fmt: skip
        if finding is not None:
            findings.append(finding)
        if message is not None:
            reported.append(f"{answer.label}: {message}")
    status = KernelStatus.FAILED if findings else KernelStatus.OK
    return KernelCheck(name, line, status, tuple(findings), len(answers), reported=tuple(reported))


def _run_of(
    case: LaunchCase,
    listing: Listing,
    answer: KernelAnswer,
    index: int,
    schedule: kernel_run.Schedule,
    seed: int,
) -> Run:
    buffers = []
    errors = -1
    structs = {s.name: s for s in case.structs}
    for i, b in enumerate(case.buffers):
        if b == OUTPUT:
            buffers.append(bytes([POISON]) * answer.output_bytes)
        elif b == ERROR_BUFFER:
            buffers.append(bytes(listing.error_size))
            errors = i
        elif b in structs:
            layout = listing.structs[structs[b].type]
            buffers.append(layout.pack(answer.structs[b]))
        else:
            buffers.append(answer.tensors[b])
    grid, tptg = answer.grid, answer.tptg
    dispatch = Dispatch(
        index, case.grid_kind is GridKind.THREADS, (grid[0], grid[1], grid[2]),
        (tptg[0], tptg[1], tptg[2]), schedule, seed, tuple(range(len(buffers))),
    )  # fmt: skip
    return Run(tuple(buffers), (dispatch,), errors)


# ---- the entry point the command shares ------------------------------------------------


def find_metal(settings: Settings, file: str) -> Path:
    """``file`` as a path, else a kernels/*.metal file of the tree by name or stem."""
    given = Path(file)
    if given.is_file():
        return given.resolve()
    folder = settings.root / "aten/src/ATen/native/mps/kernels"
    for candidate in (folder / file, folder / f"{file}.metal"):
        if candidate.is_file():
            return candidate.resolve()
    raise NoKernelFileError(file, folder)


def runners_for(settings: Settings) -> KernelRunners:
    compiler = cxx.find_compiler(settings.math.cxx)
    package = reference.torch_package(settings.tree)
    headers = cxx.find_c10_headers(settings.root, package)
    cache = settings.cache_dir / "kernel"
    bfloat = cxx_bfloat.find_bfloat_compiler(settings.math.cxx, cache)
    builder = KernelBuilder(compiler, headers, settings.root, cache, bfloat)

    def references(cases: list[KernelCase]) -> dict[str, tuple[KernelAnswer, ...]]:
        return reference.kernel_references(settings.tree, cases, cache)

    return KernelRunners(builder, references)


def run_check(
    settings: Settings,
    file: str,
    *,
    kernels: Sequence[str] = (),
    runners: KernelRunners | None = None,
) -> KernelFileReport:
    metal = find_metal(settings, file)
    spec_path = launch.spec_path(settings.kernel_specs, metal)
    spec = launch.read_spec(spec_path) if spec_path.is_file() else None
    runners = runners or runners_for(settings)
    return check_file(
        metal, spec, spec_path, runners, root=settings.root,
        scratch=settings.cache_dir / "kernel" / "run", kernels=kernels,
        launches=host_launch.read_launches(settings.root),
    )  # fmt: skip
