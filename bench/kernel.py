"""The check-kernel benchmark (issue 29): each kernel fixture file's build, cold and cached;
a 2048 x 2048 softmax (one simdgroup per row, 256 threads a threadgroup) run under each
schedule; and, when ``MPS_PIPELINE_UPSTREAM_KERNELS`` names a folder of upstream's
``kernels/*.metal`` (with their headers; never kept in this repository), the share of its
files, matrix-multiply and attention ones aside, whose kernels compile through the shim
(each file checked whole as check-kernel checks one without launch entries: no kernel
generated), and the three slowest of them built again into an object of one kernel, as a
check of named kernels compiles them.

Called from ``bench/__main__.py`` (``bench_kernel``), which passes its Figure and Result types.
"""

from __future__ import annotations

import dataclasses
import os
import random
import resource
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.math import wheel_build
from pipeline.run import cxx, cxx_bfloat, kernel_run
from pipeline.run.kernel_build import KernelBuilder
from pipeline.run.kernel_unit import Probe

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "metal_kernel"
KERNELS = "aten/src/ATen/native/mps/kernels"
UPSTREAM_ENV = "MPS_PIPELINE_UPSTREAM_KERNELS"
# the files left out of the upstream share: matrix multiplies and attention
_LEFT_OUT = ("Gemm", "GroupedMM", "ScaledMM", "Linear", "Attention", "LinearAlgebra", "Quantized")
SIDE = 2048
ROWS_PER_GROUP = 8  # 256 threads: one simdgroup per row


def _softmax_run(builder: KernelBuilder, schedule: kernel_run.Schedule, seed: int) -> Any:
    """The SoftMax fixture's softmax_rows_float_int on a SIDE x SIDE float matrix."""
    metal = builder.root / KERNELS / "SoftMax.metal"
    build = builder.build(
        metal, (Probe("SoftmaxArgs<int>", ("col_stride", "cols", "row_stride", "rows")),)
    )
    assert build.library is not None
    listing = kernel_run.list_object(builder.driver(), build.library)
    rng = random.Random(0)
    data = struct.pack(f"<{SIDE * SIDE}f", *(rng.gauss(0, 1) for _ in range(SIDE * SIDE)))
    args = listing.structs["SoftmaxArgs<int>"].pack(
        {"rows": SIDE, "cols": SIDE, "row_stride": SIDE, "col_stride": 1}
    )
    index = listing.kernels["softmax_rows_float_int"][0]
    dispatch = kernel_run.Dispatch(
        index, False, (SIDE // ROWS_PER_GROUP, 1, 1), (256, 1, 1), schedule, seed, (0, 1, 2)
    )
    return build, kernel_run.Run((data, bytes(SIDE * SIDE * 4), args), (dispatch,))


@dataclass(frozen=True)
class _FileTimes:
    """One upstream file's check: wall seconds cold, the compiler's CPU seconds cold (every
    subprocess), our own process's CPU seconds cold (reading declarations, attributing
    errors), wall seconds cached."""

    wall: float
    cpu: float
    own_cpu: float
    cached: float

    def line(self, name: str) -> str:
        return (
            f"{name} {self.wall:.2f} s ({self.cpu:.2f} + {self.own_cpu:.2f} CPU-s), "
            f"cached {self.cached:.3f} s"
        )


def _upstream_share(compiler: cxx.Compiler, headers: cxx.Headers, folder: Path, work: Path):
    """(files whose kernels all compile, files, one line per failing file, each file's
    times, one kernel per file that compiled), with the folder's own c10/metal headers
    when it has them (a checkout does)."""
    if (folder / "c10" / "metal").is_dir():
        headers = cxx.Headers(folder, f"{folder}'s c10/metal")
    files = [
        p for p in sorted((folder / KERNELS).glob("*.metal"))
        if not any(p.stem.startswith(x) for x in _LEFT_OUT)
    ]  # fmt: skip
    bfloat = cxx_bfloat.find_bfloat_compiler(None, work / "upstream")
    builder = KernelBuilder(compiler, headers, folder, work / "upstream", bfloat)
    ok, failed, times, one = 0, [], {}, {}
    for path in files:
        start, start_cpu, start_own = time.perf_counter(), _child_cpu(), _own_cpu()
        # as check-kernel builds a file none of whose kernels has a launch entry: every
        # kernel checked by the compiler's front end, none generated
        build = builder.build(path, run=frozenset())
        # timed here, not build.seconds: that is the returned build's alone, without the
        # built-in bfloat compiler's retry when the class's build came out no worse
        wall, cpu = time.perf_counter() - start, _child_cpu() - start_cpu
        own = _own_cpu() - start_own
        start = time.perf_counter()
        # the same build again: its record, no compiler
        builder.build(path, run=frozenset())
        times[path.stem] = _FileTimes(wall, cpu, own, time.perf_counter() - start)
        built = [k for k in build.kernels if k.built]
        if built:
            one[path.stem] = built[0].decl.host_name
        if build.kernels and len(built) == len(build.kernels):
            ok += 1
        else:
            why = next(
                (str(k.error or k.not_modelled) for k in build.kernels if not k.built),
                str(build.error or "no kernel found"),
            )
            failed.append(f"{path.name}: {len(built)}/{len(build.kernels)} kernels; {why[:160]}")
    return ok, len(files), failed, times, one


def _one_kernel(
    compiler: cxx.Compiler, headers: cxx.Headers, folder: Path, work: Path, one: dict[str, str]
) -> dict[str, float]:
    """Cold seconds of each file of ``one`` built for its one kernel, as a check of that
    kernel (migrate's, pr-report's) compiles it."""
    if (folder / "c10" / "metal").is_dir():
        headers = cxx.Headers(folder, f"{folder}'s c10/metal")
    builder = KernelBuilder(compiler, headers, folder, work / "upstream-one")
    return {
        stem: builder.build(folder / KERNELS / f"{stem}.metal", only=frozenset({name})).seconds
        for stem, name in one.items()
    }


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _upstream_figures(
    compiler: cxx.Compiler,
    headers: cxx.Headers,
    folder: Path,
    work: Path,
    figure: Callable[..., Any],
    figures: list[Any],
    notes: list[str],
    data: dict[str, Any],
) -> tuple[list[Any], list[str]]:
    """The upstream share and each file's times, with the load average around them: on
    the shared 2-CPU machine the wall times are mostly the wait for a CPU."""
    load_before = os.getloadavg()[0]
    ok, total, failed, times, one = _upstream_share(compiler, headers, folder, work)
    load_after = os.getloadavg()[0]
    share = 100.0 * ok / total if total else 0.0
    cold = sorted(t.wall for t in times.values())
    slow = sorted(times, key=lambda n: times[n].wall, reverse=True)[:3]
    # the slowest files again, each for one kernel: what a check of a few kernels compiles
    single = _one_kernel(compiler, headers, folder, work, {n: one[n] for n in slow if n in one})
    figures = figures + [
        figure("upstream files compiling", share, "%", goal=">= 70%", headline=True),
        figure("  upstream file cold, median", cold[len(cold) // 2] if cold else 0.0, "s",
               goal="<= 3 s"),
        figure("  upstream file cold, slowest", cold[-1] if cold else 0.0, "s", goal="<= 3 s"),
        # a large file's check runs a compiler on each CPU: its CPU time is more than its wall
        figure("  upstream file cold, compiler CPU, slowest",
               max((t.cpu for t in times.values()), default=0.0), "s"),
        figure("  upstream file cold, own CPU, slowest",
               max((t.own_cpu for t in times.values()), default=0.0), "s"),
        figure("  upstream file cached, slowest",
               max((t.cached for t in times.values()), default=0.0), "s",
               goal="0 (no compiler)"),
        figure("  one kernel of the slowest files, cold, slowest",
               max(single.values(), default=0.0), "s", goal="<= 3 s"),
    ]  # fmt: skip
    notes = notes + [
        f"{ok} of {total} upstream files compile whole (matrix-multiply and attention "
        f"files aside), each checked whole with no kernel generated; load average "
        f"{load_before:.1f} at the start, {load_after:.1f} at the end",
        "the same files built for one kernel each (a check of named kernels compiles only "
        "those): " + ", ".join(f"{n} ({one[n]}) {t:.1f} s" for n, t in single.items()),
        *failed,
        "each file cold (wall, compiler + own CPU) and cached: "
        + "; ".join(times[n].line(n) for n in sorted(times)),
    ]
    data["upstream"] = {
        "ok": ok, "total": total, "failed": failed, "one_kernel": single,
        "load": [load_before, load_after],
        "files": {n: dataclasses.asdict(t) for n, t in times.items()},
    }  # fmt: skip
    return figures, notes


def run(ctx: Any, figure: Callable[..., Any], result: Callable[..., Any]) -> Any:
    compiler, headers = wheel_build()
    work = ctx.work / "kernel"
    root = work / "tree"
    shutil.copytree(FIXTURES, root)
    builds: dict[str, tuple[float, float]] = {}
    for path in sorted((root / KERNELS).glob("*.metal")):
        cache = work / f"objects-{path.stem}"
        builder = KernelBuilder(compiler, headers, root, cache)
        builder.driver()
        start = time.perf_counter()
        cold = builder.build(path)
        cold_s = time.perf_counter() - start
        start = time.perf_counter()
        again = builder.build(path)
        builds[path.stem] = (cold_s, time.perf_counter() - start)
        assert not cold.cached and again.cached
    builder = KernelBuilder(compiler, headers, root, work / "objects-softmax")
    runs: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for schedule, seed in kernel_run.SCHEDULES:
        build, one = _softmax_run(builder, schedule, seed)
        times, cpus = [], []
        for _ in range(ctx.repeats(3)):
            start, start_cpu = time.perf_counter(), _child_cpu()
            outcome = kernel_run.run(builder.driver(), build.library, [one], work / "scratch")
            times.append(time.perf_counter() - start)
            cpus.append(_child_cpu() - start_cpu)
            assert outcome.failure is None and outcome.results[0].status == 0
        name = kernel_run.schedule_name(schedule, seed)
        runs[name], cpu[name] = sorted(times)[len(times) // 2], sorted(cpus)[len(cpus) // 2]
    figures = [
        figure(f"{name}.metal, cold", cold, "s", goal="<= 3 s", headline=name == "SoftMax")
        for name, (cold, _) in builds.items()
    ] + [
        figure(f"{name}.metal, cached", cached, "s", goal="0 (no compiler)")
        for name, (_, cached) in builds.items()
    ] + [
        figure(f"2048x2048 softmax, {name}, driver CPU", cpu[name], "s", goal="<= 0.2 s",
               headline=True)
        for name in runs
    ] + [
        figure(f"2048x2048 softmax, {name}, wall", t, "s") for name, t in runs.items()
    ]  # fmt: skip
    notes = [
        "driver CPU is the driver process's user + system time (getrusage of the children): "
        f"load, buffers in, the dispatch of {SIDE // ROWS_PER_GROUP * 256} fibers (4 "
        "SIMD-group meetings each), buffers out; wall adds process start, the 16 MB request "
        "and response files and the wait for a CPU, which grows with the machine's load",
    ]
    data: dict[str, Any] = {"builds": builds, "softmax_runs": runs, "softmax_cpu": cpu}
    upstream = os.environ.get(UPSTREAM_ENV)
    if upstream:
        figures, notes = _upstream_figures(
            compiler, headers, Path(upstream), work, figure, figures, notes, data
        )
    else:
        notes.append(f"upstream share not measured: set {UPSTREAM_ENV} to a checkout's root")
    return result(
        name="kernel",
        title=f"check-kernel ({compiler.identity})",
        measures=(
            "each kernel fixture file (tests/fixtures/metal_kernel) built cold and cached; "
            "the SoftMax fixture's simdgroup-per-row kernel on a 2048x2048 float matrix under "
            "each schedule, median of repeated runs"
        ),
        figures=tuple(figures),
        notes=tuple(notes),
        data=data,
    )
