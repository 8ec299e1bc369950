"""Inputs and torch-on-CPU references for check-kernel: ``python kernel_torch.py REQUEST OUT``.

Run by :mod:`pipeline.run.reference` under the configured interpreter, as math_torch.py is;
it imports only the standard library and torch (op_db when a case names an OpInfo).
REQUEST is JSON: ``{"cases": [{"id", "dtype", "reference", "opinfo", "inputs": [{"name",
"rank", "dtype", "range", "strided"}], "output_like", "output_dtype", "output_shape",
"structs": [{"name", "fields": [[field, expr]]}], "grid": [3 exprs], "tptg": [3 exprs],
"max_threads", "max_samples"}]}``.

Each case runs on several inputs, built to expose the bugs reductions have, not only to look
realistic: lengths 1, 31, 32, 33 and 1025 along the last dimension (a simdgroup, one short,
one over, several threadgroups); large magnitudes (a wrong max or a sum that ignores the
shift overflows); all-equal rows; NaN and ±inf; non-contiguous views for an input marked
``strided``; the OpInfo's sample inputs, flattened to the input's rank; and, for an integer
input with a ``range``, one index one past its end (torch refuses it, the kernel must say so
too). OUT is JSON: ``{"torch": VERSION, "cases": {ID: [{"label", "tensors": {NAME: {"data":
base64 of the storage from the view's offset, "shape", "stride"}}, "structs": {NAME: {FIELD:
int or [ints]}}, "grid": [3], "tptg": [3], "output_bytes", "output_dtype", "reference":
base64 or null, "error": torch's message or null}]}}``.
"""

import base64
import ctypes
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

LENGTHS = (1, 31, 32, 33, 1025, 7)
ROWS = (1, 3, 2, 3, 2, 4)
LARGE = {torch.float16: 1e3, torch.bfloat16: 1e4}


@dataclass(frozen=True)
class Input:
    """One of a case's inputs (the module docstring has REQUEST's shape)."""

    name: str
    rank: int
    dtype: str | None  # None: the case's
    range: Sequence[str] | None  # an index's [low, high) as expressions
    strided: bool


@dataclass(frozen=True)
class Struct:
    name: str
    fields: Sequence[Sequence[str]]  # (field, expression)


@dataclass(frozen=True)
class Case:
    """One case of REQUEST."""

    id: str
    dtype: str
    reference: str  # the expression torch evaluates
    opinfo: str | None
    inputs: tuple[Input, ...]
    output_like: str
    output_dtype: str | None
    output_shape: Sequence[str] | None
    structs: tuple[Struct, ...]
    grid: Sequence[str]
    tptg: Sequence[str]
    max_threads: int
    max_samples: int

    @classmethod
    def of(cls, *, inputs, structs, **rest):
        """A case as json.load gives it, a keyword per key."""
        ins = tuple(Input(**i) for i in inputs)
        return cls(inputs=ins, structs=tuple(Struct(**s) for s in structs), **rest)


@dataclass(frozen=True)
class Request:
    cases: tuple[Case, ...]

    @classmethod
    def of(cls, *, cases):
        return cls(tuple(Case.of(**c) for c in cases))


@dataclass(frozen=True)
class Storage:
    """An input as OUT holds it: its storage from the view's offset, and the view."""

    data: str  # base64
    shape: list[int]
    stride: list[int]


@dataclass(frozen=True)
class Run:
    """One input of a case, as OUT holds it (the module docstring has the shape)."""

    label: str
    tensors: dict[str, Storage]
    structs: dict[str, dict[str, int | list[int]]]
    grid: list[int | list[int]]
    tptg: list[int | list[int]]
    output_bytes: int
    output_dtype: str
    reference: str | None  # base64
    error: str | None


@dataclass(frozen=True)
class Out:
    torch: str  # the version that answered
    cases: dict[str, list[Run]]


def ceil_div(a, b):
    return (int(a) + int(b) - 1) // int(b)


def b64(t):
    """The bytes of ``t``'s storage from its view's first element (read in one copy:
    bytes() of a storage goes element by element)."""
    storage = t.untyped_storage()
    start = t.storage_offset() * t.element_size()
    data = ctypes.string_at(storage.data_ptr() + start, storage.nbytes() - start)
    return base64.b64encode(data).decode()


def shape_of(rank, i):
    """The i-th shape of the standard set: its last dimension one of LENGTHS."""
    n = LENGTHS[i % len(LENGTHS)]
    lead = [ROWS[i % len(ROWS)]] + [2] * (rank - 2)
    return [n] if rank == 1 else lead[: rank - 1] + [n]


def values(shape, dtype, kind, gen):
    if kind == "equal":
        return torch.full(shape, 3.0, dtype=torch.float64).to(dtype)
    t = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "large":
        t = t * LARGE.get(dtype, 1e4) + LARGE.get(dtype, 1e4)
    if kind == "nan/inf":
        flat = t.view(-1)
        for pos, v in zip((0, 5, 17), (float("nan"), float("inf"), -float("inf")), strict=True):
            if pos < flat.numel():
                flat[pos] = v
    return t.to(dtype)


def strided_view(t):
    """A non-contiguous view with ``t``'s values: the transpose of a contiguous transpose
    (rank >= 2), or every other element of a twice-as-long tensor."""
    if t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    base = torch.zeros(t.numel() * 2, dtype=t.dtype)
    base[::2] = t
    return base[::2]


def opinfo_samples(name, dtype, rank, limit):
    from torch.testing._internal import common_utils
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo import core

    common_utils.extract_test_fn = core.extract_test_fn = lambda: None
    ops = [op for op in op_db if op.name == name and not op.variant_test_name]
    if not ops:
        return []
    found = []
    for sample in ops[0].sample_inputs("cpu", dtype):
        t = sample.input
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        t = t.detach().reshape(-1, t.shape[-1] if t.dim() else 1)
        t = t.reshape(t.shape[0], -1) if rank == 2 else t.reshape([1] * (rank - 2) + list(t.shape))
        if rank == 1:
            t = t.reshape(-1)
        found.append(t.contiguous())
        if len(found) >= limit:
            break
    return found


def plans(case):
    """(label, {input: (shape index, kind, strided)}, index past its end) of every run."""
    first = case.inputs[0].name
    out = [(f"length {LENGTHS[i]}", i, "normal", False, False) for i in range(len(LENGTHS))]
    out += [
        ("large magnitudes, length 33", 3, "large", False, False),
        ("large magnitudes, length 1025", 4, "large", False, False),
        ("all-equal rows, length 32", 2, "equal", False, False),
        ("NaN and inf, length 33", 3, "nan/inf", False, False),
    ]
    if any(i.strided for i in case.inputs):
        out += [
            ("non-contiguous, length 33", 3, "normal", True, False),
            ("non-contiguous, large magnitudes, length 1025", 4, "large", True, False),
        ]
    if any(i.range for i in case.inputs):
        out.append(("an index one past the end", 1, "normal", False, True))
    return first, out


def evaluate(expr, names):
    value = eval(expr, {"__builtins__": {}}, names)  # the contributor's own launch spec
    if isinstance(value, (torch.Size, tuple, list)):
        return [int(v) for v in value]
    return int(value)


def build(case, dtype, tensors, label):
    names = dict(tensors)
    names.update(ceil_div=ceil_div, min=min, max=max, max_threads=case.max_threads)
    like = tensors[case.output_like]
    out_dtype = getattr(torch, case.output_dtype) if case.output_dtype else dtype
    count = like.numel()
    if case.output_shape:
        count = math.prod(evaluate(e, names) for e in case.output_shape)
    storages = {n: Storage(b64(t), list(t.shape), list(t.stride())) for n, t in tensors.items()}
    structs = {s.name: {f: evaluate(e, names) for f, e in s.fields} for s in case.structs}
    grid = [evaluate(e, names) for e in case.grid]
    tptg = [evaluate(e, names) for e in case.tptg]
    # the reference's size when there is one (a reduction's output is smaller)
    output_bytes = count * torch.empty((), dtype=out_dtype).element_size()
    reference = error = None
    try:
        ref = eval(case.reference, {"__builtins__": {}, "torch": torch}, dict(tensors))
        ref = ref.to(out_dtype).contiguous()
        reference = b64(ref)
        if not case.output_shape:
            output_bytes = ref.numel() * ref.element_size()
    except (IndexError, RuntimeError, ValueError) as exc:
        error = str(exc).splitlines()[0]
    shown = str(out_dtype).replace("torch.", "")
    return Run(label, storages, structs, grid, tptg, output_bytes, shown, reference, error)


def answer(case):
    dtype = getattr(torch, case.dtype)
    gen = torch.Generator().manual_seed(0)
    first, runs = plans(case)
    out = []
    for label, i, kind, strided, past_end in runs:
        tensors: dict[str, torch.Tensor] = {}
        for spec in case.inputs:
            t_dtype = getattr(torch, spec.dtype) if spec.dtype else dtype
            shape = shape_of(spec.rank, i)
            if spec.range:
                names = dict(tensors, ceil_div=ceil_div, min=min, max=max)
                low, high = (evaluate(e, names) for e in spec.range)
                t = torch.randint(low, max(high, low + 1), shape, generator=gen).to(t_dtype)
                if past_end:
                    t.view(-1)[-1] = high
            elif t_dtype.is_floating_point:
                t = values(shape, t_dtype, kind, gen)
            else:
                t = torch.randint(-100, 100, shape, generator=gen).to(t_dtype)
            tensors[spec.name] = strided_view(t) if strided and spec.strided else t
        out.append(build(case, dtype, tensors, label))
    if case.opinfo and len(case.inputs) == 1:
        rank = case.inputs[0].rank
        for k, t in enumerate(opinfo_samples(case.opinfo, dtype, rank, case.max_samples)):
            tensors = {first: t}
            out.append(build(case, dtype, tensors, f"OpInfo {case.opinfo} sample {k}"))
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = Request.of(**json.load(f))
    found = {c.id: answer(c) for c in request.cases}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(asdict(Out(torch.__version__, found)), f)


if __name__ == "__main__":
    main()
