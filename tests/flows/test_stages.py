"""pipeline/flows/stages.py: what the stages select and write, on the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from pipeline import state
from pipeline.config import load_settings
from pipeline.flows import stages
from pipeline.flows.request import Request
from pipeline.testid import TestId
from pipeline.tree import paths
from pipeline.tree.index import load_index
from tests.conftest import settings_env


def _settings(root: Path, tmp_path: Path):
    return load_settings(
        {
            "root": str(root),
            "state_dir": str(tmp_path / "state"),
            "opinfo_table": str(root / paths.OPINFO_TABLE),
        },
        env=settings_env(),
    )


def test_selectors_pick_exactly_the_operators_tests(sandbox_tree: Path, tmp_path: Path) -> None:
    settings = _settings(sandbox_tree, tmp_path)
    opinfos = load_index(settings.tree).opinfos_for("atan2")
    selected = stages.selectors(opinfos, ("output_match", "output_grad_match"))
    assert len(selected) == 2 * len(opinfos)
    for info in opinfos:
        for test in info.test_ids("output_match"):
            name = test.rpartition("::")[2]
            assert any(name.startswith(s) for s in selected)
            assert TestId.parse(name) is not None
    other = str(TestId("output_match", "atan", "float32"))
    assert not any(other.startswith(s) for s in selected)


def test_preview_writes_nothing_to_the_tree(sandbox_tree: Path, tmp_path: Path) -> None:
    settings = _settings(sandbox_tree, tmp_path)
    before = {p: p.read_bytes() for p in sandbox_tree.rglob("*") if p.is_file()}
    console = Console(record=True, width=100)
    stages.preview(Request(settings, "atan2", dry_run=True), console)
    after = {p: p.read_bytes() for p in sandbox_tree.rglob("*") if p.is_file()}
    assert after == before
    text = console.export_text()
    assert "native_functions.yaml" in text and "+++" in text


def test_the_audit_stage_records_the_checklist(sandbox_tree: Path, tmp_path: Path) -> None:
    settings = _settings(sandbox_tree, tmp_path)
    from pipeline.flows.audit import record_audit

    record_audit(settings, "atan2", Console(record=True))
    recorded = json.loads(state.op_files(settings, "atan2").audit.read_text("utf-8"))
    assert recorded["op"] == "atan2" and recorded["workflow"] == "migrate"
    assert [c["id"] for c in recorded["checklist"] if not c["ok"]] == [
        "dispatch", "stub", "mpsgraph", "old_names", "xfails",
    ]  # fmt: skip
    # recorded with the digest of what it was judged on: current until the tree changes
    assert state.audit_current(settings, "atan2")


def test_the_summary_names_a_stale_shader_record_and_refuses_a_bad_one(
    sandbox_tree: Path, tmp_path: Path
) -> None:
    settings = _settings(sandbox_tree, tmp_path)
    path = state.build_check(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"stale": ["a.metallib is older than b.h"]}))
    assert stages._build_lines(settings) == ["- build: stale shader: a.metallib is older than b.h"]
    path.write_text(json.dumps({"stale": [3]}))
    (line,) = stages._build_lines(settings)
    assert line.startswith("- build: shader check unknown (build-check.json unreadable: ")
    assert "stale[0] must be str, got int" in line
