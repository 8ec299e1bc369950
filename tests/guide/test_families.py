"""Issue 18 on the upstream-shaped fixture tree: each family migrates in its own files, as one
unit with its backward, with its complex forms, or is refused before any write."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.edit import metal as metal_edit
from pipeline.edit import objc as objc_edit
from pipeline.errors import NotElementwiseError
from pipeline.guide import families
from pipeline.guide import plan as migrate
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.source import TreeSource
from tests.conftest import git_init

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
TABLE = "torch/testing/_internal/opinfo_table.yaml"
OPS = "aten/src/ATen/native/mps/operations"
KERNELS = "aten/src/ATen/native/mps/kernels"
YAML = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dest = tmp_path / "pytorch"
    shutil.copytree(UPSTREAM, dest)
    git_init(dest)
    return dest


def _index(root: Path, table: Path | None = None) -> TreeIndex:
    return load_index(TreeSource(root, root.parent / "cache", "python", table or root / TABLE))


def _after(plan: migrate.EditPlan, rel: str) -> str:
    (found,) = [e for e in plan.edits if e.rel == rel]
    return found.after


def _apply(root: Path, plan: migrate.EditPlan) -> None:
    for e in plan.edits:
        (root / e.rel).write_text(e.after)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args, "--root", str(root), "--opinfo-table", TABLE]
        + ["--state-dir", str(root.parent / "state")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root.parent,
    )


def _status(root: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


# -- 1. placement by family ------------------------------------------------------------------


def test_an_activations_functor_goes_in_the_library_its_host_loads(root):
    plan = migrate.plan_edits(_index(root), "mish", body="return x;")
    assert not plan.blockers
    edited = {e.rel for e in plan.edits}
    # Activation.h's stubs are registered in ActivationKernel.mm, which loads
    # ActivationKernel_metallib.h: the functor goes there, never into UnaryKernel.metal
    assert f"{KERNELS}/ActivationKernel.metal" in edited
    assert f"{KERNELS}/UnaryKernel.metal" not in edited
    assert "struct mish_functor" in _after(plan, f"{KERNELS}/ActivationKernel.metal")
    host = _after(plan, f"{OPS}/ActivationKernel.mm")
    assert 'lib.exec_unary_kernel(iter, "mish");' in host
    assert "REGISTER_DISPATCH(mish_stub, mish_mps_kernel);" in host  # the file's own habits
    # the invariant, on the tree re-read after the edit
    _apply(root, plan)
    after = _index(root)
    assert families.unresolved_kernels(_index(root), after, {}) == []
    assert migrate.plan_edits(after, "mish", body="return x;").empty


def test_a_functor_in_a_library_the_host_does_not_load_is_caught(root):
    # what the tool used to do: the functor into UnaryKernel.metal, the stub into
    # ActivationKernel.mm, which loads only ActivationKernel.metal
    index = _index(root)
    metal_rel, host_rel = f"{KERNELS}/UnaryKernel.metal", f"{OPS}/ActivationKernel.mm"
    functor = metal_edit.add_functor(
        (root / metal_rel).read_text(), metal_rel, "mish", 1, "return x;", {"float32": "float32"}
    )
    stub = objc_edit.add_stub(
        (root / host_rel).read_text(), host_rel, "mish_stub", "mish_kernel", "unary", "mish"
    )
    edits = {metal_rel: functor, host_rel: stub}
    (problem,) = families.unresolved_kernels(index, families.index_after(index, edits), edits)
    assert problem == (
        f"mish_stub runs kernel 'mish', which has no functor in {KERNELS}/ActivationKernel.metal, "
        f"the library {host_rel} loads (it is in {metal_rel})"
    )


@pytest.mark.slow  # the real CLI
def test_a_family_without_files_gets_the_files_to_create(root):
    # TensorCompare.h's stubs: no host registers any of them yet
    plan = migrate.plan_edits(_index(root), "isposinf", body="return x;")
    created = {b.edit.rel: b for b in plan.blockers if b.edit is not None and not b.edit.before}
    host, kernels = f"{OPS}/TensorCompareKernel.mm", f"{KERNELS}/TensorCompareKernel.metal"
    assert set(created) == {host, kernels}
    assert "#include <ATen/native/mps/TensorCompareKernel_metallib.h>" in created[host].skeleton
    assert "REGISTER_DISPATCH(isposinf_stub, &isposinf_mps_kernel);" in created[host].skeleton
    assert "struct isposinf_functor" in created[kernels].skeleton
    # the preview says so and exits 1; the edit writes nothing and exits 1
    assert _cli(root, "migrate", "isposinf", "--dry-run", "--body", "return x;").returncode == 1
    edit = _cli(root, "migrate", "isposinf", "--stage", "edit", "--body", "return x;")
    assert edit.returncode == 1 and "TensorCompareKernel.mm" in edit.stdout + edit.stderr
    assert not _status(root)


# -- 2. macro lists by meaning ---------------------------------------------------------------


def test_an_operator_never_joins_a_list_whose_members_share_a_meaning(root):
    # frac registers float, half, bfloat same-type: exactly REGISTER_ROUNDING_OPS's pairs
    plan = migrate.plan_edits(_index(root), "frac", body="return x;")
    metal = _after(plan, f"{KERNELS}/UnaryKernel.metal")
    before = (root / KERNELS / "UnaryKernel.metal").read_text()
    rounding = before[before.index("#define REGISTER_ROUNDING_OPS") :].split("\n\n")[0]
    assert rounding in metal  # the rounding list is as it was
    for t in ("float", "half", "bfloat"):
        assert f"REGISTER_UNARY_OP(frac, {t}, {t});" in metal  # c10/metal's own macro
    assert metal_edit.is_general_list("INSTANTIATE_UNARY_KERNELS2")
    assert metal_edit.is_general_list("INSTANTIATE_UNARY_KERNELS_VEC2")
    for name in ("REGISTER_ROUNDING_OPS", "REGISTER_COMPARISON_OPS", "REGISTER_BITWISE_OPS"):
        assert not metal_edit.is_general_list(name)


# -- 3. a forward and its backward, as one unit ------------------------------------------------


@pytest.mark.slow  # the real CLI
def test_a_forward_and_its_backward_migrate_together(root):
    plan = migrate.plan_edits(_index(root), "hardswish", body="return x;")
    assert not plan.blockers
    yaml = _after(plan, YAML)
    for row in ("hardswish_out_mps", "hardswish_mps", "hardswish_backward_mps"):
        assert f"MPS: {row}" not in yaml
    assert "CPU, CUDA, MPS: hardswish_backward" in yaml
    graph = _after(plan, f"{OPS}/Activation.mm")
    # both implementations and both per-operator includes go; mish's stay
    assert "hardswish_out_mps" not in graph and "hardswish_backward_mps" not in graph
    assert "hardswish_native.h" not in graph and "hardswish_backward_native.h" not in graph
    assert "mish_out_mps" in graph and "<ATen/ops/mish_native.h>" in graph
    host = _after(plan, f"{OPS}/ActivationKernel.mm")
    assert "REGISTER_DISPATCH(hardswish_stub, hardswish_mps_kernel);" in host
    assert "REGISTER_DISPATCH(hardswish_backward_stub, hardswish_backward_mps_kernel);" in host
    assert "static void hardswish_mps_kernel(TensorIterator& iter)" in host  # hardswish_fn
    assert 'lib.exec_binary_kernel(iter, "hardswish_backward");' in host
    # the real run, then the audit of both on the same tree: exit 0, and the edit items pass
    preview = _cli(root, "migrate", "hardswish", "--dry-run", "--body", "return x;")
    assert preview.returncode == 0, preview.stdout + preview.stderr
    edit = _cli(root, "migrate", "hardswish", "--stage", "edit", "--body", "return x;")
    assert edit.returncode == 0, edit.stdout + edit.stderr
    for op in ("hardswish", "hardswish_backward"):
        audit = json.loads(_cli(root, "audit", op, "--json").stdout)
        failing = [
            c["id"]
            for c in audit["checklist"]
            if c["id"] in families.EDIT_ITEMS and c["status"] == "fail"
        ]
        assert failing == [], (op, audit["checklist"])


def test_a_backward_named_alone_migrates_alone_and_says_where_its_forward_stands(root):
    # upstream migrated hardswish_backward on its own: its forward's rows, MPSGraph code and
    # include stay as they were
    plan = migrate.plan_edits(_index(root), "hardswish_backward", body="return a;")
    assert not plan.blockers
    yaml = _after(plan, YAML)
    assert (
        "MPS: hardswish_backward_mps" not in yaml and "CPU, CUDA, MPS: hardswish_backward" in yaml
    )
    assert "MPS: hardswish_out_mps" in yaml and "MPS: hardswish_mps" in yaml
    graph = _after(plan, f"{OPS}/Activation.mm")
    assert "hardswish_backward_mps" not in graph and "hardswish_backward_native.h" not in graph
    assert "hardswish_out_mps" in graph and "<ATen/ops/hardswish_native.h>" in graph
    host = _after(plan, f"{OPS}/ActivationKernel.mm")
    assert "REGISTER_DISPATCH(hardswish_backward_stub" in host
    assert "REGISTER_DISPATCH(hardswish_stub" not in host
    assert any(
        n.startswith("hardswish, its forward, is left as it is (migrate workflow still to do)")
        for n in plan.notes
    ), plan.notes
    assert not any("migrates with" in n for n in plan.notes)


# -- 4. refused: not element-wise --------------------------------------------------------------


@pytest.mark.slow  # the real CLI
@pytest.mark.parametrize(
    ("op", "what"),
    [
        # a CPU function whose body this tree (no native/*.cpp) cannot show: unknown, not
        # refused on the name guessed for its stub (issue 27)
        ("linalg_inv_ex", "its stub is unknown: no aten/src/ATen/native/*.cpp in the tree"),
        ("argmax", "argmax_stub (aten/src/ATen/native/ReduceOps.h:15) runs a reduction"),
        ("_copy_from", "implemented by backend kernels only (MPS: _copy_from_mps"),
    ],
)
def test_what_is_not_element_wise_is_refused_with_exit_2_before_any_write(root, op, what):
    for stage in (["--dry-run"], ["--stage", "edit"]):
        run = _cli(root, "migrate", op, *stage, "--body", "return x;")
        assert run.returncode == 2, run.stdout + run.stderr
        # one line on stderr: "error: <the stage>: OP: ..."
        (line,) = [x.split(": ", 2)[2] for x in run.stderr.splitlines() if f": {op}: " in x]
        assert what in line and line.endswith("nothing was written")
    assert not _status(root)


# -- 5. complex --------------------------------------------------------------------------------


def test_complex_results_are_registered_in_the_files_complex_form(root):
    # conj_physical: torch gives complex64 for complex64, every other input keeps its type
    plan = migrate.plan_edits(_index(root), "conj_physical", body="return x;")
    assert not plan.blockers
    metal = _after(plan, f"{KERNELS}/UnaryKernel.metal")
    vec2 = metal[metal.index("#define INSTANTIATE_UNARY_KERNELS_VEC2") :].split("\n\n")[0]
    assert "REGISTER_UNARY_OP(conj_physical, DTYPE##2, DTYPE##2)" in vec2  # float2, half2
    _apply(root, plan)
    registered = _index(root).record("conj_physical").registered_dtypes
    assert {"complex64", "complex32", "float32", "int64", "bool"} <= set(registered)


def test_a_complex_overload_with_other_math_is_left_to_write_not_dropped(root, tmp_path):
    # acosh: integers give float32 and complex64 gives complex64: the complex overload's
    # math is not the real one's body
    table = tmp_path / "table.yaml"
    table.write_text(
        "- name: acosh\n  aten_name: acosh\n  dtypes: [float32, int64, complex64]\n"
        "  output_dtypes: {float32: float32, int64: float32, complex64: complex64}\n"
    )
    plan = migrate.plan_edits(_index(root, table), "acosh", body="return x;")
    (note,) = [n for n in plan.notes if "complex" in n]
    assert note == (
        "acosh: complex overload left to write (complex64, complex32: torch gives complex results)"
    )


# -- 6. includes -------------------------------------------------------------------------------


def test_an_include_stays_while_used_and_goes_with_its_last_use():
    text = (
        "#include <ATen/ops/hardswish_native.h>\nTensor hardswish_backward_mps(const Tensor& a);\n"
    )
    # hardswish_backward_mps is the operator hardswish_backward's, declared by its own header
    assert objc_edit.include_still_needed(text, "hardswish")
    assert not objc_edit.include_still_needed(text, "hardswish", ["hardswish_backward"])
    used = text + "Tensor& hardswish_out_mps(const Tensor& a, Tensor& out);\n"
    assert objc_edit.include_still_needed(used, "hardswish", ["hardswish_backward"])


def test_an_operator_behind_a_variants_stub_is_refused_naming_it(root):
    # no isposinf_stub, but a stub named after a variant of the operator
    header = root / "aten/src/ATen/native/TensorCompare.h"
    header.write_text(header.read_text().replace("isposinf_stub", "isposinf_scalar_stub"))
    with pytest.raises(NotElementwiseError) as refused:
        migrate.plan_edits(_index(root), "isposinf", body="return x;")
    assert str(refused.value) == (
        "isposinf: its kernel is behind isposinf_scalar_stub, not isposinf_stub, which the "
        "guide's one-stub recipe does not cover: it needs a hand-written kernel; nothing was "
        "written"
    )
