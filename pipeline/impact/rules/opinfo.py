"""OpInfo definitions (``common_methods_invocations.py``, ``opinfo/``): the OpInfo whose
call a changed line is in, or the OpInfos using a changed helper; code no single OpInfo
uses asks for the full sweep."""

from __future__ import annotations

from pipeline.impact import pyscan
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, sides


def _info_keys(ctx: Context, call: pyscan.InfoCall) -> set[str]:
    return {
        i.key
        for i in ctx.opinfos
        if i.name == call.name and (call.variant is None or i.variant_test_name == call.variant)
    }


def rule(change: ChangedFile, ctx: Context) -> None:
    for side in sides(change, ctx):
        source = pyscan.scan_opinfo_source(side.text)
        if source is None:
            ctx.found.full(f"{side.name}: not valid Python, OpInfos unknown", build=False)
            continue
        done: set[int] = set()
        for line in side.changed_lines(source.code.__contains__):
            call = pyscan.innermost_call(source, line)
            if call is not None:
                if call.start not in done:
                    done.add(call.start)
                    variant = f" ({call.variant})" if call.variant else ""
                    reason = f"{side.where(line)}OpInfo {call.name}{variant} definition changed"
                    construct = ("opinfo", side.path, call.name, call.variant)
                    keys = _info_keys(ctx, call)
                    ctx.found.hit(call.name, reason, build=False, keys=keys, construct=construct)
                continue
            top = pyscan.enclosing_def(source, line)
            key = top.start if top else -line
            if key in done:
                continue
            done.add(key)
            users = pyscan.users(source, top) if top is not None and top.names else ()
            if not users:
                what = ", ".join(sorted(top.names)) if top and top.names else "module-level code"
                ctx.found.full(
                    f"{side.where(line)}{what} changed and is not used by one OpInfo",
                    build=False,
                )
                continue
            label = ", ".join(sorted(top.names))  # type: ignore[union-attr]
            for user in users:
                ctx.found.hit(
                    user.name,
                    f"{side.where(line)}{label}, used by OpInfo {user.name}, changed",
                    build=False,
                    keys=_info_keys(ctx, user),
                    construct=("def", side.path, top.names),  # type: ignore[union-attr]
                    shared=True,
                )
