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

from pipeline.dtypes import COMPLEX
from pipeline.edit import metal as metal_edit
from pipeline.edit import native_yaml as yaml_edit
from pipeline.edit import objc as objc_edit
from pipeline.edit.atomic import FileEdit
from pipeline.errors import EditVerificationError, NotElementwiseError
from pipeline.guide import families
from pipeline.guide.checklist import UNSUPPORTED_ON_MPS, required_dtypes
from pipeline.tree import native_yaml, objc, paths
from pipeline.tree.index import OperatorRecord, TreeIndex, TreePart
from pipeline.tree.objc import ExecKind
from pipeline.tree.text import read_text

# What structured kernels hand their stubs: the kernel type when no declaration says otherwise
DEFAULT_ITERATOR = "TensorIteratorBase&"
DEFAULT_DTYPES = ("float32", "float16", "bfloat16")
# exec kind -> (host file receiving the stub, Metal file receiving a new functor) when the
# tree names no family (see pipeline.guide.families)
TARGET_FILES = families.DEFAULT_FILES


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
    was not asked or answered with a dtype MPS has no kernel type for (float64). For an
    operator with no OpInfo (a backward), every dtype torch computes it for on CPU.
    """
    if record.torch_dtypes:  # a backward: what torch computes on CPU, as no OpInfo says
        return {
            i: o
            for i, o in record.torch_dtypes
            if i not in UNSUPPORTED_ON_MPS and o not in UNSUPPORTED_ON_MPS
        }
    known = record.output_dtypes
    wanted = list(required_dtypes(record) or DEFAULT_DTYPES)
    # complex inputs torch computes complex results for: never dropped, even when
    # SUPPORTED_COMPLEX_OPS does not list the operator yet
    wanted += [d for d in complex_results(record) if d not in wanted]
    return {
        d: out if (out := known.get(d)) and out not in UNSUPPORTED_ON_MPS else d for d in wanted
    }


def complex_results(record: OperatorRecord) -> tuple[str, ...]:
    """The OpInfos' complex MPS dtypes whose CPU result is complex (conj_physical, sgn),
    with half2 beside float2: the file's complex form registers both."""
    known = record.output_dtypes
    found = [
        d
        for d in record.opinfo_dtypes
        if d in COMPLEX and d not in UNSUPPORTED_ON_MPS and known.get(d) in COMPLEX
    ]
    if "complex64" in found and known.get("complex64") == "complex64":
        found.append("complex32")
    return tuple(dict.fromkeys(found))


def kernel_function(record: OperatorRecord) -> str:
    """The MPS kernel function a migration registers for the operator's stub, named after
    the stub as upstream names them (``xlog1py_mps_kernel`` for ``xlog1py_stub``)."""
    return f"{record.stub.removesuffix('_stub')}_mps_kernel"


def exec_kind(record: OperatorRecord) -> ExecKind:
    """``unary`` or ``binary``, from the Tensor inputs of the operator's schemas."""
    counts = []
    for o in record.overloads:
        args = o.schema.split("(", 1)[1].rsplit(") ->", 1)[0].split("*", 1)[0]
        counts.append(len(re.findall(r"(?:^|,)\s*Tensor\b(?!\()", args)))
    return ExecKind.BINARY if max(counts, default=1) >= 2 else ExecKind.UNARY


def host_kernel_skeleton(record: OperatorRecord, kind: ExecKind, kernel: str) -> str:
    """A host kernel with exactly the stub's declared parameters, passed on to the kernel
    (the guide's "With Scalar Parameter" pattern)."""
    decl = record.stub_decl
    assert decl is not None
    stub, function = record.stub, kernel_function(record)
    names = [f"arg{i}" for i in range(1, len(decl.params))]
    params = ", ".join(f"{t} {n}" for t, n in zip(decl.params, ["iter", *names], strict=True))
    body = textwrap.indent(_skeleton_body(kind, kernel, names), "  ")
    return (
        f"static void {function}({params}) {{\n{body}\n}}\n\n"
        f"REGISTER_DISPATCH({stub}, &{function});\n"
    )


def _skeleton_body(kind: ExecKind, kernel: str, names: list[str]) -> str:
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
    stub, function = record.stub, kernel_function(record)
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
    host: Callable[..., FileEdit], kind: ExecKind, kernel: str, extra: int
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
    """Compute (and verify) every mechanical edit of the guide for ``op`` and the operators
    that migrate with it (its forward or backward, :func:`families.partners`); writes nothing.

    Refused (:class:`NotElementwiseError`, exit 2) before anything is planned when
    the operator is not an element-wise kernel behind a declared stub. Pieces the contributor
    must write become blockers, and planning goes on so the preview shows every other edit
    too. ``body`` is the operator() body of ``op``'s missing functor, ``host_body`` the body
    of its host kernel for a stub declared with extra parameters (the partners' are written
    by hand). A plan that writes and has no blockers is checked on the edited tree, re-parsed:
    every stub runs a functor of its host's library, and the audit's edit items pass for the
    whole unit; what would still fail becomes a blocker, so nothing is written.
    """
    record = index.record(op, find_references=False)  # the edit stage looks for them after
    reason = families.refusal(index, record)
    if reason:
        raise NotElementwiseError(reason)
    op = record.op
    edits: dict[str, FileEdit] = {}
    notes: list[str] = []
    blockers: list[Blocker] = []
    old_names = list(record.old_names)
    # the yaml as last parsed, by its text: 15,000 lines are parsed once per edit, not per use
    models: dict[str, native_yaml.NativeFunctions] = {}
    _plan_one(index, record, body, host_body, edits, notes, blockers, models)
    unit = [op]
    for other in families.partners(index, op):
        partner = index.record(other, find_references=False)
        why = families.refusal(index, partner)
        if why:
            blockers.append(Blocker(f"{other} migrates with {op}, but: {why}", "", ""))
            continue
        unit.append(other)
        old_names += partner.old_names
        notes.append(f"{other} migrates with {op} in the same change (forward and backward)")
        _plan_one(index, partner, None, None, edits, notes, blockers, models)
    forward = families.forward_state(index, op)
    if forward:
        notes.append(forward)
    if index.sources is None or not index.sources.present:
        notes.append(
            f"no {paths.NATIVE_SOURCES} in the tree: the stub of {op} is taken by its name, "
            f"{record.stub}, not read from its shared implementation"
        )
    changed = {rel: e for rel, e in edits.items() if e.changed}
    # Only a plan that writes is judged on its result: with nothing to write the stage is up
    # to date, and what the tree still lacks is the later stages' to report (failing tests).
    if changed and not blockers:
        yaml_after = changed.get(paths.NATIVE_YAML)
        after = families.index_after(
            index, changed, models.get(yaml_after.after) if yaml_after else None
        )
        left = families.unresolved_kernels(index, after, changed)
        for name in unit:
            left += families.audit_left(index, after, name, changed)
        blockers += [Blocker(f"left after the edit: {what}", "", "") for what in left]
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
        edits=tuple(changed.values()),
        blockers=tuple(blockers),
        notes=tuple(notes),
        old_names=tuple(dict.fromkeys(old_names)),
        later_writes=(paths.COMMON_MPS,) if record.xfails else (),
    )


def _functor(
    record: OperatorRecord,
    kind: ExecKind,
    fam: families.Family,
    body: str | None,
    read: Callable[[str], str],
    edits: dict[str, FileEdit],
    notes: list[str],
    blockers: list[Blocker],
) -> None:
    """The missing functor, in the library of the operator's host (or what to write)."""
    # the kernel is named after the stub (xlog1py_stub runs "xlog1py" for special_xlog1py)
    op, metal_file = record.stub.removesuffix("_stub"), fam.kernels
    outputs = output_dtypes(record)
    arity = kind.arity
    complex_in = [d for d in outputs if d in COMPLEX]
    # One template covers complex only when every kind keeps its type; else the complex
    # overload's math differs from the real one and is the contributor's.
    if complex_in and not metal_edit.one_template(outputs):
        what = (
            f"{op}: complex overload left to write ({', '.join(complex_in)}: torch gives "
            "complex results)"
        )
        if record.complex_supported:
            blockers.append(Blocker(what, metal_file, ""))
        else:
            notes.append(what)
        outputs = {i: o for i, o in outputs.items() if i not in COMPLEX}
    if not fam.kernels_exists:
        try:
            functor = metal_edit.functor_skeleton(op, arity, outputs)
        except ValueError as exc:
            functor = f"// {exc}\n"
        skeleton = NEW_METAL_HEAD + "\n" + functor
        blockers.append(
            Blocker(
                f"{op}: {fam.host} loads the library {metal_file}, which does not exist yet: "
                "create it with the functor",
                metal_file,
                skeleton,
                FileEdit(metal_file, "", skeleton, f"create {metal_file} (TODO: the math)"),
            )
        )
        return
    text = read(metal_file)
    try:
        skeleton = metal_edit.functor_skeleton(op, arity, outputs, text=text)
    except ValueError as exc:  # PyTorch's result types need more than one functor shape
        blockers.append(Blocker(f"{op}: {exc}", metal_file, ""))
        return
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
        return
    try:
        added = metal_edit.add_functor(text, metal_file, op, arity, body, outputs)
    except ValueError as exc:  # the contributor's body: say what is wrong with it
        raise EditVerificationError(f"body=...: {exc}; nothing was written") from exc
    _chain(edits, added)


def _registrations(
    record: OperatorRecord,
    kind: ExecKind,
    read: Callable[[str], str],
    edits: dict[str, FileEdit],
    notes: list[str],
    blockers: list[Blocker],
) -> None:
    """The registrations a functor written by hand still lacks (the guide's order: the math
    first), for the dtypes PyTorch computes; complex ones only where the functor has a
    complex form of its own."""
    functor = record.functors[0]
    rel = functor.span.path
    text = read(rel)
    outputs = output_dtypes(record)
    complex_in = [d for d in outputs if d in COMPLEX]
    if complex_in and not _complex_form(text, functor.span.start, functor.span.end):
        notes.append(
            f"{record.op}: {functor.name}_functor has no complex form: {', '.join(complex_in)} "
            "left unregistered (torch gives complex results)"
        )
        outputs = {i: o for i, o in outputs.items() if i not in COMPLEX}
    arity = kind.arity
    try:
        added = metal_edit.add_registrations(text, rel, functor.name, arity, outputs)
    except (ValueError, EditVerificationError) as exc:
        blockers.append(Blocker(f"{record.op}: {exc}", rel, ""))
        return
    if added is not None:
        _chain(edits, added)


# a complex-aware functor: c10/metal's complex trait or Metal's vector form of complex
_COMPLEX_FORM = re.compile(r"is_complex_v|(?:float|half)2")


def _complex_form(text: str, first: int, last: int) -> bool:
    """Whether the functor on lines ``first..last`` of ``text`` handles complex inputs."""
    return bool(_COMPLEX_FORM.search("\n".join(text.splitlines()[first - 1 : last])))


# What a new kernels file starts with: the includes and namespaces of the tree's own.
NEW_METAL_HEAD = (
    "#include <c10/metal/indexing.h>\n"
    "#include <c10/metal/utils.h>\n"
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "using namespace c10::metal;\n"
)
NEW_HOST_HEAD = """#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/TensorIterator.h>
#include <ATen/native/{header}>
#include <ATen/native/mps/OperationUtils.h>

namespace at::native {{

#ifndef PYTORCH_JIT_COMPILE_SHADERS
static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();
#else
#include <ATen/native/mps/{library}_metallib.h>
#endif

"""


def _plan_one(
    index: TreeIndex,
    record: OperatorRecord,
    body: str | None,
    host_body: str | None,
    edits: dict[str, FileEdit],
    notes: list[str],
    blockers: list[Blocker],
    models: dict[str, native_yaml.NativeFunctions],
) -> None:
    """The edits of one operator, chained onto ``edits`` (another operator of its unit may
    have edited the same files first); ``models``: yaml texts already parsed."""
    root, op = index.root, record.op

    def read(rel: str) -> str:
        # strict: a file that cannot be decoded is never edited (UnreadableFileError)
        return edits[rel].after if rel in edits else read_text(root / rel, rel)

    kind = exec_kind(record)
    fam = families.family(index, record, kind)
    # a composite runs other operators: its rows are folded, no kernel or stub is written
    composite = record.composite_calls is not None
    needs_stub = not composite and not any(s.native for s in record.stubs)
    if needs_stub and not record.functors:
        _functor(record, kind, fam, body, read, edits, notes, blockers)
    elif composite:
        notes.append(
            f"{op}: a composite: its shared implementation runs "
            f"{', '.join(record.composite_calls or ())} on MPS; only its dispatch is folded"
        )
    elif record.functors and (needs_stub or record.pending_overloads or record.mpsgraph):
        # only while the migration is under way: a finished operator's dtypes are the
        # tests' to report, never registered behind the contributor's back
        _registrations(record, kind, read, edits, notes, blockers)
    _fold_dispatch(index, record, read, edits, notes, models)
    _remove_mpsgraph(index, record, read, edits, blockers)
    if needs_stub:
        _stub(index, record, kind, fam, host_body, read, edits, notes, blockers)


def _fold_dispatch(
    index: TreeIndex,
    record: OperatorRecord,
    read: Callable[[str], str],
    edits: dict[str, FileEdit],
    notes: list[str],
    models: dict[str, native_yaml.NativeFunctions],
) -> None:
    """The operator's MPS rows of native_functions.yaml folded into the shared kernel's."""
    yaml_rel = paths.NATIVE_YAML
    # the index parsed this very file, unless a partner of the unit edited it first
    text = read(yaml_rel)
    model = models.get(text) if yaml_rel in edits else index.native
    add = native_yaml.adds_mps(o.kind for o in record.overloads)
    fold = yaml_edit.fold_mps_dispatch(text, yaml_rel, record.op, model=model, add=add)
    if fold.parsed is not None:
        models[fold.edit.after] = fold.parsed
    _chain(edits, fold.edit)
    notes += [f"{name}: {reason}" for name, reason in fold.manual]


def _remove_mpsgraph(
    index: TreeIndex,
    record: OperatorRecord,
    read: Callable[[str], str],
    edits: dict[str, FileEdit],
    blockers: list[Blocker],
) -> None:
    """The operator's MPSGraph code gone: its implementations, the include they needed, and
    the registration of its stub to them."""
    op = record.op
    for impl in record.mpsgraph:
        rel = impl.span.path
        others = [i.name for i in record.mpsgraph if i.span.path == rel]
        _chain(
            edits, objc_edit.remove_implementation(read(rel), rel, impl.name, also_removing=others)
        )
    # The operator's include goes from every file whose MPSGraph code for it is gone (also one
    # an earlier, half-done migration left behind), unless code left there still uses it.
    operators = list(index.entries_by_operator())
    leftovers = {i.span.path for i in record.leftover_includes}
    for rel in dict.fromkeys([*(i.span.path for i in record.mpsgraph), *leftovers]):
        after = read(rel)
        if any(i.op == op and i.span.path == rel for i in record.includes) and (
            not objc_edit.include_still_needed(after, op, operators)
        ):
            _chain(edits, objc_edit.remove_include(after, rel, op, operators))
    stub_name = record.stub
    for rel in dict.fromkeys(s.span.path for s in record.stubs if not s.native):
        # A second registration of one stub does not compile: replace, never add beside it.
        try:
            _chain(edits, objc_edit.remove_registration(read(rel), rel, stub_name))
        except EditVerificationError as exc:
            blockers.append(
                Blocker(f"{exc}: remove the MPSGraph registration of {stub_name}", rel, "")
            )


def _new_host_file(
    record: OperatorRecord, kind: ExecKind, fam: families.Family, kernel: str
) -> Blocker:
    """The family's host file, which the tree lacks: its skeleton, to create by hand."""
    registration = host_kernel_skeleton(record, kind, kernel) if record.stub_decl else ""
    library = PurePosixPath(fam.kernels).stem
    header = PurePosixPath(fam.header or "").name
    skeleton = NEW_HOST_HEAD.format(header=header, library=library) + registration
    skeleton += "\n} // namespace at::native\n"
    return Blocker(
        f"{record.op}: no host file registers the stubs of {fam.header} yet: create "
        f"{fam.host}, loading the library {fam.kernels}",
        fam.host,
        skeleton,
        FileEdit(fam.host, "", skeleton, f"create {fam.host}"),
    )


def _stub(
    index: TreeIndex,
    record: OperatorRecord,
    kind: ExecKind,
    fam: families.Family,
    host_body: str | None,
    read: Callable[[str], str],
    edits: dict[str, FileEdit],
    notes: list[str],
    blockers: list[Blocker],
) -> None:
    """The stub registered to the Metal kernel in the family's host file: by the file's own
    macro, or a new host kernel (one written by hand when the stub takes more parameters),
    or the host file itself to create."""
    stub_name = record.stub
    stub_file = fam.host
    param_type, stub_notes = stub_param_type(record)
    notes += stub_notes
    kernel = record.functors[0].name if record.functors else stub_name.removesuffix("_stub")
    if not fam.host_exists:
        blockers.append(_new_host_file(record, kind, fam, kernel))
        return
    if param_type is None:
        decl = record.stub_decl
        assert decl is not None
        first, *extra = decl.params
        host = functools.partial(
            objc_edit.add_stub,
            read(stub_file),
            stub_file,
            stub_name,
            kernel_function(record),
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
                kernel_function(record),
                kind,
                kernel,
                param_type=param_type,
            ),
        )
    if not blockers:
        _check_registered_once(index, stub_name, edits)
