"""The state directory's up-to-date rules: build identity and the test stage's settings."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pipeline import state
from pipeline.config import load_settings
from pipeline.errors import DocumentError


def _settings(tmp_path: Path):
    root = tmp_path / "tree"
    (root / "build").mkdir(parents=True)
    return load_settings({"root": str(root), "state_dir": str(tmp_path / "s")}, env={})


def test_build_identity_follows_ninjas_log(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    log = s.build_dir / state.NINJA_LOG
    log.write_text("# ninja log v6\n1\t2\t3\tlib/a\tdeadbeef\n")
    state.write_build_stamp(s, did_work=True)
    first = state.build_stamp(s).read_bytes()
    state.write_build_stamp(s, did_work=False)  # an idle build: the stamp stays as it is
    assert state.build_stamp(s).read_bytes() == first
    with log.open("a") as fh:  # ninja ran a command (by hand, even): a new identity
        fh.write("4\t5\t6\tlib/a\tfeedface\n")
    state.write_build_stamp(s, did_work=False)
    assert state.build_stamp(s).read_bytes() != first


def test_build_identity_without_ninja_counts_builds_that_did_work(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    ids = []
    for did_work in (True, False, True):
        state.write_build_stamp(s, did_work=did_work)
        ids.append(json.loads(state.build_stamp(s).read_text())["build"])
    assert ids == ["count:1", "count:1", "count:2"]
    # a stamp of another shape says which file and field, never a traceback
    state.build_stamp(s).write_text('{"build": 3}')
    with pytest.raises(DocumentError, match=r"build\.json: build must be str, got int"):
        state.write_build_stamp(s, did_work=True)


def test_one_interpreter_under_two_names_is_one_input(tmp_path: Path) -> None:
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    for name in ("python", "python3"):
        os.symlink(sys.executable, venv / name)
    other = tmp_path / "other" / "bin"
    other.mkdir(parents=True)
    os.symlink(sys.executable, other / "python")
    same = {state.interpreter_identity(str(venv / n)) for n in ("python", "python3")}
    assert len(same) == 1
    assert state.interpreter_identity(str(other / "python")) not in same
