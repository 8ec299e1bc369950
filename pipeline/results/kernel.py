"""check-kernel's verdicts: one kernel's runs under every schedule, against torch on CPU.

A kernel's runs of one input must give the same bytes under every schedule; when they do
not, the finding is a race (a missing barrier?), named with the kernel and the input. Then
its output is compared with torch's element by element, with check-math's tolerances
(:func:`pipeline.results.math.compare_value`). An input torch refuses (an index out of
range) must be refused by the kernel too, through TORCH_REPORT_ERROR; the message it gave is
shown. A fault names the buffer and the thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from pipeline.results.math import TOLERANCES, compare_value, decode, show

SCHEMA = 1  # of check-kernel --json (pipeline.report.kernel.to_json)
SHOWN = 3  # differing elements quoted per finding


class KernelStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"
    COMPILE_ERROR = "compile error"
    NOT_MODELLED = "not modelled"
    NO_LAUNCH_SPEC = "no launch spec"
    # whether it compiles is not known: its build gave up (rounds spent on other kernels'
    # errors) before any error was its own; neither a pass nor a failure
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Finding:
    input: str  # the input's label: "large magnitudes, length 1025"
    message: str


@dataclass(frozen=True)
class KernelCheck:
    kernel: str  # host name
    line: int
    status: KernelStatus
    findings: tuple[Finding, ...] = ()
    inputs: int = 0  # inputs run, each under every schedule
    detail: str = ""  # the compile error, what is not modelled, where the spec goes
    reported: tuple[str, ...] = ()  # TORCH_REPORT_ERROR messages the kernel gave, as expected

    @property
    def failed(self) -> bool:
        return self.status in (KernelStatus.FAILED, KernelStatus.COMPILE_ERROR)


@dataclass(frozen=True)
class KernelFileReport:
    file: str
    kernels: tuple[KernelCheck, ...]
    compiler: str
    headers: str
    seconds: float
    cached: bool
    spec: str | None  # the launch spec read, if any
    set_aside: tuple[str, ...] = ()

    @property
    def checked(self) -> int:
        return sum(1 for k in self.kernels if k.status in (KernelStatus.OK, KernelStatus.FAILED))

    @property
    def failed(self) -> bool:
        return any(k.failed for k in self.kernels)


@dataclass(frozen=True)
class KernelsSection:
    """check-kernel of a PR's changed kernel files (results.json's ``kernels``): each file's
    report and the files that could not be checked (``file: why``); or, with ``skipped``,
    why it could not run here at all (no torch, no compiler)."""

    files: tuple[KernelFileReport, ...] = ()
    errors: tuple[str, ...] = ()
    skipped: str | None = None


@dataclass(frozen=True)
class ScheduledRun:
    """One input's run under one schedule, as the driver left it."""

    schedule: str
    status: int
    why: str
    reported: str
    output: bytes


def judge(
    label: str,
    runs: Sequence[ScheduledRun],
    *,
    reference: bytes | None,
    torch_error: str | None,
    dtype: str,
) -> tuple[Finding | None, str | None]:
    """(the finding for one input, or None; the error message the kernel rightly gave)."""
    first = runs[0]
    for r in runs:
        if r.status != 0:
            return Finding(label, f"{r.schedule} schedule: {r.why}"), None
    differ = [r.schedule for r in runs[1:] if r.output != first.output]
    if differ:
        where = _first_difference(
            first.output, next(r for r in runs if r.output != first.output).output, dtype
        )
        return Finding(
            label,
            f"a race: missing barrier? the output under {first.schedule} and "
            f"{', '.join(differ)} schedules differ ({where})",
        ), None
    reported = first.reported.strip()
    if torch_error is not None:
        if not reported:
            return Finding(
                label, f"torch refuses it ({torch_error}); the kernel reported no error"
            ), None
        return None, reported.splitlines()[0]
    if reported:
        return Finding(
            label, f"the kernel reported an error torch does not: {reported.splitlines()[0]}"
        ), None
    if reference is None:
        return Finding(label, "no torch reference"), None
    return _compare(label, first.output, reference, dtype), None


def _first_difference(a: bytes, b: bytes, dtype: str) -> str:
    va, vb = decode(a, dtype), decode(b, dtype)
    for i, (x, y) in enumerate(zip(va, vb, strict=False)):
        if show(x) != show(y):
            return f"element {i}: {show(x)} vs {show(y)}"
    return "their bytes"


def _compare(label: str, output: bytes, reference: bytes, dtype: str) -> Finding | None:
    if output == reference:
        return None
    mine, ref = decode(output, dtype), decode(reference, dtype)
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    bad = []
    for i, (k, r) in enumerate(zip(mine, ref, strict=False)):
        # the common case first, in the loop's own terms (a million elements is usual)
        if k == r or (isinstance(k, float) and abs(k - r) <= atol + rtol * abs(r)):
            continue
        if compare_value(k, r, dtype) is not None:
            bad.append(i)
    if not bad:
        return None
    quoted = "; ".join(f"[{i}] kernel {show(mine[i])}, torch {show(ref[i])}" for i in bad[:SHOWN])
    return Finding(label, f"{len(bad)} of {len(ref)} elements differ from torch: {quoted}")
