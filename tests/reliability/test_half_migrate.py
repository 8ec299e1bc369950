"""Issue 16, point 7: inputs that would half-migrate are input errors before any write."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.errors import ParseError
from pipeline.tree import native_yaml
from tests.conftest import commit
from tests.reliability.cli import cli

YAML = "aten/src/ATen/native/native_functions.yaml"
BINARY_OPS = "aten/src/ATen/native/mps/operations/BinaryOps.mm"

ENTRY = """- func: atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU, CUDA: atan2_out
    MPS: atan2_out_mps
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ENTRY + "  dispatch:\n    CPU: other\n",
            "duplicate key `dispatch:` in one entry (lines 3 and 6)",
        ),
        (
            ENTRY + "  func: atan2.out(Tensor self) -> Tensor\n",
            "duplicate key `func:` in one entry (lines 1 and 6)",
        ),
        (ENTRY + ENTRY, "`atan2.out` is declared twice (lines 1 and 6)"),
        (
            ENTRY + "    MPS: again\n",
            "dispatch key MPS appears twice in one `dispatch:` (lines 5 and 6)",
        ),
        (
            ENTRY.replace("CPU, CUDA:", "CPU, CPU:"),
            "dispatch key CPU appears twice in one `dispatch:` (lines 4 and 4)",
        ),
    ],
)
def test_duplicates_are_errors_naming_both_lines(text: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        native_yaml.parse(text, YAML)
    assert message in str(info.value)


def _status(root: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


@pytest.mark.slow
@pytest.mark.parametrize("breakage", ["duplicate_dispatch", "twice", "latin1_mm"])
def test_nothing_is_written_from_an_input_that_would_half_migrate(
    tmp_path: Path, breakage: str
) -> None:
    state = tmp_path / "state"
    assert cli(tmp_path, "audit", "atan2", "--state-dir", str(state)).returncode == 1
    root = state / "sandbox"
    yaml = root / YAML
    text = yaml.read_text()
    start = text.index("- func: atan2.out(")
    end = text.index("\n\n", start) + 1
    entry = text[start:end]
    if breakage == "duplicate_dispatch":
        yaml.write_text(text[:end] + "  dispatch:\n    CPU: atan2_out\n" + text[end:])
    elif breakage == "twice":
        yaml.write_text(text[:end] + "\n" + entry + text[end:])
    else:
        mm = root / BINARY_OPS
        mm.write_bytes(mm.read_bytes().replace(b"// ", "// caf\u00e9 ".encode("latin-1"), 1))
    commit(root, breakage)
    run = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert run.returncode == 2, run.stdout + run.stderr
    out = run.stdout + run.stderr
    if breakage == "latin1_mm":
        assert f"{BINARY_OPS}: not UTF-8: byte 0xe9" in out
        assert "nothing was written" in out
    else:
        assert f"{YAML}:" in out and "lines" in out
    assert _status(root) == ""  # the tree as committed: nothing written
