"""Fold an operator's MPS dispatch into the row it shares with CPU and CUDA.

Step 1 of the native-Metal migration: ``MPS: atan2_out_mps`` goes, and ``CPU, CUDA: atan2_out``
becomes ``CPU, CUDA, MPS: atan2_out``, in every overload of the operator. The edit works on
lines so every other byte of the file (comments, key order, other backends) stays as it was.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from pipeline.edit.atomic import FileEdit
from pipeline.errors import EditVerificationError, ParseError, UnknownOperatorError
from pipeline.tree import native_yaml
from pipeline.tree.native_yaml import PENDING_KINDS, DispatchRow, MpsKind, NativeFunction

# A block-style dispatch row: indent, comma-separated keys, then ": kernel" and anything after.
_ROW = re.compile(
    r"^(?P<indent>[ \t]*)"
    r"(?P<keys>[A-Za-z0-9_]+(?:[ \t]*,[ \t]*[A-Za-z0-9_]+)*)"
    r"(?P<rest>[ \t]*:.*)$"
)
_MPS_ROW = re.compile(r"^[ \t]*MPS[ \t]*:[ \t]*(?P<kernel>\S+)[ \t]*(?:#.*)?$")


# Why a migration leaves an overload without MPS as it is
NOT_ADDED = (
    "had no MPS dispatch and keeps none: adding MPS is the add workflow's, not a migration's"
)


@dataclass(frozen=True)
class YamlFoldResult:
    """What :func:`fold_mps_dispatch` did; ``edit`` is unchanged when there was nothing to do."""

    edit: FileEdit
    folded: tuple[str, ...]  # full names of the entries rewritten
    manual: tuple[tuple[str, str], ...]  # (full name, why a human has to do it)
    old_kernels: tuple[str, ...]  # removed MPS-only kernels that nothing dispatches to any more
    # the edited text as parsed to verify it (None: unchanged), for callers reading it again
    parsed: native_yaml.NativeFunctions | None = None


@dataclass(frozen=True)
class _Plan:
    entry: NativeFunction
    shared: DispatchRow  # the row MPS joins
    new_text: str  # the shared row's line with MPS appended to its keys
    drop: DispatchRow | None  # the MPS-only row, None when MPS had no row (add-MPS workflow)


def fold_mps_dispatch(
    text: str,
    path: str,
    operator: str,
    *,
    model: native_yaml.NativeFunctions | None = None,
    add: bool = False,
) -> YamlFoldResult:
    """Fold MPS into the CPU/CUDA row of every overload of ``operator`` that has its own.

    Entries whose MPS kernel is MPS-only are folded, and with ``add`` (the guide's add-MPS
    workflow) also those with no MPS row at all but a row shared by CPU and CUDA; without it
    they are left as they were and reported in ``manual``: a migration never gives MPS to an
    overload that had none. Shared, delegating and composite entries are left alone, so a
    second fold changes nothing. Entries with no CPU/CUDA row to join are reported in
    ``manual``. The result is verified by re-parsing it: EditVerificationError if anything
    but the folded entries' dispatch changed. UnknownOperatorError if no entry has that name.

    ``model`` is ``text`` already parsed (the tree index has it: the real file is 15,000
    lines); the edited text is always parsed again.
    """
    model = model or native_yaml.parse(text, path)
    ops = model.operators()
    if operator not in ops:
        raise UnknownOperatorError(operator, difflib.get_close_matches(operator, list(ops), n=3))
    plans: list[_Plan] = []
    manual: list[tuple[str, str]] = []
    for entry in ops[operator]:
        if entry.mps_kind not in PENDING_KINDS:
            continue
        if entry.mps_kind is MpsKind.NONE and not add:
            manual.append((entry.full_name, NOT_ADDED))
            continue
        plan = _plan(entry)
        if isinstance(plan, str):
            manual.append((entry.full_name, plan))
        else:
            plans.append(plan)

    lines = native_yaml.split_lines(text, keepends=True)
    for plan in plans:
        line = lines[plan.shared.line - 1]
        lines[plan.shared.line - 1] = plan.new_text + line[len(plan.shared.text) :]
        if plan.drop is not None:
            lines[plan.drop.line - 1] = ""
    after = "".join(lines)

    folded = tuple(p.entry.full_name for p in plans)
    if not plans:  # nothing folded: the text is unchanged, nothing to verify
        return YamlFoldResult(
            FileEdit(path, text, text, f"{operator}: no MPS dispatch to fold"),
            (),
            tuple(manual),
            (),
        )
    new = _verify(model, after, path, plans)
    # Callers delete the MPSGraph implementations named here, so a kernel some other entry
    # still dispatches to is not reported.
    still_used = {row.kernel for entry in new.entries for row in entry.dispatch}
    dropped = (p.drop.kernel for p in plans if p.drop is not None)
    old_kernels = tuple(k for k in dict.fromkeys(dropped) if k not in still_used)
    summary = (
        f"fold MPS into shared dispatch of {', '.join(folded)}"
        if folded
        else f"{operator}: no MPS dispatch to fold"
    )
    return YamlFoldResult(
        FileEdit(path, text, after, summary), folded, tuple(manual), old_kernels, new
    )


def _plan(entry: NativeFunction) -> _Plan | str:
    """How to fold ``entry``, or why it cannot be done mechanically."""
    cpu_rows = [row for row in entry.dispatch if "CPU" in row.keys]
    if not cpu_rows:
        return "no CPU dispatch row for MPS to join"
    shared = cpu_rows[-1]
    cuda = entry.kernel_for("CUDA")
    if cuda is None:
        return f"CPU kernel {shared.kernel} is not shared with CUDA; no shared row to join"
    if cuda != shared.kernel:
        return f"CPU and CUDA have different kernels ({shared.kernel}, {cuda}); no shared row"
    match = _ROW.match(shared.text)
    if not match or _keys(match[2]) != shared.keys:
        return f"CPU row is not a plain `KEYS: kernel` line: {shared.text.strip()!r}"
    new_text = match.expand(r"\g<indent>\g<keys>, MPS\g<rest>")
    if entry.mps_kind is MpsKind.NONE:
        return _Plan(entry, shared, new_text, None)
    mps_rows = [row for row in entry.dispatch if "MPS" in row.keys]
    drop = mps_rows[-1]
    match = _MPS_ROW.match(drop.text)
    if len(mps_rows) > 1 or not match or match[1] != drop.kernel:
        return f"MPS row is not a line of its own: {drop.text.strip()!r}"
    return _Plan(entry, shared, new_text, drop)


def _keys(text: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(","))


def _fields(entry: NativeFunction) -> tuple:
    """Everything about an entry but its dispatch and position (lines shift after an edit)."""
    return (
        entry.name,
        entry.overload,
        entry.schema,
        entry.structured,
        entry.structured_delegate,
        entry.structured_inherits,
        entry.autogen,
    )


def _rows(entry: NativeFunction) -> tuple:
    return tuple((row.keys, row.kernel, row.text) for row in entry.dispatch)


def _effective(entry: NativeFunction) -> dict[str, str]:
    return {key: row.kernel for row in entry.dispatch for key in row.keys}


def _verify(
    model: native_yaml.NativeFunctions, after: str, path: str, plans: list[_Plan]
) -> native_yaml.NativeFunctions:
    """Re-parse ``after``: only the planned entries may differ, and only as planned."""
    try:
        new = native_yaml.parse(after, path)
    except ParseError as exc:
        raise EditVerificationError(f"the folded file no longer parses: {exc}") from None
    if [e.full_name for e in new.entries] != [e.full_name for e in model.entries]:
        raise EditVerificationError(f"{path}: folding changed the list of entries")
    planned = {p.entry.span.start: p for p in plans}
    for old, now in zip(model.entries, new.entries, strict=True):
        plan = planned.get(old.span.start)
        if plan is None:
            if _fields(old) != _fields(now) or _rows(old) != _rows(now):
                raise EditVerificationError(
                    f"{old.span}: folding changed unrelated entry {old.full_name}; "
                    "nothing was written"
                )
            continue
        expected = {**_effective(old), "MPS": plan.shared.kernel}
        if not (
            _fields(old) == _fields(now)
            and _effective(now) == expected
            and now.mps_kind is MpsKind.SHARED
        ):
            raise EditVerificationError(
                f"{now.span}: {now.full_name} did not become `MPS: {plan.shared.kernel}` "
                "shared with CPU and CUDA; nothing was written"
            )
    return new
