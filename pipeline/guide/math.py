"""Which functors check-math checks, and against which torch reference (over the index).

A target is one functor (``NAME_functor`` of a ``.metal`` file) that has registrations. Its
reference is, first match wins:

1. the ``math.references`` setting (``div_floor: div.floor_rounding``; ``torch.fn`` names a
   torch function; ``none`` says there is none);
2. the OpInfo named like the kernel (``atan2``), by name or aten name, without a variant;
3. an OpInfo of the kernel's operator (found through the stub whose kernel string is the
   kernel's name) whose variant names the kernel's suffix (``div_floor`` -> ``floor``), or
   the operator's first OpInfo when the kernel is the operator;
4. the operator the host code runs the kernel for (:mod:`pipeline.tree.host_refs`:
   ``make_complex`` -> ``complex``, ``huber`` -> ``huber_loss`` with its alpha on
   ``delta``; ``leaky_relu_backward`` with its operands in its meta's order), through aten
   with the scalars the host passes or fixes; for a kernel named like no operator, when the
   host shows no operator the tree can read, the reference is unknown, saying what was
   looked for, unless the next two find one by the kernel's name;
5. ``torch.<kernel>``, if the interpreter's torch has it (no samples, edge values only);
6. the aten operator of one of :func:`aten_names`, when its schema takes the kernel's
   operands without a guess (see ``pipeline/run/math_torch.py``). An ALPHA kernel always
   goes through aten: its schema says which argument the alpha is.

The dtypes checked are the registered ones that are also the OpInfo's MPS dtypes (all
registered ones when the reference has no OpInfo).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UnknownOperatorError
from pipeline.tree import host_refs
from pipeline.tree.host_refs import HostReference
from pipeline.tree.index import TreeIndex
from pipeline.tree.opinfo import OpInfoRecord

NONE = "none"


@dataclass(frozen=True)
class Target:
    kernel: str
    metal: Path  # absolute
    file: str  # tree-relative
    op: str | None  # the operator the kernel serves, when known
    opinfo: tuple[str, str] | None  # (name, variant_test_name)
    fn: str | None  # torch.<fn> when there is no OpInfo
    dtypes: tuple[str, ...] | None  # the OpInfo's MPS dtypes; None: every registered one
    host: HostReference | None = None  # the operator the host code runs the kernel for

    @property
    def reference(self) -> str | None:
        if self.opinfo is not None:
            name, variant = self.opinfo
            return f"{name}.{variant}" if variant else name
        if self.fn:
            return f"torch.{self.fn}"
        return f"aten.{self.host.op}" if self.host and self.host.op else None

    @property
    def bound(self) -> tuple[tuple[str, str], ...]:
        """The schema arguments the host fixes for this kernel (``n=1`` for trigamma)."""
        return self.host.bound if self.host and self.host.op else ()

    @property
    def alpha_argument(self) -> str | None:
        """The schema argument the functor's alpha fills, as the host passes it."""
        return self.host.alpha if self.host and self.host.op else None

    @property
    def operands(self) -> tuple[str, ...]:
        """The schema's tensors in the kernel's operand order (empty: the schema's order)."""
        return self.host.operands if self.host and self.host.op else ()

    @property
    def avoid(self) -> tuple[str, ...]:
        """Alpha values the host sends to another kernel: the check leaves them out."""
        return self.host.avoid if self.host and self.host.op else ()


def aten_names(t: Target, alpha: bool) -> tuple[str, ...]:
    """The aten operators ``t``'s reference may fall back on, first existing one wins: its
    own name; for an ALPHA kernel, named for its variant of an operator (``add_alpha``,
    ``round_decimals``), then its operator and its name's prefixes. Only for those: with
    defaults for the rest, ``gelu`` is not what ``gelu_tanh`` computes. A kernel the host
    code runs for an operator (``huber`` for ``huber_loss``) has that one alone."""
    if t.host is not None and t.host.op is not None:
        return (t.host.op,)
    names = [t.kernel]
    if alpha:
        parts = t.kernel.split("_")
        names += [t.op] if t.op else []
        names += ["_".join(parts[:k]) for k in range(len(parts) - 1, 0, -1)]
    return tuple(dict.fromkeys(names))


def _kernel_files(index: TreeIndex) -> dict[str, str]:
    """kernel -> the .metal file that registers it (first wins)."""
    out: dict[str, str] = {}
    for f in index.kernels.files:
        for r in f.registrations:
            out.setdefault(r.kernel, f.path)
    return out


def operator_of(index: TreeIndex, kernel: str) -> str | None:
    """The operator a kernel serves: itself, or the op of the stub that runs it."""
    ops = index.entries_by_operator()
    if kernel in ops:
        return kernel
    for f in index.host.files:
        for stub in f.stubs:
            if stub.kernel_name != kernel:
                continue
            base = stub.stub.removesuffix("_stub")
            while base:
                if base in ops:
                    return base
                base, _, _ = base.rpartition("_")
    try:
        return index.resolve(kernel)
    except UnknownOperatorError:
        return None


def _spec(text: str, infos: tuple[OpInfoRecord, ...]) -> tuple[tuple[str, str] | None, str | None]:
    if text == NONE:
        return None, None
    if text.startswith("torch."):
        return None, text.removeprefix("torch.")
    name, _, variant = text.partition(".")
    # OpInfo names have dots of their own (nn.functional.gelu): match whole names first
    for info in infos:
        if info.name == text and not info.variant_test_name:
            return (info.name, ""), None
    return (name, variant), None


def target(index: TreeIndex, kernel: str, file: str, references: Mapping[str, str]) -> Target:
    op = operator_of(index, kernel)
    metal = index.root / file
    infos = index.opinfos

    def by_opinfo(info: OpInfoRecord) -> Target:
        return Target(
            kernel, metal, file, op, (info.name, info.variant_test_name), None, info.dtypes
        )

    if kernel in references:
        opinfo, fn = _spec(references[kernel], infos)
        if opinfo is not None:
            found = next((i for i in infos if (i.name, i.variant_test_name) == opinfo), None)
            if found is not None:
                return by_opinfo(found)
            return Target(kernel, metal, file, op, opinfo, None, None)
        return Target(kernel, metal, file, op, None, fn, None)
    for info in infos:
        if kernel in (info.name, info.aten_name) and not info.variant_test_name:
            return by_opinfo(info)
    if op is not None:
        own = index.opinfos_for(op)
        suffix = kernel.removeprefix(op + "_") if kernel.startswith(op + "_") else None
        if suffix:
            for info in own:
                if suffix in info.variant_test_name.split("_"):
                    return by_opinfo(info)
        if kernel == op and own:
            return by_opinfo(own[0])
    host = host_refs.resolve(index, kernel)
    if host is not None and host.op is not None:
        return Target(kernel, metal, file, host.op, None, None, None, host)
    if kernel in index.entries_by_operator():
        host = None  # an operator's own name: its schema is the reference, not the host's gaps
    return Target(kernel, metal, file, op, None, kernel, None, host)


def targets_for_op(index: TreeIndex, op: str, references: Mapping[str, str]) -> list[Target]:
    """The functors of an operator (``div``: div_true, div_floor, div_trunc)."""
    record = index.record(op, find_references=False)
    files = _kernel_files(index)
    kernels = [k for k in record.kernel_names if k in files]
    return [target(index, k, files[k], references) for k in kernels]


def targets_for_file(
    index: TreeIndex, path: str, references: Mapping[str, str]
) -> list[Target] | None:
    """Every registered functor of one .metal file (tree-relative path); None: no such file."""
    wanted = Path(path).as_posix()
    for f in index.kernels.files:
        if f.path == wanted or Path(f.path).name == Path(wanted).name:
            kernels = dict.fromkeys(r.kernel for r in f.registrations)
            return [target(index, k, f.path, references) for k in kernels]
    return None


def all_targets(index: TreeIndex, references: Mapping[str, str]) -> list[Target]:
    return [
        t for f in index.kernels.files for t in targets_for_file(index, f.path, references) or []
    ]
