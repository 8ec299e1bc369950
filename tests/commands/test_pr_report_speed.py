"""pr-report's review and speed sections end to end on the sandbox: the Mac job (results only,
the affected kernels timed for real with torch on CPU) and the posting job (--post-from),
which judges the timings against main's figures in the nightly history from the same device
class only (issue 32)."""

from __future__ import annotations

import importlib.util
import json
import sqlite3

import pytest

from pipeline import state as layout
from pipeline.results import history
from pipeline.results import speed as speeds
from tests.commands import test_pr_report as pr_report
from tests.commands.test_pr_report import build_now, cli, results_json, touch_atan2
from tests.conftest import commit, git
from tests.results.test_device import mac

RUNNER = "macos-m2-15"
tree = pr_report.tree  # the committed sandbox with its build.ninja
settings = pr_report.settings


@pytest.mark.slow
def test_the_mac_job_times_and_the_report_job_judges(settings, tree, tmp_path, capsys,
                                                     monkeypatch):  # fmt: skip
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (nox installs it)")
    monkeypatch.setenv("RUNNER_CONFIG", RUNNER)
    build_now(tree)
    base = git(tree, "rev-parse", "HEAD")
    touch_atan2(tree)
    commit(tree, "atan2: another message")
    assert cli(settings, "--pr", "7", "--base", base, "--results-only", "--speed", "cpu") == 0
    data = results_json(settings)
    assert data["review"] is not None and data["review"]["checks"]
    measured = data["speed"]["measurements"]
    assert {m["op"] for m in measured} == {"atan2"} and data["speed"]["runner"] == RUNNER
    # no history on the Mac: timed, not judged; the CPU is no device class
    assert {v["judgement"] for v in data["speed"]["verdicts"]} == {"no baseline"}
    assert data["speed"]["machine"] is None

    # main's history, three nights on this runner: ten times faster than this build
    db = history.connect(settings.state_dir / layout.HISTORY)
    for night in (1, 2, 3):
        recorded = history.record_nightly(db, {RUNNER: []}, commit="",
                                          started=f"2026-11-0{night}T03:17:00.000000Z")  # fmt: skip
        rows = [
            speeds.Measurement(m["op"], m["dtype"], m["shape"], m["layout"],
                               tuple(t / 10 for t in m["times"]))
            for m in measured
        ]  # fmt: skip
        with db:
            history.record_devices(db, {recorded.runs[0].id: mac(RUNNER)})
            speeds.record(db, recorded.runs[0].id, rows)
    db.close()
    capsys.readouterr()
    folder = settings.results_dir / "pr-7"
    assert cli(settings, "--pr", "7", "--post-from", str(folder), "--dry-run") == 0
    body = capsys.readouterr().out
    assert "### Review checks" in body and "### Kernel speed against main" in body
    # the CPU's figures are never compared with the Macs'
    assert f"On `{RUNNER}` (device: cpu (unknown)): no baseline for an unknown device " in body
    assert "🐢 slower" not in body
    # the same figures as a Mac job of main's device class would have sent them
    data["speed"]["machine"] = mac(RUNNER).to_dict()
    (folder / "results.json").write_text(json.dumps(data))
    assert cli(settings, "--pr", "7", "--post-from", str(folder), "--dry-run") == 0
    body = capsys.readouterr().out
    said = ("against main's median over its last 3 nights from the same device class (Apple "
            "M2, 10 GPU cores, macOS 15)")  # fmt: skip
    assert said in body
    assert "🐢 slower" in body
    assert sqlite3.connect(settings.state_dir / layout.HISTORY).execute(
        "SELECT COUNT(*) FROM speed"
    ).fetchone()[0] == 3 * len(measured)


@pytest.mark.slow
def test_without_an_mps_device_the_comment_goes_out_without_speed(settings, tree, capsys):
    # issue 28: no MPS device is said once; the tests' comment is not lost for it
    torch = pytest.importorskip("torch", reason="torch is not installed (nox installs it)")
    if torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    build_now(tree)
    base = git(tree, "rev-parse", "HEAD")
    touch_atan2(tree)
    commit(tree, "atan2: another message")
    capsys.readouterr()
    assert cli(settings, "--pr", "7", "--base", base, "--results-only", "--speed", "mps") == 0
    data = results_json(settings)
    assert data["speed"] is None and data["table"] is not None
    (line,) = [e for e in capsys.readouterr().err.splitlines() if e.startswith("warning:")]
    assert line.startswith("warning: speed: no MPS device here: torch 2.")
    assert line.endswith("the comment has no kernel speed (--speed cpu times the kernels on "
                         "the CPU)")  # fmt: skip
