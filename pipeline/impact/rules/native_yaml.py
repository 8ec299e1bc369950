"""``native_functions.yaml``: the entries whose schema, dispatch, structured fields,
autogen or text changed, compared entry by entry (by the edited lines without the old
version)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, fields

from pipeline.errors import ParseError
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context
from pipeline.impact.view import NATIVE_YAML, TreeView
from pipeline.tree import native_yaml
from pipeline.tree.native_yaml import NativeFunction, NativeFunctions

_YAML_COMMENT = re.compile(r"(^|\s)#.*$")


def _yaml_code(text: str) -> list[str]:
    return [_YAML_COMMENT.sub("", line).rstrip() for line in text.splitlines()]


@dataclass(frozen=True)
class _Signature:
    """The aspects of an entry compared between two versions; a field's name is how a
    reason names that aspect."""

    schema: str
    dispatch: tuple[tuple[tuple[str, ...], str], ...]  # (keys, kernel) of each row
    structured: tuple[bool, str | None, str | None]  # structured, its delegate, inherits
    autogen: tuple[str, ...]
    definition: tuple[str, ...]  # the entry's lines, comments and blank lines left out

    @classmethod
    def of(cls, entry: NativeFunction, code: list[str]) -> _Signature:
        body = [line for line in code[entry.span.start - 1 : entry.span.end] if line.strip()]
        return cls(
            schema=entry.schema,
            dispatch=tuple((row.keys, row.kernel) for row in entry.dispatch),
            structured=(entry.structured, entry.structured_delegate, entry.structured_inherits),
            autogen=entry.autogen,
            definition=tuple(body),
        )

    def changed(self, other: _Signature) -> list[str]:
        """The aspects that differ, in field order."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def _dispatch_detail(old: NativeFunction, new: NativeFunction) -> str:
    before, after = old.kernel_for("MPS"), new.kernel_for("MPS")
    if before != after:
        return f" (MPS: {before or 'none'} -> {after or 'none'})"
    return ""


def _parsed_yaml(view: TreeView, text: str | None) -> NativeFunctions | None:
    """The view's model when it was parsed from ``text`` (saves re-reading 15k lines)."""
    if not text:
        return None
    if view.native is not None and view.texts.get(NATIVE_YAML) == text:
        return view.native
    return native_yaml.parse(text, NATIVE_YAML)


def rule(change: ChangedFile, ctx: Context) -> None:
    name = posixpath.basename(change.path)
    if change.old_text is None:
        _yaml_lines_edited(change, ctx)
        return
    try:
        old = _parsed_yaml(ctx.old, change.old_text)
        new = _parsed_yaml(ctx.new, change.new_text)
    except ParseError as exc:
        ctx.found.full(f"{exc}: cannot compare native_functions.yaml entries", build=True)
        return
    old_entries = {e.full_name: e for e in (old.entries if old else ())}
    new_entries = {e.full_name: e for e in (new.entries if new else ())}
    old_code = _yaml_code(change.old_text or "")
    new_code = _yaml_code(change.new_text or "")
    for full_name, entry in new_entries.items():
        before = old_entries.get(full_name)
        line = entry.span.start
        if before is None:
            ctx.found.hit(entry.operator, f"{name}:{line} {full_name} added", build=True)
            continue
        changed = _Signature.of(before, old_code).changed(_Signature.of(entry, new_code))
        if not changed:
            continue
        # "definition" (the entry's text sans comments) is implied by any other aspect
        if len(changed) > 1:
            changed.remove("definition")
        detail = _dispatch_detail(before, entry) if "dispatch" in changed else ""
        aspects = " and ".join(changed)
        ctx.found.hit(
            entry.operator, f"{name}:{line} {aspects} of {full_name} changed{detail}", build=True
        )
    for full_name, entry in old_entries.items():
        if full_name not in new_entries:
            reason = f"{name}:{entry.span.start} {full_name} removed"
            ctx.found.hit(entry.operator, reason, build=True)


def _yaml_lines_edited(change: ChangedFile, ctx: Context) -> None:
    """Without the previous version: the entries spanning edited (non-comment) lines."""
    native = ctx.new.native
    name = posixpath.basename(change.path)
    if native is None:
        ctx.found.full(f"{name}: could not be parsed, entries unknown", build=True)
        return
    code = _yaml_code(change.new_text or "")
    for entry in native.entries:
        for start, end in change.new_ranges:
            lines = [
                n
                for n in range(max(start, entry.span.start), min(end, entry.span.end) + 1)
                if n <= len(code) and code[n - 1].strip()
            ]
            if lines:
                reason = f"{name}:{lines[0]} entry {entry.full_name} edited"
                ctx.found.hit(entry.operator, reason, build=True)
                break
