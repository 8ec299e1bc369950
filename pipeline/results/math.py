"""check-math's verdicts, as pure functions: a functor's outputs against torch's on CPU.

Values arrive as the bytes both sides wrote (Metal types on the kernel's side, torch dtypes on
the reference's) and are compared element by element:

- integers and bool exactly;
- floating point within the dtype's tolerance, ``|k - r| <= atol + rtol * |r|`` (the ones
  ``test_mps.py`` starts from, in :data:`TOLERANCES`), complex numbers per component;
- NaN and ±inf exactly (NaN matches NaN, inf only the same inf), reported apart from
  precision misses: ``a > b ? a : b`` loses a NaN by a kind, not by a margin;
- a disagreement on an element whose input or reference is subnormal is counted apart and
  does not fail: the GPU flushes subnormals to zero, so neither side speaks for it;
- an element the kernel faulted on (an integer division by zero: SIGFPE) is a crash, unless
  torch refuses that input too;
- the registration's output dtype against the dtype torch gives (int -> int where torch
  gives float is a finding), and against what the functor really returns (Metal's
  ``static_assert`` in REGISTER_* would not compile).

A dtype without a torch counterpart is "no reference": listed, never failed. A known,
reviewed deviation (``math.known`` in the config) is reported as known and does not fail.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypedDict

from pipeline.dtypes import METAL_TO_DTYPE

SCHEMA = 1  # of check-math --json (pipeline.report.math.to_json)
# (rtol, atol) by the dtype compared in
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-2),
    "bfloat16": (1.6e-2, 1e-2),
    "complex64": (1.3e-6, 1e-5),
    "complex32": (1e-3, 1e-2),
    "float64": (1e-7, 1e-7),
    "complex128": (1e-7, 1e-7),
}
COUNTEREXAMPLES = 3
# the smallest normal magnitude, by dtype: below it (and above 0) a value is subnormal
TINY: dict[str, float] = {
    "float32": 1.1754943508222875e-38,
    "bfloat16": 1.1754943508222875e-38,
    "float16": 6.103515625e-05,
    "complex64": 1.1754943508222875e-38,
    "complex32": 6.103515625e-05,
}
SIGNALS = {4: "SIGILL", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}

# struct formats of one element, by canonical dtype; bfloat16 is decoded by hand
_FORMATS: dict[str, str] = {
    "float32": "f",
    "float16": "e",
    "float64": "d",
    "int64": "q",
    "int32": "i",
    "int16": "h",
    "int8": "b",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "bool": "?",
    "complex64": "ff",
    "complex32": "ee",
    "complex128": "dd",
}
FLOATING = frozenset({"float32", "float16", "bfloat16", "float64"})
COMPLEX = frozenset({"complex64", "complex32", "complex128"})


class Kind(str, Enum):
    """Why one element disagrees."""

    PRECISION = "precision"
    SPECIAL = "nan/inf"
    EXACT = "value"  # integers, bool
    CRASH = "crash"
    SUBNORMAL = "subnormal"

    def __str__(self) -> str:
        return self.value


class MathSkippedJson(TypedDict):
    schema: int
    skipped: str


@dataclass(frozen=True)
class MathSkipped:
    """check-math did not run, and why (no functor, no compiler, no torch): the
    ``{"schema", "skipped"}`` document the migrate chain's stage and results.json hold."""

    reason: str

    def to_dict(self) -> MathSkippedJson:
        return {"schema": SCHEMA, "skipped": self.reason}


class Agreement(str, Enum):
    """Whether one dtype's kernel agrees with torch (a functor check's status; not the
    checklist's pass/fail/unknown, :class:`pipeline.guide.checklist.Status`)."""

    OK = "ok"
    MISMATCH = "mismatch"
    KNOWN = "known"
    NO_REFERENCE = "no reference"

    def __str__(self) -> str:
        return self.value


Value = int | float | bool | complex


def metal_dtype(metal_type: str) -> str:
    """Canonical dtype of a Metal type name; the name itself when it is none of them."""
    return METAL_TO_DTYPE.get(metal_type, metal_type)


def decode(data: bytes, dtype: str) -> list[Value]:
    """The elements of ``data`` read as ``dtype`` (canonical name)."""
    if dtype == "bfloat16":
        halves = struct.unpack(f"<{len(data) // 2}H", data[: len(data) // 2 * 2])
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    fmt = _FORMATS[dtype]
    size = struct.calcsize("<" + fmt)
    count = len(data) // size
    flat = struct.unpack(f"<{fmt * count}", data[: count * size])
    if len(fmt) == 2:
        return [complex(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    return list(flat)


def element_size(dtype: str) -> int:
    return 2 if dtype == "bfloat16" else struct.calcsize("<" + _FORMATS[dtype])


def show(value: Value) -> str:
    if isinstance(value, complex):
        return f"({show(value.real)}{'+' if not value.imag < 0 else ''}{show(value.imag)}j)"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def is_subnormal(value: Value, dtype: str) -> bool:
    tiny = TINY.get(dtype)
    if tiny is None or isinstance(value, (bool, int)):
        return False
    parts = (value.real, value.imag) if isinstance(value, complex) else (float(value),)
    return any(0 < abs(p) < tiny for p in parts)


def _float_kind(k: float, r: float, rtol: float, atol: float) -> Kind | None:
    if math.isnan(r) or math.isnan(k):
        return None if math.isnan(r) and math.isnan(k) else Kind.SPECIAL
    if math.isinf(r) or math.isinf(k):
        return None if k == r else Kind.SPECIAL
    return None if abs(k - r) <= atol + rtol * abs(r) else Kind.PRECISION


def compare_value(k: Value, r: Value, dtype: str) -> Kind | None:
    """None when the kernel's ``k`` matches torch's ``r`` in ``dtype``, else why not."""
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    if isinstance(r, complex) or isinstance(k, complex):
        kc, rc = complex(k), complex(r)
        kinds = [
            _float_kind(kc.real, rc.real, rtol, atol),
            _float_kind(kc.imag, rc.imag, rtol, atol),
        ]
        found = [x for x in kinds if x is not None]
        return (Kind.SPECIAL if Kind.SPECIAL in found else found[0]) if found else None
    if dtype in FLOATING or isinstance(r, float) or isinstance(k, float):
        return _float_kind(float(k), float(r), rtol, atol)
    return None if k == r else Kind.EXACT


@dataclass(frozen=True)
class Counterexample:
    inputs: tuple[str, ...]
    kernel: str
    torch: str
    kind: Kind


@dataclass(frozen=True)
class Known:
    """A reviewed deviation from the config: ``op`` is the kernel or operator name."""

    op: str
    dtype: str  # canonical, or "*" for every dtype
    reason: str

    def covers(self, names: Iterable[str], dtype: str) -> bool:
        return self.op in set(names) and self.dtype in ("*", dtype)


@dataclass(frozen=True)
class DtypeCheck:
    """One registration (kernel, input dtype) against torch."""

    kernel: str
    dtype: str  # the input dtype, canonical
    output: str  # the registered output dtype
    torch_dtype: str | None  # what torch gives; None without a reference
    checked: int = 0
    matched: int = 0
    precision: int = 0
    special: int = 0  # NaN / inf that differ
    exact: int = 0  # integer / bool values that differ
    crashes: int = 0
    subnormal: int = 0  # disagreements on subnormal inputs or results (not failures)
    refused: int = 0  # inputs torch itself refuses (no reference for them)
    edge: int = 0
    samples: int = 0
    upcast: bool = False
    counterexamples: tuple[Counterexample, ...] = ()
    findings: tuple[str, ...] = ()  # dtype findings: registration vs torch, vs the functor
    no_reference: str | None = None
    known: str | None = None  # the reviewed reason, when a deviation is known

    @property
    def mismatched(self) -> int:
        return self.precision + self.special + self.exact + self.crashes

    @property
    def status(self) -> Agreement:
        if self.no_reference is not None:
            return Agreement.NO_REFERENCE
        if self.mismatched == 0 and not self.findings:
            return Agreement.OK
        return Agreement.KNOWN if self.known is not None else Agreement.MISMATCH


def _dtype_findings(dtype: str, registered: str, result: str, torch_dtype: str | None) -> list[str]:
    """The registration's output dtype against what the functor returns and torch gives."""
    findings = []
    if result != registered:
        findings.append(
            f"registered {dtype} -> {registered}, but the functor returns {result} "
            "(Metal's static_assert in REGISTER_* would not compile)"
        )
    if torch_dtype is not None and torch_dtype != registered:
        findings.append(f"registered {dtype} -> {registered}, but torch gives {torch_dtype}")
    return findings


@dataclass(frozen=True)
class _Run:
    """One registration's run, decoded: its inputs, the kernel's outputs and status, torch's."""

    dtype: str  # the input dtype
    compared_in: str  # the dtype whose tolerance applies
    torch_dtype: str
    args: list[list[Value]]
    ours: list[Value]
    theirs: list[Value]
    status: bytes

    def verdict(self, i: int) -> tuple[Kind | None, str]:
        """Why element ``i`` disagrees (None when it matches), and the kernel's value shown."""
        code = self.status[i] if i < len(self.status) else 0
        if code:
            return Kind.CRASH, SIGNALS.get(code, f"signal {code}")
        if i >= len(self.ours):
            return Kind.CRASH, "no output"
        kind = compare_value(self.ours[i], self.theirs[i], self.compared_in)
        if kind is not None and (
            any(is_subnormal(a[i], self.dtype) for a in self.args if i < len(a))
            or is_subnormal(self.theirs[i], self.torch_dtype)
        ):
            kind = Kind.SUBNORMAL
        return kind, show(self.ours[i])


@dataclass
class _Tally:
    """The element-by-element counts of one registration, built as the elements are read."""

    counts: dict[Kind, int] = field(default_factory=lambda: {kind: 0 for kind in Kind})
    examples: list[Counterexample] = field(default_factory=list)
    checked: int = 0
    matched: int = 0
    refused: int = 0


def _tally(run: _Run, torch_errors: Mapping[int, str], alphas: Sequence[str]) -> _Tally:
    tally = _Tally()
    n = len(run.theirs)
    for i in range(n):
        if i in torch_errors:
            tally.refused += 1
            continue
        tally.checked += 1
        kind, kernel_text = run.verdict(i)
        if kind is None:
            tally.matched += 1
            continue
        tally.counts[kind] += 1
        if kind is Kind.SUBNORMAL or len(tally.examples) >= COUNTEREXAMPLES:
            continue
        shown = tuple(show(a[i]) for a in run.args if i < len(a))
        if alphas:
            shown += (f"alpha={alphas[i * len(alphas) // n]}",)
        tally.examples.append(Counterexample(shown, kernel_text, show(run.theirs[i]), kind))
    return tally


def check_dtype(
    *,
    kernel: str,
    names: Sequence[str],
    input_type: str,
    output_type: str,
    result_type: str,
    inputs: Sequence[bytes],
    reference: bytes | None,
    torch_dtype: str | None,
    torch_errors: Mapping[int, str],
    output: bytes,
    status: bytes,
    known: Sequence[Known] = (),
    no_reference: str | None = None,
    edge: int = 0,
    samples: int = 0,
    upcast: bool = False,
    alphas: Sequence[str] = (),
) -> DtypeCheck:
    """Compare one registration's kernel outputs with torch's (see the module doc).

    ``names`` are the kernel's and its operator's names (what ``math.known`` entries name);
    Metal types are as the compiled object recorded them. With ``alphas`` (an ALPHA kernel's
    values, shown), the elements are one equal block per alpha value, in that order.
    """
    dtype = metal_dtype(input_type)
    registered = metal_dtype(output_type)
    result = metal_dtype(result_type)
    reason = next((k.reason for k in known if k.covers(names, dtype)), None)
    if no_reference is not None or reference is None or torch_dtype is None:
        return DtypeCheck(
            kernel,
            dtype,
            registered,
            torch_dtype,
            edge=edge,
            samples=samples,
            findings=tuple(_dtype_findings(dtype, registered, result, None)),
            no_reference=no_reference or "none",
            known=reason,
        )
    run = _Run(
        dtype=dtype,
        compared_in=torch_dtype if torch_dtype in TOLERANCES else registered,
        torch_dtype=torch_dtype,
        args=[decode(block, dtype) for block in inputs],
        ours=decode(output, result) if result in _FORMATS or result == "bfloat16" else [],
        theirs=decode(reference, torch_dtype),
        status=status,
    )
    tally = _tally(run, torch_errors, alphas)
    return DtypeCheck(
        kernel,
        dtype,
        registered,
        torch_dtype,
        checked=tally.checked,
        matched=tally.matched,
        precision=tally.counts[Kind.PRECISION],
        special=tally.counts[Kind.SPECIAL],
        exact=tally.counts[Kind.EXACT],
        crashes=tally.counts[Kind.CRASH],
        subnormal=tally.counts[Kind.SUBNORMAL],
        refused=tally.refused,
        edge=edge,
        samples=samples,
        upcast=upcast,
        counterexamples=tuple(tally.examples),
        findings=tuple(_dtype_findings(dtype, registered, result, torch_dtype)),
        known=reason,
    )


@dataclass(frozen=True)
class FunctorCheck:
    """Every checked registration of one functor, or why it could not be checked."""

    kernel: str
    file: str  # tree-relative .metal path
    reference: str | None  # "div.floor_rounding", "torch.atan2", or None
    dtypes: tuple[DtypeCheck, ...] = ()
    compile_error: str | None = None  # "file:line: message"
    failure: str | None = None  # the functor's process died as a whole
    # Metal functions it reaches that the host shim does not model (SIMD-group...): not
    # run, so no result, neither a pass nor a failure
    not_modelled: tuple[str, ...] = ()
    # other parts of its .metal file left out of its build: they do not compile here
    set_aside: tuple[str, ...] = ()
    # the compiler that built it when the shim's bfloat class did not compile it (cxx.py)
    built_with: str | None = None
    # registered input dtypes left out: not among the OpInfo's MPS dtypes
    skipped: tuple[str, ...] = ()
    cached: bool = False
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return (
            self.compile_error is not None
            or self.failure is not None
            or any(d.status is Agreement.MISMATCH for d in self.dtypes)
        )


@dataclass(frozen=True)
class MathReport:
    functors: tuple[FunctorCheck, ...]
    compiler: str = ""
    headers: str = ""
    warnings: tuple[str, ...] = field(default=())

    @property
    def failed(self) -> bool:
        return any(f.failed for f in self.functors)

    @property
    def compile_errors(self) -> int:
        """Functors that did not compile."""
        return sum(1 for f in self.functors if f.compile_error)

    @property
    def not_modelled(self) -> int:
        """Functors that reach what the host model does not run."""
        return sum(1 for f in self.functors if f.not_modelled)

    def counts(self) -> dict[str, int]:
        """Dtypes per agreement, then the functors not compiling and not modelled."""
        out = {str(s): 0 for s in Agreement}
        for f in self.functors:
            for d in f.dtypes:
                out[str(d.status)] += 1
        return {**out, "compile errors": self.compile_errors, "not modelled": self.not_modelled}
