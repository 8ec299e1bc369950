"""Backend-shared structured kernels (``aten/src/ATen/native/*.cpp``): the structured
kernels, meta functions and dispatch stubs MPS runs, and the helpers they name."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.errors import ParseError
from pipeline.impact import cscan
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, sides

_STRUCTURED = re.compile(r"^\s*TORCH_(IMPL|META)_FUNC2?\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")
_DEFINE_DISPATCH = re.compile(r"^\s*DEFINE_DISPATCH\s*\(\s*(\w+)\s*\)")


def _mps_ops_of_unit(ctx: Context, text: str) -> dict[str, str]:
    """Operators whose MPS path runs this top-level unit of a shared .cpp, with what it is.

    ``TORCH_IMPL_FUNC(k)`` and plain functions count when a yaml entry dispatches MPS to
    ``k``; ``TORCH_META_FUNC(op)`` when ``op`` has any MPS kernel; ``DEFINE_DISPATCH(s)``
    when MPS registers stub ``s``.
    """
    res = ctx.resolver
    first = text.lstrip().split("\n", 1)[0]
    if match := _STRUCTURED.match(first):
        kind, name = match.group(1), match.group(2)
        if kind == "IMPL":
            return {op: f"structured kernel {name}" for op in sorted(res.mps_kernels.get(name, ()))}
        op = res.operator(name)[0]
        return {op: f"structured meta function of {name}"} if op in res.mps_ops else {}
    if match := _DEFINE_DISPATCH.match(first):
        stub = match.group(1)
        registered = any(
            s.stub == stub
            for view in (ctx.new, ctx.old)
            for m in view.host.values()
            for s in m.stubs
        )
        return {res.stub_operator(stub)[0]: f"dispatch stub {stub}"} if registered else {}
    return {}


def rule(change: ChangedFile, ctx: Context) -> None:
    """A backend-shared .cpp: only the structured kernels, meta functions and stubs MPS runs
    (and helpers they name) count; the rest is other backends' business."""
    attributed = False
    for side in sides(change, ctx):
        try:
            units = cscan.units(side.text, side.path)
            changed = side.changed_code_lines("c")
        except ParseError as exc:
            ctx.found.full(f"{exc}: its MPS code is unknown", build=True)
            attributed = True
            continue
        lines = side.text.splitlines()
        text_of = {u.start: "\n".join(lines[u.start - 1 : u.end]) for u in units}
        done: set[int] = set()
        for line in changed:
            unit = next((u for u in units if u.start <= line <= u.end), None)
            if unit is None or unit.start in done:
                continue
            done.add(unit.start)
            found = _mps_ops_of_unit(ctx, text_of[unit.start])
            label = ""
            if not found and unit.defines:
                # a helper: the structured kernels that name it, directly or not
                users = _cpp_users(units, unit)
                for user in users:
                    for op, what in _mps_ops_of_unit(ctx, text_of[user.start]).items():
                        found.setdefault(op, what)
                label = ", ".join(sorted(unit.defines)) + ", used by "
            for op, what in found.items():
                reason = f"{side.where(line)}{label}{what} changed (MPS shares it)"
                ctx.found.hit(
                    op,
                    reason,
                    build=True,
                    construct=("cpp", side.path, unit.defines, what),
                    shared=bool(label),  # a helper the structured kernel uses
                )
                attributed = True
    if not attributed:
        ctx.found.ignored.append(change.path)


def _cpp_users(units: Sequence[cscan.Unit], start: cscan.Unit) -> list[cscan.Unit]:
    names, frontier, seen, users = set(start.defines), set(start.defines), {start.start}, []
    while frontier:
        reached = [u for u in units if u.start not in seen and u.mentions & frontier]
        frontier = set()
        for unit in reached:
            seen.add(unit.start)
            users.append(unit)
            frontier |= unit.defines - names
            names |= unit.defines
    return users
