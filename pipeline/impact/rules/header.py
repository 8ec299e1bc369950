"""Headers under ``kernels/`` and ``c10/metal/``: every operator of each file that includes
the changed header (Metal kernels, host .mm files), or the full sweep when no includer is
known."""

from __future__ import annotations

import posixpath

from pipeline.errors import ParseError
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, sides
from pipeline.impact.rules.metal import hit_kernels, metal_units
from pipeline.impact.view import OPERATIONS_DIR, is_kernel_header
from pipeline.tree.objc import ObjcFile


def _host_ops(ctx: Context, model: ObjcFile) -> set[str]:
    ops = {ctx.resolver.stub_operator(s.stub)[0] for s in model.stubs}
    for impl in model.implementations:
        ops |= set(ctx.resolver.ops_for_impl(impl.name)) or {ctx.resolver.operator(impl.name)[0]}
    return ops | {inc.op for inc in model.includes}


def rule(change: ChangedFile, ctx: Context) -> None:
    name = posixpath.basename(change.path)
    try:
        lines = [line for side in sides(change, ctx) for line in side.changed_code_lines("c")]
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot tell its code from its comments", build=True)
        return
    if not lines and change.status != "D" and (change.new_ranges or change.old_ranges):
        return  # comments only
    where = f"{name}:{lines[0] if lines else 1}"
    includers = sorted(ctx.old.includers(change.path) | ctx.new.includers(change.path))
    if not includers:
        if change.status != "A":  # a new header nobody includes cannot change a kernel
            ctx.found.full(f"{where} header changed and no file including it was found", build=True)
        return
    fan_out(ctx, where, includers)


def fan_out(ctx: Context, where: str, includers: list[str], what: str = "header changed") -> None:
    """Every operator of each includer: all kernels of a .metal file, all operators of a
    host file; the full sweep for an includer outside the kernels and host files. A reason
    reads ``{where} {what} (included by {includer})``."""
    for includer in includers:
        inc_name = posixpath.basename(includer)
        view = ctx.new if includer in ctx.new.texts else ctx.old
        reason = f"{where} {what} (included by {inc_name})"
        if includer.endswith(".metal"):
            mfile = metal_units(view, includer, view.texts[includer])
            if mfile is None:
                ctx.found.full(reason + f"; {inc_name} does not parse", build=True)
            else:
                hit_kernels(ctx, mfile.all_kernels(), reason, shared=True)
        elif includer.startswith(OPERATIONS_DIR) and includer in view.host:
            ops = _host_ops(ctx, view.host[includer])
            for op in sorted(ops):
                ctx.found.hit(op, reason, build=True, shared=True)
            if not ops:
                ctx.found.full(reason + f"; no operator found in {inc_name}", build=True)
        elif not is_kernel_header(includer):
            ctx.found.full(reason + ": shared MPS infrastructure", build=True)
