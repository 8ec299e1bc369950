"""The iterator type of a migrated operator's kernel function follows its stub's declaration
in the sandbox's headers, and the sandbox compiler accepts what migrate writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import (
    EditVerificationError,
    NotElementwiseError,
    UnknownImplementationError,
    UnreadableFileError,
)
from pipeline.guide import plan as migrate
from pipeline.sandbox import compile
from pipeline.tree.index import load_index
from tests.sandbox.edits import BINARY_KERNEL, BINARY_OPS_H, edit

UNARY_KERNEL = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"


def _after(plan: migrate.EditPlan, rel: str) -> str:
    (found,) = [e for e in plan.edits if e.rel == rel]
    return found.after


def test_binary_fn_stub_gets_a_tensor_iterator_kernel_that_compiles(sandbox_settings):
    # DECLARE_DISPATCH(binary_fn, fmod_stub)
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "fmod")
    kernel = _after(plan, BINARY_KERNEL)
    assert "static void fmod_mps_kernel(TensorIterator& iter) {\n" in kernel
    assert "REGISTER_DISPATCH(fmod_stub, &fmod_mps_kernel)" in kernel
    assert not any("fmod_stub" in note for note in plan.notes)
    root = sandbox_settings.root
    for e in plan.edits:
        (root / e.rel).write_text(e.after)
    result = compile.build(root)
    assert result.errors == ()
    assert result.artifact["operators"]["fmod"]["mps"] == "native"


def test_structured_stub_keeps_tensor_iterator_base(sandbox_settings):
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "atan2")
    assert "static void atan2_mps_kernel(TensorIteratorBase& iter) {\n" in _after(
        plan, BINARY_KERNEL
    )
    assert not any("atan2_stub" in note for note in plan.notes)


def test_stub_with_an_extra_argument_blocks_the_plan_with_a_host_skeleton(sandbox_settings):
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "logit", body="return x;")
    assert UNARY_KERNEL not in {e.rel for e in plan.edits}
    (blocker,) = [b for b in plan.blockers if "logit_stub" in b.what]
    assert blocker.what.startswith("aten/src/ATen/native/UnaryOps.h:")
    assert "declared as unary_fn_with_scalar, taking (TensorIteratorBase&, const Scalar&)" in (
        blocker.what
    )
    # the skeleton takes exactly the declared parameters and passes them on
    assert "static void logit_mps_kernel(TensorIteratorBase& iter, const Scalar& arg1) {" in (
        blocker.skeleton
    )
    assert 'lib.exec_unary_kernel(iter, "logit", arg1);' in blocker.skeleton
    assert "REGISTER_DISPATCH(logit_stub, &logit_mps_kernel);" in blocker.skeleton
    assert not plan.empty


def test_an_operator_whose_stub_no_header_declares_is_refused_before_any_plan(sandbox_settings):
    edit(
        sandbox_settings.root,
        BINARY_OPS_H,
        "DECLARE_DISPATCH(structured_binary_fn, hypot_stub)\n",
        "",
    )
    with pytest.raises(NotElementwiseError) as refused:
        migrate.plan_edits(load_index(sandbox_settings.tree), "hypot", body="return a;")
    assert refused.value.exit_code == 2
    message = str(refused.value)
    assert "\n" not in message
    # what implements it, and that it needs a hand-written kernel
    assert message.startswith("hypot: implemented by hypot_out (CPU, hypot.out at ")
    assert "no header declares hypot_stub" in message
    assert message.endswith("it needs a hand-written kernel; nothing was written")


def test_without_the_shared_sources_a_stub_no_header_declares_is_unknown_not_refused(
    sandbox_settings,
):
    """No native/*.cpp (a partial checkout, the sweep's wheel tree): the stub's name is only
    a guess from the operator's (huber_loss calls huber_stub), so a header that does not
    declare the guess proves nothing: unknown, exit 2, never a refusal."""
    for cpp in (sandbox_settings.root / "aten/src/ATen/native").glob("*.cpp"):
        cpp.unlink()
    edit(
        sandbox_settings.root,
        BINARY_OPS_H,
        "DECLARE_DISPATCH(structured_binary_fn, hypot_stub)\n",
        "",
    )
    with pytest.raises(UnknownImplementationError) as unknown:
        migrate.plan_edits(load_index(sandbox_settings.tree), "hypot", body="return a;")
    assert unknown.value.exit_code == 2
    assert str(unknown.value) == (
        "hypot: its stub is unknown: no aten/src/ATen/native/*.cpp in the tree to read its "
        "shared implementation from, and no header declares hypot_stub, the name guessed from "
        "the operator; nothing was written"
    )


def test_a_header_that_cannot_be_read_is_named_in_the_note(sandbox_settings):
    header = sandbox_settings.root / BINARY_OPS_H
    header.write_bytes(header.read_bytes() + b"// caf\xe9\n")
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "hypot")
    (note,) = [n for n in plan.notes if "hypot_stub" in n]
    assert note.startswith(
        "no DECLARE_DISPATCH for hypot_stub found under aten/src/ATen/native/*.h "
        f"(not all headers could be read: {BINARY_OPS_H}: not UTF-8: byte 0xe9 at line"
    )
    assert "hypot_mps_kernel takes TensorIteratorBase&: check it against" in note


def test_a_file_the_plan_must_edit_is_never_edited_undecoded(sandbox_settings):
    # the readers skip BinaryKernel.mm; the plan registers atan2's stub in it: refused
    host = sandbox_settings.root / BINARY_KERNEL
    host.write_bytes(b"\xff\xfe" + host.read_text().encode("utf-16-le"))
    with pytest.raises(UnreadableFileError, match=f"^{BINARY_KERNEL}: a UTF-16 file"):
        migrate.plan_edits(load_index(sandbox_settings.tree), "atan2")


def test_unreadable_declaration_gets_the_default_and_says_why(sandbox_settings):
    edit(
        sandbox_settings.root,
        BINARY_OPS_H,
        "(structured_binary_fn, hypot_stub)",
        "(hypot_fn, hypot_stub)",
    )
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "hypot")
    assert "hypot_mps_kernel(TensorIteratorBase& iter)" in _after(plan, BINARY_KERNEL)
    (note,) = [n for n in plan.notes if "hypot_stub" in n]
    assert note.startswith(f"{BINARY_OPS_H}:")
    assert "the type hypot_stub is declared with is not understood (no `using hypot_fn" in note


# -- the file's own conventions -------------------------------------------------------------


def test_stub_is_registered_with_the_host_files_own_macro(sandbox_settings):
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "exp2")
    after = _after(plan, UNARY_KERNEL)
    assert "REGISTER_UNARY_TI_DISPATCH(sinc);\nREGISTER_UNARY_TI_DISPATCH(exp2);\n" in after
    assert "static void exp2_mps_kernel" not in after  # not a second style beside the macro


def test_mpsgraph_stub_macro_is_replaced_not_doubled(sandbox_settings):
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "ceil", body="return x;")
    assert not plan.blockers
    ops = _after(plan, "aten/src/ATen/native/mps/operations/UnaryOps.mm")
    assert "REGISTER_MPS_UNARY_STUB(ceil, ceil);" not in ops
    assert "REGISTER_MPS_UNARY_STUB(trunc, truncate);" in ops  # its neighbour stays
    assert "REGISTER_UNARY_TI_DISPATCH(ceil);" in _after(plan, UNARY_KERNEL)
    root = sandbox_settings.root
    for e in plan.edits:
        (root / e.rel).write_text(e.after)
    registrations = [s for f in load_index(sandbox_settings.tree).host.files for s in f.stubs]
    assert [s.native for s in registrations if s.stub == "ceil_stub"] == [True]


def test_a_macro_whose_kernel_name_does_not_fit_is_not_used(sandbox_settings):
    from pipeline.edit import objc as objc_edit
    from pipeline.tree import objc

    text = (sandbox_settings.root / UNARY_KERNEL).read_text()
    (like, *_) = objc.parse(text, UNARY_KERNEL).stubs
    fits = objc_edit.add_macro_registration(text, UNARY_KERNEL, "exp2_stub", like, "exp2")
    assert fits is not None and "REGISTER_UNARY_TI_DISPATCH(exp2);" in fits.after
    # a functor called otherwise (special_erfcx_stub runs "erfcx"): the macro would call the
    # kernel "exp2", which does not exist
    assert (
        objc_edit.add_macro_registration(text, UNARY_KERNEL, "exp2_stub", like, "exp_two") is None
    )


def _fixture_index(tmp_path, *ops: str):
    """The index of the upstream-shaped fixture tree, with a small OpInfo table of ``ops``."""
    import shutil

    from pipeline.tree.source import TreeSource

    root = tmp_path / "tree"
    shutil.copytree(UPSTREAM, root)
    table = tmp_path / "opinfo.yaml"
    table.write_text(
        "".join(
            f"- name: {op}\n  variant_test_name: ''\n  aten_name: {op}\n  aliases: []\n"
            "  dtypes: [float32, float16, bfloat16, int64, int32, int16, int8, uint8, bool]\n"
            "  decorators: []\n"
            for op in ops
        )
    )
    return load_index(TreeSource(root, tmp_path / "cache", "python", table))


def test_upstream_shape_acosh_moves_from_the_mpsgraph_macro_to_the_unary_kernel_macro(
    tmp_path,
):
    index = _fixture_index(tmp_path, "acosh")
    plan = migrate.plan_edits(index, "acosh", body="return x;")
    ops = "aten/src/ATen/native/mps/operations/UnaryOps.mm"
    # UnaryOps.h's other stubs are registered in UnaryKernel.mm, with its one-line macro
    assert "REGISTER_UNARY_TI_DISPATCH(acosh);" in _after(plan, UNARY_KERNEL)
    assert "REGISTER_MPS_UNARY_STUB(acosh, acosh);" not in _after(plan, ops)
    assert "REGISTER_MPS_UNARY_STUB(asinh, asinh);" in _after(plan, ops)
    assert not plan.blockers


def test_upstream_shape_half_done_migration_is_completed(tmp_path):
    # logaddexp: functor, stub and folded yaml row exist; TORCH_IMPL_FUNC(logaddexp_out_mps)
    # and its include are still in BinaryOps.mm, which no longer builds
    index = _fixture_index(tmp_path, "logaddexp")
    plan = migrate.plan_edits(index, "logaddexp")
    ops = "aten/src/ATen/native/mps/operations/BinaryOps.mm"
    assert [e.rel for e in plan.edits] == [ops]
    after = _after(plan, ops)
    assert "logaddexp_out_mps" not in after and "<ATen/ops/logaddexp_native.h>" not in after
    assert "minimum_out_mps" in after  # the other MPSGraph code stays
    assert not plan.blockers


# -- what the contributor writes: skeletons with PyTorch's types, host kernels ----------------


def test_missing_functor_skeleton_registers_pytorchs_output_dtypes(sandbox_settings):
    # xlogy's integer inputs give float32 in PyTorch (the OpInfos' CPU runs say so)
    index = load_index(sandbox_settings.tree)
    assert index.record("xlogy").output_dtypes["int64"] == "float32"
    plan = migrate.plan_edits(index, "xlogy")
    (blocker,) = [b for b in plan.blockers if "no Metal functor" in b.what]
    assert "REGISTER_INT2FLOAT_BINARY_OP(xlogy);" in blocker.skeleton
    assert "inline float operator()" in blocker.skeleton  # the integral overload
    # the preview shows it in place, as a diff marked TODO
    assert blocker.edit is not None and blocker.edit.rel.endswith("BinaryKernel.metal")
    assert "TODO" in blocker.edit.diff()


def test_host_body_writes_a_kernel_with_the_stubs_declared_parameters(sandbox_settings):
    index = load_index(sandbox_settings.tree)
    host_body = 'lib.exec_unary_kernel(iter, "logit", arg1);'
    plan = migrate.plan_edits(index, "logit", body="return x;", host_body=host_body)
    assert not plan.blockers
    kernel = _after(plan, UNARY_KERNEL)
    assert "static void logit_mps_kernel(TensorIteratorBase& iter, const Scalar& arg1) {" in (
        kernel
    )
    assert host_body in kernel and "REGISTER_DISPATCH(logit_stub, &logit_mps_kernel)" in kernel
    root = sandbox_settings.root
    for e in plan.edits:
        (root / e.rel).write_text(e.after)
    assert compile.build(root).errors == ()


def test_host_body_that_runs_no_metal_kernel_is_refused(sandbox_settings):
    index = load_index(sandbox_settings.tree)
    with pytest.raises(EditVerificationError, match="host_body"):
        migrate.plan_edits(index, "logit", body="return x;", host_body="(void)arg1;")
