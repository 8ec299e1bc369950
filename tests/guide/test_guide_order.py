"""The guide's own order on upstream-shaped trees: the contributor writes the functor first,
by hand, in the family's .metal file; `migrate` writes the rest (registrations for PyTorch's
dtypes, the folded rows, the stub, the MPSGraph code gone) and the edit items then pass."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.guide import families
from pipeline.guide import plan as migrate
from pipeline.guide.checklist import Status, checklist
from pipeline.tree import metal
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.source import TreeSource
from tests.conftest import git_init

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
TABLE = "torch/testing/_internal/opinfo_table.yaml"
KERNELS = "aten/src/ATen/native/mps/kernels"
OPS = "aten/src/ATen/native/mps/operations"
YAML = "aten/src/ATen/native/native_functions.yaml"

# (operator, its family's .metal file, the functor the contributor writes by hand)
UNARY_FUNCTOR = """
struct {op}_functor {{
  template <typename T>
  inline T operator()(const T x) {{
    return T(precise::{fn}(float(x)));
  }}
}};
"""
BINARY_FUNCTOR = """
struct minimum_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return a < b ? a : b;
  }
};
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dest = tmp_path / "pytorch"
    shutil.copytree(UPSTREAM, dest)
    git_init(dest)
    return dest


def _index(root: Path) -> TreeIndex:
    return load_index(TreeSource(root, root.parent / "cache", "python", root / TABLE))


def _write_functor(root: Path, rel: str, functor: str) -> None:
    path = root / rel
    path.write_text(path.read_text() + functor)


def _apply(root: Path, plan: migrate.EditPlan) -> None:
    for e in plan.edits:
        (root / e.rel).write_text(e.after)


def _failing_edit_items(index: TreeIndex, op: str) -> list[str]:
    record = index.record(op)
    return [
        i.id
        for i in checklist(record)
        if i.id in families.EDIT_ITEMS and i.id != "old_names" and i.status is Status.FAIL
    ]


@pytest.mark.parametrize(
    ("op", "rel", "functor"),
    [
        ("minimum", f"{KERNELS}/BinaryKernel.metal", BINARY_FUNCTOR),
        ("acosh", f"{KERNELS}/UnaryKernel.metal", UNARY_FUNCTOR.format(op="acosh", fn="acosh")),
        ("mish", f"{KERNELS}/ActivationKernel.metal", UNARY_FUNCTOR.format(op="mish", fn="tanh")),
    ],
    ids=["binary", "unary", "activation"],
)
def test_a_functor_written_first_gets_its_registrations_and_the_rest(root, op, rel, functor):
    _write_functor(root, rel, functor)
    index = _index(root)
    assert index.record(op).functors and not index.record(op).registrations
    plan = migrate.plan_edits(index, op)
    assert not plan.blockers, [b.what for b in plan.blockers]
    metal_edit = next(e for e in plan.edits if e.rel == rel)
    assert metal_edit.summary.startswith(f"register {op}_functor:")
    # the math stays the contributor's: the functor is as written, byte for byte
    assert functor in metal_edit.after
    _apply(root, plan)
    after = _index(root)
    registered = {r.input for r in after.record(op).registrations}
    wanted = set(migrate.output_dtypes(index.record(op)))
    assert registered == wanted
    assert _failing_edit_items(after, op) == []
    assert migrate.plan_edits(after, op).empty  # a second run has nothing left to do


def test_a_functor_with_some_registrations_gets_the_rest_and_keeps_its_own(root):
    rel = f"{KERNELS}/BinaryKernel.metal"
    _write_functor(root, rel, BINARY_FUNCTOR + "\nREGISTER_BINARY_OP(minimum, float, float);\n")
    index = _index(root)
    plan = migrate.plan_edits(index, "minimum")
    assert not plan.blockers
    after = next(e for e in plan.edits if e.rel == rel).after
    assert after.count("REGISTER_BINARY_OP(minimum, float, float);") == 1
    regs = metal.parse(after, rel).registrations
    inputs = [r.input for r in regs if r.kernel == "minimum"]
    assert sorted(inputs) == sorted(set(inputs))  # each dtype registered once
    assert set(inputs) == set(migrate.output_dtypes(index.record("minimum")))


def test_a_forward_and_its_backward_written_together_are_both_registered(root):
    # both functors by hand (mish's backward has a stub of its own, mish_backward_stub, once
    # declared); here hardswish's backward functor exists and its forward's is written
    rel = f"{KERNELS}/ActivationKernel.metal"
    _write_functor(root, rel, UNARY_FUNCTOR.format(op="hardswish", fn="tanh"))
    text = (root / rel).read_text()
    lines = [ln for ln in text.splitlines(keepends=True)
             if not ln.startswith("REGISTER_BINARY_OP(hardswish_backward")]  # fmt: skip
    (root / rel).write_text("".join(lines))
    index = _index(root)
    assert not index.record("hardswish_backward").registrations
    plan = migrate.plan_edits(index, "hardswish")
    assert not plan.blockers, [b.what for b in plan.blockers]
    _apply(root, plan)
    after = _index(root)
    for op in ("hardswish", "hardswish_backward"):
        assert after.record(op).registrations, op
        assert _failing_edit_items(after, op) == [], op


@pytest.mark.slow  # the real CLI
def test_the_guides_order_through_the_cli(root):
    import json
    import subprocess
    import sys

    _write_functor(
        root, f"{KERNELS}/UnaryKernel.metal", UNARY_FUNCTOR.format(op="acosh", fn="acosh")
    )
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t",
                    "commit", "-qam", "acosh_functor, by hand"], check=True)  # fmt: skip

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pipeline", *args, "--root", str(root), "--opinfo-table",
             TABLE, "--state-dir", str(root.parent / "state")],
            capture_output=True, text=True, timeout=120, cwd=root.parent,
        )  # fmt: skip

    edit = cli("migrate", "acosh", "--stage", "edit")
    assert edit.returncode == 0, edit.stdout + edit.stderr
    assert "register acosh_functor" in edit.stdout
    audit = json.loads(cli("audit", "acosh", "--json").stdout)
    failing = [c["id"] for c in audit["checklist"]
               if c["id"] in families.EDIT_ITEMS and c["status"] == "fail"]  # fmt: skip
    assert failing == [], audit["checklist"]


def test_a_backward_with_no_opinfo_is_registered_for_what_torch_gives_on_cpu(root):
    import dataclasses

    # hardswish_backward's functor is there, its registrations are not; torch on CPU (the
    # OpInfo dump's backward_dtypes) says which dtypes it computes, and gives them
    rel = f"{KERNELS}/ActivationKernel.metal"
    text = (root / rel).read_text()
    lines = [ln for ln in text.splitlines(keepends=True)
             if not ln.startswith("REGISTER_BINARY_OP(hardswish_backward")]  # fmt: skip
    (root / rel).write_text("".join(lines))
    torch_says = (("bfloat16", "bfloat16"), ("float16", "float16"), ("float32", "float32"),
                  ("float64", "float64"))  # fmt: skip
    index = dataclasses.replace(_index(root), backward_dtypes={"hardswish_backward": torch_says})
    record = index.record("hardswish_backward")
    assert not record.opinfos and record.torch_dtypes == torch_says
    assert migrate.output_dtypes(record) == {d: d for d in ("bfloat16", "float16", "float32")}
    plan = migrate.plan_edits(index, "hardswish_backward")
    assert not plan.blockers, [b.what for b in plan.blockers]
    after = next(e for e in plan.edits if e.rel == rel).after
    regs = {
        r.input for r in metal.parse(after, rel).registrations if r.kernel == "hardswish_backward"
    }
    assert regs == {"float32", "float16", "bfloat16"}  # float64: no Metal type, never registered


@pytest.mark.realdata
def test_torch_on_cpu_gives_the_backwards_dtypes():
    import sys

    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(Path(migrate.__file__).parents[1] / "tree"))
    try:
        import opinfo_dump
    finally:
        sys.path.pop(0)
    allowed = {torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.bool}
    found = opinfo_dump.backward_dtypes(allowed, torch)
    assert found["hardswish_backward"] == {d: d for d in ("bfloat16", "float16", "float32")}
    # Scalar arguments (TorchScript's "number") are made up too; integers where torch has them
    assert found["hardtanh_backward"] == found["hardswish_backward"]
    assert found["threshold_backward"]["int32"] == "int32"
