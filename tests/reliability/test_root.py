"""Issue 16, point 3: standing in a broken PyTorch checkout is an error naming its yaml, never
a silent switch to the bundled sandbox."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.reliability.cli import cli

YAML = "aten/src/ATen/native/native_functions.yaml"


def _checkout(tmp_path: Path) -> Path:
    from pipeline import sandbox

    root = tmp_path / "pytorch"
    shutil.copytree(sandbox.TREE, root)
    return root


def directory(yaml: Path) -> str:
    yaml.mkdir()
    return "a directory, not a file"


def dangling(yaml: Path) -> str:
    yaml.symlink_to(yaml.parent / "gone.yaml")
    return "a dangling symlink"


def loop(yaml: Path) -> str:
    other = yaml.parent / "other.yaml"
    other.symlink_to(yaml)
    yaml.symlink_to(other)
    return "a symlink loop"


def fifo(yaml: Path) -> str:
    os.mkfifo(yaml)
    return "not a regular file (a FIFO"


def missing(yaml: Path) -> str:
    return "missing"


@pytest.mark.parametrize("breakage", [directory, dangling, loop, fifo, missing])
def test_a_checkout_whose_yaml_cannot_be_read_is_exit_2(tmp_path: Path, breakage) -> None:
    root = _checkout(tmp_path)
    yaml = root / YAML
    yaml.unlink()
    why = breakage(yaml)
    work = root / "aten/src/ATen/native/mps"  # standing inside the checkout
    run = cli(work, "migrate", "atan2", "--state-dir", str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith(f"error: {yaml}: {why}"), run.stderr
    assert "looks like a PyTorch checkout" in run.stderr
    assert not (tmp_path / "state").exists()  # no sandbox made, nothing written


def test_a_git_top_level_with_aten_counts_as_a_checkout(tmp_path: Path) -> None:
    root = tmp_path / "pytorch"
    (root / "aten").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    run = cli(root / "aten", "audit", "atan2")
    assert run.returncode == 2 and f"error: {root / YAML}: missing" in run.stderr, run.stderr


@pytest.mark.slow
def test_outside_any_checkout_the_sandbox_is_still_used(tmp_path: Path) -> None:
    run = cli(tmp_path, "audit", "atan2", "--state-dir", str(tmp_path / "state"))
    assert run.returncode in (0, 1), run.stderr
    assert "root: the bundled sandbox" in run.stderr
