"""Format-preserving edits of an OpInfo's MPS ``DecorateInfo`` entries (libcst, issue 31).

A :class:`DecorationChange` deletes one ``DecorateInfo(...)`` from the ``skips=`` or
``decorators=`` sequence that holds it, or narrows its ``dtypes`` to those that still fail.
An entry is found by the line its call starts on, as :mod:`pipeline.tree.decorations`
reports it. The layout rules are :mod:`pipeline.edit.xfails`' (its sequence helpers do the
work): a deleted entry's trailing comment goes with it, its neighbours' comments stay, a
narrowed literal keeps its surviving elements as written. An entry that listed all dtypes
gains ``dtypes=(torch.<dtype>, ...)``.

The comment block directly above a deleted entry (contiguous comment lines, no blank line
between) explains it (``# MPS: atan2 not implemented for int64``) and goes with it, as in
upstream's hand-made removals. Upstream also writes one block over several MPS entries of
one failure (``aten::max.unary_out`` over ``test_out`` and ``test_out_warning``): a block
heads the MPS entries right after its own, up to a blank line, an entry with a comment of
its own, or an entry that is not an MPS one; it goes only when every entry it heads goes.
A comment after a blank line (a section's) stays, as does a block holding a commented-out
``DecorateInfo(``: that is an entry, not an explanation.

The result is verified before it is returned: its abstract syntax tree must be the old one
with exactly these changes made (nothing else in the file moved), and the reader must find
the MPS decorations it found before, less the deleted, with the narrowed ones' new dtypes.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from pipeline.dtypes import TORCH_ALIASES, canonical, sort_key
from pipeline.edit.atomic import FileEdit, unplaced
from pipeline.edit.xfails import comments, filter_sequence, is_subsequence, remove_elements
from pipeline.errors import EditVerificationError
from pipeline.tree import decorations

# a comment line that is an entry turned off, not an explanation of the next one
_COMMENTED_OUT = re.compile(r"#\s*DecorateInfo\(")


@dataclass(frozen=True)
class DecorationChange:
    """Delete the DecorateInfo starting on ``line`` (of the OpInfo ``key``), or set its
    dtypes to ``new_dtypes`` (canonical, non-empty; None: all dtypes, so no narrowing)."""

    line: int
    key: str
    new_dtypes: tuple[str, ...] | None
    delete: bool = False

    def __post_init__(self) -> None:
        if self.delete:
            return
        if not self.new_dtypes:
            raise ValueError(f"DecorationChange at line {self.line}: say delete=True instead")
        for dtype in self.new_dtypes:
            if TORCH_ALIASES.get(dtype) != dtype:
                raise ValueError(f"DecorationChange at line {self.line}: {dtype!r} not canonical")


def apply_decoration_changes(text: str, path: str, changes: Sequence[DecorationChange]) -> FileEdit:
    """Apply ``changes`` to one OpInfo file's text; raises :class:`EditVerificationError`
    when one names no MPS DecorateInfo or the result is not exactly what was intended."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise EditVerificationError(f"{path}: not valid Python ({exc.msg})") from None
    before = decorations.from_tree(tree, path)
    by_line = {d.span.start: d for d in before.decorations}
    for c in changes:
        found = by_line.get(c.line)
        if found is None or found.key != c.key:
            raise EditVerificationError(
                f"{path}:{c.line}: no MPS DecorateInfo of {c.key!r} starts there; "
                "nothing was written"
            )
        if not c.delete and found.raw_dtypes is not None:
            raise EditVerificationError(
                f"{path}:{c.line}: dtypes are not a literal list ({found.raw_dtypes}); "
                "change them by hand"
            )
    plan = {c.line: c for c in changes}
    lines = text.splitlines(keepends=True)
    after, applied, comment_lines = text, set(), set()
    # Each OpInfo call is edited apart, last first so earlier offsets hold: libcst over the
    # whole 25,000-line common_methods_invocations.py takes a minute, over one OpInfo ms.
    for start, end, first in sorted(_owners(tree, plan, lines), reverse=True):
        snippet = after[start:end]
        wrapper = MetadataWrapper(cst.parse_module(snippet), unsafe_skip_copy=True)
        own = {line - first + 1: c for line, c in plan.items()}
        mps = {d.span.start - first + 1 for d in before.decorations}
        editor = _Editor(own, mps, wrapper.resolve(PositionProvider))
        after = after[:start] + wrapper.module.visit(editor).code + after[end:]
        applied |= editor.applied  # the changes' own (file) lines
        comment_lines |= {line + first - 1 for line in editor.comment_lines}
    missed = set(plan) - applied
    if missed:
        raise EditVerificationError(
            f"{path}: could not edit the DecorateInfo at line(s) "
            f"{', '.join(map(str, sorted(missed)))} (not in a bracketed sequence); "
            "nothing was written"
        )
    _verify(tree, after, path, plan, before)
    _verify_comments(text, after, path, plan, by_line, comment_lines)
    return FileEdit(path, text, after, _summary(path, plan, by_line))


def _owners(
    tree: ast.AST, plan: dict[int, DecorationChange], lines: list[str]
) -> set[tuple[int, int, int]]:
    """(start, end) character offsets and first line of each innermost ``...Info(...)``
    call holding a planned DecorateInfo: the text each libcst edit parses."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (name := decorations.callee(n)).endswith("Info")
        and name != "DecorateInfo"
    ]
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text))

    def offset(line: int, column: int) -> int:  # ast columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode()[:column].decode())

    found = set()
    for at in plan:
        holders = [c for c in calls if c.lineno <= at <= (c.end_lineno or c.lineno)]
        if holders:
            c = min(holders, key=lambda c: (c.end_lineno or c.lineno) - c.lineno)
            end = offset(c.end_lineno or c.lineno, c.end_col_offset or 0)
            found.add((offset(c.lineno, c.col_offset), end, c.lineno))
    return found


def _is_decorate_info(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
    return name == "DecorateInfo"


class _Editor(cst.CSTTransformer):
    """``plan`` and ``mps`` (the lines MPS DecorateInfos start on) count the snippet's lines;
    ``comment_lines``: those of the comment blocks deleted with their entries."""

    def __init__(self, plan: dict[int, DecorationChange], mps: set[int], positions) -> None:
        super().__init__()
        self.plan = plan
        self.mps = mps
        self.positions = positions
        self.applied: set[int] = set()
        self.comment_lines: set[int] = set()

    def _change(self, node: cst.CSTNode) -> DecorationChange | None:
        if not _is_decorate_info(node):
            return None
        return self.plan.get(self.positions[node].start.line)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        change = self._change(original_node)
        if change is None or change.delete or change.new_dtypes is None:
            return updated_node
        self.applied.add(change.line)
        args = list(updated_node.args)
        for i, arg in enumerate(args):
            if (arg.keyword and arg.keyword.value == "dtypes") or (not arg.keyword and i == 4):
                value = arg.value
                if not isinstance(value, (cst.List, cst.Tuple)):
                    raise EditVerificationError(f"line {change.line}: dtypes not a literal list")
                args[i] = arg.with_changes(value=filter_sequence(value, set(change.new_dtypes)))
                return updated_node.with_changes(args=args)
        listed = ", ".join(f"torch.{d}" for d in sorted(change.new_dtypes, key=sort_key))
        new = cst.Arg(
            keyword=cst.Name("dtypes"),
            value=cst.parse_expression(f"({listed},)"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        last = args[-1]
        if isinstance(last.comma, cst.Comma):  # a trailing comma stays trailing
            args.append(new.with_changes(comma=last.comma))
            args[-2] = last.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        else:
            args[-1] = last.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            args.append(new)
        return updated_node.with_changes(args=args)

    def _drops(self, original: cst.List | cst.Tuple, opening) -> dict[int, int]:
        """The elements of ``original`` to delete, each with how many comment lines above
        it go too (see the module docs)."""
        elements = original.elements
        gaps = [opening, *(_after_comma(e) for e in elements[:-1])]
        going = []
        for element in elements:
            change = self._change(element.value)
            going.append(change is not None and change.delete)
            if change is not None and change.delete:
                self.applied.add(change.line)
        drops = {}
        for index, gone in enumerate(going):
            if not gone:
                continue
            block = _comment_block(gaps[index])
            heads = index + 1
            while (
                heads < len(elements)
                and not _empty_lines(gaps[heads])
                and self.positions[elements[heads].value].start.line in self.mps
            ):
                heads += 1
            drops[index] = len(block) if all(going[index:heads]) else 0
            start = self.positions[elements[index].value].start.line
            self.comment_lines.update(range(start - drops[index], start))
        return drops

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        drops = self._drops(original_node, original_node.lbracket.whitespace_after)
        if not drops:
            return updated_node
        kept, opening, closing = remove_elements(
            list(updated_node.elements),
            updated_node.lbracket.whitespace_after,
            updated_node.rbracket.whitespace_before,
            drops,
        )
        return updated_node.with_changes(
            elements=kept,
            lbracket=updated_node.lbracket.with_changes(whitespace_after=opening),
            rbracket=updated_node.rbracket.with_changes(whitespace_before=closing),
        )

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        if not updated_node.lpar:  # a bare tuple has no brackets to keep the layout of
            return updated_node
        drops = self._drops(original_node, original_node.lpar[0].whitespace_after)
        if not drops:
            return updated_node
        lpar, rpar = updated_node.lpar[0], updated_node.rpar[-1]
        kept, opening, closing = remove_elements(
            list(updated_node.elements), lpar.whitespace_after, rpar.whitespace_before, drops
        )
        if len(kept) == 1 and not isinstance(kept[0].comma, cst.Comma):
            kept[0] = kept[0].with_changes(comma=cst.Comma())  # (x,) stays a tuple
        return updated_node.with_changes(
            elements=kept,
            lpar=[lpar.with_changes(whitespace_after=opening), *updated_node.lpar[1:]],
            rpar=[*updated_node.rpar[:-1], rpar.with_changes(whitespace_before=closing)],
        )


def _after_comma(element: cst.BaseElement) -> cst.BaseParenthesizableWhitespace:
    comma = element.comma
    return comma.whitespace_after if isinstance(comma, cst.Comma) else cst.SimpleWhitespace("")


def _empty_lines(gap: cst.BaseParenthesizableWhitespace) -> list[cst.EmptyLine]:
    """The whole lines (blank or comment) between the last element and the next."""
    return list(gap.empty_lines) if isinstance(gap, cst.ParenthesizedWhitespace) else []


def _comment_block(gap: cst.BaseParenthesizableWhitespace) -> list[cst.EmptyLine]:
    """The comment lines directly above the element ``gap`` precedes, none if they hold a
    commented-out entry."""
    block: list[cst.EmptyLine] = []
    for line in reversed(_empty_lines(gap)):
        if line.comment is None:
            break
        block.insert(0, line)
    if any(_COMMENTED_OUT.match(line.comment.value) for line in block if line.comment):
        return []
    return block


# --- verification ------------------------------------------------------------------------


class _Intended(ast.NodeTransformer):
    """The old tree with the changes made on it: what the new text must parse to."""

    def __init__(self, plan: dict[int, DecorationChange]) -> None:
        self.plan = plan

    def _target(self, node: ast.AST) -> DecorationChange | None:
        if isinstance(node, ast.Call) and decorations.callee(node) == "DecorateInfo":
            return self.plan.get(node.lineno)
        return None

    def _sequence(self, node: ast.Tuple | ast.List) -> ast.AST:
        self.generic_visit(node)
        node.elts = [e for e in node.elts if not ((c := self._target(e)) and c.delete)]
        return node

    visit_Tuple = visit_List = _sequence

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        change = self._target(node)
        if change is None or change.delete or change.new_dtypes is None:
            return node
        keep = set(change.new_dtypes)
        found = [k.value for k in node.keywords if k.arg == "dtypes"]
        found += node.args[4:5]
        for value in found:
            if isinstance(value, (ast.Tuple, ast.List)):
                value.elts = [e for e in value.elts if _canonical(e) in keep]
        if not found:
            dtypes = sorted(keep, key=sort_key)
            load = ast.Load()
            elts: list[ast.expr] = [ast.Attribute(ast.Name("torch", load), d, load) for d in dtypes]
            node.keywords.append(ast.keyword("dtypes", ast.Tuple(elts, load)))
        return node


def _canonical(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in TORCH_ALIASES:
        return canonical(node.attr)
    return None


def _verify(
    tree: ast.Module, after: str, path: str, plan: dict[int, DecorationChange], before
) -> None:
    def fail(why: str) -> EditVerificationError:
        return EditVerificationError(
            f"{path}: edit verification failed, nothing was written: {why}"
        )

    try:
        got = ast.parse(after)
        read = decorations.from_tree(got, path)
    except Exception as exc:  # noqa: BLE001 - any failure to re-read is a failed edit
        raise fail(f"the edited file no longer parses ({exc})") from exc
    intended = _Intended(plan).visit(tree)  # the old tree, edited in place: read last
    if ast.dump(intended) != ast.dump(got):
        raise fail("the file's syntax tree is not the old one with exactly these changes")
    expected = []
    for d in before.decorations:
        change = plan.get(d.span.start)
        if change is None:
            expected.append(d)
        elif not change.delete:
            expected.append(replace(d, dtypes=change.new_dtypes))
    if _as_sets(read.decorations) != _as_sets(expected):
        raise fail("the MPS decorations read back are not the intended ones")


def _verify_comments(
    text: str,
    after: str,
    path: str,
    plan: dict[int, DecorationChange],
    by_line,
    blocks: set[int],
) -> None:
    """The comments gone are the deleted blocks' and some of the deleted entries' own (a
    trailing one on a line shared with a kept neighbour stays); the rest are kept in order."""
    removable = set(blocks)
    for line, change in plan.items():
        if change.delete:
            removable.update(range(line, by_line[line].span.end + 1))
    old = comments(text)
    new = [c for _, c in comments(after)]
    kept = [c for line, c in old if line not in removable]
    if not is_subsequence(kept, new) or not is_subsequence(
        new, [c for line, c in old if line not in blocks]
    ):
        raise EditVerificationError(
            f"{path}: edit verification failed, nothing was written: comments other than "
            "the deleted entries' moved or changed"
        )


def _as_sets(found: Sequence[decorations.Decoration]) -> Counter:
    """``found`` placed nowhere, their dtypes in one order: a narrowed literal keeps the
    file's order, a written one is sorted."""
    return unplaced(
        replace(d, dtypes=tuple(sorted(d.dtypes, key=sort_key)) if d.dtypes else d.dtypes)
        for d in found
    )


def _summary(path: str, plan: dict[int, DecorationChange], by_line) -> str:
    parts = []
    for line, c in sorted(plan.items()):
        what = by_line[line].test or "every test"
        if c.delete:
            parts.append(f"drop {c.key}'s DecorateInfo for {what} ({path}:{line})")
        else:
            dtypes = ", ".join(sorted(c.new_dtypes or (), key=sort_key))
            parts.append(f"narrow {c.key}'s DecorateInfo for {what} to {dtypes} ({path}:{line})")
    return "; ".join(parts)
