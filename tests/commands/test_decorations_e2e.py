"""An OpInfo's MPS DecorateInfo, end to end on a private sandbox (issue 31): the sandbox's
test/test_mps.py applies it, the real pytest JUnit shows it xpass, and `doit migrate_op`'s
drop_xfails (one machine) or the nightly (three simulated runners) deletes it with the comment
that explains it; one that still fails on a runner is kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.results import junit
from pipeline.sandbox import backend
from pipeline.tree import decorations
from pipeline.workspace import prepare
from tests.doit_runs import doit, stages_run
from tests.results.nightly_runs import run, sandbox_sweep

pytestmark = pytest.mark.slow

# an opinfo/definitions file: a tree with its own common_methods_invocations.py counts as a
# checkout whose torch is its own, and the sandbox has no c10/metal headers for check_math
DEFS = "torch/testing/_internal/opinfo/definitions/elementwise.py"
OP_DB = """\
# mps-pipeline test: the shape of an opinfo/definitions module's op_db entries.
import unittest

import torch
from torch.testing._internal.opinfo.core import BinaryUfuncInfo, DecorateInfo

op_db = [
    BinaryUfuncInfo('{name}',
                    skips=(
                        DecorateInfo(unittest.skip("Skipped!"), 'TestCommon', 'test_out',
                                     device_type='cuda'),
{entries}
                    )),
]
"""


def entry(comment: str, dtype: str) -> str:
    pad = " " * 24
    return (
        f"{pad}# {comment}\n"
        f"{pad}DecorateInfo(unittest.expectedFailure, 'TestConsistency', 'test_output_match',\n"
        f"{pad}             device_type='mps', dtypes=(torch.{dtype},)),"
    )


def sandbox_with(state: Path, name: str, *entries: str) -> Path:
    """The sandbox copy, its OpInfo file holding ``entries`` under ``name``'s OpInfo,
    committed (drop_xfails edits only a clean tree)."""
    root = prepare(load_settings({"state_dir": str(state)})).root
    (root / DEFS).parent.mkdir(parents=True)
    (root / DEFS).write_text(OP_DB.format(name=name, entries="\n".join(entries)))
    for args in (("add", DEFS), ("commit", "-q", "-m", "an OpInfo file")):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True
        )
    return root


def mps_tests(root: Path) -> set[tuple[str | None, tuple[str, ...] | None]]:
    text = (root / DEFS).read_text()
    compile(text, DEFS, "exec")
    return {(d.test, d.dtypes) for d in decorations.parse(text, DEFS).decorations}


def test_migrate_op_drops_the_decorate_info_that_xpassed_and_its_comment(tmp_path: Path):
    # atan2's integer dtypes work once it is migrated: the OpInfo's int64 xfail xpasses
    root = sandbox_with(tmp_path / "state", "atan2", entry("MPS: no integer atan2", "int64"))
    done = doit(tmp_path / "state", "migrate_op", "op=atan2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "drop_xfails" in stages_run(done.stdout)
    cases = junit.parse_report(tmp_path / "state/ops/atan2/junit.xml").cases
    (int64,) = [c for c in cases if c.name.endswith("test_output_match_atan2_mps_int64")]
    assert int64.outcome is junit.Outcome.XPASS
    assert f"{DEFS}:" in done.stdout and "verified:" in done.stdout
    assert mps_tests(root) == set()
    text = (root / DEFS).read_text()
    assert "no integer atan2" not in text and "device_type='cuda'" in text


def test_the_nightly_proposes_what_xpassed_on_every_runner_and_keeps_what_failed_on_one(
    tmp_path: Path, monkeypatch
):
    """maximum's float32 works on the three runners; its bfloat16 drops NaNs before macOS
    14.4 (the sandbox's simulated device), so it still fails on macos-m1-14."""
    monkeypatch.delenv(backend.BUILD_DIR_ENV, raising=False)
    state = tmp_path / "state"
    root = sandbox_with(
        state,
        "maximum",
        entry("MPS: float32 maximum mismatches", "float32"),
        entry("MPS: bfloat16 maximum drops NaN", "bfloat16"),
    )
    ninja = shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")
    build = subprocess.run(
        [ninja, "-C", "build", "torch_cpu"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, build.stdout + build.stderr
    results = tmp_path / "results"
    macos = {"macos-m1-14": "14.0", "macos-m2-15": "15.0", "macos-m2-26": "26.0"}
    sandbox_sweep(root, results, macos, "test_output_match_maximum")
    xpassed = {
        runner: {
            c.name.rsplit("_", 1)[1]
            for c in junit.parse_report(results / runner / "shard-1.xml").cases
            if c.outcome is junit.Outcome.XPASS
        }
        for runner in macos
    }
    assert xpassed == {
        "macos-m1-14": {"float32"},
        "macos-m2-15": {"float32", "bfloat16"},
        "macos-m2-26": {"float32", "bfloat16"},
    }

    settings = prepare(load_settings({"state_dir": str(state)}))
    run(settings, results, min_passes=2)
    summary = run(settings, results, min_passes=2)
    (proposal,) = summary["proposals"]
    assert (proposal["key"], proposal["action"]) == ("maximum", "delete")
    assert proposal["at"].startswith(f"{DEFS}:")
    removed = [line for line in summary["diff"].splitlines() if line.startswith("-")]
    assert any("float32 maximum mismatches" in line for line in removed)
    assert not any("bfloat16" in line for line in removed)

    # the proposal's diff, applied as a reviewer would
    patch = tmp_path / "proposal.diff"
    patch.write_text(summary["diff"])
    subprocess.run(["git", "apply", str(patch)], cwd=root, check=True)
    assert mps_tests(root) == {("TestConsistency.test_output_match", ("bfloat16",))}
    text = (root / DEFS).read_text()
    assert "float32 maximum mismatches" not in text and "bfloat16 maximum drops NaN" in text
