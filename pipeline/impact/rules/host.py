"""``.mm`` host files under ``native/mps/operations/``: the stub registration, stub kernel,
MPSGraph implementation or include a changed line belongs to; code outside all of them
asks for the full sweep."""

from __future__ import annotations

from pipeline.errors import ParseError
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, Side, sides
from pipeline.tree import objc
from pipeline.tree.objc import ObjcFile


def rule(change: ChangedFile, ctx: Context) -> None:
    for side in sides(change, ctx):
        model = side.view.host.get(side.path)
        if model is None or side.view.texts.get(side.path) != side.text:
            try:
                model = objc.parse(side.text, side.path)
            except ParseError as exc:
                ctx.found.full(f"{exc}: its stubs are unknown", build=True)
                continue
        done: set[tuple[str, int]] = set()
        for line in side.changed_code_lines("c"):
            _host_line(ctx, side, model, line, done)


def _host_line(ctx: Context, side: Side, model: ObjcFile, line: int, done: set) -> None:
    where = side.where(line)
    res = ctx.resolver
    path = side.path
    for stub in model.stubs:
        if stub.span.contains(line):
            if ("stub", stub.span.start) not in done:
                done.add(("stub", stub.span.start))
                op, how = res.stub_operator(stub.stub)
                reason = f"{where}registration of {stub.stub} changed{how}"
                ctx.found.hit(op, reason, build=True, construct=("stub", path, stub.stub))
            return
    for fn in model.functions:
        if fn.span.contains(line):
            if ("fn", fn.span.start) not in done:
                done.add(("fn", fn.span.start))
                reason = f"{where}stub kernel {fn.name} changed"
                construct = ("fn", path, fn.name)
                stubs = res.stubs_registering(fn.name)
                found = [(*res.stub_operator(stub), f" (registered as {stub})") for stub in stubs]
                if not stubs and fn.kernel_name:
                    found = [(op, how, "") for op, how in res.ops_for_kernel(fn.kernel_name)]
                elif not stubs:
                    found = [(*res.operator(fn.name), "")]
                for op, how, via in found:
                    ctx.found.hit(op, reason + via + how, build=True, construct=construct)
            return
    for impl in model.implementations:
        if impl.span.contains(line):
            if ("impl", impl.span.start) not in done:
                done.add(("impl", impl.span.start))
                reason = f"{where}MPSGraph implementation {impl.name} changed"
                construct = ("impl", path, impl.name)
                ops = res.ops_for_impl(impl.name)
                for op in ops:
                    ctx.found.hit(
                        op, f"{reason} (MPS kernel of {op})", build=True, construct=construct
                    )
                if not ops:
                    op, how = res.operator(impl.name)
                    ctx.found.hit(op, reason + how, build=True, construct=construct)
            return
    for inc in model.includes:
        if inc.span.contains(line):
            reason = f"{where}include of {inc.op}_native.h changed"
            ctx.found.hit(inc.op, reason, build=True, construct=("include", path, inc.op))
            return
    if ("shared", 0) not in done:
        done.add(("shared", 0))
        ctx.found.full(
            f"{where}shared host code changed (outside any stub, kernel or MPSGraph "
            "implementation)",
            build=True,
        )
