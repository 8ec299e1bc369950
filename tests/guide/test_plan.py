"""The iterator type of a migrated operator's kernel function follows its stub's declaration
in the sandbox's headers, and the sandbox compiler accepts what migrate writes."""

from __future__ import annotations

from pipeline.guide import plan as migrate
from pipeline.sandbox import compile
from pipeline.tree.index import load_index
from tests.sandbox.edits import BINARY_KERNEL, BINARY_OPS_H, edit

UNARY_KERNEL = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"


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


def test_undeclared_stub_gets_the_default_and_a_note(sandbox_settings):
    edit(
        sandbox_settings.root,
        BINARY_OPS_H,
        "DECLARE_DISPATCH(structured_binary_fn, hypot_stub)\n",
        "",
    )
    plan = migrate.plan_edits(load_index(sandbox_settings.tree), "hypot")
    assert "static void hypot_mps_kernel(TensorIteratorBase& iter) {\n" in _after(
        plan, BINARY_KERNEL
    )
    (note,) = [n for n in plan.notes if "hypot_stub" in n]
    assert note.startswith(
        "no DECLARE_DISPATCH for hypot_stub found under aten/src/ATen/native/*.h; "
        "hypot_mps_kernel takes TensorIteratorBase&"
    )


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
