"""``.metal`` kernel sources: the functors, registrations, kernels, macros and helpers a
changed line belongs to, followed to the kernels that use them and on to their operators.

``MetalUnits`` and ``hit_kernels`` serve the header rule too: a header's change reaches
every kernel of each .metal file including it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.errors import ParseError
from pipeline.impact import cscan
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, Side, sides
from pipeline.impact.view import TreeView
from pipeline.tree import metal
from pipeline.tree.metal import Functor, MetalFile


@dataclass(frozen=True)
class MetalUnits:
    """A .metal file's reader model joined with its top-level units."""

    path: str
    model: MetalFile
    units: tuple[cscan.Unit, ...]

    def functor_kernel(self, functor: Functor) -> str:
        return functor.name.removesuffix("_functor")

    def struct_name(self, functor: Functor) -> str:
        return self.functor_kernel(functor) + "_functor"

    def kernel_functions(self) -> set[str]:
        return {n for u in self.units if u.kind == "kernel" for n in u.defines}

    def unit_kernels(self, unit: cscan.Unit, seen: set[int] | None = None) -> set[str]:
        """Metal kernel names a unit defines, registers, or instantiates (through macros)."""
        seen = set() if seen is None else seen
        if unit.start in seen:
            return set()
        seen.add(unit.start)
        kernels = {
            self.functor_kernel(f)
            for f in self.model.functors
            if f.span.overlaps(unit.start, unit.end)
        }
        kernels |= {
            r.kernel for r in self.model.registrations if r.span.overlaps(unit.start, unit.end)
        }
        if unit.kind == "kernel":
            kernels |= set(unit.defines)
        if unit.kind in ("define", "statement"):
            if unit.kind == "define":
                kernels |= {
                    r.kernel for r in self.model.registrations if r.written_macro in unit.defines
                }
                kernels |= {
                    self.functor_kernel(f) for f in self.model.functors if f.macro in unit.defines
                }
            # what the macro body or invocation names: kernel functions, functors, macros
            kernels |= unit.mentions & self.kernel_functions()
            structs = {self.struct_name(f): self.functor_kernel(f) for f in self.model.functors}
            kernels |= {structs[m] for m in unit.mentions & set(structs)}
            for other in self.units:
                if other.kind == "define" and other.defines & unit.mentions:
                    kernels |= self.unit_kernels(other, seen)
        return kernels

    def reach(self, names: Iterable[str], exclude: cscan.Unit | None = None) -> set[str]:
        """Kernels of every unit that names ``names``, directly or through other units."""
        frontier = set(names)
        known = set(frontier)
        visited: set[int] = set() if exclude is None else {exclude.start}
        kernels: set[str] = set()
        while frontier:
            reached = [u for u in self.units if u.start not in visited and u.mentions & frontier]
            frontier = set()
            for unit in reached:
                visited.add(unit.start)
                kernels |= self.unit_kernels(unit)
                new = set(unit.defines) | {
                    self.struct_name(f)
                    for f in self.model.functors
                    if f.span.overlaps(unit.start, unit.end)
                }
                frontier |= new - known
                known |= new
        return kernels

    def all_kernels(self) -> set[str]:
        kernels = {self.functor_kernel(f) for f in self.model.functors}
        kernels |= {r.kernel for r in self.model.registrations}
        return kernels | self.kernel_functions()


def metal_units(side_view: TreeView, path: str, text: str) -> MetalUnits | None:
    model = side_view.metal.get(path)
    if model is None or side_view.texts.get(path) != text:
        try:
            model = metal.parse(text, path)
        except ParseError:
            return None
    return MetalUnits(path, model, cscan.units(text, path))


def hit_kernels(
    ctx: Context,
    kernels: Iterable[str],
    reason: str,
    construct: tuple | None = None,
    *,
    shared: bool = False,
) -> None:
    for kernel in sorted(kernels):
        for op, how in ctx.resolver.ops_for_kernel(kernel):
            ctx.found.hit(op, reason + how, build=True, construct=construct, shared=shared)


def _file_wide(ctx: Context, mfile: MetalUnits, reason: str) -> None:
    kernels = mfile.all_kernels()
    if not kernels:
        ctx.found.full(reason + f"; no kernel found in {mfile.path}", build=True)
        return
    name = posixpath.basename(mfile.path)
    reason = f"{reason}: every operator with Metal kernels in {name}"
    hit_kernels(ctx, kernels, reason, ("file", mfile.path), shared=True)


def rule(change: ChangedFile, ctx: Context) -> None:
    for side in sides(change, ctx):
        mfile = metal_units(side.view, side.path, side.text)
        if mfile is None:
            ctx.found.full(f"{side.name}: does not parse, its kernels are unknown", build=True)
            continue
        done: set[tuple[str, int]] = set()
        for line in side.changed_code_lines("c"):
            _metal_line(ctx, side, mfile, line, done)


def _metal_line(
    ctx: Context, side: Side, mfile: MetalUnits, line: int, done: set[tuple[str, int]]
) -> None:
    where = side.where(line)
    path = side.path
    # one line can register many kernels (a file-local macro instantiating a list of ops)
    regs = [r for r in mfile.model.registrations if r.span.contains(line)]
    if regs:
        key = ("reg", regs[0].span.start)
        if key not in done:
            done.add(key)
            for kernel in dict.fromkeys(r.kernel for r in regs):
                reason = f"{where}registration of {kernel} changed"
                hit_kernels(ctx, [kernel], reason, ("reg", path, kernel))
        return
    functors = [f for f in mfile.model.functors if f.span.contains(line)]
    if functors:
        key = ("functor", functors[0].span.start)
        if key not in done:
            done.add(key)
            for functor in functors:
                kernel = mfile.functor_kernel(functor)
                construct: tuple = ("functor", path, kernel)
                hit_kernels(ctx, [kernel], f"{where}functor {kernel}_functor changed", construct)
                unit = next((u for u in mfile.units if functor.span.overlaps(u.start, u.end)), None)
                users = mfile.reach([mfile.struct_name(functor)], exclude=unit) - {kernel}
                reason = f"{where}functor {kernel}_functor, used by {{}}, changed"
                for user in sorted(users):
                    hit_kernels(ctx, [user], reason.format(user), construct, shared=True)
        return
    unit = next((u for u in mfile.units if u.start <= line <= u.end), None)
    key = ("unit", unit.start if unit else line)
    if key in done:
        return
    done.add(key)
    if unit is None or unit.kind == "directive":
        _file_wide(ctx, mfile, f"{where}shared code changed (outside any functor)")
        return
    kernels = mfile.unit_kernels(unit) | mfile.reach(unit.defines, exclude=unit)
    label = ", ".join(sorted(unit.defines)) or "top-level code"
    if not kernels:
        _file_wide(ctx, mfile, f"{where}{label} changed and no user of it was found")
        return
    what = "macro" if unit.kind == "define" else "kernel" if unit.kind == "kernel" else "helper"
    construct = ("unit", path, unit.kind, unit.defines or unit.mentions)
    reason = f"{where}shared {what} {label} changed"
    # a kernel function is its own kernels' code; what reaches it through it shares it
    own = set(unit.defines) & kernels if unit.kind == "kernel" else set()
    hit_kernels(ctx, own, reason, construct)
    hit_kernels(ctx, kernels - own, reason, construct, shared=True)
