"""The tool as a user gets it: the wheel `pip install`ed, without extras, into a fresh venv,
and `mps-pipeline migrate atan2` run from an empty directory on the bundled sandbox.

``installed_venv`` (module-scoped: built once) is that venv, for any test of the installed
command. Nothing of this checkout is visible to it: no PYTHONPATH, no MPS_PIPELINE_* settings,
the working directory empty, and the wheel built from a copy of only what a wheel is made of.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pipeline.__main__ import main
from pipeline.tree.common_mps import read as read_common_mps
from tests.conftest import session_shared, wheel_key
from tests.doit_runs import stages_run

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASKS = ("audit", "edit", "check_math", "build", "test_op", "table", "drop_xfails", "summary")
INSTALL_TIMEOUT = 600


def _timed(what: str, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (check=True); print how long it took (`pytest -s` shows it)."""
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, **kwargs)
    print(f"\n{what}: {time.monotonic() - started:.1f}s")
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def user_env() -> dict[str, str]:
    """A user's shell: this environment without PYTHONPATH, MPS_PIPELINE_* or PYTEST_*
    variables, and without the test interpreter's venv on PATH."""
    ours = Path(sys.prefix) / "bin" if sys.prefix != sys.base_prefix else None
    path = [
        p for p in os.environ.get("PATH", "").split(os.pathsep) if ours is None or Path(p) != ours
    ]
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
            and not k.startswith(("MPS_PIPELINE_", "PYTEST_", "MPS_SIM_"))
        },
        "PATH": os.pathsep.join(path),
    }


@pytest.fixture(scope="session")
def installed_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh venv (no system site-packages) with the wheel and its dependencies from the
    registry, no extras; its path. ``<venv>/bin/mps-pipeline`` is the command. Made once a
    session, the xdist workers sharing it: no test writes into it."""

    def install(base: Path) -> None:
        venv = base / "venv"
        command = [sys.executable, "-m", "venv", str(venv)]
        _timed("venv creation", command, timeout=INSTALL_TIMEOUT)
        python = str(venv / "bin" / "python")
        _timed(
            "pip install (wheel + dependencies)",
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
            timeout=INSTALL_TIMEOUT,
            env=user_env(),
        )

    return session_shared(tmp_path_factory, f"installed-{wheel_key(wheel)}", install) / "venv"


def mps_pipeline(
    venv: Path, *args: str, cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``<venv>/bin/mps-pipeline ARGS`` from ``cwd`` in a user's environment."""
    return subprocess.run(
        [str(venv / "bin" / "mps-pipeline"), *args],
        cwd=cwd,
        env=user_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_wheel_has_every_file_of_the_package(wheel: Path) -> None:
    # what the code opens next to itself (Path(__file__)): the sandbox tree with its
    # dotfiles, sandbox/*.yaml, the pytest plugin (a directory, not a package), opinfo_dump.py
    package = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "pipeline").rglob("*")
        if p.is_file() and not {"__pycache__", ".pytest_cache"} & set(p.parts)
    }
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if not n.startswith("mps_pipeline-")}
    assert sorted(package - shipped) == []
    assert "pipeline/sandbox/tree/.gitignore" in shipped
    assert "pipeline/run/pytest_plugin/mps_pipeline_outcomes.py" in shipped


def test_the_installed_package_is_the_wheel(installed_venv: Path, tmp_path: Path) -> None:
    code = "import pipeline, pytest; print(pipeline.__file__)"
    proc = subprocess.run(
        [str(installed_venv / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        env=user_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    # pytest came as a dependency; pipeline from site-packages, not from this checkout
    assert Path(proc.stdout.strip()).is_relative_to(installed_venv)


def test_migrate_atan2_from_an_empty_directory(
    installed_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))  # the user's
    started = time.monotonic()
    first = mps_pipeline(installed_venv, "migrate", "atan2", cwd=empty)
    print(f"\nmigrate atan2 (first run): {time.monotonic() - started:.1f}s")
    assert first.returncode == 0, first.stdout + first.stderr
    assert stages_run(first.stdout) == set(TASKS)
    assert "XPASS" in first.stdout  # the table showed the integer dtypes passing
    assert "verified: 9 run" in first.stdout
    # no torch in a plain install: check-math could not run, and the verdict says so (on
    # the bundled sandbox, in its own line), never that every item passes
    verdict = next(line for line in first.stdout.splitlines() if line.startswith("verdict"))
    assert verdict.startswith(
        "verdict (on the bundled sandbox, not a checkout of yours): atan2: 8/8 checklist items "
        "and the tests pass; not checked: check-math, because python="
    ), verdict
    assert "Every checklist item passes" not in first.stdout

    # the state went into the user's state folder, and nothing into the working directory
    state = tmp_path / "state-home" / "mps-pipeline"
    assert list(empty.iterdir()) == []
    for name in ("junit.xml", "table.md", "table.json", "summary.md"):
        assert (state / "ops" / "atan2" / name).is_file()
    assert read_common_mps(state / "sandbox").for_key("atan2") == ()

    started = time.monotonic()
    second = mps_pipeline(installed_venv, "migrate", "atan2", cwd=empty)
    print(f"migrate atan2 (second run, no-op): {time.monotonic() - started:.1f}s")
    assert second.returncode == 0, second.stdout + second.stderr
    assert stages_run(second.stdout) == set()


def test_an_interpreter_without_pytest_is_refused(
    installed_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))  # the user's
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ("migrate", "atan2", "--stage", "test_op", "--python", str(python))
    result = mps_pipeline(installed_venv, *args, cwd=empty)
    assert result.returncode == 2, result.stdout + result.stderr
    # doit reports a task's error on stdout
    assert (
        f"python={python} has no pytest: pip install pytest into it "
        "(or set python= / MPS_PIPELINE_PYTHON to an interpreter that has it)\n"
    ) in result.stdout + result.stderr
    state = tmp_path / "state-home" / "mps-pipeline"
    assert state.is_dir() and not list((state / "results").glob("*/pytest.log"))


UPSTREAM = REPO / "tests" / "fixtures" / "upstream"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout shaped like upstream PyTorch, with its own .mps-pipeline.yaml (the
    static OpInfo table: the installed venv has no torch)."""
    tree = tmp_path / "pytorch"
    shutil.copytree(UPSTREAM, tree)
    (tree / ".mps-pipeline.yaml").write_text(
        "opinfo_table: torch/testing/_internal/opinfo_table.yaml\n"
    )
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "upstream shape"], check=True)
    return tree


def test_audit_from_a_subfolder_of_a_checkout(
    installed_venv: Path, checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = checkout / "aten" / "src" / "ATen" / "native" / "mps"
    result = mps_pipeline(installed_venv, "audit", "atan2", "--json", cwd=sub)
    assert result.returncode in (0, 1), result.stderr
    assert result.stderr.splitlines()[0] == (
        f"root: {checkout} (the PyTorch checkout containing the current directory)"
    )
    installed = json.loads(result.stdout)
    # the same audit as this checkout's code gives for that tree, named explicitly
    table = str(checkout / "torch/testing/_internal/opinfo_table.yaml")
    state = str(checkout.parent / "state")
    code = main(
        [
            "audit",
            "atan2",
            "--json",
            "--root",
            str(checkout),
            "--opinfo-table",
            table,
            "--state-dir",
            state,
        ]
    )
    assert code == result.returncode
    assert installed == json.loads(capsys.readouterr().out)
    # results stay with the tree, and out of git's way
    assert (checkout / ".mps-pipeline").is_dir()
    status = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert status == ""


def test_config_and_doit_from_the_checkout(installed_venv: Path, checkout: Path) -> None:
    result = mps_pipeline(installed_venv, "config", "--json", cwd=checkout / "aten")
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)["settings"]
    assert settings["root"]["value"] == str(checkout)
    assert settings["opinfo_table"]["origin"] == str(checkout / ".mps-pipeline.yaml")
    assert settings["github.api_url"] == {"value": "https://api.github.com", "origin": "default"}

    helped = mps_pipeline(installed_venv, "doit", "help", "migrate_op", cwd=checkout / "aten")
    assert helped.returncode == 0, helped.stdout + helped.stderr
    for variable in ("--op", "--root", "--force", "--dry_run", "--config"):
        assert variable in helped.stdout
    listed = mps_pipeline(installed_venv, "doit", "list", cwd=checkout / "aten")
    assert listed.returncode == 0 and "migrate_op" in listed.stdout
    # doit's database is the checkout's too
    assert (checkout / ".mps-pipeline" / "doit.sqlite").is_file()
