"""``common_mps.py``, the xfail lists: the OpInfo keys whose entries were added, removed or
changed; code outside every entry (the modifier's logic) asks for the full sweep."""

from __future__ import annotations

import posixpath
from typing import Any

from pipeline.errors import ParseError
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context, sides
from pipeline.tree import common_mps
from pipeline.tree.common_mps import CommonMps
from pipeline.tree.span import Span


def _xfail_signature(model: CommonMps) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    table: dict[tuple[str, str, str], list[Any]] = {}
    for entry in model.entries:
        value = (entry.dtypes, entry.raw)
        table.setdefault((entry.list, entry.function, entry.key), []).append(value)
    for member in model.sets:
        table.setdefault((member.list, member.function, member.key), []).append("member")
    return {k: tuple(v) for k, v in table.items()}


def _key_hit(ctx: Context, key: str, reason: str, *, build: bool = False) -> None:
    infos = [i for i in ctx.opinfos if i.key == key]
    if infos:
        ctx.found.hit(infos[0].name, reason, build=build, keys={key})
    else:
        ctx.found.hit(key, reason + " (no OpInfo has this key)", build=build, keys=set())


def _spans_of(model: CommonMps) -> list[Span]:
    spans = []
    for entry in model.entries:
        spans.append(entry.span)
        if entry.comment_span is not None:
            spans.append(entry.comment_span)
    return spans + [member.span for member in model.sets]


def rule(change: ChangedFile, ctx: Context) -> None:
    name = posixpath.basename(change.path)
    try:
        old = common_mps.parse(change.old_text, change.path) if change.old_text else None
        new = common_mps.parse(change.new_text, change.path) if change.new_text else None
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot compare xfail entries", build=False)
        return
    if change.old_text is not None and old is not None and new is not None:
        before, after = _xfail_signature(old), _xfail_signature(new)
        lines = {}
        for parsed, label in ((old, " (old)"), (new, "")):
            keyed: tuple[common_mps.XfailEntry | common_mps.SetEntry, ...]
            keyed = (*parsed.entries, *parsed.sets)
            for item in keyed:
                lines[(item.list, item.function, item.key)] = f"{name}:{item.span.start}{label}"
        for k in dict.fromkeys([*after, *before]):
            if before.get(k) == after.get(k):
                continue
            verb = "added" if k not in before else "removed" if k not in after else "changed"
            _key_hit(ctx, k[2], f"{lines[k]} {k[0]} entry {k[2]!r} {verb}")
    # code changed outside every entry: the modifier's logic itself
    for side in sides(change, ctx):
        model = old if side.old else new
        if model is None:
            continue
        spans = _spans_of(model)
        for line in side.changed_code_lines("python"):
            inside = [s for s in model.entries if s.span.contains(line)] + [
                s for s in model.sets if s.span.contains(line)
            ]
            if change.old_text is None and inside:
                for item in inside:
                    _key_hit(
                        ctx, item.key, f"{side.where(line)}{item.list} entry {item.key!r} edited"
                    )
                continue
            if not any(span.contains(line) for span in spans):
                ctx.found.full(
                    f"{side.where(line)}code outside the xfail entries changed", build=False
                )
                break
