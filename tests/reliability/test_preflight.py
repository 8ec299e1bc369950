"""Issue 16, point 6 and issue 19, item 2: everything the chain will need is checked before
its first write; a missing piece is one line, exit 2, and an untouched tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git_init
from tests.reliability.cli import cli, git_status, sandbox_copy

COMMON_MPS = "torch/testing/_internal/common_mps.py"
HEADER = "aten/src/ATen/native/BinaryOps.h"


def _error_line(run: subprocess.CompletedProcess[str]) -> str:
    # a stage's error is one line on stderr, in our words: "error: <the stage>: <why>"
    (line,) = [ln for ln in run.stderr.splitlines() if ln.startswith("error: ")]
    return line.split(": ", 2)[2]


@pytest.mark.slow
def test_a_checkout_without_build_ninja_stops_before_writing(tmp_path: Path) -> None:
    from pipeline import sandbox

    root = tmp_path / "pytorch"
    shutil.copytree(sandbox.TREE, root)  # a checkout: no build/ configured
    git_init(root)
    run = cli(root, "migrate", "atan2", "--opinfo-table", str(sandbox.OPINFO_TABLE))
    assert run.returncode == 2, run.stdout + run.stderr
    line = _error_line(run)
    assert line.startswith("atan2: nothing was written, the chain would stop later: ")
    assert f"{root / 'build/build.ninja'} not found: run `python setup.py develop`" in line
    assert git_status(root) == "?? .mps-pipeline/\n" or git_status(root) == ""
    assert not (root / ".git/mps-pipeline/journal.json").exists()


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("common_mps", f"{COMMON_MPS} not found"),
        # the plan refuses first: no header declares the stub (so no element-wise kernel)
        ("header", "no header declares atan2_stub"),
        ("python", "has no pytest: pip install pytest into it"),
        ("build_command", "the build command's 'no-such-ninja' is not found on PATH"),
    ],
)
@pytest.mark.slow
def test_a_missing_piece_is_found_before_the_first_edit(
    tmp_path: Path, breakage: str, expected: str
) -> None:
    root = sandbox_copy(tmp_path)
    extra: list[str] = []
    if breakage == "common_mps":
        (root / COMMON_MPS).unlink()
    elif breakage == "header":
        (root / HEADER).unlink()
    elif breakage == "python":
        python = shutil.which("python3", path="/usr/bin")
        assert python is not None
        extra = ["--python", python]
    else:
        (tmp_path / ".mps-pipeline.yaml").write_text("build_command: [no-such-ninja]\n")
        extra = ["--config", str(tmp_path / ".mps-pipeline.yaml")]
    before = git_status(root)
    run = cli(tmp_path, "migrate", "atan2", "--state-dir", str(tmp_path / "state"), *extra)
    assert run.returncode == 2, run.stdout + run.stderr
    assert expected in _error_line(run)
    assert git_status(root) == before  # not one file written


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_timeout_that_is_not_positive_is_refused_at_load(tmp_path: Path, value: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"test:\n  timeout: {value if value != 'nan' else '.nan'}\n")
    run = cli(
        tmp_path,
        "migrate",
        "atan2",
        "--state-dir",
        str(tmp_path / "state"),
        "--config",
        str(config),
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "config key 'test.timeout'" in run.stderr
    assert "is not a number of seconds > 0" in run.stderr
    assert not (tmp_path / "state").exists()
