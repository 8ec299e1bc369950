"""What every benchmark shares: figures, results, the run context, timing, subprocesses."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import Settings, load_settings
from pipeline.tree import paths

REPO = Path(__file__).resolve().parent.parent
DODO = REPO / "dodo.py"
# tree path -> (package, path inside the installed package) of the torch 2.13.0 wheel
WHEEL_FILES = {
    paths.NATIVE_YAML: ("torchgen", "packaged/ATen/native/native_functions.yaml"),
    paths.COMMON_MPS: ("torch", "testing/_internal/common_mps.py"),
}
# the environment must not point the subprocesses at another tree or interpreter
_DROPPED_ENV = ("PYTHONDONTWRITEBYTECODE",)
_FLOOR_DODO = '''\
"""doit's floor: one task with no dependencies that is always up to date."""

DOIT_CONFIG = {{"backend": "sqlite3", "dep_file": {dep_file!r}, "verbosity": 2}}


def task_noop():
    return {{"actions": [lambda: None], "uptodate": [True]}}
'''


class BenchError(Exception):
    """A benchmark could not run (a command failed, an input is missing)."""


@dataclass(frozen=True)
class Figure:
    """One printed number: what it measures, its value, and the issue's goal if any."""

    label: str
    value: float
    unit: str  # "s" | "x" (ratio) | "tests" | "cases/s" | "" (a count)
    goal: str = ""
    headline: bool = False  # also shown in the closing table

    def text(self) -> str:
        if self.unit == "s":
            return f"{self.value:.3f} s"
        if self.unit == "x":
            return f"{self.value:.2f}x"
        if self.unit == "cases/s":
            return f"{self.value:,.0f} cases/s"
        if self.unit == "%":
            return f"{self.value:.1f}%"
        count = f"{self.value:,.0f}" if float(self.value).is_integer() else f"{self.value:,.1f}"
        return f"{count} {self.unit}".rstrip()


@dataclass(frozen=True)
class Result:
    """One benchmark's figures, the notes that qualify them, and raw data for bench.json."""

    name: str
    title: str
    measures: str
    figures: tuple[Figure, ...]
    notes: tuple[str, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """Where a run works, how often it repeats, and the subprocess environment."""

    work: Path  # scratch for this run, deleted at the end
    cache: Path  # kept between runs: op_db dump, bytecode, bench.json
    quick: bool
    env: Mapping[str, str]
    memo: dict[str, Any] = field(default_factory=dict, compare=False)

    def repeats(self, full: int) -> int:
        """``full`` repetitions, or about a third of them with ``--quick``."""
        return max(1, (full + 1) // 3) if self.quick else full


def make_context(work: Path, cache: Path, *, quick: bool) -> Context:
    """A context whose subprocesses run the interpreter and doit of this environment.

    The subprocesses get a bytecode cache under ``cache`` (as an installed package has one):
    with PYTHONDONTWRITEBYTECODE set, every start would compile the pipeline's modules again.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _DROPPED_ENV and not k.startswith("MPS_PIPELINE_")
    }
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return Context(work=work, cache=cache, quick=quick, env=env)


# --- timing ---------------------------------------------------------------------------------


def timed(fn: Callable[[], object], n: int) -> list[float]:
    """Wall-clock seconds of ``n`` calls of ``fn``."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def run(
    ctx: Context, argv: Sequence[str], cwd: Path, ok: Iterable[int] = (0,)
) -> subprocess.CompletedProcess[str]:
    """Run a command in the benchmark environment; BenchError unless it exits with ``ok``."""
    proc = subprocess.run(
        list(argv), cwd=cwd, env=dict(ctx.env), capture_output=True, text=True, check=False
    )
    if proc.returncode not in tuple(ok):
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise BenchError(f"`{' '.join(argv)}` exited {proc.returncode}:\n{tail}")
    return proc


def round_robin(fns: Mapping[str, Callable[[], object]], n: int) -> dict[str, list[float]]:
    """``n`` wall-clock samples of each of ``fns``, taken in turn, so that a change in the
    machine's load while they run shows in all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(n):
        for name, fn in fns.items():
            samples[name] += timed(fn, 1)
    return samples


def command(
    ctx: Context, argv: Sequence[str], cwd: Path, ok: Iterable[int] = (0,)
) -> Callable[[], object]:
    """A callable running ``argv`` (wall time then includes start-up, as a user sees it)."""
    return lambda: run(ctx, argv, cwd, ok)


def doit_command() -> list[str]:
    """The ``doit`` of this interpreter's environment."""
    script = Path(sys.executable).parent / "doit"
    if script.is_file():
        return [str(script)]
    found = shutil.which("doit")
    return [found] if found else [sys.executable, "-m", "doit"]


def _median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def settings_for(root: Path, state: Path, *, opinfo_table: Path | None) -> Settings:
    """Settings for ``root`` with state under ``state``, ignoring MPS_PIPELINE_* variables;
    check-math's cache there too, not the user's: a figure never rests on an earlier run."""
    settings = load_settings({"root": str(root), "state_dir": str(state)}, env={}, cwd=state)
    return dataclasses.replace(
        settings,
        opinfo_table=opinfo_table,
        python=sys.executable,
        math_cache=settings.cache_dir / "math",
    )


def wheel_file(package: str, rel: str) -> Path | None:
    """A file of an installed package, located without importing it (torch takes seconds)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0], rel)
    return path if path.is_file() else None
