"""Inputs and torch-on-CPU references for check-math: ``python math_torch.py REQUEST OUT``.

Run by :mod:`pipeline.run.reference` under the configured interpreter (one that imports
torch), as a copy in a scratch directory: it imports only the standard library and torch
(and op_db, when a case names an OpInfo). REQUEST is JSON::

    {"max_samples": 256, "cases": [{"id": "atan2/float32", "dtype": "float32", "arity": 2,
      "opinfo": ["atan2", ""] or null, "fn": "atan2" or null, "alpha": "float32" or null,
      "aten": ["atan2"]}]}

For each case it makes the inputs, in the case's dtype: edge values (±0, ±inf, NaN,
subnormals, the dtype's min/max and tiny, small integers, a dense grid on [-5, 5]; all pairs
of them for binary ops), then the OpInfo's sample and reference inputs flattened element by
element (broadcast against each other for binary ops); and the reference: the OpInfo's op (or
``torch.<fn>``) on CPU with the kwargs of the OpInfo's first sample, in the same dtype, or
upcast to float32 / complex64 where the CPU lacks that dtype's kernel. An element torch
refuses (an integer division by zero) is listed in ``errors`` and has no reference.

Without an OpInfo or ``torch.<fn>``, and always for an ALPHA kernel (``alpha`` names the
dtype of its scalar operand), the reference is the aten operator of the first ``aten`` name
that exists, when exactly one functional overload takes the kernel's operands on its Tensor
arguments in order and the alpha on its one number argument (:func:`fits`): otherwise there
is no reference, never a guessed mapping. A case resolved through the host code
(``pipeline/tree/host_refs.py``) names the operator alone, the argument its alpha fills
(``"alpha_arg": "delta"``), the ones the host fixes (``"bound": [["n", "1"]]``) and the
alpha values it sends elsewhere (``"avoid": ["2.0"]``, left out of :data:`ALPHA_VALUES`), and
the schema's tensors in the kernel's operand order where the operator's meta function builds
its iterator in another (``"operands": ["self", "grad_output"]``); an
``int reduction`` argument is always None (0): the kernel is element-wise. An ALPHA case
runs its inputs once per alpha value (:data:`ALPHA_VALUES`, as its alpha type holds them).

OUT is JSON: ``{"torch": VERSION, "cases": {ID: {"n", "block", "inputs": [base64 of each
operand's bytes, one block], "alphas": [base64 of each alpha value], "alpha_shown",
"edge", "samples", "result_dtype", "reference": base64 of n values or null, "upcast",
"kwargs", "via": the aten overload used, "errors": {index: message}, "no_reference": reason
or null}}}``: n is block times the number of alpha values (one without).
"""

import base64
import contextlib
import io
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

# beside this script in its scratch directory (pipeline.run.reference copies both)
from math_torch_aten import aten_operator, bind, reorder


@dataclass(frozen=True)
class Asked:
    """One case of REQUEST (the module docstring has its shape); a key left out is its
    default."""

    id: str
    dtype: str
    arity: int
    opinfo: Sequence[str] | None = None  # (name, variant_test_name)
    fn: str | None = None
    alpha: str | None = None
    aten: Sequence[str] = ()
    bound: Sequence[Sequence[str]] = ()  # (argument, literal)
    alpha_arg: str | None = None
    avoid: Sequence[str] = ()
    operands: Sequence[str] = ()  # the schema's tensors in the kernel's operand order


@dataclass(frozen=True)
class Request:
    cases: tuple[Asked, ...]
    max_samples: int

    @classmethod
    def of(cls, *, cases, max_samples=256):
        """REQUEST as json.load gives it, a keyword per key."""
        return cls(tuple(Asked(**case) for case in cases), int(max_samples))


@dataclass(frozen=True)
class Answer:
    """One case of OUT (the module docstring has its shape), its fields in the document's
    order; ``note`` and ``via`` are written only when set (:data:`SET_ONLY`)."""

    no_reference: str | None
    errors: dict[str, str]  # value index -> what torch refused there
    upcast: bool
    kwargs: dict[str, str]  # the OpInfo sample's keywords, repr'd
    note: str | None  # op_db could not be imported
    via: str | None  # the aten overload a fallback used
    block: int
    n: int
    edge: int
    samples: int
    inputs: list[str]
    alphas: list[str]
    alpha_shown: list[str]
    reference: str | None
    result_dtype: str | None


@dataclass(frozen=True)
class Failed:
    """A case the script failed on: why, and no inputs."""

    no_reference: str
    n: int = 0
    inputs: tuple[str, ...] = ()
    reference: None = None
    result_dtype: None = None
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Out:
    torch: str  # the version that answered
    cases: dict[str, Answer | Failed]


# an Answer's keys that a reader finds absent rather than null when there is none
SET_ONLY = frozenset({"note", "via"})


def document(pairs):
    """asdict's dict_factory for OUT: every field, but a :data:`SET_ONLY` one only when set."""
    return {k: v for k, v in pairs if v is not None or k not in SET_ONLY}


UPCAST = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.complex32: torch.complex64,
}
GRID = 21
COMPLEX_OF = {torch.float16: torch.complex32}


def dtype_of(name):
    return getattr(torch, name)


def b64(t):
    t = t.detach().contiguous().clone()
    return base64.b64encode(bytes(t.untyped_storage())).decode()


def edge_values(dtype):
    """One tensor of the dtype's edge values (duplicates removed, order kept)."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_complex:
        real = torch.finfo(dtype).max if dtype != torch.complex32 else 65504.0
        parts = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, float("inf"), -float("inf"), float("nan")]
        pairs = [complex(a, b) for a in parts for b in parts] + [complex(real, 1.0)]
        return torch.tensor(pairs, dtype=torch.complex64).to(dtype)
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 10.0, -10.0, 1e-3]
        values += [math.pi, -math.pi, 100.0, -100.0, 0.25, 1.5, -1.5, 2.5, -2.5]
        values += [float("inf"), -float("inf"), float("nan")]
        values += [info.tiny, -info.tiny, info.tiny / 4, -info.tiny / 4, info.max, -info.max]
        values += [info.eps, 1 + info.eps]
        values += [-5.0 + 10.0 * i / (GRID - 1) for i in range(GRID)]
        return torch.tensor(values, dtype=torch.float64).to(dtype)
    ints = torch.iinfo(dtype)
    values = [0, 1, 2, 3, 7, 10, 100, ints.max, ints.max - 1, ints.min, ints.min + 1]
    if ints.min < 0:
        values += [-1, -2, -3, -7, -10, -100]
    values += [v for v in range(-5, 6) if ints.min <= v <= ints.max]
    seen, kept = set(), []
    for v in values:
        if v not in seen and ints.min <= v <= ints.max:
            seen.add(v)
            kept.append(v)
    return torch.tensor(kept, dtype=dtype)


def edge_inputs(dtype, arity):
    values = edge_values(dtype)
    if arity == 1:
        return [values]
    if arity == 2:
        a, b = torch.meshgrid(values, values, indexing="ij")
        return [a.reshape(-1), b.reshape(-1)]
    small = values[: min(len(values), 12)]
    a, b, c = torch.meshgrid(small, small, small, indexing="ij")
    return [a.reshape(-1), b.reshape(-1), c.reshape(-1)]


_OP_DB = None


def find_opinfo(name, variant):
    global _OP_DB
    if _OP_DB is None:
        from torch.testing._internal import common_utils
        from torch.testing._internal.common_methods_invocations import op_db
        from torch.testing._internal.opinfo import core

        # Each sample iterator looks for the unittest test running it with inspect.stack(),
        # which reads every frame's source file: half of this script's time. Outside a
        # unittest run it finds none, which is what this says at once.
        common_utils.extract_test_fn = core.extract_test_fn = lambda: None
        _OP_DB = op_db
    for op in _OP_DB:
        if op.name == name and op.variant_test_name == variant:
            return op
    return None


def operands(sample, arity, dtype):
    """The sample's first ``arity`` tensor-like operands, broadcast and flattened."""
    raw = [sample.input, *sample.args][:arity]
    if len(raw) < arity:
        return None
    tensors = []
    for value in raw:
        if isinstance(value, torch.Tensor):
            tensors.append(value.detach().to("cpu"))
        elif isinstance(value, (bool, int, float, complex)):
            tensors.append(torch.tensor(value))
        else:
            return None
    try:
        tensors = torch.broadcast_tensors(*tensors)
    except RuntimeError:
        return None
    if any(t.dtype != dtype for t in tensors):
        try:
            tensors = [t.to(dtype) for t in tensors]
        except (RuntimeError, TypeError):
            return None
    return [t.reshape(-1) for t in tensors]


def sample_inputs(op, dtype, arity, limit):
    """Flattened sample + reference inputs of the OpInfo, and the kwargs they share."""
    kwargs, blocks, count = None, [], 0
    generators = [op.sample_inputs("cpu", dtype)]
    if getattr(op, "reference_inputs_func", None) is not None:
        generators.append(op.reference_inputs("cpu", dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for gen in generators:
            try:
                for sample in gen:
                    if kwargs is None:
                        kwargs = dict(sample.kwargs)
                    if dict(sample.kwargs) != kwargs:
                        continue
                    flat = operands(sample, arity, dtype)
                    if flat is None or flat[0].numel() == 0:
                        continue
                    take = min(flat[0].numel(), limit - count)
                    blocks.append([t[:take] for t in flat])
                    count += take
                    if count >= limit:
                        break
            except Exception:  # a sample generator that fails on CPU: use what it gave
                pass
            if count >= limit:
                break
    if not blocks:
        return [], kwargs or {}
    return [torch.cat([b[k] for b in blocks]) for k in range(arity)], kwargs or {}


def plain_kwargs(kwargs):
    """kwargs a reference call can take as they are (no tensors: those are other inputs)."""
    return {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}


def call(fn, tensors, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*tensors, **kwargs)


def reference(fn, tensors, kwargs, dtype):
    """(result or None, upcast?, per-element errors) of ``fn`` on CPU."""
    upcast = False
    try:
        return call(fn, tensors, kwargs), upcast, {}
    except Exception as exc:
        first = exc
    if dtype in UPCAST:
        try:
            wide = [t.to(UPCAST[dtype]) for t in tensors]
            result = call(fn, wide, kwargs)
            # back to the input's width; a complex result of a real half input is complex32
            # (polar, complex): narrowing it to float16 would keep its real part only
            narrow = {
                torch.float32: dtype,
                torch.complex64: dtype if dtype.is_complex else COMPLEX_OF.get(dtype),
            }.get(result.dtype)
            return (result.to(narrow) if narrow else result), True, {}
        except Exception:
            pass
    # element by element: find the inputs torch refuses, keep the others
    n = tensors[0].numel()
    results, errors, result_dtype = [None] * n, {}, None
    for i in range(n):
        try:
            r = call(fn, [t[i : i + 1] for t in tensors], kwargs)
            results[i] = r.reshape(-1)
            result_dtype = r.dtype
        except Exception as exc:
            errors[i] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    if result_dtype is None:
        raise first
    filler = torch.zeros(1, dtype=result_dtype)
    return torch.cat([r if r is not None else filler for r in results]), upcast, errors


def in_child(work):
    """``work()`` in a forked child: (True, its value), or (False, signal) when the child
    dies. torch's own integer kernels trap on some inputs (INT_MIN // -1 raises SIGFPE on
    x86), which would kill this process and every case after it."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 0
        try:
            buffer = io.BytesIO()
            torch.save(work(), buffer)
            data = buffer.getvalue()
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        except BaseException:
            code = 3
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as src:
        data = src.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return False, os.WTERMSIG(status)
    if os.WEXITSTATUS(status) != 0 or not data:
        return False, 0
    return True, torch.load(io.BytesIO(data), weights_only=False)


def crashing(fn, tensors, kwargs):
    """Indices on which torch dies. A child runs the inputs one by one and reports each it
    survives; where one dies, the next child starts after that input: one fork per death
    (forking this process costs ~10 ms: halving the range took hundreds per case)."""
    n, start, dead = tensors[0].numel(), 0, []
    while start < n:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb", buffering=0) as out:
                for i in range(start, n):
                    # an exception is a refusal, which reference() reports, not a death
                    with contextlib.suppress(BaseException):
                        call(fn, [t[i : i + 1] for t in tensors], kwargs)
                    out.write(b"+")
            os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as src:
            survived = len(src.read())
        _, status = os.waitpid(pid, 0)
        if start + survived >= n or not os.WIFSIGNALED(status):
            break
        dead.append(start + survived)
        start += survived + 1
    return dead


def safe_reference(fn, tensors, kwargs, dtype):
    """:func:`reference`, with the inputs that kill torch set aside as refused."""
    ok, value = in_child(lambda: reference(fn, tensors, kwargs, dtype))
    if ok:
        return value
    if value == 0:  # an exception in the child: let it happen here, where it is reported
        return reference(fn, tensors, kwargs, dtype)
    n = tensors[0].numel()
    dead = crashing(fn, tensors, kwargs)
    keep = torch.tensor([i for i in range(n) if i not in set(dead)], dtype=torch.long)
    ok, value = in_child(lambda: reference(fn, [t[keep] for t in tensors], kwargs, dtype))
    if not ok:
        raise RuntimeError("torch dies on these inputs even without the isolated ones")
    result, upcast, errors = value
    full = torch.zeros(n, dtype=result.dtype)
    full[keep] = result.reshape(-1)
    merged = {int(keep[i]): msg for i, msg in errors.items()}
    for i in dead:
        merged[i] = "torch itself dies on this input (a hardware trap in its CPU kernel)"
    return full, upcast, merged


def torch_function(name):
    """``torch.<name>`` (dots allowed: ``special.erfcx``), else ``torch.special.<name>``."""
    obj: object = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return getattr(torch.special, name, None)
    return obj if callable(obj) else None


ALPHA_VALUES: dict[str, tuple[Any, ...]] = {
    "float": (0.5, 2.0, -1.5),
    "int": (2, 0, -3),
    "bool": (True, False),
    "complex": (complex(0.5, -1.5), 2.0),
}


def alpha_values(dtype, avoid=()):
    """The alpha values a case runs with, as the kernel receives them (rounded to its alpha
    type): not 1, which hides a dropped or misplaced alpha; 0 and negatives where they fit.
    Those equal to an ``avoid`` literal are left out: the host sends them to another kernel
    (sqr for an exponent of 2), so this one's result there is nothing torch is asked for."""
    kind = "int"
    if dtype == torch.bool:
        kind = "bool"
    elif dtype.is_complex:
        kind = "complex"
    elif dtype.is_floating_point:
        kind = "float"
    values = [torch.tensor(v).to(dtype) for v in ALPHA_VALUES[kind]]
    return [v for v in values if all(v.item() != float(lit) for lit in avoid)]


@dataclass(frozen=True)
class Chosen:
    """A case's reference: the callable (None without one, and ``why``), the OpInfo that
    gives its samples, and what an answer says of how it was found."""

    fn: Callable[..., Any] | None
    op: Any  # the OpInfo, or None
    why: str | None = None
    note: str | None = None  # op_db could not be imported
    via: str | None = None  # the aten overload, with the host's bound literals


def choose_reference(case):
    """The case's :class:`Chosen`. An aten reference is called through :func:`bind`; with an
    alpha it takes the alpha value as ``v``."""
    op, note = None, None
    if case.opinfo:
        try:
            op = find_opinfo(*case.opinfo)
        except Exception as exc:
            note = f"op_db could not be imported: {type(exc).__name__}: {exc}"[:300]
    alpha = bool(case.alpha)
    # an ALPHA kernel's reference is an aten overload, whose schema says where the alpha
    # goes; the OpInfo's op (a Python wrapper) still gives the samples
    if op is not None and not alpha:
        return Chosen(op.op, op, note=note)
    fn = torch_function(case.fn) if case.fn and not alpha else None
    if fn is not None:
        return Chosen(fn, op, note=note)
    bound = [tuple(b) for b in case.bound]
    aten, slot, why = aten_operator(case.aten, case.arity, alpha, bound, case.alpha_arg)
    if aten is None:
        return Chosen(None, op, why, note)
    order = reorder(aten, case.operands)
    if order is None:
        why = f"{aten} has no tensors named {', '.join(case.operands)}"
        return Chosen(None, op, why, note)
    via = str(aten) + "".join(f", {k}={v}" for k, v in bound)
    if case.operands:
        via += ", operands " + ", ".join(case.operands)
    if alpha:
        return Chosen(
            lambda *ts, v: bind(aten, [ts[i] for i in order], slot, v, bound),
            op,
            note=note,
            via=via,
        )
    return Chosen(
        lambda *ts: bind(aten, [ts[i] for i in order], slot, None, bound), op, note=note, via=via
    )


def one_reference(fn, tensors, kwargs, dtype, alphas):
    """(result, upcast, errors) over the inputs once per alpha value (once without)."""
    if not alphas:
        return safe_reference(fn, tensors, kwargs, dtype)
    n = tensors[0].numel()
    results: list[Any] = []
    upcast, errors, first = False, {}, None
    for k, a in enumerate(alphas):
        value = a.item()
        try:
            found = safe_reference(lambda *ts, v=value: fn(*ts, v=v), tensors, {}, dtype)
        except Exception as exc:  # torch refuses this alpha (softshrink's negative lambd)
            first = first or exc
            why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            errors.update({k * n + i: why for i in range(n)})
            results.append(None)
            continue
        results.append(found[0].reshape(-1))
        upcast = upcast or found[1]
        errors.update({k * n + i: msg for i, msg in found[2].items()})
    kept = [r for r in results if r is not None]
    if not kept:
        assert first is not None
        raise first
    filler = torch.zeros(n, dtype=kept[0].dtype)
    return torch.cat([r if r is not None else filler for r in results]), upcast, errors


def one_case(case, limit):
    # the OpInfo's samples are random: seeded per case, a case's inputs are the same in any
    # request (the answers are cached case by case) and from one run to the next
    torch.manual_seed(0)
    dtype = dtype_of(case.dtype)
    chosen = choose_reference(case)
    edge = edge_inputs(dtype, case.arity)
    samples, kwargs = ([], {})
    if chosen.op is not None:
        samples, kwargs = sample_inputs(chosen.op, dtype, case.arity, limit)
    kwargs = plain_kwargs(kwargs) if not case.alpha else {}
    tensors = [torch.cat([e, s]) for e, s in zip(edge, samples, strict=False)] if samples else edge
    # with an alpha the inputs run once per alpha value: "inputs" hold one block, "n" all
    alphas = alpha_values(dtype_of(case.alpha), case.avoid) if case.alpha else []
    block, edges = int(tensors[0].numel()), int(edge[0].numel())
    out = Answer(
        no_reference=None,
        errors={},
        upcast=False,
        kwargs={k: repr(v) for k, v in kwargs.items()},
        note=chosen.note,
        via=chosen.via,
        block=block,
        n=block * max(len(alphas), 1),
        edge=edges,
        samples=block - edges,
        inputs=[b64(t) for t in tensors],
        alphas=[b64(a.reshape(1)) for a in alphas],
        alpha_shown=[repr(a.item()) for a in alphas],
        reference=None,
        result_dtype=None,
    )
    if chosen.fn is None:
        return replace(
            out, no_reference=chosen.why or "no OpInfo and no torch function of that name"
        )
    if case.alpha and not alphas:
        return replace(
            out, no_reference="every alpha value checked is one the host sends elsewhere"
        )
    try:
        result, upcast, errors = one_reference(chosen.fn, tensors, kwargs, dtype, alphas)
    except Exception as exc:
        refused = f"torch refuses {case.dtype}: {type(exc).__name__}: {exc}"
        return replace(out, no_reference=refused.splitlines()[0][:300])
    if not isinstance(result, torch.Tensor) or result.numel() != out.n:
        return replace(out, no_reference="the reference is not one value per element")
    return replace(
        out,
        upcast=upcast,
        errors={str(k): v for k, v in errors.items()},
        result_dtype=str(result.dtype).removeprefix("torch."),
        reference=b64(result.reshape(-1)),
    )


def main():
    # one thread: the children forked to survive torch's traps must not inherit a lock of a
    # worker pool (a refusal run here once, on a large block, starts one; the next child
    # then waits on it forever)
    torch.set_num_threads(1)
    request_path, out_path = sys.argv[1], sys.argv[2]
    with open(request_path, encoding="utf-8") as fh:
        request = Request.of(**json.load(fh))
    cases: dict[str, Answer | Failed] = {}
    for case in request.cases:
        try:
            cases[case.id] = one_case(case, request.max_samples)
        except Exception as exc:
            cases[case.id] = Failed(f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(asdict(Out(torch.__version__, cases), dict_factory=document), fh)


if __name__ == "__main__":
    main()
