"""The guide's mechanical edits for one operator, planned in memory: the edit plan.

A plan is every edit the tree needs (dispatch fold on every overload, MPSGraph removal and
its include, functor insertion, stub registration), each verified by re-parsing, plus what
blocks it: pieces that cannot be written mechanically (a missing Metal functor without
``body=``, a stub whose declared signature needs a hand-written host kernel). A plan with
blockers is never applied, so the tree never ends half migrated. An empty plan (no edits,
no blockers) is what "the edit stage is up to date" means.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from pipeline.edit import metal as metal_edit
from pipeline.edit import native_yaml as yaml_edit
from pipeline.edit import objc as objc_edit
from pipeline.edit.atomic import FileEdit
from pipeline.errors import EditVerificationError
from pipeline.guide.checklist import UNSUPPORTED_ON_MPS, required_dtypes
from pipeline.tree import objc, paths
from pipeline.tree.index import OperatorRecord, TreeIndex, TreePart
from pipeline.tree.text import read_text

# What structured kernels hand their stubs: the kernel type when no declaration says otherwise
DEFAULT_ITERATOR = "TensorIteratorBase&"
DEFAULT_DTYPES = ("float32", "float16", "bfloat16")
# exec kind -> (host file receiving the stub, Metal file receiving a new functor)
TARGET_FILES = {
    "unary": (f"{paths.OPERATIONS_DIR}/UnaryKernel.mm", f"{paths.KERNELS_DIR}/UnaryKernel.metal"),
    "binary": (
        f"{paths.OPERATIONS_DIR}/BinaryKernel.mm",
        f"{paths.KERNELS_DIR}/BinaryKernel.metal",
    ),
}


@dataclass(frozen=True)
class Blocker:
    """A piece the migration needs that the contributor must write: what, where, a skeleton."""

    what: str
    file: str
    skeleton: str
    # the skeleton in place, as a whole-file edit a preview shows as a diff (never written)
    edit: FileEdit | None = None

    def render(self) -> str:
        return f"{self.what}\n  in {self.file}:\n\n{self.skeleton.rstrip()}\n"


@dataclass(frozen=True)
class EditPlan:
    """Every edit of the guide for one operator, verified, and what still blocks them."""

    op: str
    edits: tuple[FileEdit, ...]
    blockers: tuple[Blocker, ...]
    notes: tuple[str, ...]  # advice that does not block the edit (decorators to drop...)
    old_names: tuple[str, ...]  # the *_mps kernels the yaml dispatched to before
    # files a later stage of the chain will write (common_mps.py when xfails may go)
    later_writes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        """Nothing to edit and nothing blocking: the edit stage has nothing left to do."""
        return not self.edits and not self.blockers


def output_dtypes(record: OperatorRecord) -> dict[str, str]:
    """Input dtype -> the dtype PyTorch computes for it, for every dtype the kernel needs.

    From the OpInfos' CPU runs (``OperatorRecord.output_dtypes``); same-type where PyTorch
    was not asked or answered with a dtype MPS has no kernel type for (float64).
    """
    known = record.output_dtypes
    return {
        d: out if (out := known.get(d)) and out not in UNSUPPORTED_ON_MPS else d
        for d in required_dtypes(record) or DEFAULT_DTYPES
    }


def exec_kind(record: OperatorRecord) -> str:
    """``unary`` or ``binary``, from the Tensor inputs of the operator's schemas."""
    counts = []
    for o in record.overloads:
        args = o.schema.split("(", 1)[1].rsplit(") ->", 1)[0].split("*", 1)[0]
        counts.append(len(re.findall(r"(?:^|,)\s*Tensor\b(?!\()", args)))
    return "binary" if max(counts, default=1) >= 2 else "unary"


def host_kernel_skeleton(record: OperatorRecord, kind: str, kernel: str) -> str:
    """A host kernel with exactly the stub's declared parameters, passed on to the kernel
    (the guide's "With Scalar Parameter" pattern)."""
    decl = record.stub_decl
    assert decl is not None
    stub, function = f"{record.op}_stub", f"{record.op}_mps_kernel"
    names = [f"arg{i}" for i in range(1, len(decl.params))]
    params = ", ".join(f"{t} {n}" for t, n in zip(decl.params, ["iter", *names], strict=True))
    body = textwrap.indent(_skeleton_body(kind, kernel, names), "  ")
    return (
        f"static void {function}({params}) {{\n{body}\n}}\n\n"
        f"REGISTER_DISPATCH({stub}, &{function});\n"
    )


def _skeleton_body(kind: str, kernel: str, names: list[str]) -> str:
    """The host kernel's body to fill in: hand ``names`` (its extra parameters) on."""
    return (
        f"// TODO: pass what the Metal kernel needs of {', '.join(names)}\n"
        f'lib.exec_{kind}_kernel(iter, "{kernel}"{"".join(", " + n for n in names)});'
    )


def stub_param_type(record: OperatorRecord) -> tuple[str | None, list[str]]:
    """The iterator parameter type of the operator's new kernel function, and notes.

    It is the iterator the stub's ``DECLARE_DISPATCH`` type takes (``TensorIterator&`` or
    ``TensorIteratorBase&``). None when that type takes more (``const Scalar& alpha``): the
    function is then the contributor's to write. Without a readable declaration,
    ``TensorIteratorBase&`` (what structured kernels pass), with a note.
    """
    stub, function = f"{record.op}_stub", f"{record.op}_mps_kernel"
    decl = record.stub_decl
    if decl is None:
        unread = [
            u
            for u in record.unrecognised
            if PurePosixPath(u.span.path).match(paths.NATIVE_HEADERS) and stub in u.text
        ]
        why = (
            f"{unread[0].span}: the type {stub} is declared with is not understood "
            f"({unread[0].reason})"
            if unread
            else f"no DECLARE_DISPATCH for {stub} found under {paths.NATIVE_HEADERS}"
        )
        # a header that could not be read may be the one declaring it
        unreadable = [gap for source, gap in record.gaps if source is TreePart.HEADERS]
        if unreadable:
            why += f" (not all headers could be read: {'; '.join(unreadable)})"
        return DEFAULT_ITERATOR, [
            f"{why}; {function} takes {DEFAULT_ITERATOR}: check it against the stub's type"
        ]
    return decl.iterator_param, []


def host_file(index: TreeIndex, record: OperatorRecord, default: str) -> str:
    """Where the operator's stub is registered for MPS: the host file that registers most of
    the other stubs declared in the same ``native/*.h`` header (``UnaryOps.h`` →
    UnaryKernel.mm), else ``default``."""
    decl = record.stub_decl
    if decl is None:
        return default
    header = next((f for f in index.dispatch.files if f.path == decl.span.path), None)
    siblings = {d.stub for d in header.decls} - {decl.stub} if header else set()
    counts = Counter(
        s.span.path for f in index.host.files for s in f.stubs if s.native and s.stub in siblings
    )
    return counts.most_common(1)[0][0] if counts else default


def _register_with_file_macro(
    index: TreeIndex, text: str, rel: str, stub: str, kernel: str, param_type: str
) -> FileEdit | None:
    """The registration in the file's own convention: its local macro (the most used one
    first) when that macro's expansion fits the stub (a stub of the same parameter type,
    the same kernel-name string), else None."""
    parsed = objc.parse(text, rel)
    native = [s for s in parsed.stubs if s.native and s.macro not in objc.DISPATCH_MACROS]
    for macro, _ in Counter(s.macro for s in native).most_common():
        for like in (s for s in native if s.macro == macro):
            decl = index.dispatch.stub(like.stub)
            if decl is None or not _same_type(decl.iterator_param, param_type):
                continue
            edit = objc_edit.add_macro_registration(text, rel, stub, like, kernel)
            if edit is not None:
                return edit
            break  # the macro itself does not fit: try the next one
    return None


def _same_type(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.replace(" ", "") == b.replace(" ", "")


def _check_registered_once(index: TreeIndex, stub: str, edits: dict[str, FileEdit]) -> None:
    """The invariant of every plan: after it, ``stub`` is registered exactly once for MPS."""
    count = 0
    for f in index.host.files:
        parsed = objc.parse(edits[f.path].after, f.path) if f.path in edits else f
        count += len([s for s in parsed.stubs if s.stub == stub])
    for rel, edit in edits.items():  # a host file the tree did not have yet
        if rel.endswith(".mm") and all(f.path != rel for f in index.host.files):
            count += len([s for s in objc.parse(edit.after, rel).stubs if s.stub == stub])
    if count != 1:
        raise EditVerificationError(
            f"{stub} would be registered {count} times for MPS after the edit; nothing was "
            "written. Please report this with the files involved."
        )


def _skeleton_edit(
    host: Callable[..., FileEdit], kind: str, kernel: str, extra: int
) -> FileEdit | None:
    """The host-kernel skeleton in place, for the preview; None where it cannot be placed."""
    names = [f"arg{i}" for i in range(1, extra + 1)]
    try:
        return host(body=_skeleton_body(kind, kernel, names))
    except (ValueError, EditVerificationError):
        return None


def _chain(edits: dict[str, FileEdit], new: FileEdit) -> None:
    """Fold successive edits of one file into a single before→after edit."""
    prev = edits.get(new.rel)
    if prev is None:
        edits[new.rel] = new
    else:
        edits[new.rel] = FileEdit(new.rel, prev.before, new.after, f"{prev.summary}; {new.summary}")


def plan_edits(
    index: TreeIndex, op: str, body: str | None = None, host_body: str | None = None
) -> EditPlan:
    """Compute (and verify) every mechanical edit of the guide for ``op``; writes nothing.

    Pieces the contributor must write become blockers, and planning goes on so the preview
    shows every other edit too. ``body`` is the operator() body of a missing functor,
    ``host_body`` the body of a host kernel for a stub declared with extra parameters.
    """
    root = index.root
    record = index.record(op, find_references=False)  # the edit stage looks for them after
    op = record.op
    edits: dict[str, FileEdit] = {}
    notes: list[str] = []
    blockers: list[Blocker] = []

    def read(rel: str) -> str:
        # strict: a file that cannot be decoded is never edited (UnreadableFileError)
        return edits[rel].after if rel in edits else read_text(root / rel, rel)

    kind = exec_kind(record)
    stub_file, metal_file = TARGET_FILES[kind]
    needs_stub = not any(s.native for s in record.stubs)
    if needs_stub and not record.functors:
        outputs = output_dtypes(record)
        arity = 2 if kind == "binary" else 1
        text = read(metal_file)
        try:
            skeleton = metal_edit.functor_skeleton(op, arity, outputs, text=text)
        except ValueError as exc:  # PyTorch's result types need more than one functor shape
            blockers.append(Blocker(f"{op}: {exc}", metal_file, ""))
        else:
            if body is None:
                blockers.append(
                    Blocker(
                        f"{op}: no Metal functor yet: write it (the math is yours), or pass "
                        'body="return ...;" to have it inserted',
                        metal_file,
                        skeleton,
                        metal_edit.functor_skeleton_edit(text, metal_file, op, arity, outputs),
                    )
                )
            else:
                try:
                    functor = metal_edit.add_functor(text, metal_file, op, arity, body, outputs)
                except ValueError as exc:  # the contributor's body: say what is wrong with it
                    raise EditVerificationError(f"body=...: {exc}; nothing was written") from exc
                _chain(edits, functor)

    yaml_rel = paths.NATIVE_YAML
    # the index parsed this very file (nothing in the plan edited it before)
    fold = yaml_edit.fold_mps_dispatch(read(yaml_rel), yaml_rel, op, model=index.native)
    _chain(edits, fold.edit)
    notes += [f"{name}: {reason}" for name, reason in fold.manual]

    for impl in record.mpsgraph:
        rel = impl.span.path
        others = [i.name for i in record.mpsgraph if i.span.path == rel]
        _chain(
            edits, objc_edit.remove_implementation(read(rel), rel, impl.name, also_removing=others)
        )
    # The operator's include goes from every file whose MPSGraph code for it is gone (also one
    # an earlier, half-done migration left behind).
    leftovers = {i.span.path for i in record.leftover_includes}
    for rel in dict.fromkeys([*(i.span.path for i in record.mpsgraph), *leftovers]):
        after = read(rel)
        if any(i.op == op and i.span.path == rel for i in record.includes) and (
            not objc_edit.include_still_needed(after, op)
        ):
            _chain(edits, objc_edit.remove_include(after, rel, op))
    stub_name = f"{op}_stub"
    for rel in dict.fromkeys(s.span.path for s in record.stubs if not s.native):
        # A second registration of one stub does not compile: replace, never add beside it.
        try:
            _chain(edits, objc_edit.remove_registration(read(rel), rel, stub_name))
        except EditVerificationError as exc:
            blockers.append(
                Blocker(f"{exc}: remove the MPSGraph registration of {stub_name}", rel, "")
            )
    if needs_stub:
        stub_file = host_file(index, record, stub_file)
        param_type, stub_notes = stub_param_type(record)
        notes += stub_notes
        kernel = record.functors[0].name if record.functors else op
        if param_type is None:
            decl = record.stub_decl
            assert decl is not None
            first, *extra = decl.params
            host = functools.partial(
                objc_edit.add_stub,
                read(stub_file),
                stub_file,
                stub_name,
                f"{op}_mps_kernel",
                kind,
                kernel,
                param_type=first,
                extra=extra,
            )
            if host_body is not None:
                try:
                    _chain(edits, host(body=host_body))
                except (ValueError, EditVerificationError) as exc:
                    raise EditVerificationError(f"host_body=...: {exc}") from exc
            else:
                blockers.append(
                    Blocker(
                        f"{decl.span}: {stub_name} is declared as {decl.fn_type}, taking "
                        f"({', '.join(decl.params)}): its MPS kernel takes the same parameters "
                        "and passes them to the Metal kernel; check the skeleton against your "
                        'functor, then pass it as host_body="..."',
                        stub_file,
                        host_kernel_skeleton(record, kind, kernel),
                        _skeleton_edit(host, kind, kernel, len(extra)),
                    )
                )
        else:
            text = read(stub_file)
            registered = _register_with_file_macro(
                index, text, stub_file, stub_name, kernel, param_type
            )
            _chain(
                edits,
                registered
                or objc_edit.add_stub(
                    text,
                    stub_file,
                    stub_name,
                    f"{op}_mps_kernel",
                    kind,
                    kernel,
                    param_type=param_type,
                ),
            )
    if (needs_stub or record.stubs) and not blockers:
        _check_registered_once(index, stub_name, edits)
    for info in record.opinfos:
        for d in info.decorators:
            what = " ".join(
                x
                for x in (
                    d.kind,
                    d.test,
                    f"[{', '.join(d.dtypes)}]" if d.dtypes else None,
                    f"({d.where})" if d.where else None,
                )
                if x
            )
            notes.append(f"OpInfo {info.key}: MPS decorator {what} should go once the tests pass")
    return EditPlan(
        op=op,
        edits=tuple(e for e in edits.values() if e.changed),
        blockers=tuple(blockers),
        notes=tuple(notes),
        old_names=record.old_names,
        later_writes=(paths.COMMON_MPS,) if record.xfails else (),
    )
