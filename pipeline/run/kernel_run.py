"""Running a check-kernel object: its listing, the parameter structs packed as the compiler
lays them out, and the driver's runs (``metal_shim/mps_kernel_driver.cpp``, in a subprocess:
a crash of the driver is a finding, never a dead checker)."""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pipeline.errors import ConfigError


class Schedule(Enum):
    """The order runnable threads (and threadgroups) go in: mps_kernel_dispatch.h's."""

    FORWARD = 0
    REVERSE = 1
    RANDOM = 2


# every case runs under each: a right kernel gives the same bytes under all of them
SCHEDULES: tuple[tuple[Schedule, int], ...] = (
    (Schedule.FORWARD, 0),
    (Schedule.REVERSE, 0),
    (Schedule.RANDOM, 1),
)


def schedule_name(schedule: Schedule, seed: int) -> str:
    return f"random (seed {seed})" if schedule is Schedule.RANDOM else schedule.name.lower()


@dataclass(frozen=True)
class FieldLayout:
    name: str
    offset: int
    size: int
    element: int
    kind: str  # f, i, u, b


@dataclass(frozen=True)
class StructLayout:
    type: str
    size: int
    fields: Mapping[str, FieldLayout]

    def pack(self, values: Mapping[str, int | list[int]]) -> bytes:
        """The struct's bytes with ``values`` at its fields (zero elsewhere); a list fills an
        array field from its start."""
        out = bytearray(self.size)
        for name, value in values.items():
            f = self.fields[name]
            items = value if isinstance(value, list) else [value]
            if len(items) * f.element > f.size:
                raise ConfigError(f"{self.type}.{name} holds {f.size // f.element} values")
            for k, v in enumerate(items):
                code = _CODES[(f.kind, f.element)]
                struct.pack_into("<" + code, out, f.offset + k * f.element, v)
        return bytes(out)


_CODES = {
    ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
    ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
    ("b", 1): "?", ("f", 4): "f", ("f", 2): "e", ("f", 8): "d",
}  # fmt: skip


@dataclass(frozen=True)
class Listing:
    """What an object holds: kernel name -> (table index, max threads); struct layouts."""

    kernels: Mapping[str, tuple[int, int]]
    error_size: int
    structs: Mapping[str, StructLayout]


def list_object(driver: Path, library: Path) -> Listing:
    proc = subprocess.run(
        [str(driver), str(library), "--list"], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ConfigError(f"cannot list the kernels of {library}: {proc.stderr.strip()}")
    kernels: dict[str, tuple[int, int]] = {}
    error_size = 0
    sizes: dict[str, int] = {}
    fields: dict[str, dict[str, FieldLayout]] = {}
    for line in proc.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "error_size":
            error_size = int(f[1])
        elif f[0] == "field":
            owner, name = f[1], f[2]
            if not name:  # the struct's own row: its size, and a scalar's kind (``uint& n``)
                sizes[owner] = int(f[4])
            layout = FieldLayout(name, int(f[3]), int(f[4]), int(f[5]), f[6])
            fields.setdefault(owner, {})[name] = layout
        else:
            kernels[f[0]] = (len(kernels), int(f[2]))
    structs = {t: StructLayout(t, sizes[t], fields[t]) for t in sizes}
    return Listing(kernels, error_size, structs)


@dataclass(frozen=True)
class Dispatch:
    kernel: int
    threads: bool  # dispatchThreads (else dispatchThreadgroups)
    size: tuple[int, int, int]
    tptg: tuple[int, int, int]
    schedule: Schedule
    seed: int
    slots: tuple[int, ...]  # buffer index per binding


@dataclass(frozen=True)
class Run:
    """Buffers (bytes; the ``errors`` one is TORCH_REPORT_ERROR's) and the dispatches run on
    them in order."""

    buffers: tuple[bytes, ...]
    dispatches: tuple[Dispatch, ...]
    errors: int = -1


@dataclass(frozen=True)
class RunResult:
    status: int  # 0 ran to its end, 1 stopped (the message says why), 2 a fault
    why: str
    reported: str  # TORCH_REPORT_ERROR's messages, one a line
    buffers: tuple[bytes, ...]


@dataclass(frozen=True)
class Outcome:
    results: tuple[RunResult, ...]
    failure: str | None = None  # the driver itself died


def _request(runs: Sequence[Run]) -> bytes:
    chunks = [struct.pack("<I", len(runs))]
    for run in runs:
        chunks.append(struct.pack("<I", len(run.buffers)))
        for i, data in enumerate(run.buffers):
            chunks += [struct.pack("<QB", len(data), 1 if i == run.errors else 0), data]
        chunks.append(struct.pack("<I", len(run.dispatches)))
        for d in run.dispatches:
            chunks.append(
                struct.pack(
                    "<II3I3IIQI",
                    d.kernel,
                    0 if d.threads else 1,
                    *d.size,
                    *d.tptg,
                    d.schedule.value,
                    d.seed,
                    len(d.slots),
                )  # fmt: skip
            )
            chunks.append(struct.pack(f"<{len(d.slots)}I", *d.slots))
    return b"".join(chunks)


def run(
    driver: Path, library: Path, runs: Sequence[Run], scratch: Path, timeout: float = 300.0
) -> Outcome:
    scratch.mkdir(parents=True, exist_ok=True)
    stem = f"{library.stem}.{os.getpid()}"
    request, response = scratch / f"{stem}.req", scratch / f"{stem}.out"
    request.write_bytes(_request(runs))  # scratch, read once: no need to survive a crash
    try:
        proc = subprocess.run(
            [str(driver), str(library), str(request), str(response)],
            capture_output=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome((), f"the kernel did not finish within {timeout:.0f} s (a hang?)")
    finally:
        request.unlink(missing_ok=True)
    if proc.returncode != 0:
        response.unlink(missing_ok=True)
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return Outcome((), f"the driver died: {tail[0] if tail else f'exit {proc.returncode}'}")
    data = response.read_bytes()
    response.unlink(missing_ok=True)
    results, pos = [], 0
    for r in runs:
        (status,) = struct.unpack_from("<I", data, pos)
        why, pos = _text(data, pos + 4)
        reported, pos = _text(data, pos)
        out = []
        for b in r.buffers:
            # 0: the bytes sent, unchanged (the driver writes back only what a run changed)
            changed, pos = data[pos], pos + 1
            out.append(data[pos : pos + len(b)] if changed else b)
            pos += len(b) if changed else 0
        results.append(RunResult(status, why, reported, tuple(out)))
    return Outcome(tuple(results))


def _text(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", data, pos)
    return data[pos + 4 : pos + 4 + n].decode(errors="replace"), pos + 4 + n
