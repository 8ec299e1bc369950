"""Edits of the MPS host files: drop an MPSGraph implementation and its include, add a stub.

Every editor is pure (text in, :class:`FileEdit` out) and re-parses its result with
:mod:`pipeline.tree.objc`, raising EditVerificationError when anything but the intended
entries changed.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from pipeline.edit.atomic import NOWHERE, FileEdit, unplaced
from pipeline.errors import EditVerificationError, ParseError
from pipeline.tree import cpp, objc
from pipeline.tree.host_choice import KernelLaunch
from pipeline.tree.objc import ExecKind
from pipeline.tree.span import Span

_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
_PARAM_TYPE = re.compile(r"(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*\s*&\Z")
_RECEIVER = re.compile(r"([A-Za-z_][\w:]*(?:\.|->))exec_\w+_kernel\s*\(")


def _parse(text: str, path: str, what: str) -> objc.ObjcFile:
    try:
        return objc.parse(text, path)
    except ParseError as exc:
        raise EditVerificationError(f"{path}: {what} does not parse: {exc}") from None


def _same(before: objc.ObjcFile, after: objc.ObjcFile, *, skip: Sequence[str] = ()) -> list[str]:
    """Names of the entry kinds (other than ``skip``) that differ between two parses."""
    kinds = ("functions", "stubs", "implementations", "includes", "unrecognised")
    return [
        k
        for k in kinds
        if k not in skip and unplaced(getattr(before, k)) != unplaced(getattr(after, k))
    ] + ([] if "warnings" in skip or before.warnings == after.warnings else ["warnings"])


def _blank(line: str | None) -> bool:
    return line is not None and not line.strip()


def _remove_lines(text: str, start: int, end: int) -> str:
    """Drop lines ``start..end`` (1-based) and one adjacent blank line if two would meet."""
    lines = text.splitlines(keepends=True)
    prev = lines[start - 2] if start >= 2 else None
    nxt = lines[end] if end < len(lines) else None
    first, last = start, end
    if _blank(nxt) and (_blank(prev) or prev is None or prev.rstrip().endswith("{")):
        last += 1
    elif _blank(prev) and (nxt is None or nxt.lstrip().startswith("}")):
        first -= 1
    return "".join(lines[: first - 1] + lines[last:])


def _check_whole_lines(text: str, path: str, span: Span, name: str) -> None:
    """Refuse when the lines of ``span`` also hold other declarations or namespace braces."""
    source = cpp.lex(text, path)
    items, namespaces = cpp.scan(source)
    inside = [i for i in items if source.span(i.start, i.end).overlaps(span.start, span.end)]
    braces = [
        n
        for n in namespaces
        if span.contains(source.line_of(n.open)) or span.contains(source.line_of(n.close))
    ]
    if len(inside) != 1 or braces:
        raise EditVerificationError(
            f"{path}:{span.start}: {name} shares its lines with other code; remove it by hand"
        )


def remove_implementation(
    text: str, path: str, name: str, *, also_removing: Iterable[str] = ()
) -> FileEdit:
    """Delete the MPSGraph implementation ``name`` (whole block, or its macro line).

    Unchanged edit when the file has no such implementation. Refuses when ``name`` is still
    referenced elsewhere in the file, unless the referencing implementations are listed in
    ``also_removing`` (the caller removes them in the same plan).
    """
    before = _parse(text, path, "the file")
    found = [i for i in before.implementations if i.name == name]
    if not found:
        return FileEdit(path, text, text, f"{name}: no implementation here, nothing to remove")
    if len(found) > 1:
        where = ", ".join(str(i.span) for i in found)
        raise EditVerificationError(f"{path}: {name} is defined {len(found)} times ({where})")
    impl = found[0]
    _check_whole_lines(text, path, impl.span, name)
    after = _remove_lines(text, impl.span.start, impl.span.end)
    parsed = _parse(after, path, "the edited file")
    _check_unreferenced(after, parsed, name, set(also_removing) - {name})
    changed = _same(before, parsed, skip=("implementations",))
    expected = unplaced(before.implementations) - unplaced([impl])
    if changed or unplaced(parsed.implementations) != expected:
        raise EditVerificationError(
            f"{path}: removing {name} also changed {', '.join(changed) or 'other implementations'}"
            "; nothing was written"
        )
    lines = impl.span.end - impl.span.start + 1
    return FileEdit(
        path, text, after, f"remove {impl.kind} {name} ({lines} line{'s' * (lines > 1)})"
    )


def _check_unreferenced(after: str, parsed: objc.ObjcFile, name: str, allowed: set[str]) -> None:
    """Refuse when code left in ``after`` still uses ``name`` (outside ``allowed`` ones)."""
    source = cpp.lex(after, parsed.path)
    for m in re.finditer(rf"\b{re.escape(name)}\b", source.masked):
        line = source.line_of(m.start())
        if any(i.name in allowed and i.span.contains(line) for i in parsed.implementations):
            continue
        raise EditVerificationError(
            f"{parsed.path}:{line}: {name} is still used there; remove that use first "
            "(or name its implementation in also_removing= to remove both)"
        )


def include_still_needed(text: str, op: str, others: Collection[str] = ()) -> bool:
    """Whether ``ATen/ops/OP_native.h`` still declares something the file uses.

    That header declares the ``at::native`` kernels of ``op``: ``structured_OP*`` classes
    (what ``TORCH_IMPL_FUNC`` defines) and MPS kernels like ``OP_out_mps``. Conservative:
    any ``structured_OP``, any ``native::OP*`` and any MPS-style name starting with ``OP_``
    that is not a file-local kernel function counts as a use. ``others``: the tree's other
    operators; a name that is one of theirs (``hardshrink_backward_out_mps`` of the operator
    ``hardshrink_backward``) is declared by their header, not this one.
    """
    source = cpp.lex(text, "<text>")
    local = {f.name for f in objc.parse(text, "<text>").functions}
    longer = [o for o in others if o.startswith(op + "_")]

    def theirs(name: str) -> bool:
        bare = name.removeprefix("structured_")
        return any(bare == o or bare.startswith(o + "_") for o in longer)

    for m in re.finditer(r"((?:[A-Za-z_]\w*\s*::\s*)*)([A-Za-z_]\w*)", source.masked):
        qualifier, name = m.group(1), m.group(2)
        if theirs(name):
            continue
        of_op = name == op or name.startswith(op + "_")
        if name == f"structured_{op}" or name.startswith(f"structured_{op}_"):
            return True
        if of_op and re.search(r"\bnative\s*::\s*\Z", qualifier):
            return True
        if of_op and objc.MPS_NAME.match(name) and name not in local:
            return True
    return False


def remove_include(text: str, path: str, op: str, others: Collection[str] = ()) -> FileEdit:
    """Delete ``#include <ATen/ops/OP_native.h>``; unchanged edit when it is not there.

    Refuses (EditVerificationError) while :func:`include_still_needed` says the file uses it.
    """
    before = _parse(text, path, "the file")
    found = [i for i in before.includes if i.op == op]
    if not found:
        return FileEdit(path, text, text, f"no ATen/ops/{op}_native.h include, nothing to remove")
    if include_still_needed(text, op, others):
        raise EditVerificationError(
            f"{path}: ATen/ops/{op}_native.h is still needed (the file still uses a declaration "
            f"of {op}); remove the implementation first"
        )
    lines = text.splitlines(keepends=True)
    drop = {n for inc in found for n in range(inc.span.start, inc.span.end + 1)}
    after = "".join(line for n, line in enumerate(lines, 1) if n not in drop)
    parsed = _parse(after, path, "the edited file")
    changed = _same(before, parsed, skip=("includes",))
    if changed or [i.op for i in parsed.includes] != [i.op for i in before.includes if i.op != op]:
        raise EditVerificationError(
            f"{path}: removing the {op} include changed {', '.join(changed) or 'other includes'}"
        )
    return FileEdit(path, text, after, f"remove #include <ATen/ops/{op}_native.h>")


def _receiver(source: cpp.CppText, path: str) -> str:
    """How this file calls the shader library (``lib.``), or refuse: the stub could not build."""
    seen = Counter(m.group(1) for m in _RECEIVER.finditer(source.masked))
    if seen:
        return seen.most_common(1)[0][0]
    if re.search(r"\blib\b", source.masked):
        return "lib."
    raise EditVerificationError(
        f"{path} has no Metal shader library (`lib`) to run exec_*_kernel with; add the stub "
        "to a file that has one (BinaryKernel.mm, UnaryKernel.mm)"
    )


def _namespace_path(ns: cpp.Namespace, namespaces: list[cpp.Namespace]) -> str:
    outer = sorted(
        (n for n in namespaces if n.open < ns.open and n.close > ns.close), key=lambda n: n.open
    )
    return "::".join(n.name for n in [*outer, ns] if n.name)


def _in_native(namespace: tuple[str, ...]) -> bool:
    return "::".join(n for n in namespace if n) == "at::native"


def add_stub(
    text: str,
    path: str,
    stub: str,
    function: str,
    exec_kind: ExecKind,
    kernel_name: str,
    param_type: str = "TensorIteratorBase&",
    *,
    extra: Sequence[str] = (),
    body: str | None = None,
) -> FileEdit:
    """Add ``static void FUNCTION(PARAM iter) { lib.exec_KIND_kernel(iter, "KERNEL"); }``
    and ``REGISTER_DISPATCH(STUB, &FUNCTION)`` in the file's style and places.

    ``extra``: the types of the stub's further parameters (``const Scalar&``); the function
    takes them as ``arg1``... ``body`` replaces the one-line body (the contributor's
    ``host_body=``); it must run ``exec_KIND_kernel(iter, "KERNEL", ...)``.

    The function goes after the last registered kernel function (else before the first
    ``REGISTER_DISPATCH``, else at the end of ``namespace at::native``); the registration
    after the last ``REGISTER_DISPATCH`` line (else after the function), copying the
    majority's ``&`` and ``;`` habits. An existing function with the same name and kernel
    is reused. Unchanged edit when ``stub`` is already registered; ValueError for names
    that are not identifiers; EditVerificationError when the name is taken or the file
    has no shader library.
    """
    for label, value in (("stub", stub), ("function", function), ("kernel", kernel_name)):
        if not _IDENT.match(value):
            raise ValueError(f"{label} name {value!r} is not a C identifier")
    exec_kind = ExecKind.parse(exec_kind)
    if not _PARAM_TYPE.match(param_type):
        raise ValueError(f"parameter type {param_type!r} is not a reference type name")
    param_type = re.sub(r"\s+&", "&", param_type)
    before = _parse(text, path, "the file")
    registered = [s for s in before.stubs if s.stub == stub]
    if registered:
        return FileEdit(path, text, text, f"{stub} is already registered at {registered[0].span}")
    source = cpp.lex(text, path)
    _, namespaces = cpp.scan(source)
    existing = _reusable(before, source, path, function, exec_kind, kernel_name)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    direct = [s for s in before.stubs if s.macro in objc.DISPATCH_MACROS]
    reg = _registration_line(lines, direct, stub, function)
    inserts: list[tuple[int, list[str]]] = []  # (0-based line to insert before, new lines)
    if existing is None:
        indent = _body_indent(lines, before)
        names = [f"arg{i}" for i in range(1, len(extra) + 1)]
        params = "".join(f", {t} {n}" for t, n in zip(extra, names, strict=True))
        call = "".join(f", {n}" for n in names)
        inner = (
            [f"{indent}{line}\n" for line in body.strip().splitlines()]
            if body is not None
            else [
                f'{indent}{_receiver(source, path)}exec_{exec_kind}_kernel(iter, "{kernel_name}"'
                f"{call});\n"
            ]
        )
        fn = [f"static void {function}({param_type} iter{params}) {{\n", *inner, "}\n"]
        at, lead, trail = _function_place(lines, before, direct, namespaces, source, path)
        inserts.append((at, [*lead, *fn, *([] if direct else ["\n", reg]), *trail]))
    elif not direct:
        end = existing.span.end
        inserts.append((end, ["\n", reg, *_gap_before(_line(lines, end))]))
    if direct:
        inserts.append((max(s.span.end for s in direct), [reg]))
    for at, new in sorted(inserts, key=lambda x: x[0], reverse=True):
        lines[at:at] = new
    after = "".join(lines)
    _verify_stub(before, after, path, stub, function, exec_kind, kernel_name, param_type)
    what = "REGISTER_DISPATCH" if existing else f"{function} and REGISTER_DISPATCH"
    return FileEdit(
        path, text, after, f"add {what} for {stub} (exec_{exec_kind}_kernel {kernel_name!r})"
    )


def _reusable(
    before: objc.ObjcFile,
    source: cpp.CppText,
    path: str,
    function: str,
    exec_kind: ExecKind,
    kernel_name: str,
) -> objc.KernelFunction | None:
    """The kernel function named ``function`` when it already runs the same kernel (it is
    reused), None when there is none; EditVerificationError when the name is taken."""
    existing = next((f for f in before.functions if f.name == function), None)
    if existing is not None and (existing.exec_kind, existing.kernel_name) != (
        exec_kind,
        kernel_name,
    ):
        raise EditVerificationError(
            f"{existing.span}: {function} already exists and runs "
            f"exec_{existing.exec_kind}_kernel({existing.kernel_name!r}); pick another name"
        )
    taken = re.search(rf"\b{function}\b", source.masked)
    if existing is None and taken:
        raise EditVerificationError(
            f"{path}:{source.line_of(taken.start())}: the name {function} is already used"
        )
    return existing


def _line(lines: list[str], index: int) -> str | None:
    return lines[index] if 0 <= index < len(lines) else None


def _gap_before(line: str | None) -> list[str]:
    """A blank line to separate new code from ``line``, unless it is blank or a closing brace."""
    return [] if line is None or _blank(line) or line.lstrip().startswith("}") else ["\n"]


def _body_indent(lines: list[str], before: objc.ObjcFile) -> str:
    """The indentation of the first body line of an existing kernel function, or two spaces."""
    for f in before.functions:
        body = _line(lines, f.span.start) if f.span.end > f.span.start else None
        if body and body.strip():
            return body[: len(body) - len(body.lstrip())] or "  "
    return "  "


def _function_place(
    lines: list[str],
    before: objc.ObjcFile,
    direct: list[objc.StubRegistration],
    namespaces: list[cpp.Namespace],
    source: cpp.CppText,
    path: str,
) -> tuple[int, list[str], list[str]]:
    """(line index to insert before, blank lines to lead with, blank lines to trail with)."""
    registered = {
        re.sub(r"<.*", "", s.function).rsplit("::", 1)[-1] for s in before.stubs if s.function
    }
    anchors = [f for f in before.functions if f.name in registered]
    if anchors:
        end = max(f.span.end for f in anchors)
        return end, ["\n"], _gap_before(_line(lines, end))
    if direct:
        first = min(s.span.start for s in direct) - 1
        return first, [] if first == 0 or _blank(_line(lines, first - 1)) else ["\n"], ["\n"]
    native = [n for n in namespaces if _namespace_path(n, namespaces) == "at::native"]
    if not native:
        raise EditVerificationError(f"{path} has no `namespace at::native {{` block to add to")
    close = native[-1].close
    at = source.line_of(close) - 1
    if source.masked[source.line_starts[at] : close].strip():
        raise EditVerificationError(
            f"{path}:{at + 1}: namespace at::native closes mid-line; add the stub by hand"
        )
    prev = _line(lines, at - 1)
    lead = [] if prev is None or _blank(prev) or prev.rstrip().endswith("{") else ["\n"]
    return at, lead, []


def _registration_line(
    lines: list[str], direct: list[objc.StubRegistration], stub: str, function: str
) -> str:
    """``REGISTER_DISPATCH(stub, &fn)`` with the majority's ``&`` and ``;`` habits."""
    written = ["".join(lines[s.span.start - 1 : s.span.end]).strip() for s in direct]
    amp = not written or 2 * sum("&" in w for w in written) >= len(written)
    semi = bool(written) and 2 * sum(w.endswith(";") for w in written) > len(written)
    return f"REGISTER_DISPATCH({stub}, {'&' * amp}{function}){';' * semi}\n"


def _verify_stub(
    before: objc.ObjcFile,
    after_text: str,
    path: str,
    stub: str,
    function: str,
    exec_kind: ExecKind,
    kernel_name: str,
    param_type: str,
) -> None:
    after = _parse(after_text, path, "the edited file")
    problems = _same(before, after, skip=("functions", "stubs"))
    new_fns = unplaced(after.functions) - unplaced(before.functions)
    new_stubs = unplaced(after.stubs) - unplaced(before.stubs)
    if unplaced(before.functions) - unplaced(after.functions) or (
        unplaced(before.stubs) - unplaced(after.stubs)
    ):
        problems.append("existing kernel functions or registrations changed")
    # one launch of the kernel; which parameter it passes as the scalar is the body's own
    # (a host body passes the stub's declared parameters), so only what it launches is checked
    launch = (KernelLaunch(str(exec_kind), kernel_name),)
    want_fn = objc.KernelFunction(function, param_type, exec_kind, kernel_name, NOWHERE, launch)
    if {_launched(f) for f in new_fns} - {want_fn}:
        problems.append(f"unexpected kernel functions {sorted(f.name for f in new_fns)}")
    want_stub = objc.StubRegistration(
        stub, function, "REGISTER_DISPATCH", True, kernel_name, exec_kind, NOWHERE, launch
    )
    if [_launched(s) for s in new_stubs] != [want_stub]:
        problems.append(f"the new registration reads as {list(new_stubs)}")
    source = cpp.lex(after_text, path)
    items, _ = cpp.scan(source)
    placed = [
        i
        for i in items
        if i.kind == "call"
        and i.name == "REGISTER_DISPATCH"
        and cpp.call_args(source, i)[:1] == [stub]
    ]
    if not placed or not all(_in_native(i.namespace) for i in placed):
        problems.append("the registration is not inside namespace at::native")
    if problems:
        raise EditVerificationError(f"{path}: {'; '.join(problems)}; nothing was written")


def _launched(
    x: objc.KernelFunction | objc.StubRegistration,
) -> objc.KernelFunction | objc.StubRegistration:
    """``x`` with its launches reduced to what they launch (kind and kernel name)."""
    launches = tuple(KernelLaunch(la.kind, la.kernel, unread=la.unread) for la in x.launches)
    return dataclasses.replace(x, launches=launches)


def _registrations(parsed: objc.ObjcFile, stub: str) -> list[objc.StubRegistration]:
    return [s for s in parsed.stubs if s.stub == stub]


def add_macro_registration(
    text: str,
    path: str,
    stub: str,
    like: objc.StubRegistration,
    kernel_name: str,
) -> FileEdit | None:
    """Register ``stub`` with the file's own macro, as ``like`` (a native registration through
    that macro) registers its stub: ``REGISTER_UNARY_TI_DISPATCH(exp2);`` after its last use.

    The macro's arguments are ``like``'s with its stub's base name replaced by ``stub``'s.
    Kept only when the file, re-parsed, registers ``stub`` once, natively, with the
    kernel-name string it needs; None when the macro does not fit. (The caller checks that
    ``like``'s stub takes the same parameter type.)
    """
    lines = text.splitlines(keepends=True)
    written = "".join(lines[like.span.start - 1 : like.span.end])
    old, new = like.stub.removesuffix("_stub"), stub.removesuffix("_stub")
    call = re.match(rf"(\s*){re.escape(like.macro)}\s*\((.*)\)\s*(;?)\s*$", written, re.S)
    if call is None:
        return None
    args = [a.strip() for a in cpp.split_args(call[2])]
    if old not in args:
        return None
    args = [new if a == old else a for a in args]
    last = max(s.span.end for s in objc.parse(text, path).stubs if s.macro == like.macro)
    indent = written[: len(written) - len(written.lstrip(" \t"))]
    line = f"{indent}{like.macro}({', '.join(args)}){call[3]}\n"
    after = "".join(lines[:last] + [line] + lines[last:])
    try:
        parsed = objc.parse(after, path)
    except ParseError:
        return None
    got = _registrations(parsed, stub)
    if not (len(got) == 1 and got[0].native and got[0].kernel_name == kernel_name):
        return None
    return FileEdit(path, text, after, f"register {stub} with {like.macro}({', '.join(args)})")


def remove_registration(text: str, path: str, stub: str) -> FileEdit:
    """Delete the registration of ``stub`` whose body is MPSGraph (a macro line such as
    ``REGISTER_MPS_UNARY_STUB(ceil, ceil);`` takes the function it generates with it).

    Verified by re-parsing: the stub is no longer registered in the file, and every other
    registration, function and implementation is unchanged.
    """
    before = _parse(text, path, "the file")
    found = [r for r in _registrations(before, stub) if not r.native]
    if len(found) != 1:
        raise EditVerificationError(
            f"{path}: {len(found)} MPSGraph registrations of {stub}; remove them by hand"
        )
    registration = found[0]
    span = registration.span
    _check_whole_lines(text, path, span, stub)
    after = _remove_lines(text, span.start, span.end)
    parsed = _parse(after, path, "the edited file")

    def kept(entries: Iterable[Any]) -> Counter:  # what lies outside the removed lines
        return unplaced(e for e in entries if not span.overlaps(e.span.start, e.span.end))

    same = all(
        kept(getattr(before, k)) == unplaced(getattr(parsed, k))
        for k in ("stubs", "functions", "implementations")
    )
    if not same or _same(before, parsed, skip=("stubs", "functions", "implementations")):
        raise EditVerificationError(
            f"{path}: removing {registration.macro} for {stub} also changed other code; "
            "nothing was written"
        )
    return FileEdit(
        path, text, after, f"remove {registration.macro} registration of {stub} (MPSGraph body)"
    )
