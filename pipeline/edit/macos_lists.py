"""Moving xfails of common_mps.py into macOS-version lists (``MACOS_BEFORE_15_0_XFAILLIST``).

An :class:`XfailAddition` puts dtypes of one key into a list named
``MACOS_BEFORE_<major>_<minor>_XFAILLIST`` (``..._XFAILLIST_GRAD`` in
``mps_ops_grad_modifier``, as PyTorch named its gradient ones). :func:`apply_xfail_moves`
makes the removals (:class:`~pipeline.edit.xfails.XfailChange`, applied by
:func:`~pipeline.edit.xfails.apply_xfail_changes`) and the additions as one edit:

- a list that exists gains the key (a line before its closing brace, written as
  :mod:`pipeline.edit.xfails` writes dtype lists), or the key's list gains the dtypes;
- a list that does not exist is declared in its function, after the function's last
  ``MACOS_BEFORE_*`` list (else after its first xfail list), and applied in the function's
  ``for op in ops:`` loop. The applying ``if`` is a copy of the function's last
  ``MACOS_BEFORE_*`` block (its condition on ``MACOS_VERSION``, its ``addDecorator`` call)
  with the list's name and version swapped; a function without one gets the same shape,
  written out: ``key in <list>``, ``key not in xfail_exclusion`` where the function takes
  that argument, ``(MACOS_VERSION < 15.0)``, then ``addDecorator(op, DecorateInfo(
  unittest.expectedFailure, dtypes=<list>[key]))``. ``MACOS_VERSION`` is a float in
  PyTorch (``15.0``), so the version is written ``major.minor``.

The result is verified before it is returned: it compiles, re-reading it with
:mod:`pipeline.tree.common_mps` finds exactly the intended entries (every other entry as it
was), and every list it declared is applied by a ``MACOS_VERSION < <version>`` block in its
function's loop. Lines are only inserted; the removals keep the rules of
:mod:`pipeline.edit.xfails`.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.dtypes import TORCH_ALIASES
from pipeline.edit.atomic import FileEdit
from pipeline.edit.xfails import LINE_WIDTH, XfailChange, apply_xfail_changes
from pipeline.errors import EditVerificationError, ParseError
from pipeline.tree import common_mps

_TARGET = re.compile(r"^MACOS_BEFORE_(\d+)_(\d+)_XFAILLIST(_GRAD)?$")
# any macOS "before" list, as a template for the applying block
_BEFORE_LIST = re.compile(r"^MACOS_BEFORE_\d+_\d+_\w+$")
_INDENT = "    "


@dataclass(frozen=True)
class XfailAddition:
    """Add ``dtypes`` (canonical names) of ``key`` to the macOS-version list ``list``."""

    list: str
    function: str
    key: str
    dtypes: tuple[str, ...]

    def __post_init__(self) -> None:
        if _TARGET.match(self.list) is None:
            raise ValueError(
                f"XfailAddition for {self.key!r}: {self.list!r} is not a list named like "
                "MACOS_BEFORE_15_0_XFAILLIST (or ..._XFAILLIST_GRAD)"
            )
        if not self.dtypes:
            raise ValueError(f"XfailAddition for {self.key!r}: no dtypes to add")
        for dtype in self.dtypes:
            if TORCH_ALIASES.get(dtype) != dtype:
                raise ValueError(
                    f"XfailAddition for {self.key!r}: {dtype!r} is not a canonical dtype"
                )

    @property
    def version(self) -> str:
        """The version as the list's condition writes it: ``"15.0"``."""
        match = _TARGET.match(self.list)
        assert match is not None
        return f"{match[1]}.{match[2]}"


def apply_xfail_moves(
    text: str,
    path: str,
    changes: Sequence[XfailChange],
    additions: Sequence[XfailAddition],
) -> FileEdit:
    """Make ``changes`` (removals) and ``additions`` to a common_mps.py text, verified.

    Raises :class:`EditVerificationError` when a change or addition cannot be made as
    described (the module docstring says how) or the result is not what was intended.
    """
    before = common_mps.parse(text, path)
    current = apply_xfail_changes(text, path, changes).after if changes else text
    created: list[XfailAddition] = []
    by_list: dict[tuple[str, str], list[XfailAddition]] = {}
    for addition in additions:
        by_list.setdefault((addition.list, addition.function), []).append(addition)
    for (name, function), group in by_list.items():
        keys = [a.key for a in group]
        if len(set(keys)) != len(keys):
            raise EditVerificationError(f"{path}: two additions of one key to {name}")
        model = common_mps.parse(current, path)
        decls = [d for d in model.dicts if (d.list, d.function) == (name, function)]
        if len(decls) > 1:
            raise EditVerificationError(
                f"{path}: {name} is declared {len(decls)} times in {function}; add by hand"
            )
        if not decls:
            current = _declare(current, path, model, group[0], function)
            created.append(group[0])
            model = common_mps.parse(current, path)
        current = _add_to_list(current, path, model, name, function, group)
    _verify(before, text, current, path, changes, additions, created)
    return FileEdit(path, text, current, _summary(changes, additions, created))


# --- adding to a list --------------------------------------------------------------------


def _add_to_list(
    text: str,
    path: str,
    model: common_mps.CommonMps,
    name: str,
    function: str,
    group: Sequence[XfailAddition],
) -> str:
    """Every key of ``group`` in the list ``name`` with (at least) its dtypes."""
    changes = []
    for addition in group:
        target = (name, function, addition.key)
        entries = [e for e in model.entries if (e.list, e.function, e.key) == target]
        if not entries:
            text = _insert_key(text, path, name, function, addition.key)
            changes.append(XfailChange(name, function, addition.key, addition.dtypes))
            continue
        (entry,) = entries[-1:]
        if entry.raw is not None:
            raise EditVerificationError(
                f"{entry.span}: {addition.key!r} in {name} is not a literal list; add "
                f"{', '.join(addition.dtypes)} by hand"
            )
        if entry.dtypes is None:
            continue  # xfailed for every dtype already
        union = tuple(dict.fromkeys((*entry.dtypes, *addition.dtypes)))
        changes.append(XfailChange(name, function, addition.key, union))
    if not changes:
        return text
    return apply_xfail_changes(text, path, changes).after


def _insert_key(text: str, path: str, name: str, function: str, key: str) -> str:
    """``text`` with ``"key": None,`` as the last entry of the dict ``name`` (the caller
    then writes the dtypes with the xfail editor's rules)."""
    node = _dict_node(ast.parse(text), name, function)
    if node is None:
        raise EditVerificationError(f"{path}: {name} in {function} is not a dict literal")
    lines, eol = _split(text)
    close_line = node.end_lineno or node.lineno
    line = lines[close_line - 1]
    close_col = _col(line, node.end_col_offset or 0) - 1
    literal = json.dumps(key)
    if not node.keys and node.lineno == close_line:
        start = _col(line, node.col_offset)
        if line[start : close_col + 1] == "{}":  # X = {}: open it up
            indent = _indent_of(line)
            lines[close_line - 1 : close_line] = [
                line[:start] + "{" + eol,
                f"{indent}{_INDENT}{literal}: None,{eol}",
                indent + "}" + line[close_col + 1 :],
            ]
            return "\n".join(lines)
    if line[:close_col].strip() or (node.keys and node.keys[-1] is None):
        raise EditVerificationError(
            f"{path}:{close_line}: the closing brace of {name} does not sit on its own line; "
            f"add {key!r} to it by hand"
        )
    if node.keys:
        first_key = node.keys[0] or node.values[0]  # a leading **spread has no key
        indent = _indent_of(lines[first_key.lineno - 1])
        last = node.values[-1]
        last_line = last.end_lineno or last.lineno
        row = lines[last_line - 1]
        end = _col(row, last.end_col_offset or 0)
        tail = _code_between(lines, (last_line, end), (close_line, close_col))
        if "," not in tail:  # no trailing comma after the last entry: add one
            lines[last_line - 1] = row[:end] + "," + row[end:]
    else:
        indent = _indent_of(line) + _INDENT
    lines.insert(close_line - 1, f"{indent}{literal}: None,{eol}")
    return "\n".join(lines)


def _code_between(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source between two positions (1-based lines, columns), comments left out."""
    (sl, sc), (el, ec) = start, end
    if sl == el:
        pieces = [lines[sl - 1][sc:ec]]
    else:
        pieces = [lines[sl - 1][sc:], *lines[sl : el - 1], lines[el - 1][:ec]]
    return "".join(p.split("#", 1)[0] for p in pieces)


def _split(text: str) -> tuple[list[str], str]:
    """The lines of ``text`` as ast numbers them (split at ``\\n``; ``"\\n".join`` gives
    ``text`` back), and ``"\\r"`` when they end in one (CRLF), else ``""``."""
    lines = text.split("\n")
    return lines, "\r" if lines[0].endswith("\r") else ""


def _col(line: str, offset: int) -> int:
    """A column of ``line`` from ast's ``col_offset`` (which counts UTF-8 bytes)."""
    return len(line.encode("utf-8")[:offset].decode("utf-8", errors="ignore"))


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


# --- declaring a list and the code that applies it ---------------------------------------


def _function_node(tree: ast.Module, model: common_mps.CommonMps, function: str, path: str):
    """The ``def function`` that declares the xfail lists (PyTorch defines the modifiers
    twice: with MPS available, and a stub without)."""
    spans = [d.span for d in model.dicts if d.function == function]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef)
            and node.name == function
            and any(node.lineno <= s.start <= (node.end_lineno or 0) for s in spans)
        ):
            return node
    raise EditVerificationError(
        f"{path}: no {function} declaring xfail lists; create the macOS list by hand"
    )


def _op_loop(function: ast.FunctionDef, path: str) -> ast.For:
    """``for op in ops:``: the loop that decorates each OpInfo."""
    for node in ast.walk(function):
        if isinstance(node, ast.For) and any(
            isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "key" for t in s.targets)
            for s in node.body
        ):
            return node
    raise EditVerificationError(
        f"{path}: {function.name} has no `for op in ops:` loop setting `key`; apply the "
        "macOS list by hand"
    )


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _version_compare(test: ast.expr) -> ast.Compare | None:
    """The ``MACOS_VERSION < <number>`` comparison in an if's test, if there is one."""
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == "MACOS_VERSION"
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Lt)
            and isinstance(node.comparators[0], ast.Constant)
            and isinstance(node.comparators[0].value, (int, float))
        ):
            return node
    return None


def _template(loop: ast.For) -> tuple[ast.If, str] | None:
    """The loop's last ``if`` applying a MACOS_BEFORE_* list, and that list's name."""
    found = None
    for stmt in loop.body:
        if not isinstance(stmt, ast.If) or stmt.orelse or _version_compare(stmt.test) is None:
            continue
        names = sorted(n for n in _names(stmt.test) if _BEFORE_LIST.match(n))
        if len(names) == 1:
            found = (stmt, names[0])
    return found


def _applying_block(
    lines: list[str], function: ast.FunctionDef, loop: ast.For, name: str, version: str
) -> tuple[int, list[str]]:
    """(line after which it goes, the lines of the ``if`` that applies list ``name``)."""
    template = _template(loop)
    if template is not None:
        stmt, old = template
        compare = _version_compare(stmt.test)
        assert compare is not None
        number = compare.comparators[0]
        block = lines[stmt.lineno - 1 : stmt.end_lineno]
        row = number.lineno - stmt.lineno
        line = block[row]
        start, end = _col(line, number.col_offset), _col(line, number.end_col_offset or 0)
        block[row] = line[:start] + version + line[end:]
        pattern = re.compile(rf"\b{re.escape(old)}\b")
        return stmt.end_lineno or stmt.lineno, [pattern.sub(name, line) for line in block]
    indent = _indent_of(lines[loop.body[0].lineno - 1])
    args = {a.arg for a in (*function.args.args, *function.args.kwonlyargs)}
    terms = [f"key in {name}"]
    if "xfail_exclusion" in args:
        terms.append("key not in xfail_exclusion")
    terms.append(f"(MACOS_VERSION < {version})")
    one_line = f"{indent}if {' and '.join(terms)}:"
    if len(one_line) <= LINE_WIDTH:
        head = [one_line]
    else:
        inner = indent + _INDENT
        head = [f"{indent}if (", f"{inner}{terms[0]}", *(f"{inner}and {t}" for t in terms[1:])]
        head.append(f"{indent}):")
    i1, i2, i3 = (indent + _INDENT * n for n in (1, 2, 3))
    body = [
        f"{i1}addDecorator(",
        f"{i2}op,",
        f"{i2}DecorateInfo(",
        f"{i3}unittest.expectedFailure,",
        f"{i3}dtypes={name}[key],",
        f"{i2}),",
        f"{i1})",
    ]
    # after the loop's last `if key in <an xfail list>` block, else at the loop's end
    after = loop.body[-1]
    for statement in loop.body:
        if isinstance(statement, ast.If) and any("XFAILLIST" in n for n in _names(statement.test)):
            after = statement
    return after.end_lineno or after.lineno, head + body


def _declaration(indent: str, name: str, version: str) -> list[str]:
    return [
        f"{indent}{name} = {{",
        f"{indent}{_INDENT}# These ops fail before macOS {version} and work from it on",
        f"{indent}}}",
    ]


def _generated(lines: list[str], eol: str) -> list[str]:
    """Generated lines in the file's line ending; copied ones carry it already."""
    return [line if line.endswith("\r") or not eol else line + eol for line in lines]


def _declare(
    text: str, path: str, model: common_mps.CommonMps, addition: XfailAddition, function: str
) -> str:
    """``text`` with an empty list ``addition.list`` declared in ``function`` and applied in
    its loop (the keys are added afterwards)."""
    name, version = addition.list, addition.version
    tree = ast.parse(text)
    if "MACOS_VERSION" not in _module_names(tree):
        raise EditVerificationError(
            f"{path}: MACOS_VERSION is not imported at module level; create {name} by hand"
        )
    node = _function_node(tree, model, function, path)
    loop = _op_loop(node, path)
    lines, eol = _split(text)
    block_after, block = _applying_block(lines, node, loop, name, version)
    # where the declaration goes: after the last MACOS_BEFORE_* list of the function, else
    # after its first xfail list
    inside = [
        d for d in model.dicts if d.function == function and node.lineno <= d.span.start
        and d.span.end <= (node.end_lineno or 0)
    ]  # fmt: skip
    anchor = [d for d in inside if _BEFORE_LIST.match(d.list)][-1:] or [
        d for d in inside if "XFAILLIST" in d.list
    ][:1]
    if not anchor:
        raise EditVerificationError(f"{path}: {function} declares no xfail list to follow")
    decl_after = anchor[0].span.end
    decl_indent = _indent_of(lines[anchor[0].span.start - 1])
    declaration = _declaration(decl_indent, name, version)
    block, declaration = _generated(block, eol), _generated(declaration, eol)
    if decl_after > block_after:
        raise EditVerificationError(
            f"{path}: {function}'s lists are declared after its loop; create {name} by hand"
        )
    # insert bottom-up, so the line numbers above stay right
    for after, new in ((block_after, block), (decl_after, declaration)):
        following = lines[after] if after < len(lines) else ""
        lines[after:after] = [eol, *new] + ([eol] if following.strip() else [])
    return "\n".join(lines)


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound at module level (imports and assignments, any depth of if/try)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _dict_node(tree: ast.Module, name: str, function: str) -> ast.Dict | None:
    for scope in ast.walk(tree):
        if function and not (isinstance(scope, ast.FunctionDef) and scope.name == function):
            continue
        for node in ast.walk(scope):
            targets = (
                node.targets if isinstance(node, ast.Assign)
                else [node.target] if isinstance(node, ast.AnnAssign) else []
            )  # fmt: skip
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and any(isinstance(t, ast.Name) and t.id == name for t in targets)
                and isinstance(node.value, ast.Dict)
            ):
                return node.value
    return None


def applies_list(text: str, function: str, name: str) -> bool:
    """Does ``function``'s loop apply list ``name`` under ``MACOS_VERSION < <version>``,
    decorating with ``<name>[key]``?"""
    match = _TARGET.match(name)
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == function):
            continue
        for stmt in ast.walk(node):
            if not isinstance(stmt, ast.If) or name not in _names(stmt.test):
                continue
            compare = _version_compare(stmt.test)
            if compare is None or (
                match
                and isinstance(number := compare.comparators[0], ast.Constant)
                and number.value != float(f"{match[1]}.{match[2]}")
            ):
                continue
            decorates = any(
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == name
                for call in ast.walk(ast.Module(body=stmt.body, type_ignores=[]))
                if isinstance(call, ast.Call) and _called(call) == "addDecorator"
                for sub in ast.walk(call)
            )
            if decorates:
                return True
    return False


def _called(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else ""


# --- verification ------------------------------------------------------------------------


def _verify(
    before: common_mps.CommonMps,
    text: str,
    after_text: str,
    path: str,
    changes: Sequence[XfailChange],
    additions: Sequence[XfailAddition],
    created: Sequence[XfailAddition],
) -> None:
    def fail(why: str) -> EditVerificationError:
        return EditVerificationError(
            f"{path}: edit verification failed, nothing was written: {why}"
        )

    try:
        compile(after_text, path, "exec", dont_inherit=True)
        after = common_mps.parse(after_text, path)
    except (SyntaxError, ValueError, ParseError) as exc:
        raise fail(f"the edited file does not compile ({exc})") from exc

    def value(dtypes):
        return None if dtypes is None else frozenset(dtypes)

    expected: dict[tuple[str, str, str], list] = {}
    for e in before.entries:
        expected.setdefault((e.list, e.function, e.key), []).append((value(e.dtypes), e.raw))
    for c in changes:
        olds = expected.pop(c.target, [])
        if not c.delete:
            expected[c.target] = [(value(c.new_dtypes), None) for _ in olds]
    for a in additions:
        target = (a.list, a.function, a.key)
        olds = expected.get(target, [])
        if not olds:
            expected[target] = [(frozenset(a.dtypes), None)]
        else:
            old, _ = olds[-1]
            olds[-1] = (None if old is None else old | frozenset(a.dtypes), None)
    want = Counter((t, v, raw) for t, vs in expected.items() for v, raw in vs)
    got = Counter(((e.list, e.function, e.key), value(e.dtypes), e.raw) for e in after.entries)
    if want != got:
        missing = ", ".join(f"{t[2]!r} in {t[0]}" for t, _, _ in (want - got)) or "none"
        extra = ", ".join(f"{t[2]!r} in {t[0]}" for t, _, _ in (got - want)) or "none"
        raise fail(f"entries not as intended (missing: {missing}; unexpected: {extra})")
    declared = Counter((d.list, d.function, d.kind) for d in before.dicts)
    declared.update((a.list, a.function, "dict") for a in created)
    if declared != Counter((d.list, d.function, d.kind) for d in after.dicts):
        raise fail("the set of declared lists is not the one intended")
    if [(s.list, s.function, s.key) for s in before.sets] != [
        (s.list, s.function, s.key) for s in after.sets
    ]:
        raise fail("a set such as SUPPORTED_COMPLEX_OPS changed")
    if [u.text for u in before.unrecognised] != [u.text for u in after.unrecognised]:
        raise fail("an unrecognised declaration changed")
    for a in created:
        if not applies_list(after_text, a.function, a.list):
            raise fail(f"{a.list} is declared but {a.function} does not apply it")


def _summary(
    changes: Sequence[XfailChange],
    additions: Sequence[XfailAddition],
    created: Sequence[XfailAddition],
) -> str:
    parts = []
    for c in changes:
        parts.append(f"{'drop' if c.delete else 'narrow'} {c.key} in {c.list}")
    new = {a.list for a in created}
    for a in additions:
        verb = "create" if a.list in new else "add to"
        parts.append(f"{verb} {a.list}: {a.key} {', '.join(a.dtypes)}")
        new.discard(a.list)
    return "; ".join(parts)
