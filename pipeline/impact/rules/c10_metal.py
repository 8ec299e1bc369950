"""Headers under ``c10/metal/``: from a changed helper to the functors that call it.

A changed line inside a helper's definition (``erfinv``, a macro) names the helper; the
helpers of the kernel headers that call it, directly or through one another, are followed
by name, and each .metal file including the header gives the kernels whose functors or
kernel functions reach any of them (:meth:`MetalUnits.reach`), on to their operators.
A changed line outside every definition (an include, a type alias, top-level code) cannot
be followed by name: every operator of every includer, as for other headers.

c10/metal is shared beyond the eager kernels: Inductor's generated Metal code (and
Helion's) calls ``c10::metal::*``, where no consistency test looks. Every code change here
selects the Inductor MPS tests, with the most exact reason the code generator's text
gives (:mod:`pipeline.tree.inductor`), and a header no functor includes selects them
alone, saying so.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from pipeline.errors import ParseError
from pipeline.impact import cscan
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, Side, sides
from pipeline.impact.rules.header import fan_out
from pipeline.impact.rules.metal import hit_kernels, metal_units
from pipeline.impact.view import INDUCTOR_MPS_CODEGEN, TreeView, is_kernel_header

_IDENT = re.compile(r"[A-Za-z_]\w*")
# helper -> (each name that reaches it, the helper it calls on the way; None for itself)
Reach = dict[str, str | None]


def _changed_helpers(lines: Iterable[tuple[Side, int]]) -> dict[str, int] | None:
    """Each helper a changed line is in, with its first changed line; None when a changed
    line is outside every named definition (it cannot be followed by name)."""
    found: dict[str, int] = {}
    parsed: dict[tuple[str, bool], tuple[cscan.Unit, ...]] = {}
    for side, line in lines:
        units = parsed.setdefault((side.path, side.old), cscan.units(side.text, side.path))
        unit = next((u for u in units if u.start <= line <= u.end), None)
        if unit is None or unit.kind == "directive" or not unit.defines:
            return None
        for name in sorted(unit.defines):
            found.setdefault(name, line)
    return found


def _reach(views: Iterable[TreeView], helper: str) -> Reach:
    """``helper`` and every kernel-header definition calling it, directly or not."""
    headers = {(p, t) for view in views for p, t in view.texts.items() if is_kernel_header(p)}
    units = [
        u
        for path, text in sorted(headers)
        for u in _units(text, path)
        if u.defines and u.kind != "directive"
    ]
    reach: Reach = {helper: None}
    frontier = {helper}
    while frontier:
        grown: set[str] = set()
        for unit in units:
            callee = next(iter(sorted(unit.mentions & frontier)), None)
            if callee is None:
                continue
            for name in unit.defines - reach.keys():
                reach[name] = callee
                grown.add(name)
        frontier = grown
    return reach


def _units(text: str, path: str) -> tuple[cscan.Unit, ...]:
    try:
        return cscan.units(text, path)
    except ParseError:
        return ()  # another header that does not lex: its callers are not followed


def _through(reach: Reach, name: str) -> str:
    """``a -> b`` : how ``name`` reaches the changed helper (empty for the helper itself)."""
    chain = []
    while (callee := reach.get(name)) is not None:
        chain.append(name)
        name = callee
    return " -> ".join(chain)


def rule(change: ChangedFile, ctx: Context) -> None:
    path = change.path
    try:
        lines = [(side, n) for side in sides(change, ctx) for n in side.changed_code_lines("c")]
        helpers = _changed_helpers(lines)
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot tell its code from its comments", build=True)
        ctx.found.inductor[f"{path}: {exc}; what Inductor's generated code uses is unknown"] = None
        return
    if not lines and change.status != "D" and (change.new_ranges or change.old_ranges):
        return  # comments only
    where = f"{path}:{lines[0][1] if lines else 1}"
    # the build installs the headers Inductor's kernels include at run time
    ctx.found.build = True
    includers = sorted(ctx.old.includers(path) | ctx.new.includers(path))
    reaches = {h: _reach((ctx.new, ctx.old), h) for h in helpers or {}}
    _inductor(ctx, path, where, helpers, reaches)
    kernels_or_host = [p for p in includers if not is_kernel_header(p)]
    if not kernels_or_host:
        ctx.found.inductor[
            f"{where} no functor includes {path}: no consistency test reaches it, and "
            "Inductor's generated Metal code can"
        ] = None
        return
    if helpers is None:
        fan_out(ctx, where, kernels_or_host, "header changed outside any helper")
        return
    for helper, line in helpers.items():
        _helper_users(ctx, f"{path}:{line}", helper, reaches[helper], kernels_or_host)


def _helper_users(
    ctx: Context, where: str, helper: str, reach: Reach, includers: list[str]
) -> None:
    names = set(reach)
    for includer in includers:
        inc_name = posixpath.basename(includer)
        view = ctx.new if includer in ctx.new.texts else ctx.old
        text = view.texts[includer]
        mfile = metal_units(view, includer, text) if includer.endswith(".metal") else None
        if mfile is None:
            if _names_any(text, includer, names):  # host code, or a .metal file not parsed
                fan_out(ctx, where, [includer], f"c10::metal::{helper} changed, named")
            continue
        seen: set[str] = set()
        # the helper's own callers first, then each caller of a caller with its chain
        for callee in sorted(names, key=lambda n: (n != helper, n)):
            kernels = mfile.reach([callee]) - seen
            seen |= kernels
            through = _through(reach, callee)
            how = f" through {through}" if through else ""
            reason = f"{where} c10::metal::{helper} changed, called{how} in {inc_name}"
            hit_kernels(ctx, kernels, reason, ("c10", where, callee, includer), shared=True)


def _names_any(text: str, path: str, names: set[str]) -> bool:
    """Whether the code of ``text`` names any of ``names`` (True when it does not lex)."""
    try:
        code = "\n".join(cscan.code_lines(text, path))
    except ParseError:
        return True
    return bool(names & set(_IDENT.findall(code)))


def _inductor(
    ctx: Context, path: str, where: str, helpers: dict[str, int] | None, reaches: dict[str, Reach]
) -> None:
    """Why the Inductor MPS tests run for this change, as exactly as the codegen says."""
    codegen = ctx.new.inductor or ctx.old.inductor
    say = ctx.found.inductor
    if codegen is None:
        say[
            f"{where} {path} changed; which c10::metal functions Inductor's generated Metal "
            f"code calls is unknown ({INDUCTOR_MPS_CODEGEN} is not in the tree)"
        ] = None
        return
    called = False
    for helper, reach in reaches.items():
        for name in sorted(reach, key=lambda n: (n != helper, n)):
            if (how := codegen.calls(name)) is None:
                continue
            called = True
            chain = "" if name == helper else f", as {_through(reach, name)} -> {helper}"
            say[
                f"{path}: c10::metal::{helper} is called by Inductor's generated Metal "
                f"code{chain} ({INDUCTOR_MPS_CODEGEN}: {how})"
            ] = None
            break
    if called:
        return
    what = ", ".join(sorted(helpers)) if helpers else "code outside any helper"
    included = [h for h in sorted(codegen.headers) if h == path or h in _includers(ctx, path)]
    if included:
        via = "" if included[0] == path else f" through {included[0]}"
        say[
            f"{where} {what} changed in {path}, which Inductor's generated Metal code "
            f"includes{via} ({INDUCTOR_MPS_CODEGEN}); no call to it found by name"
        ] = None
    else:
        say[
            f"{where} {what} changed; Inductor's generated Metal code ({INDUCTOR_MPS_CODEGEN}) "
            "neither includes the header nor calls it by name, but c10::metal is shared with "
            "generated code outside the tree (Helion's Metal backend)"
        ] = None


def _includers(ctx: Context, path: str) -> frozenset[str]:
    return ctx.old.includers(path) | ctx.new.includers(path)
