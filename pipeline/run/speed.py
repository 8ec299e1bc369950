"""The kernel micro-benchmark: a script this module writes, run by the interpreter that has the
build's torch, every benchmark in that one process (torch imported once).

Each operator is timed in each of its dtypes over a few shapes (small, medium, large, and the
skinny ``N×1`` and ``1×N`` where reductions regressed, pytorch#189464), each contiguous,
strided (every other element of a tensor twice as wide, so the kernel takes its strided
path) and, for 2-D shapes, transposed (a contiguous tensor's ``.t()``: a non-contiguous view
with swapped strides). A reduction is also timed over each dimension in turn (shape
``medium/dim=1``). Every call is followed by a device synchronisation inside the timed
statement: a loop that synchronises once at its end times the queue, not the kernel, and
flatters whichever side queues faster (pytorch#181451). On device ``mps`` on the Macs
(``cpu`` in tests and without a GPU).
Each benchmark is timed in blocks of calls (:data:`BLOCK` and the constants after it: until
the blocks' spread is small, with a cap), on one thread, as ``torch.utils.benchmark``'s
Timer times, with the standard library's ``timeit`` that Timer runs on the CPU.
The script writes ``speed.json`` (:mod:`pipeline.results.speed` reads it): per benchmark
the seconds per call of at least ``repeats`` repeated blocks. An operator or dtype the
device cannot run is recorded with its error, not timed, and the others go on. A device the
interpreter's torch cannot use at all (``mps`` off a Mac with Apple silicon) stops the script
before anything is timed: :class:`NoDeviceError`, said once.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.errors import ConfigError, NoDeviceError, PipelineError
from pipeline.fsio import write_atomic
from pipeline.results.device import Device
from pipeline.results.speed import (
    SPEED_JSON,
    Measurement,
    NotTimed,
    UpstreamFigure,
    read_rows,
)

SCRIPT_NAME = "speed_bench.py"
# elements of each shape: a launch-bound size, a cache-sized one, a bandwidth-bound one
SHAPES: dict[str, tuple[int, ...]] = {
    "small": (256,),
    "medium": (256, 256),
    "large": (1024, 1024),
    "skinny-column": (65536, 1),
    "skinny-row": (1, 65536),
}
LAYOUTS = ("contiguous", "strided", "transposed")
# How long each benchmark is timed: blocks of at least BLOCK seconds (the timer's own loop
# then costs a few per cent of the fastest call), at least ``repeats`` of them and
# MIN_RUN_TIME seconds in all; then more until their spread (interquartile range over the
# median) is under SPREAD, or MAX_RUN_TIME is spent. A quiet machine stops early; a noisy
# one is timed to the cap, and its spread is reported. Every benchmark took 0.2 s plus
# torch's block sizing before (blocked_autorange): 44 s for one operator on the sandbox.
BLOCK = 0.005
MIN_RUN_TIME = 0.02
MAX_RUN_TIME = 0.1
SPREAD = 0.05
# the script's exit status when torch cannot use the device (told to it in the spec)
NO_DEVICE_EXIT = 3
# and when the interpreter has no torch at all
NO_TORCH_EXIT = 4

SCRIPT = '''\
"""Written by mps-pipeline (pipeline/run/speed.py): kernel micro-benchmarks, timed in
blocks of calls with timeit. Usage: python speed_bench.py SPEC.json OUT.json"""
import json
import os
import statistics
import sys
import timeit

spec = json.load(open(sys.argv[1]))
try:
    import torch
except ImportError:
    sys.exit(spec["no_torch_exit"])
device = spec["device"]
if device == "mps" and not torch.backends.mps.is_available():
    where = f"torch {torch.__version__} ({sys.executable})"
    if torch.backends.mps.is_built():
        print(f"{where} finds no MPS device (it needs Apple silicon and macOS 12.3 or later)",
              file=sys.stderr)
    else:
        print(f"{where} was built without MPS, which needs a Mac with Apple silicon",
              file=sys.stderr)
    sys.exit(spec["no_device_exit"])
sync = torch.mps.synchronize if device == "mps" else (lambda: None)
torch.manual_seed(0)
torch.set_num_threads(1)  # as torch.utils.benchmark's Timer(num_threads=1) times


def resolve(call):
    target = torch
    for part in call.split("."):
        target = getattr(target, part)
    return target


def tensor(shape, dtype, layout):
    if layout == "transposed":  # made as the transpose's shape, then viewed back
        return tensor(shape[::-1], dtype, "contiguous").t()
    wide = list(shape[:-1]) + [shape[-1] * 2] if layout == "strided" else list(shape)
    # values in (0.05, 0.95): inside the domain of log, erfinv, atanh, sqrt...
    base = torch.rand(wide, device=device) * 0.9 + 0.05
    if dtype == torch.bool:
        value = base > 0.5
    elif dtype.is_floating_point or dtype.is_complex:
        value = base.to(dtype)
    else:
        value = (base * 10).to(dtype) + 1
    return value[..., ::2] if layout == "strided" else value


def cases():
    """(op, dtype name, shape label, shape, layout, dim) of every benchmark."""
    for op in spec["ops"]:
        for dtype_name in op["dtypes"]:
            for shape_name, shape in spec["shapes"].items():
                dims = range(len(shape)) if op["reduction"] else [None]
                for layout in spec["layouts"]:
                    if layout == "transposed" and len(shape) != 2:
                        continue  # a 1-D tensor has no transpose
                    for dim in dims:
                        label = shape_name if dim is None else f"{shape_name}/dim={dim}"
                        yield op, dtype_name, label, shape, layout, dim


def bound(call, dim):
    fn = resolve(call)
    return fn if dim is None else (lambda *xs: fn(*xs, dim=dim))


def spread(times):
    """Interquartile range over the median, as pipeline.results.speed reports it."""
    q = statistics.quantiles(times, n=4, method="inclusive")
    return (q[2] - q[0]) / statistics.median(times)


def timed(timer):
    """Seconds per call of each block: blocks of at least spec["block"] seconds, at least
    spec["repeats"] of them and spec["min_run_time"] in all, then more until their spread
    is under spec["spread"] or spec["max_run_time"] is spent."""
    number = 1
    while True:  # calls per block, by tens: the first blocks also warm up
        took = timer.timeit(number)
        if took >= spec["block"] / 10 or number >= 10**6:
            break
        number *= 10
    number = max(number, int(spec["block"] * number / took) + 1)
    times, total = [], 0.0
    while True:
        took = timer.timeit(number)
        times.append(took / number)
        total += took
        if len(times) < spec["repeats"]:
            continue
        if total >= spec["max_run_time"]:
            return times
        if total >= spec["min_run_time"] and spread(times) < spec["spread"]:
            return times


results = []
for op, dtype_name, label, shape, layout, dim in cases():
    row = {"op": op["op"], "dtype": dtype_name, "shape": label,
           "layout": layout, "elements": 1}
    for n in shape:
        row["elements"] *= n
    try:
        fn = bound(op["call"], dim)
        dtype = getattr(torch, dtype_name)
        inputs = [tensor(shape, dtype, layout) for _ in range(op["arity"])]
        fn(*inputs)
        sync()
        # the standard library's timer, as torch.utils.benchmark's runs it on the CPU
        # without its ~1 ms of bookkeeping per block
        timer = timeit.Timer("fn(*inputs); sync()",
                             globals={"fn": fn, "inputs": inputs, "sync": sync})
        row["times"] = timed(timer)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    results.append(row)

# what the process really had of the switches it was asked to run under
env = {name: os.environ.get(name) for name in spec["env"]}
json.dump({"schema": 1, "device": device, "torch": torch.__version__, "env": env,
           "results": results}, open(sys.argv[2], "w"), indent=1)
'''


@dataclass(frozen=True)
class BenchOp:
    """One operator to time: its name, the torch callable (``special.erfcx``), how many
    tensors it takes and the dtypes."""

    op: str
    call: str
    arity: int
    dtypes: tuple[str, ...]
    reduction: bool = False  # takes ``dim=``: timed over each dimension too


@dataclass(frozen=True)
class SpeedRequest:
    python: str
    ops: tuple[BenchOp, ...]
    folder: Path  # where the script, its spec and speed.json go
    device: str = "mps"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: dict(SHAPES))
    min_run_time: float = MIN_RUN_TIME
    repeats: int = 5  # blocks at least
    max_run_time: float = MAX_RUN_TIME
    spread: float = SPREAD  # the blocks' spread under which a benchmark stops early
    timeout: float = 3600.0
    # added to the script's environment: a switch forcing the MPSGraph path, read once per
    # process (pipeline.tree.switches)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SpeedResult:
    path: Path  # speed.json
    device: str
    measurements: tuple[Measurement, ...]
    errors: tuple[NotTimed, ...]
    machine: Device | None = None  # what the Mac's commands said (mps only)
    # switch -> the same benchmarks run with it set: the operator's forced MPSGraph path
    forced: Mapping[str, tuple[Measurement, ...]] = field(default_factory=dict)
    # test/bench_mps_ops.py's figures for the operators it covers; why it could not run
    upstream: tuple[UpstreamFigure, ...] = ()
    upstream_error: str = ""


def write_script(folder: Path) -> Path:
    """The benchmark script, written into ``folder`` (atomically); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SCRIPT_NAME
    write_atomic(path, SCRIPT)
    return path


def run(request: SpeedRequest) -> SpeedResult:
    """Write the script and its spec, run it, read what it measured."""
    if not request.ops:
        raise PipelineError("speed: no operator to benchmark")
    script = write_script(request.folder)
    spec = request.folder / "speed_spec.json"
    out = request.folder / SPEED_JSON
    write_atomic(
        spec,
        json.dumps(
            {
                "device": request.device,
                "ops": [asdict(op) for op in request.ops],
                "shapes": {k: list(v) for k, v in request.shapes.items()},
                "layouts": list(LAYOUTS),
                "min_run_time": request.min_run_time,
                "max_run_time": request.max_run_time,
                "spread": request.spread,
                "block": BLOCK,
                "repeats": request.repeats,
                "no_device_exit": NO_DEVICE_EXIT,
                "no_torch_exit": NO_TORCH_EXIT,
                "env": sorted(request.env),
            },
            indent=1,
        ),
    )
    try:
        proc = subprocess.run(
            [request.python, str(script), str(spec), str(out)],
            capture_output=True, text=True, timeout=request.timeout, check=False,
            env={**os.environ, **request.env},
        )  # fmt: skip
    except FileNotFoundError:
        raise PipelineError(f"speed: python={request.python} not found") from None
    except subprocess.TimeoutExpired:
        raise PipelineError(f"speed: the benchmark ran over {request.timeout:.0f} s") from None
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    if proc.returncode == NO_TORCH_EXIT:
        raise ConfigError(
            f"python={request.python} cannot import torch, which speed needs to time the "
            "kernels: point python= (--python, MPS_PIPELINE_PYTHON) at the interpreter your "
            "checkout is built into"
        )
    if proc.returncode == NO_DEVICE_EXIT:
        raise NoDeviceError(request.device, last)
    if proc.returncode != 0:
        raise PipelineError(f"speed: the benchmark script failed (exit {proc.returncode}): {last}")
    device, rows = read_rows(out)
    measurements = tuple(r for r in rows if isinstance(r, Measurement))
    errors = tuple(r for r in rows if isinstance(r, NotTimed))
    return SpeedResult(out, device, measurements, errors)
