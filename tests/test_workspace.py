"""Making the configured tree ready: the sandbox copy, and refusing what is not a PyTorch tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.errors import EXIT_INPUT, ConfigError
from pipeline.tasks import check_variables
from pipeline.workspace import prepare


def test_a_directory_without_native_functions_is_not_a_pytorch_tree(tmp_path: Path) -> None:
    settings = load_settings({"root": str(tmp_path), "state_dir": str(tmp_path / "s")}, env={})
    with pytest.raises(ConfigError, match="is not a PyTorch checkout") as raised:
        prepare(settings)
    assert raised.value.exit_code == EXIT_INPUT


def test_the_sandbox_is_created_by_prepare_not_by_loading(tmp_path: Path) -> None:
    settings = load_settings({"state_dir": str(tmp_path / "s")}, env={}, cwd=tmp_path)
    assert not settings.root.exists()
    assert (prepare(settings).root / "aten/src/ATen/native/native_functions.yaml").is_file()


def test_a_mistyped_doit_variable_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    check_variables(["migrate_op", "op=atan2", "dry_run=1", "--verbosity=2"])
    with pytest.raises(SystemExit) as raised:
        check_variables(["migrate_op", "op=atan2", "dryrun=1"])
    assert raised.value.code == EXIT_INPUT
    assert "unknown variable dryrun= (did you mean dry_run=?)" in capsys.readouterr().err
