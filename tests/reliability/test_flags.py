"""Issue 16, point 2: a yes/no variable takes 1 or 0; anything else is exit 2, nothing run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doit_runs import doit
from tests.reliability.cli import cli


@pytest.mark.parametrize(
    "arg", ["dry_run=on", "dry_run=yes", "dry_run=true", "force=maybe", "--dry_run=on"]
)
def test_a_yes_no_variable_refuses_what_the_docs_do_not_give(tmp_path: Path, arg: str) -> None:
    state = tmp_path / "state"
    run = doit(state, "migrate_op", "op=atan2", arg)
    name, _, value = arg.lstrip("-").partition("=")
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"error: {name}={value}: a yes/no variable takes 1 or 0" in run.stderr
    assert ".  edit:atan2" not in run.stdout
    yaml = state / "sandbox/aten/src/ATen/native/native_functions.yaml"
    assert not yaml.exists() or "atan2_out_mps" in yaml.read_text()  # nothing migrated


@pytest.mark.slow
def test_the_cli_doit_refuses_too_and_1_still_previews(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    bad = cli(tmp_path, "doit", "preview", "op=atan2", "dry_run=on", f"state_dir={state}")
    assert bad.returncode == 2 and "dry_run=on" in bad.stderr, bad.stderr
    good = cli(tmp_path, "doit", "migrate_op", "op=atan2", "dry_run=1", f"state_dir={state}")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "would edit" in good.stdout
    yaml = tmp_path / "state/sandbox/aten/src/ATen/native/native_functions.yaml"
    assert "atan2_out_mps" in yaml.read_text()
