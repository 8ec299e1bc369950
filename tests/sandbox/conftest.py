"""Fixtures for the sandbox tests: private working copies, built or not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.sandbox import backend, compile

BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A console script of the running venv (ninja), else whatever PATH has."""
    candidate = BIN / name
    return str(candidate) if candidate.exists() else (shutil.which(name) or name)


def run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in ``cwd`` and capture its output; never raises on a non-zero exit."""
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


def ninja(root: Path) -> subprocess.CompletedProcess[str]:
    """``ninja -C build torch_cpu`` in the sandbox at ``root``."""
    return run([tool("ninja"), "-C", "build", "torch_cpu"], root)


def compile_in_process(root: Path) -> compile.BuildOutput:
    """What the ninja rule does, without ninja: build and write the artifact."""
    result = compile.build(root)
    if result.artifact is not None:
        out = backend.artifact_path(root)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result.artifact), encoding="utf-8")
    return result


@pytest.fixture
def sandbox_copy(tmp_path: Path) -> Path:
    """A fresh materialized (git-committed, with build.ninja) sandbox, not built."""
    return sandbox.materialize(tmp_path / "sandbox")


@pytest.fixture
def built_sandbox(sandbox_copy: Path) -> Path:
    """A materialized sandbox with its artifact written by the compiler (no ninja)."""
    result = compile_in_process(sandbox_copy)
    assert not result.errors, result.errors
    return sandbox_copy


@pytest.fixture(autouse=True)
def _default_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see the default simulated macOS and build directory whatever the caller set."""
    monkeypatch.delenv(backend.MACOS_ENV, raising=False)
    monkeypatch.delenv(backend.BUILD_DIR_ENV, raising=False)
