"""materialize(): a private, committed working copy of the bundled tree, made once."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.config import load_settings
from pipeline.workspace import prepare


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


def test_materialize_copies_commits_and_leaves_the_bundle_alone(tmp_path):
    before = digest(sandbox.TREE)
    dest = sandbox.materialize(tmp_path / "state" / "sandbox")
    assert dest == tmp_path / "state" / "sandbox"
    assert digest(sandbox.TREE) == before
    assert (dest / sandbox.OPINFO_TABLE).is_file()
    assert (dest / "build" / "build.ninja").is_file()
    assert git(dest, "status", "--porcelain") == ""  # build/ is ignored, the rest committed
    tracked = set(git(dest, "ls-files").split())
    assert "aten/src/ATen/native/native_functions.yaml" in tracked
    assert "test/test_mps.py" in tracked and "pytest.ini" in tracked
    assert not any(t.startswith("build/") for t in tracked)
    assert git(dest, "log", "--format=%an <%ae>").strip() == "mps-pipeline <mps-pipeline@localhost>"
    assert [p.name for p in dest.parent.iterdir()] == ["sandbox"]  # no staging left over


def test_materialize_is_idempotent_and_keeps_local_changes(tmp_path):
    dest = sandbox.materialize(tmp_path / "sandbox")
    yaml = dest / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(yaml.read_text() + "\n# local edit\n")
    head = git(dest, "rev-parse", "HEAD")
    assert sandbox.materialize(dest) == dest
    assert yaml.read_text().endswith("# local edit\n")
    assert git(dest, "rev-parse", "HEAD") == head


def test_build_ninja_runs_the_compiler_for_torch_cpu(tmp_path):
    dest = sandbox.materialize(tmp_path / "my sandbox")
    text = (dest / "build" / "build.ninja").read_text()
    assert "deps = gcc" in text and "depfile = $out.d" in text
    assert f"{sys.executable} -m pipeline.sandbox.compile --root .. --out $out" in text
    assert "build lib/torch_cpu.mpsim.json: compile | $" in text
    assert "../aten/src/ATen/native/mps/kernels/BinaryKernel.metal" in text
    assert "../aten/src/ATen/native/native_functions.yaml" in text
    assert "test_mps.py" not in text
    assert "build torch_cpu: phony lib/torch_cpu.mpsim.json" in text
    assert text.rstrip().endswith("default torch_cpu")


def test_ninja_escaping_of_paths_and_interpreters(tmp_path):
    (tmp_path / "aten/src/ATen/native").mkdir(parents=True)
    (tmp_path / "aten/src/ATen/native/native_functions.yaml").write_text("")
    (tmp_path / "aten/src/ATen/native/a b$c.cpp").write_text("")
    text = sandbox.build_ninja(tmp_path, python="/opt/py $x/python")
    assert "../aten/src/ATen/native/a$ b$$c.cpp" in text
    assert "'/opt/py $$x/python' -m pipeline.sandbox.compile" in text


def test_settings_use_the_materialized_sandbox(tmp_path):
    cwd, state_home = tmp_path / "cwd", tmp_path / "state"
    cwd.mkdir()
    settings = prepare(load_settings(cwd=cwd, env={"XDG_STATE_HOME": str(state_home)}))
    assert settings.is_sandbox
    assert settings.root == (state_home / "mps-pipeline" / "sandbox").resolve()
    assert list(cwd.iterdir()) == []  # a folder that is no checkout gets nothing of ours
    assert settings.opinfo_table == settings.root / sandbox.OPINFO_TABLE
    assert (settings.build_dir / "build.ninja").is_file()


def test_materialize_reports_a_missing_git(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(sandbox.ConfigError, match="needs git"):
        sandbox.materialize(tmp_path / "sandbox")
    assert not (tmp_path / "sandbox").exists()
    assert list(tmp_path.iterdir()) == []
