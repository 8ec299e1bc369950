"""Format-preserving edits of the xfail/skip dicts in common_mps.py (libcst).

An :class:`XfailChange` either deletes an entry or narrows its value to the dtypes that
still fail. The decision of *what* to change lives in ``pipeline.results.decide``; this
module only applies changes, and proves it applied exactly them by re-reading the result
with :mod:`pipeline.tree.common_mps`.

Layout rules:

- Deleting an entry removes its key, value and trailing comment. The comment block directly
  above it (the reader's ``comment_span``: contiguous comment lines, no blank line) heads a
  *group*: that entry and the entries right after it, up to the next blank line, the next
  entry with a comment block of its own, or the end of the dict. Commented-out entries
  (``# "kthvalue": None,``) stay in the group and are never removed. The block goes only
  when every entry of its group is deleted in the same change; otherwise it is a heading
  for the rest (``# CPU Errors:``, ``# GEMM ... integral types``) and stays, now above the
  next survivor. Comments above other entries always stay. Where a removal brings two blank
  lines together one of them goes, and so does a blank line it brings next to a bracket.
  Removing the last entry keeps the dict's trailing-comma style.
- Narrowing a literal list keeps the surviving elements as written (``torch.half`` stays
  ``torch.half``) and the list's layout. When a new list has to be written (the old value was
  ``None``, or gains a dtype), each dtype is spelled as the entry already spells it, else as
  the file most often spells it, else ``torch.<canonical>``; one line if it fits in 88
  columns (PyTorch's formatter width), else one dtype per line.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from pipeline.dtypes import TORCH_ALIASES, canonical, sort_key
from pipeline.edit.atomic import FileEdit
from pipeline.errors import EditVerificationError
from pipeline.tree import common_mps
from pipeline.tree.common_mps import CommonMps, XfailEntry

# the width common_mps.py's lists are wrapped at (upstream's flake8 max-line-length)
LINE_WIDTH = 88


@dataclass(frozen=True)
class XfailChange:
    """Delete ``key`` from ``list`` in ``function``, or set its dtypes to ``new_dtypes``.

    ``new_dtypes`` are canonical names; ``None`` means all dtypes. It is ignored when
    ``delete`` is true. An empty tuple xfails nothing: say ``delete=True`` instead.
    """

    list: str
    function: str
    key: str
    new_dtypes: tuple[str, ...] | None
    delete: bool = False

    def __post_init__(self) -> None:
        if self.delete or self.new_dtypes is None:
            return
        if not self.new_dtypes:
            raise ValueError(
                f"XfailChange for {self.key!r}: an empty dtype list xfails nothing; "
                "use delete=True to remove the entry"
            )
        for dtype in self.new_dtypes:
            if TORCH_ALIASES.get(dtype) != dtype:
                raise ValueError(
                    f"XfailChange for {self.key!r}: {dtype!r} is not a canonical dtype"
                )

    @property
    def target(self) -> tuple[str, str, str]:
        return (self.list, self.function, self.key)


@dataclass(frozen=True)
class _Op:
    change: XfailChange
    entry: XfailEntry
    drop_comment_lines: int


def apply_xfail_changes(text: str, path: str, changes: Sequence[XfailChange]) -> FileEdit:
    """Apply ``changes`` to a common_mps.py text; verified, nothing else in the file moves.

    Raises :class:`EditVerificationError` when a change names no entry, targets a value
    that is not a literal list, or when re-reading the result shows any difference beyond
    the intended entries.
    """
    before = common_mps.parse(text, path)
    ops = _plan(before, text.splitlines(), path, changes)
    if not ops:
        return FileEdit(path, text, text, "xfail lists: nothing to change")
    module, positions = _tree(text)
    editor = _Editor(ops, positions, text)
    after = module.visit(editor).code
    missed = set(ops) - editor.applied
    if missed:
        raise EditVerificationError(
            f"{path}: could not locate {', '.join(ops[m].entry.key for m in sorted(missed))} "
            "in the concrete syntax tree; nothing was written"
        )
    _verify(before, text, after, path, list(ops.values()))
    return FileEdit(path, text, after, _summary(ops.values()))


# libcst's trees are immutable, so the last texts' trees and node positions are kept: the
# positions are half of an edit's time (a code generation of the whole file, 0.2 s for the
# real common_mps.py), and a text edited again in one process (one change after another on
# the same file) needs them again.
@functools.lru_cache(maxsize=2)
def _tree(text: str) -> tuple[cst.Module, Mapping[cst.CSTNode, CodeRange]]:
    """``text``'s concrete syntax tree and the position of each of its nodes."""
    wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
    return wrapper.module, wrapper.resolve(PositionProvider)


def _plan(
    model: CommonMps, lines: list[str], path: str, changes: Sequence[XfailChange]
) -> dict[tuple, _Op]:
    by_target: dict[tuple[str, str, str], XfailChange] = {}
    for change in changes:
        if by_target.setdefault(change.target, change) != change:
            raise EditVerificationError(f"{path}: conflicting changes for {change.key!r}")
    deleted = {
        (e.span.start, e.key)
        for e in model.entries
        if (c := by_target.get((e.list, e.function, e.key))) is not None and c.delete
    }
    ops: dict[tuple[int, str], _Op] = {}
    for target, change in by_target.items():
        entries = [e for e in model.entries if (e.list, e.function, e.key) == target]
        if not entries:
            raise EditVerificationError(
                f"{path}: no entry {change.key!r} in {change.list} "
                f"({change.function or 'module'}); nothing was written"
            )
        for entry in entries:
            if not change.delete and entry.raw is not None:
                raise EditVerificationError(
                    f"{entry.span}: value of {entry.key!r} is not a literal list "
                    f"({entry.raw.splitlines()[0]}); change it by hand"
                )
            if not change.delete and _same(entry.dtypes, change.new_dtypes):
                continue
            above, drop = entry.comment_span, 0
            if change.delete and above and _ends_comment_group(entry, model, deleted, lines):
                drop = above.end - above.start + 1
            ops[(entry.span.start, entry.key)] = _Op(change, entry, drop)
    return ops


def _same(old: tuple[str, ...] | None, new: tuple[str, ...] | None) -> bool:
    if old is None or new is None:
        return old is new
    return set(old) == set(new)


def _ends_comment_group(
    entry: XfailEntry, model: CommonMps, deleted: set, lines: list[str]
) -> bool:
    """True when the comment block above ``entry`` goes with it (see the module docs)."""
    if entry.comment_span is None:
        return False
    siblings = sorted(
        (
            e
            for e in model.entries
            if (e.list, e.function) == (entry.list, entry.function)
            and e.span.start > entry.span.end
        ),
        key=lambda e: e.span.start,
    )
    previous_end = entry.span.end
    for sibling in siblings:
        gap = lines[previous_end : sibling.span.start - 1]
        if sibling.comment_span is not None or not all(map(common_mps.is_disabled_entry, gap)):
            return True
        if (sibling.span.start, sibling.key) not in deleted:
            return False
        previous_end = sibling.span.end
    return True


# --- the concrete-syntax-tree side -------------------------------------------------------


class _Editor(cst.CSTTransformer):
    def __init__(self, ops: dict[tuple[int, str], _Op], positions, text: str) -> None:
        super().__init__()
        self.ops = ops
        self.positions = positions
        self.lines = text.splitlines()
        self.applied: set[tuple[int, str]] = set()
        self.spelling = _file_spelling(text)
        self.lines_changed = {line for line, _ in ops}

    def on_visit(self, node: cst.CSTNode) -> bool:
        # a node spanning no changed entry's line holds nothing to change: not descended
        # into, the walk of the 2,000-line file's tree is a few statements' (0.14 s an edit)
        where = self.positions.get(node)
        if where is not None and not any(
            where.start.line <= line <= where.end.line for line in self.lines_changed
        ):
            return False
        return super().on_visit(node)

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        drops: dict[int, int] = {}
        elements = list(updated_node.elements)
        for index, element in enumerate(original_node.elements):
            if not isinstance(element, cst.DictElement):
                continue
            key = _string_value(element.key)
            if key is None:  # not a string key, so no entry's
                continue
            where = (self.positions[element.key].start.line, key)
            op = self.ops.get(where)
            if op is None:
                continue
            self.applied.add(where)
            if op.change.delete:
                drops[index] = op.drop_comment_lines
            else:
                elements[index] = elements[index].with_changes(
                    value=self.new_value(element.value, op)
                )
        node = updated_node.with_changes(elements=elements)
        if not drops:
            return node
        kept, opening, closing = remove_elements(
            elements, node.lbrace.whitespace_after, node.rbrace.whitespace_before, drops
        )
        return node.with_changes(
            elements=kept,
            lbrace=node.lbrace.with_changes(whitespace_after=opening),
            rbrace=node.rbrace.with_changes(whitespace_before=closing),
        )

    def new_value(self, old: cst.BaseExpression, op: _Op) -> cst.BaseExpression:
        new = op.change.new_dtypes
        if new is None:
            return cst.Name("None")
        old_dtypes = op.entry.dtypes or ()
        if isinstance(old, (cst.List, cst.Tuple)) and old_dtypes and set(new) <= set(old_dtypes):
            return filter_sequence(old, set(new))
        own = {canonical(a): a for a in _torch_attrs(old)}
        ordered = [d for d in dict.fromkeys(old_dtypes) if d in new]
        ordered += sorted((d for d in set(new) - set(ordered)), key=sort_key)
        items = [f"torch.{own.get(d) or self.spelling.get(d, d)}" for d in ordered]
        start = self.positions[old].start
        one_line = "[" + ", ".join(items) + "]"
        if start.column + len(one_line) + 1 <= LINE_WIDTH:
            return cst.parse_expression(one_line)
        line = self.lines[start.line - 1]
        indent = line[: len(line) - len(line.lstrip())]
        body = "".join(f"{indent}    {item},\n" for item in items)
        expression = cst.parse_expression(f"[\n{body}{indent}]").visit(_AbsoluteIndent())
        return cst.ensure_type(expression, cst.List)  # the transformer only moves whitespace


class _AbsoluteIndent(cst.CSTTransformer):
    """Our generated text carries absolute columns: don't let libcst add the block indent."""

    def leave_ParenthesizedWhitespace(self, original_node, updated_node):
        return updated_node.with_changes(indent=False)


def _string_value(node: cst.BaseExpression) -> str | None:
    value = getattr(node, "evaluated_value", None)
    return value if isinstance(value, str) else None


def _torch_attrs(node: cst.BaseExpression) -> list[str]:
    if not isinstance(node, (cst.List, cst.Tuple)):
        return []
    return [
        el.value.attr.value
        for el in node.elements
        if isinstance(el.value, cst.Attribute)
        and isinstance(el.value.value, cst.Name)
        and el.value.value.value == "torch"
        and el.value.attr.value in TORCH_ALIASES
    ]


def _file_spelling(text: str) -> dict[str, str]:
    """canonical dtype -> the ``torch.<attr>`` spelling this file uses most for it."""
    counts = Counter(m for m in re.findall(r"\btorch\.(\w+)", text) if m in TORCH_ALIASES)
    best: dict[str, str] = {}
    for attr, _ in counts.most_common():
        best.setdefault(TORCH_ALIASES[attr], attr)
    return best


def filter_sequence(node: cst.List | cst.Tuple, keep: set[str]) -> cst.BaseExpression:
    drops = {
        i: 0
        for i, el in enumerate(node.elements)
        if not (
            isinstance(el.value, cst.Attribute)
            and el.value.attr.value in TORCH_ALIASES
            and canonical(el.value.attr.value) in keep
        )
    }
    if isinstance(node, cst.List):
        elements, opening, closing = remove_elements(
            list(node.elements),
            node.lbracket.whitespace_after,
            node.rbracket.whitespace_before,
            drops,
        )
        return node.with_changes(
            elements=elements,
            lbracket=node.lbracket.with_changes(whitespace_after=opening),
            rbracket=node.rbracket.with_changes(whitespace_before=closing),
        )
    lpar, rpar = node.lpar[0], node.rpar[-1]
    elements, opening, closing = remove_elements(
        list(node.elements), lpar.whitespace_after, rpar.whitespace_before, drops
    )
    if len(elements) == 1 and not isinstance(elements[0].comma, cst.Comma):
        elements[0] = elements[0].with_changes(comma=cst.Comma())  # (x,) stays a tuple
    return node.with_changes(
        elements=elements,
        lpar=[lpar.with_changes(whitespace_after=opening), *node.lpar[1:]],
        rpar=[*node.rpar[:-1], rpar.with_changes(whitespace_before=closing)],
    )


def remove_elements(elements: list, opening, closing, drops: dict[int, int]):
    """Remove ``elements[i]`` for each ``i`` in ``drops`` from a bracketed sequence.

    ``drops[i]`` is how many comment lines directly above element ``i`` go with it. The
    whitespace between elements (libcst keeps a trailing comment and the comment lines above
    the *next* element in the comma's ``whitespace_after``) is merged so that comments of
    neighbours survive and the bracket layout stays as it was.
    """
    trailing_comma = isinstance(elements[-1].comma, cst.Comma)
    gaps = [opening, *(el.comma.whitespace_after for el in elements[:-1]), closing]
    kept: list[list] = []
    gap = gaps[0]
    for index, element in enumerate(elements):
        after = gaps[index + 1]
        if index in drops:
            gap = _merge(gap, after, drops[index], first=not kept, last=index == len(elements) - 1)
        else:
            kept.append([element, gap])
            gap = after
    if not kept:
        return [], cst.SimpleWhitespace(""), gap
    out = []
    for position, (element, _) in enumerate(kept):
        if position + 1 < len(kept):
            comma = element.comma if isinstance(element.comma, cst.Comma) else cst.Comma()
            out.append(
                element.with_changes(
                    comma=comma.with_changes(whitespace_after=kept[position + 1][1])
                )
            )
        elif trailing_comma:
            final = elements[-1].comma
            comma = element.comma if isinstance(element.comma, cst.Comma) else final
            out.append(
                element.with_changes(
                    comma=comma.with_changes(whitespace_after=final.whitespace_after)
                )
            )
        else:
            out.append(element.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    return out, kept[0][1], gap


def _merge(before, after, drop_lines: int, *, first: bool, last: bool):
    """The whitespace that replaces ``before + <removed element> + after``.

    ``first``: nothing precedes ``before`` but the opening bracket; ``last``: ``after`` is the
    whitespace before the closing bracket.
    """
    paren = cst.ParenthesizedWhitespace
    if isinstance(before, paren):
        lines = list(before.empty_lines)
        own = lines[len(lines) - drop_lines :] if drop_lines else []
        if len(own) != drop_lines or any(line.comment is None for line in own):
            raise EditVerificationError(
                "comment lines above a deleted entry were not where expected"
            )
        lines = lines[: len(lines) - drop_lines]
        following = list(after.empty_lines) if isinstance(after, paren) else []
        # the blank lines that framed the removed lines must not pile up at the seam
        if following and _blank(following[0]) and (_blank(lines[-1]) if lines else first):
            following.pop(0)
        if last and not following and lines and _blank(lines[-1]):
            lines.pop()
        if isinstance(after, paren):
            return before.with_changes(
                empty_lines=lines + following,
                indent=after.indent,
                last_line=after.last_line,
            )
        return before.with_changes(empty_lines=lines)
    if isinstance(after, paren):
        # the removed element shared a line with its predecessor: drop its trailing comment
        return after.with_changes(
            first_line=cst.TrailingWhitespace(newline=after.first_line.newline)
        )
    return after if last else before


def _blank(line: cst.EmptyLine) -> bool:
    return line.comment is None


# --- verification ------------------------------------------------------------------------


def _verify(before: CommonMps, text: str, after_text: str, path: str, ops: list[_Op]) -> None:
    def fail(why: str) -> EditVerificationError:
        return EditVerificationError(
            f"{path}: edit verification failed, nothing was written: {why}"
        )

    try:
        after = common_mps.parse(after_text, path)
    except Exception as exc:  # noqa: BLE001 - any failure to re-read is a failed edit
        raise fail(f"the edited file no longer parses ({exc})") from exc
    if [(d.list, d.function, d.kind) for d in before.dicts] != [
        (d.list, d.function, d.kind) for d in after.dicts
    ]:
        raise fail("the set of declared lists changed")
    if [(s.list, s.function, s.key) for s in before.sets] != [
        (s.list, s.function, s.key) for s in after.sets
    ]:
        raise fail("a set such as SUPPORTED_COMPLEX_OPS changed")
    if [u.text for u in before.unrecognised] != [u.text for u in after.unrecognised]:
        raise fail("an unrecognised declaration changed")

    by_entry = {(op.entry.span.start, op.entry.key): op for op in ops}
    expected: list[tuple[tuple[str, str, str], tuple[str, ...] | frozenset[str] | None, str | None]]
    expected = []
    for entry in before.entries:
        target = (entry.list, entry.function, entry.key)
        op = by_entry.get((entry.span.start, entry.key))
        if op is None or op.change.target != target:  # e.g. B in `A = B = {...}`
            expected.append((target, entry.dtypes, entry.raw))
        elif not op.change.delete:
            new = op.change.new_dtypes
            expected.append((target, None if new is None else frozenset(new), None))
    if len(after.entries) != len(expected):
        raise fail(f"expected {len(expected)} entries after the edit, found {len(after.entries)}")
    for entry, (target, value, raw) in zip(after.entries, expected, strict=True):
        got: tuple[str, ...] | frozenset[str] | None = entry.dtypes
        if isinstance(value, frozenset) and got is not None:
            got = frozenset(got)  # a narrowed list is compared as a set of dtypes
        if ((entry.list, entry.function, entry.key), got, entry.raw) != (target, value, raw):
            raise fail(f"{entry.span}: {entry.key!r} in {entry.list} is not what was intended")

    _verify_comments(before, text, after_text, ops, fail)
    _verify_outside(before, after, text, after_text, ops, fail)


def comments(text: str) -> list[tuple[int, str]]:
    """``text``'s comments, each with its line."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def is_subsequence(small: list[str], big: list[str]) -> bool:
    """True when ``big`` holds ``small``'s items in order (others between)."""
    it = iter(big)
    return all(item in it for item in small)


def _verify_comments(before: CommonMps, text: str, after_text: str, ops: list[_Op], fail) -> None:
    """Comments outside the changed entries survive in order; none appear from nowhere."""
    removable: set[int] = set()
    for op in ops:
        removable.update(range(op.entry.span.start, op.entry.span.end + 1))
        if op.drop_comment_lines and op.entry.comment_span:
            removable.update(range(op.entry.comment_span.start, op.entry.comment_span.end + 1))
    changed = {(op.entry.span.start, op.entry.key) for op in ops}
    for entry in before.entries:  # a line shared with an untouched entry keeps its comment
        if (entry.span.start, entry.key) not in changed:
            removable.difference_update(range(entry.span.start, entry.span.end + 1))
    for decl in before.dicts:  # and so does the closing line of a dict
        removable.discard(decl.span.end)
    old = comments(text)
    new = [c for _, c in comments(after_text)]
    must_keep = [c for line, c in old if line not in removable]
    if not is_subsequence(must_keep, new) or not is_subsequence(new, [c for _, c in old]):
        raise fail("comments outside the changed entries moved or changed")


def _verify_outside(before: CommonMps, after: CommonMps, text: str, after_text: str, ops, fail):
    """Every line outside the dicts that hold a change is byte-for-byte the same."""
    touched = {
        i
        for i, decl in enumerate(before.dicts)
        for op in ops
        if (decl.list, decl.function) == (op.entry.list, op.entry.function)
        and decl.span.contains(op.entry.span.start)
    }

    def outside(lines: list[str], decls) -> list[list[str]]:
        spans = sorted({(decls[i].span.start, decls[i].span.end) for i in touched})
        pieces, cursor = [], 1
        for start, end in spans:
            pieces.append(lines[cursor - 1 : start - 1])
            cursor = max(cursor, end + 1)
        pieces.append(lines[cursor - 1 :])
        return pieces

    old_lines = text.splitlines(keepends=True)
    new_lines = after_text.splitlines(keepends=True)
    if outside(old_lines, before.dicts) != outside(new_lines, after.dicts):
        raise fail("lines outside the edited dicts changed")


def _summary(ops) -> str:
    parts = []
    for op in sorted(ops, key=lambda o: o.entry.span.start):
        c = op.change
        if c.delete:
            parts.append(f"drop {c.key} from {c.list}")
        else:
            dtypes = (
                "all" if c.new_dtypes is None else ", ".join(sorted(c.new_dtypes, key=sort_key))
            )
            parts.append(f"narrow {c.key} in {c.list} to {dtypes}")
    return "; ".join(parts)
