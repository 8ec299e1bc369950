"""make_demo: a complete checkout in a new or empty folder, never into one that holds anything,
never half-made; sweep: the whole demo suite into one runner's JUnit file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.results import junit
from pipeline.sandbox.demo import CONFIG_FILE, make_demo, sweep


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_demo_is_a_committed_checkout_with_its_build_dir_and_table(tmp_path: Path) -> None:
    demo = make_demo(tmp_path / "new" / "demo")
    assert demo.root == tmp_path / "new" / "demo"
    assert _git(demo.root, "status", "--porcelain") == ""
    assert _git(demo.root, "ls-files", CONFIG_FILE) == f"{CONFIG_FILE}\n"
    assert demo.build_ninja.is_file() and demo.opinfo_table.is_file()
    # nothing left of the staging folder beside it
    assert [p.name for p in demo.root.parent.iterdir()] == ["demo"]
    # standing inside it, the settings find the checkout and its table with no variable
    settings = load_settings(cwd=demo.root / "aten", env={})
    assert settings.root == demo.root and not settings.is_sandbox
    assert settings.opinfo_table == demo.opinfo_table
    assert settings.sources["opinfo_table"].origin == str(demo.config)


def test_an_empty_folder_is_used_and_a_full_one_or_a_file_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert make_demo(empty).root == empty and (empty / ".git").is_dir()
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not empty; name a new"):
        make_demo(full)
    assert [p.name for p in full.iterdir()] == ["notes.txt"]
    with pytest.raises(ConfigError, match="is a file"):
        make_demo(full / "notes.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "full"]


@pytest.mark.slow
def test_sweep_builds_and_writes_one_runners_junit(tmp_path: Path) -> None:
    demo = make_demo(tmp_path / "demo")
    report = tmp_path / "results" / "macos-m1-14" / "shard-1.xml"
    assert sweep(demo.root, report, macos="14.7") == 0
    cases = junit.parse_report(report).cases
    assert len(cases) > 100
    assert {c.outcome for c in cases} >= {junit.Outcome.PASS, junit.Outcome.XFAIL}
    assert (demo.root / "build" / "lib" / "torch_cpu.mpsim.json").is_file()
