"""Issue 16, point 5: an edit keeps each line's own line end and a UTF-8 byte-order mark."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pytest

from pipeline.tree.text import encode_like
from tests.conftest import commit
from tests.reliability.cli import cli

YAML = "aten/src/ATen/native/native_functions.yaml"
COMMON_MPS = "torch/testing/_internal/common_mps.py"
BINARY_OPS = "aten/src/ATen/native/mps/operations/BinaryOps.mm"
BINARY_KERNEL = "aten/src/ATen/native/mps/operations/BinaryKernel.mm"


def test_encode_like_keeps_each_lines_end_and_the_mark() -> None:
    original = codecs.BOM_UTF8 + b"a\r\nb\nc\r\n"
    assert encode_like(original, "a\nb\nc\n", "a\nX\nb\nc\n") == (
        codecs.BOM_UTF8 + b"a\r\nX\r\nb\nc\r\n"
    )
    assert encode_like(b"a\rb\r", "a\nb\n", "a\n") == b"a\r"
    assert encode_like(b"a\nb\n", "a\nb\n", "a\nz\n") == b"a\nz\n"
    assert encode_like(None, "", "new\n") == b"new\n"


@pytest.mark.slow
def test_a_migration_of_crlf_mixed_and_bom_files_keeps_them(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert cli(tmp_path, "audit", "atan2", "--state-dir", str(state)).returncode == 1
    root = state / "sandbox"  # the sandbox's working copy, with its build dir
    crlf = (YAML, BINARY_KERNEL)
    for rel in crlf:
        path = root / rel
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    # mixed: the first half of the lines CRLF, the rest LF
    ops = root / BINARY_OPS
    lines = ops.read_bytes().split(b"\n")
    half = len(lines) // 2
    ops.write_bytes(b"\r\n".join(lines[:half]) + b"\r\n" + b"\n".join(lines[half:]))
    mixed_head = b"\r\n".join(lines[:10]) + b"\r\n"
    bom = root / COMMON_MPS
    bom.write_bytes(codecs.BOM_UTF8 + bom.read_bytes())
    commit(root, "CRLF, mixed and BOM files")

    run = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert run.returncode == 0, run.stdout + run.stderr
    for rel in crlf:
        data = (root / rel).read_bytes()
        assert re.search(rb"(?<!\r)\n", data) is None, rel  # every line still CRLF
    assert "atan2_out_mps" not in ops.read_text()
    assert ops.read_bytes().startswith(mixed_head)  # the CRLF half kept CRLF...
    assert ops.read_bytes().endswith(b"\n".join(lines[-5:]))  # ...and the LF half LF
    assert bom.read_bytes().startswith(codecs.BOM_UTF8)
    assert "'atan2'" not in bom.read_text(encoding="utf-8-sig")
