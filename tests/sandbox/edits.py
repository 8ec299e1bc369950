"""Hand-made source edits of the sandbox: what the migration workflows change, and breakage."""

from __future__ import annotations

from pathlib import Path

BINARY_KERNEL = "aten/src/ATen/native/mps/operations/BinaryKernel.mm"
BINARY_OPS = "aten/src/ATen/native/mps/operations/BinaryOps.mm"
UNARY_OPS = "aten/src/ATen/native/mps/operations/UnaryOps.mm"
BINARY_METAL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
YAML = "aten/src/ATen/native/native_functions.yaml"
BINARY_OPS_H = "aten/src/ATen/native/BinaryOps.h"
ATAN2_STUB = """static void atan2_mps_kernel(TensorIteratorBase& iter) {
  lib.exec_binary_kernel(iter, "atan2");
}

REGISTER_DISPATCH(atan2_stub, &atan2_mps_kernel)
"""


def edit(root: Path, rel: str, old: str, new: str, count: int = 1) -> None:
    """Replace ``old`` (which must occur) by ``new`` in one sandbox file."""
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def add_atan2_stub(root: Path, name: str = "atan2") -> None:
    """Register atan2_stub for MPS, its kernel running the Metal kernel called ``name``."""
    edit(
        root,
        BINARY_KERNEL,
        "REGISTER_DISPATCH(copysign_stub",
        ATAN2_STUB.replace('"atan2"', f'"{name}"') + "REGISTER_DISPATCH(copysign_stub",
    )


def add_hypot_dispatch(root: Path) -> None:
    """Add MPS to hypot.out's shared dispatch row (the add-MPS workflow's yaml edit)."""
    edit(root, YAML, "CPU, CUDA, XPU: hypot_out", "CPU, CUDA, XPU, MPS: hypot_out")


def add_hypot_stub(root: Path) -> None:
    """Register hypot_stub for MPS with a kernel running the hypot functor."""
    stub = ATAN2_STUB.replace("atan2", "hypot")
    edit(
        root,
        BINARY_KERNEL,
        "REGISTER_DISPATCH(copysign_stub",
        stub + "REGISTER_DISPATCH(copysign_stub",
    )


def fold_atan2_yaml(root: Path) -> None:
    """Fold ``MPS: atan2_out_mps`` into the shared ``CPU, CUDA`` row of atan2.out."""
    edit(
        root,
        YAML,
        "    CPU, CUDA: atan2_out\n    MPS: atan2_out_mps\n",
        "    CPU, CUDA, MPS: atan2_out\n",
    )


def remove_atan2_impl(root: Path) -> None:
    """Delete TORCH_IMPL_FUNC(atan2_out_mps) and its per-operator include."""
    path = root / BINARY_OPS
    text = path.read_text()
    start = text.index("TORCH_IMPL_FUNC(atan2_out_mps)")
    text = text[:start] + text[text.index("TORCH_IMPL_FUNC(fmod_mps_out)") :]
    path.write_text(text.replace("#include <ATen/ops/atan2_native.h>\n", ""))


def line_of(root: Path, rel: str, needle: str) -> tuple[int, int]:
    """(line, column), 1-based, of the first occurrence of ``needle`` in a sandbox file."""
    for number, line in enumerate((root / rel).read_text().splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(f"{needle!r} not in {rel}")
