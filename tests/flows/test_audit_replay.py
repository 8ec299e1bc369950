"""pipeline/flows/audit_replay.py: a warm `doit audit` writes what the last one wrote, without
loading the index or rich, and renders afresh as soon as anything it rests on changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.flows import audit_replay as replay
from tests.doit_runs import doit, executed

# What only rendering a checklist imports (the warm replay must not)
RENDERING = ("rich", "pipeline.tree.index", "pipeline.guide.checklist")


def _audit(state: Path, **env: str):
    """`doit audit op=atan2` under -X importtime: (stdout, the modules it imported)."""
    proc = doit(state, "audit", "op=atan2", env={"PYTHONPROFILEIMPORTTIME": "1", **env})
    assert proc.returncode == 0, proc.stderr
    assert executed(proc.stdout) == {"audit:atan2"}
    imported = {
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    return proc.stdout, imported


@pytest.mark.slow
def test_a_warm_audit_replays_and_a_change_renders_afresh(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first, imported = _audit(state)
    assert "✗ no MPSGraph implementation left" in first
    assert set(RENDERING) <= imported
    saved = json.loads((state / "ops" / "atan2" / replay.SCREEN.format(kind="doit")).read_text())
    assert saved["stdout"] in first and saved["ok"] is False

    again, imported = _audit(state)
    assert again == first
    assert not set(RENDERING) & imported

    # another terminal width: rendered for it
    _, imported = _audit(state, COLUMNS="90")
    assert set(RENDERING) <= imported

    # a file the audit reads changed: rendered afresh, and it shows
    common = state / "sandbox" / "torch" / "testing" / "_internal" / "common_mps.py"
    text = common.read_text()
    assert "'atan2'" in text or '"atan2"' in text
    common.write_text(text.replace('"atan2"', '"atan2_gone"').replace("'atan2'", "'atan2_gone'"))
    changed, imported = _audit(state)
    assert set(RENDERING) <= imported
    assert "✓ no xfail/skip entries in common_mps.py" in changed
    assert changed != first
    replayed, imported = _audit(state)
    assert replayed == changed and not set(RENDERING) & imported


def test_a_damaged_saved_screen_is_rendered_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first, _ = _audit(state)
    (state / "ops" / "atan2" / replay.SCREEN.format(kind="doit")).write_text("{not json")
    again, imported = _audit(state)
    assert again == first and set(RENDERING) <= imported


@pytest.mark.slow
def test_the_cli_audit_replays_with_its_exit_status_and_warnings(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    state = tmp_path / "state"
    kernels = state / "sandbox" / "aten" / "src" / "ATen" / "native" / "mps" / "kernels"

    def cli() -> tuple[subprocess.CompletedProcess[str], set[str]]:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "pipeline", "audit", "atan2",
             "--state-dir", str(state)],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        )  # fmt: skip
        imported = {
            line.split("|")[-1].strip()
            for line in proc.stderr.splitlines()
            if line.startswith("import time:")
        }
        return proc, imported

    first, imported = cli()
    assert first.returncode == 1 and set(RENDERING) <= imported  # items fail: exit 1
    (kernels / "Broken.metal").write_bytes(b"\xff\xfe not UTF-8")  # a warning, and a change
    warned, imported = cli()
    assert warned.returncode == 1 and set(RENDERING) <= imported
    assert "warning: " in warned.stderr and "Broken.metal" in warned.stderr
    again, imported = cli()
    assert not set(RENDERING) & imported
    assert (again.returncode, again.stdout) == (1, warned.stdout)
    assert [x for x in again.stderr.splitlines() if x.startswith("warning: ")] == [
        x for x in warned.stderr.splitlines() if x.startswith("warning: ")
    ]


def _screen(**changes: object) -> dict[str, object]:
    keys = {"kind": "cli", "inputs": "d1", "code": "c1", "terminal": ["TextIOWrapper", False]}
    process = {"argv": ["audit", "atan2"], "cwd": "/w", "env": [], "python": ["py", "3"]}
    witness = {**process, "terminal": [], "state_dir": "/s", "announced": "a\n", "files": [],
               "kinds": [], "resolved": []}  # fmt: skip
    return {"keys": keys, "stdout": "out", "stderr": "", "ok": True, "witness": witness, **changes}


@pytest.mark.parametrize(
    "damaged",
    [
        {"stdout": None},  # cut short
        {"ok": 1},  # another type
        {"keys": {"kind": "cli"}},
        {"witness": {"state_dir": "/s"}},
        {"surprise": 1},  # another version's
    ],
)
def test_a_saved_screen_reads_back_whole_or_not_at_all(damaged: dict[str, object]) -> None:
    whole = json.dumps(_screen(), ensure_ascii=False)
    saved = replay.Screen.read(whole)
    assert saved is not None and saved.witness is not None
    assert (saved.keys.inputs, saved.ok, saved.witness.announced) == ("d1", True, "a\n")
    assert json.dumps(saved.to_json(), ensure_ascii=False) == whole  # written as it was read
    assert replay.Screen.read(json.dumps(_screen(witness=None))).witness is None
    assert replay.Screen.read(json.dumps(_screen(**damaged))) is None
