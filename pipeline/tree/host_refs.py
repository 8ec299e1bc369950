"""A functor's operator as the tree says it, through the host code (issue 27).

A kernel named unlike any operator (``make_complex``, ``trigamma``, ``huber``) is run by a
host kernel function (``exec_binary_kernel(iter, "huber", delta)``), registered for a stub
(``REGISTER_DISPATCH(huber_stub, &huber_mps_kernel)``); the stub is called by the shared
implementation of an operator (``huber_stub(iter.device_type(), iter, delta)`` in
``huber_loss_out``), which a yaml row names (``CPU, CUDA: huber_loss_out``). That is the
operator whose torch reference checks the functor, read in the direction opposite to
:meth:`pipeline.tree.index.TreeIndex.record`'s.

The scalars follow the same path: the host function's parameter that the launch passes as
the kernel's scalar, or that a condition fixes (``order == 1`` before ``"trigamma"``), is
the argument at the same place in the shared implementation's stub call, which names the
operator's schema argument (``delta``, ``n``). Whatever the tree does not show that way
(no native/*.cpp, no caller, a condition not read, in the host or in a shared
implementation that calls several stubs, an argument that is an expression) is an unknown
that says what was looked for, never a guess.

A structured operator's iterator is built by its meta function, which may take the
schema's tensors in another order: ``TORCH_META_FUNC(leaky_relu_backward)(grad_output,
self_or_result, negval, is_result)`` builds ``build_borrowing_binary_op(maybe_get_output(),
self_or_result, grad_output)``, so the kernel's first operand is ``self``. The operands go
to the operator by those names. A bool argument that reaches neither the iterator nor the
stub (``is_result``: only the meta's ``TORCH_CHECK`` reads it) cannot change what the
kernel computes, on MPS or on the CPU the reference runs on: it is passed as false.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pipeline.tree import host_impl
from pipeline.tree.index import TreeIndex
from pipeline.tree.objc import StubRegistration
from pipeline.tree.sources import Implementation

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*\Z")


@dataclass(frozen=True)
class HostReference:
    """The operator a kernel's launch computes, or why the tree does not tell.

    ``alpha``: the schema argument the functor's scalar fills (None: none named).
    ``bound``: (schema argument, literal) the host's condition fixes for this kernel.
    ``avoid``: literals of the alpha that a condition sends elsewhere (``order == 1`` to
    trigamma: polygamma's kernel never gets n=1), to leave out of the values checked.
    """

    kernel: str
    op: str | None
    via: str  # "huber_stub -> huber_loss_out" or what was looked for
    alpha: str | None = None
    bound: tuple[tuple[str, str], ...] = ()
    unknown: str | None = None
    avoid: tuple[str, ...] = ()  # alpha values the host sends to another kernel
    # the schema's tensors in the kernel's operand order, when the meta reorders them
    operands: tuple[str, ...] = ()


def _argument(impl: Implementation, stub: str, index: int) -> str | None:
    """The schema argument at the host parameter ``index``'s place in ``impl``'s call of
    ``stub`` (device type and iterator first, as the host's iterator is), if a name."""
    args = impl.args_of(stub) or ()
    if index + 1 >= len(args) or not _IDENTIFIER.match(args[index + 1]):
        return None
    return args[index + 1]


def _operators(index: TreeIndex) -> dict[str, tuple[str, ...]]:
    """shared implementation name -> the operators whose CPU and CUDA rows name it."""
    out: dict[str, list[str]] = {}
    for op, entries in index.entries_by_operator().items():
        for e in entries:
            cpu = e.kernel_for("CPU")
            if cpu and cpu == e.kernel_for("CUDA") and op not in out.get(cpu, []):
                out.setdefault(cpu, []).append(op)
    return {k: tuple(v) for k, v in out.items()}


def _through(
    index: TreeIndex, kernel: str, s: StubRegistration, ops: dict[str, tuple[str, ...]]
) -> list[HostReference]:
    found = []
    for launch in s.launches:
        if launch.kernel != kernel:
            continue
        where = f"{s.function} ({s.span})"
        if launch.unread is not None:
            why = f'{where} runs "{kernel}" under `{launch.unread}`, which the tool cannot read'
            found.append(HostReference(kernel, None, s.stub, unknown=why))
            continue
        assert index.sources is not None
        for impl in index.sources.callers(s.stub):
            via = f"{s.stub} -> {impl.name} ({impl.span})"
            if len(set(impl.stubs)) > 1:
                # div_out_mode's trunc and floor stubs: the arguments that choose one (a
                # rounding mode) are conditions in the .cpp, which the tool does not read
                others = ", ".join(sorted(set(impl.stubs) - {s.stub}))
                why = f"{via}: {impl.name} also calls {others}; which runs is its condition's"
                found.append(HostReference(kernel, None, via, unknown=why))
                continue
            alpha = _argument(impl, s.stub, launch.alpha) if launch.alpha is not None else None
            bound = [(_argument(impl, s.stub, i), lit) for i, lit in launch.fixed]
            alpha, bound = _in_schema(index, impl, alpha, bound)
            if (launch.alpha is not None and alpha is None) or any(a is None for a, _ in bound):
                why = f"{via}: a scalar the host passes is no argument name in the stub's call"
                found.append(HostReference(kernel, None, via, unknown=why))
                continue
            pairs = tuple((a, lit) for a, lit in bound if a is not None)
            for op in ops.get(impl.name, ()):
                operands, unused = _layout(index, impl, op)
                found.append(
                    HostReference(
                        kernel,
                        op,
                        via,
                        alpha,
                        pairs + unused,
                        avoid=launch.avoid,
                        operands=operands,
                    )
                )
    return found


def _layout(
    index: TreeIndex, impl: Implementation, op: str
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The schema's tensors in the order ``op``'s meta function gives the iterator (empty:
    no meta read, the schema's own order), and its bool arguments that reach neither the
    iterator nor ``impl``'s body (passed as false)."""
    assert index.sources is not None
    entries = index.entries_by_operator().get(op, ())
    outs = {e.full_name for e in entries if e.kernel_for("CPU") == impl.name and e.structured}
    functional = [e for e in entries if e.structured_delegate in outs and e.name == op]
    if len(functional) != 1:
        return (), ()
    meta = index.sources.find("meta::" + functional[0].full_name.replace(".", "_"))
    schema = host_impl.schema_of(functional[0].schema)
    if meta is None or schema is None or len(meta.params) != len(schema.names):
        return (), ()
    place = dict(zip(meta.params, schema.names, strict=True))
    inputs = meta.inputs or ()
    operands = tuple(place[i] for i in inputs if i in place)
    if len(operands) != len(inputs) or sorted(operands) != sorted(schema.tensors):
        operands = ()
    unused = tuple(
        (name, "false")
        for k, name in enumerate(schema.names)
        if name in schema.flags
        and meta.params[k] not in meta.used
        and k < len(impl.params)
        and impl.params[k] not in impl.used
    )
    return (operands if operands != schema.tensors else ()), unused


def resolve(index: TreeIndex, kernel: str) -> HostReference | None:
    """The operator the host runs ``kernel`` for; None when no host function launches it."""
    stubs = [
        s for f in index.host.files for s in f.stubs if any(x.kernel == kernel for x in s.launches)
    ]
    if not stubs:
        return _from_implementations(index, kernel)
    names = ", ".join(dict.fromkeys(s.stub for s in stubs))
    if index.sources is None or not index.sources.present:
        why = f"{kernel} runs for {names}; the tree has no native/*.cpp to read who calls it"
        return HostReference(kernel, None, names, unknown=why)
    ops = _operators(index)
    found = [r for s in stubs for r in _through(index, kernel, s, ops)]
    unknown = [r for r in found if r.unknown]
    if unknown:
        return unknown[0]
    distinct = _merged(found)
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    if not distinct:
        why = f"no yaml row names a shared implementation that calls {names}"
        return HostReference(kernel, None, names, unknown=why)
    shown = ", ".join(sorted({str(r.op) for r in distinct.values()}))
    why = f"{names} serve(s) several operators ({shown}): which one the functor is is unknown"
    return HostReference(kernel, None, names, unknown=why)


def _merged(found: list[HostReference]) -> dict[tuple[object, ...], HostReference]:
    """One reference per (operator, alpha, bound): launches of one kernel that differ only
    in the values they avoid (pow_scalar after sqr's, sqrt's... pins) avoid them all, which
    leaves values out but never checks one the host does not send."""
    out: dict[tuple[object, ...], HostReference] = {}
    for r in found:
        key = (r.op, r.alpha, r.bound, r.operands)
        if key in out:
            avoid = tuple(dict.fromkeys(out[key].avoid + r.avoid))
            r = dataclasses.replace(out[key], avoid=avoid)
        out[key] = r
    return out


def _in_schema(
    index: TreeIndex,
    impl: Implementation,
    alpha: str | None,
    bound: list[tuple[str | None, str]],
) -> tuple[str | None, list[tuple[str | None, str]]]:
    """The host's scalars named as the operator's schema names them: an implementation's
    parameter is the schema argument at its place (``exp`` of ``pow_Tensor_Scalar_out(base,
    exp, out)`` is ``exponent``), when the row's schema has as many arguments; else its own
    name, which the torch side takes only if the schema has it."""
    schemas = [
        host_impl.schema_of(e.schema)
        for entries in index.entries_by_operator().values()
        for e in entries
        if e.kernel_for("CPU") == impl.name and e.kernel_for("CUDA") == impl.name
    ]
    rows = [s.names for s in schemas if s is not None]
    places = {args for args in rows if len(args) == len(impl.params)}

    def named(name: str | None) -> str | None:
        if name is None or name not in impl.params or len(places) != 1:
            return name
        return next(iter(places))[impl.params.index(name)]

    return named(alpha), [(named(a), lit) for a, lit in bound]


def _from_implementations(index: TreeIndex, kernel: str) -> HostReference | None:
    """The operator an MPS row's own function launches ``kernel`` for (see
    :mod:`pipeline.tree.host_impl`); None when none launches it. One launch read whole is
    the functor's reference, whatever other launches leave unread: the math is the
    functor's, not the launch's."""
    found = host_impl.find(index.root, index.native.entries, kernel)
    known = {(f.op, f.alpha, f.bound): f for f in found if f.op is not None}
    if len(known) == 1:
        f = next(iter(known.values()))
        return HostReference(kernel, f.op, f.via, f.alpha, f.bound)
    if known:
        shown = ", ".join(sorted({str(f.op) for f in known.values()}))
        why = f"launched for several operators ({shown}): which one the functor is is unknown"
        return HostReference(kernel, None, shown, unknown=why)
    if found:
        return HostReference(kernel, None, found[0].via, unknown=found[0].unknown)
    return None
