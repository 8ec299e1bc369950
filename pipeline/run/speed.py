"""The kernel micro-benchmark: a script this module writes, run by the interpreter that has the
build's torch, with ``torch.utils.benchmark``.

Each operator is timed in each of its dtypes over a few shapes (small, medium, large), each
contiguous and strided (every other element of a tensor twice as wide, so the kernel takes
its strided path), on device ``mps`` on the Macs (``cpu`` in tests and without a GPU).
The script writes ``speed.json`` (:mod:`pipeline.results.speed` reads it): per benchmark
the seconds per call of at least ``repeats`` repeated blocks. An operator or dtype the
device cannot run is recorded with its error, not timed, and the others go on. A device the
interpreter's torch cannot use at all (``mps`` off a Mac with Apple silicon) stops the script
before anything is timed: :class:`NoDeviceError`, said once.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.errors import NoDeviceError, PipelineError
from pipeline.fsio import write_atomic
from pipeline.results.speed import SPEED_JSON, Measurement, read

SCRIPT_NAME = "speed_bench.py"
# elements of each shape: a launch-bound size, a cache-sized one, a bandwidth-bound one
SHAPES: dict[str, tuple[int, ...]] = {"small": (256,), "medium": (256, 256), "large": (1024, 1024)}
LAYOUTS = ("contiguous", "strided")
# the script's exit status when torch cannot use the device (told to it in the spec)
NO_DEVICE_EXIT = 3

SCRIPT = '''\
"""Written by mps-pipeline (pipeline/run/speed.py): kernel micro-benchmarks with
torch.utils.benchmark. Usage: python speed_bench.py SPEC.json OUT.json"""
import json
import sys

import torch
from torch.utils import benchmark

spec = json.load(open(sys.argv[1]))
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


def resolve(call):
    target = torch
    for part in call.split("."):
        target = getattr(target, part)
    return target


def tensor(shape, dtype, layout):
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


results = []
for op in spec["ops"]:
    for dtype_name in op["dtypes"]:
        for shape_name, shape in spec["shapes"].items():
            for layout in spec["layouts"]:
                row = {"op": op["op"], "dtype": dtype_name, "shape": shape_name,
                       "layout": layout, "elements": 1}
                for n in shape:
                    row["elements"] *= n
                try:
                    fn = resolve(op["call"])
                    dtype = getattr(torch, dtype_name)
                    inputs = [tensor(shape, dtype, layout) for _ in range(op["arity"])]
                    fn(*inputs)
                    sync()
                    timer = benchmark.Timer(
                        stmt="fn(*inputs); sync()",
                        globals={"fn": fn, "inputs": inputs, "sync": sync},
                        num_threads=1,
                    )
                    m = timer.blocked_autorange(min_run_time=spec["min_run_time"])
                    times = list(m.times)
                    while len(times) < spec["repeats"]:
                        times.append(timer.timeit(m.number_per_run).median)
                    row["times"] = times
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                results.append(row)

json.dump({"schema": 1, "device": device, "torch": torch.__version__, "results": results},
          open(sys.argv[2], "w"), indent=1)
'''


@dataclass(frozen=True)
class BenchOp:
    """One operator to time: its name, the torch callable (``special.erfcx``), how many
    tensors it takes and the dtypes."""

    op: str
    call: str
    arity: int
    dtypes: tuple[str, ...]


@dataclass(frozen=True)
class SpeedRequest:
    python: str
    ops: tuple[BenchOp, ...]
    folder: Path  # where the script, its spec and speed.json go
    device: str = "mps"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: dict(SHAPES))
    min_run_time: float = 0.2  # seconds per benchmark, before the repeats are topped up
    repeats: int = 5
    timeout: float = 3600.0


@dataclass(frozen=True)
class NotTimed:
    """A benchmark the device could not run (an operator or dtype it lacks), and why."""

    op: str
    dtype: str
    shape: str
    layout: str
    error: str  # "TypeError: ..."


@dataclass(frozen=True)
class SpeedResult:
    path: Path  # speed.json
    device: str
    measurements: tuple[Measurement, ...]
    errors: tuple[NotTimed, ...]


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
                "repeats": request.repeats,
                "no_device_exit": NO_DEVICE_EXIT,
            },
            indent=1,
        ),
    )
    try:
        proc = subprocess.run(
            [request.python, str(script), str(spec), str(out)],
            capture_output=True, text=True, timeout=request.timeout, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise PipelineError(f"speed: python={request.python} not found") from None
    except subprocess.TimeoutExpired:
        raise PipelineError(f"speed: the benchmark ran over {request.timeout:.0f} s") from None
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    if proc.returncode == NO_DEVICE_EXIT:
        raise NoDeviceError(request.device, last)
    if proc.returncode != 0:
        raise PipelineError(f"speed: the benchmark script failed (exit {proc.returncode}): {last}")
    device, measurements = read(out)
    data = json.loads(out.read_text(encoding="utf-8"))
    errors = tuple(
        NotTimed(*(str(r.get(k, "")) for k in ("op", "dtype", "shape", "layout", "error")))
        for r in data["results"] if r.get("error")
    )  # fmt: skip
    return SpeedResult(out, device, measurements, errors)

