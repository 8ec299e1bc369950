"""Issue 16, points 8 and 9: read-only and immutable files and folders, a failing disk, names
no folder can hold, a state dir that is a file, a damaged doit database, a config file that is
a folder: each is one line naming the path, exit 2, and nothing written."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.cli import cli, git_status, sandbox_copy

YAML = "aten/src/ATen/native/native_functions.yaml"
BINARY_OPS = "aten/src/ATen/native/mps/operations/BinaryOps.mm"
OPERATIONS = "aten/src/ATen/native/mps/operations"


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (not root, or the filesystem has none)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def _task_error(run: subprocess.CompletedProcess[str]) -> str:
    # a stage's error is one line on stderr, in our words: "error: <the stage>: <why>"
    (line,) = [ln for ln in run.stderr.splitlines() if ln.startswith("error: ")]
    return line.split(": ", 2)[2]


@pytest.mark.slow
def test_a_read_only_yaml_is_never_replaced(tmp_path: Path) -> None:
    root = sandbox_copy(tmp_path)
    (root / YAML).chmod(0o444)
    run = cli(tmp_path, "migrate", "atan2", "--state-dir", str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert _task_error(run) == (
        f"{YAML} is read-only (mode 0444); nothing was written: make it writable "
        f"(chmod u+w {YAML}) to let the pipeline edit it"
    )
    assert git_status(root) == ""
    assert (root / YAML).stat().st_mode & 0o777 == 0o444


@pytest.mark.slow
def test_an_immutable_file_then_a_users_change_loses_nothing(tmp_path: Path) -> None:
    # the reproduction of point 1: chattr +i on the yaml, migrate, chattr -i, a line
    # appended to BinaryOps.mm, migrate again
    root = sandbox_copy(tmp_path)
    state = str(tmp_path / "state")
    with immutable(root / YAML):
        run = cli(tmp_path, "migrate", "atan2", "--state-dir", state)
    assert run.returncode == 2, run.stdout + run.stderr
    assert _task_error(run).startswith(f"{YAML} cannot be written: Operation not permitted")
    assert "Traceback" not in run.stdout + run.stderr
    assert git_status(root) == "" and not (root / ".git/mps-pipeline/journal.json").exists()
    mine = (root / BINARY_OPS).read_text() + "// mine\n"
    (root / BINARY_OPS).write_text(mine)
    again = cli(tmp_path, "migrate", "atan2", "--state-dir", state)
    assert again.returncode == 2, again.stdout  # uncommitted changes of the user's: refused
    assert "BinaryOps.mm has uncommitted changes" in again.stderr
    assert (root / BINARY_OPS).read_text() == mine


@pytest.mark.slow
def test_an_immutable_folder_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    root = sandbox_copy(tmp_path)
    with immutable(root / OPERATIONS):
        run = cli(tmp_path, "migrate", "atan2", "--state-dir", str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    line = _task_error(run)
    assert line.startswith(str(root / OPERATIONS)) and "nothing was written" in line, line
    assert "Traceback" not in run.stdout + run.stderr
    assert git_status(root) == ""


@pytest.mark.slow
def test_eio_on_a_rename_is_one_line_and_the_next_run_finishes(tmp_path: Path) -> None:
    root = sandbox_copy(tmp_path)
    state = str(tmp_path / "state")
    run = cli(
        tmp_path, "migrate", "atan2", "--state-dir", state, kill_at=("replace", 2), fault="eio"
    )
    assert run.returncode == 2, run.stdout + run.stderr
    line = _task_error(run)
    assert "Input/output error while committing an edit; the edit is kept in" in line, line
    assert "Traceback" not in run.stdout + run.stderr
    again = cli(tmp_path, "migrate", "atan2", "--state-dir", state)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "recovered: rolled forward" in again.stdout
    assert "atan2_out_mps" not in (root / BINARY_OPS).read_text()


@pytest.mark.parametrize("command", ["migrate", "audit"])
def test_an_operator_name_no_folder_can_hold_is_exit_2(tmp_path: Path, command: str) -> None:
    run = cli(tmp_path, command, "a" * 10_000, "--state-dir", str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    out = run.stdout + run.stderr
    assert "(10000 characters)" in out
    assert "is not an operator name" in out or "unknown operator" in out
    assert "Traceback" not in out and "File name too long" not in out
    assert max(len(line) for line in out.splitlines()) < 400


def test_a_state_dir_that_is_a_file_is_exit_2(tmp_path: Path) -> None:
    # the bundled sandbox's default state folder (outside any checkout), a file
    (tmp_path / "mps-pipeline").write_text("not a folder")
    run = cli(tmp_path, "migrate", "atan2", extra_env={"XDG_STATE_HOME": str(tmp_path)})
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"error: {tmp_path / 'mps-pipeline'} is not a directory" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_a_damaged_doit_database_is_exit_2_naming_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert cli(tmp_path, "migrate", "atan2", "--state-dir", str(state)).returncode == 0
    db = state / "doit.sqlite"
    db.write_bytes(b"this is no database at all" * 100)
    run = cli(tmp_path, "migrate", "atan2", "--state-dir", str(state))
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"error: {db}: doit's database is damaged" in run.stderr
    db.unlink()
    assert cli(tmp_path, "migrate", "atan2", "--state-dir", str(state)).returncode == 0


@pytest.mark.slow
def test_a_config_file_that_is_a_folder_is_exit_2(tmp_path: Path) -> None:
    root = sandbox_copy(tmp_path)
    (root / ".mps-pipeline.yaml").mkdir()
    run = cli(root, "audit", "atan2")
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith(f"error: {root / '.mps-pipeline.yaml'}: a directory, not a file")
    named = cli(tmp_path, "audit", "atan2", "--config", str(root / ".mps-pipeline.yaml"))
    assert named.returncode == 2 and "a directory, not a file" in named.stderr, named.stderr


@pytest.mark.slow
def test_as_an_unprivileged_user_a_read_only_yaml_is_never_replaced() -> None:
    # the rename over a 0444 file needs only the folder's permission: refused all the same
    import os
    import shutil
    import sys
    import tempfile

    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root (to become another user) and setpriv")
    work = Path(tempfile.mkdtemp(prefix="mps-nobody-", dir="/tmp"))
    try:
        os.chown(work, 65534, 65534)
        as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = {**os.environ, "HOME": str(work), "PYTHONPATH": str(Path(__file__).parents[2])}

        def run(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*as_nobody, sys.executable, "-m", "pipeline", *argv, "--state-dir",
                 str(work / "state")],
                cwd=work, capture_output=True, text=True, env=env, timeout=300,
            )  # fmt: skip

        assert run("audit", "atan2").returncode == 1
        yaml = work / "state/sandbox" / YAML
        yaml.chmod(0o444)
        migrated = run("migrate", "atan2")
        assert migrated.returncode == 2, migrated.stdout + migrated.stderr
        assert f"{YAML} is read-only (mode 0444); nothing was written" in migrated.stderr
        assert "atan2_out_mps" in yaml.read_text()
        assert yaml.stat().st_mode & 0o777 == 0o444
    finally:
        shutil.rmtree(work, ignore_errors=True)
