"""The stub an operator needs is read from its shared implementation in native/*.cpp, never
guessed from its name; a composite migrates by folding its dispatch alone; an implementation
the tree does not hold is an unknown that stops before any write (exit 2)."""

# ruff: noqa: E501 - the C++ lines are written as upstream writes them, a signature a line
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.errors import UnknownImplementationError
from pipeline.guide import families
from pipeline.guide import plan as migrate
from pipeline.guide.checklist import Status, checklist
from pipeline.tree import sources
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.source import TreeSource

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
TABLE = "torch/testing/_internal/opinfo_table.yaml"
YAML = "aten/src/ATen/native/native_functions.yaml"
BINARY_H = "aten/src/ATen/native/BinaryOps.h"
BINARY_CPP = "aten/src/ATen/native/BinaryOps.cpp"
KERNEL_MM = "aten/src/ATen/native/mps/operations/BinaryKernel.mm"

# Entries in the shape of the 2.15.0 yaml: a structured special_ operator whose stub has no
# prefix, still on an MPSGraph row, and two composites (one of operators MPS runs, one not).
ENTRIES = """
- func: special_xlog1py.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
  device_check: NoCheck   # TensorIterator
  structured: True
  structured_inherits: TensorIteratorBase
  python_module: special
  variants: function
  dispatch:
    CPU, CUDA: special_xlog1py_out
    MPS: special_xlog1py_out_mps
  tags: pointwise

- func: special_xlog1py(Tensor self, Tensor other) -> Tensor
  python_module: special
  structured_delegate: special_xlog1py.out

- func: softclip.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA: softclip_out
    MPS: softclip_out_mps

- func: hardclip.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA: hardclip_out
    MPS: hardclip_out_mps

- func: cumclip.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA: cumclip_out

- func: lostclip.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA: lostclip_out
    MPS: lostclip_out_mps
"""
# Our own code in the shape of upstream's BinaryOps.cpp / Activation.cpp
CPP = """#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/BinaryOps.h>

namespace at::native {

DEFINE_DISPATCH(xlog1py_stub);

TORCH_IMPL_FUNC(special_xlog1py_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  xlog1py_stub(device_type(), *this);
}

Tensor& softclip_out(const Tensor& self, Tensor& out) {
  // a composite: MPS runs both
  return at::mul_out(out, self, at::sigmoid(self));
}

Tensor& hardclip_out(const Tensor& self, Tensor& out) {
  return at::cumclip_out(out, self);
}

} // namespace at::native
"""
GRAPH = """
TORCH_IMPL_FUNC(special_xlog1py_out_mps) (const Tensor& self, const Tensor& other, const Tensor& output) {
  mps::binaryOpTensor(self, other, output, "xlog1py_out_mps", nullptr);
}

Tensor& softclip_out_mps(const Tensor& self, Tensor& out) {
  MPSGraph* graph = nil;
  return out;
}
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dest = tmp_path / "pytorch"
    shutil.copytree(UPSTREAM, dest)
    (dest / YAML).write_text((dest / YAML).read_text() + ENTRIES)
    (dest / BINARY_CPP).write_text(CPP)
    header = dest / BINARY_H
    header.write_text(
        header.read_text().replace(
            "DECLARE_DISPATCH(",
            "DECLARE_DISPATCH(structured_binary_fn, xlog1py_stub)\nDECLARE_DISPATCH(",
            1,
        )
    )
    ops = dest / "aten/src/ATen/native/mps/operations/BinaryOps.mm"
    ops.write_text(
        ops.read_text().replace("namespace at::native {", "namespace at::native {" + GRAPH, 1)
    )
    return dest


def _index(root: Path) -> TreeIndex:
    return load_index(TreeSource(root, root.parent / "cache", "python", root / TABLE))


def test_the_reader_finds_impl_funcs_plain_and_macro_made_functions():
    text = CPP.replace(
        "} // namespace at::native",
        "#define CREATE_BINARY_TORCH_IMPL_FUNC(func_out, func_stub) \\\n"
        "TORCH_IMPL_FUNC(func_out) (const Tensor& self, const Tensor& other, const Tensor& result) { \\\n"
        "  func_stub(device_type(), *this); \\\n}\n\n"
        "CREATE_BINARY_TORCH_IMPL_FUNC(bitwise_and_out, bitwise_and_stub);\n"
        "} // namespace at::native",
    )
    found = {i.name: i for i in sources.parse(text, BINARY_CPP).implementations}
    assert found["special_xlog1py_out"].stubs == ("xlog1py_stub",)
    assert found["special_xlog1py_out"].span.start == 8
    assert found["bitwise_and_out"].stubs == ("bitwise_and_stub",)
    assert found["softclip_out"].stubs == ()
    assert {"mul_out", "sigmoid"} <= set(found["softclip_out"].calls)


def test_a_special_operator_gets_the_stub_its_implementation_calls(root):
    record = _index(root).record("special_xlog1py")
    assert record.stub == "xlog1py_stub"
    assert record.stub_decl is not None and record.stub_decl.stub == "xlog1py_stub"
    assert families.refusal(_index(root), record) is None
    plan = migrate.plan_edits(_index(root), "special_xlog1py")
    (functor,) = [b for b in plan.blockers if "no Metal functor" in b.what]
    assert "struct xlog1py_functor" in functor.skeleton
    host = next(e for e in plan.edits if e.rel == KERNEL_MM).after
    assert "REGISTER_DISPATCH(xlog1py_stub, &xlog1py_mps_kernel)" in host
    assert "special_xlog1py_stub" not in host


def test_a_composite_migrates_by_folding_its_dispatch_alone(root):
    index = _index(root)
    record = index.record("softclip")
    assert record.composite_calls is not None and "mul_out" in record.composite_calls
    plan = migrate.plan_edits(index, "softclip")
    assert not plan.blockers, [b.what for b in plan.blockers]
    rels = {e.rel for e in plan.edits}
    assert YAML in rels and not any(r.endswith(".metal") for r in rels)
    assert "CPU, CUDA, MPS: softclip_out" in next(e for e in plan.edits if e.rel == YAML).after
    graph = next(e for e in plan.edits if e.rel.endswith("BinaryOps.mm")).after
    assert "softclip_out_mps" not in graph and "special_xlog1py_out_mps" in graph
    assert any("a composite" in n for n in plan.notes)
    for e in plan.edits:
        (root / e.rel).write_text(e.after)
    after = _index(root).record("softclip")
    failing = [i.id for i in checklist(after) if i.status is Status.FAIL and i.id != "xfails"]
    assert failing == [] or failing == ["old_names"], failing


def test_a_composite_of_an_operator_without_mps_is_refused_naming_it(root):
    index = _index(root)
    why = families.refusal(index, index.record("hardclip"))
    assert why is not None and "no dispatch for cumclip" in why


def test_an_implementation_the_tree_does_not_hold_is_unknown_exit_2(root):
    index = _index(root)
    with pytest.raises(UnknownImplementationError) as unknown:
        migrate.plan_edits(index, "lostclip")
    assert unknown.value.exit_code == 2
    assert "lostclip_out" in str(unknown.value) and "aten/src/ATen/native/*.cpp" in str(
        unknown.value
    )
