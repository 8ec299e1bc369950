"""pipeline/tasks.py: the doit tasks' settings, and their variables through doit's public API."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from doit import doit_cmd

from pipeline import sandbox, tasks
from pipeline.flows.migrate import BY_NAME


def test_settings_follow_the_directory_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two checkouts; one process (the CLI's in-process doit) working in each in turn
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        shutil.copytree(sandbox.TREE, root)
    for name in [k for k in os.environ if k.startswith("MPS_PIPELINE_")]:
        monkeypatch.delenv(name)
    # no variables left by an earlier in-process doit run of this test session
    monkeypatch.setattr(doit_cmd, "_CMDLINE_VARS", {})
    monkeypatch.chdir(a)
    first = tasks.settings()
    monkeypatch.chdir(b)
    second = tasks.settings()
    assert first.root == a.resolve() and second.root == b.resolve()
    assert first.state_dir != second.state_dir
    # and a variable set between two calls is seen
    monkeypatch.setenv("MPS_PIPELINE_STATE_DIR", str(tmp_path / "elsewhere"))
    assert tasks.settings().state_dir == (tmp_path / "elsewhere").resolve()


def test_task_variables_are_doit_creator_params() -> None:
    create = tasks.TASKS["task_migrate_op"]
    names = [p["name"] for p in create._task_creator_params]
    assert names == list(BY_NAME["migrate_op"].all_variables)
