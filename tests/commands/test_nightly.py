"""`python -m pipeline nightly`: the command line, its exit status, and the workflow's call.

The nightly's analysis is tested in tests/results/test_nightly.py, on the same reports.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from pipeline.__main__ import build_parser, main
from pipeline.commands import nightly
from pipeline.config import load_settings
from pipeline.results import history
from pipeline.workspace import prepare
from tests.results.nightly_runs import RUNNERS


@pytest.fixture
def settings(tmp_path):
    return prepare(load_settings({"state_dir": str(tmp_path / "state")}))


def test_no_reports_is_an_error_with_the_expected_layout(tmp_path, settings, capsys):
    (tmp_path / "empty").mkdir()
    code = main(["nightly", "--results", str(tmp_path / "empty"), "--state-dir",
                 str(settings.state_dir)])  # fmt: skip
    assert code == 2
    assert "results/<runner>/shard-<n>.xml" in capsys.readouterr().err


def test_regression_is_flagged_and_fails_the_command(settings, nights, capsys):
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    capsys.readouterr()
    code = main(["nightly", "--results", str(nights.results(macos_m1_14="bad")), "--json",
                 *state])  # fmt: skip
    assert code == 1
    summary = json.loads(capsys.readouterr().out)
    got = {(r["name"], r["runner"], r["before"], r["after"]) for r in summary["regressions"]}
    assert got == {
        ("test_output_match_atan2_mps_float32", "macos-m1-14", "pass", "fail"),
        # worked (xpass) last night, fails again now: the kernel broke although CI is green
        ("test_output_match_atan2_mps_int64", "macos-m1-14", "xpass", "xfail"),
    }
    message = next(r["message"] for r in summary["regressions"] if r["after"] == "fail")
    assert "atan2_float32: mismatch <script>" in message
    html = (settings.state_dir / "dashboard" / "index.html").read_text()
    assert "<svg" in html and "<script" not in html
    assert "atan2_float32: mismatch &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


def test_cli_paths_and_history_file(settings, nights, tmp_path, capsys):
    db_path = tmp_path / "elsewhere" / "h.sqlite"
    code = main(["nightly", "--results", str(nights.results()), "--history", str(db_path),
                 "--dashboard", str(tmp_path / "d"), "--state-dir", str(settings.state_dir),
                 "--source", "run-1"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "MPS nightly" in out and "regressions: 0" in out and "migration backlog: 10" in out
    db = history.connect(db_path)
    try:
        (night,) = history.nightlies(db)
        assert night.runners == RUNNERS and night.runs[0].source == "run-1"
    finally:
        db.close()
    assert (tmp_path / "d" / "index.html").is_file()
    assert not (settings.state_dir / "dashboard").exists()


def test_the_nightly_workflow_calls_this_cli():
    """ci/workflows/mps-nightly.yml's call parses, with the paths the workflow produces."""
    workflow = yaml.safe_load(
        (Path(__file__).parents[2] / "ci/workflows/mps-nightly.yml").read_text()
    )
    aggregate = workflow["jobs"]["aggregate"]
    (step,) = [s for s in aggregate["steps"] if "-m pipeline nightly" in s.get("run", "")]
    argv = shlex.split(step["run"].split("-m pipeline ", 1)[1])
    args = build_parser("nightly").parse_args(
        [a.replace("$RUN_URL", "https://x/runs/1") for a in argv]
    )
    assert args.module is nightly and args.results == Path("results")
    assert args.source == "https://x/runs/1" and "RUN_URL" in step["env"]
    # the history lives where the workflow's cache steps save and restore it
    cached = {
        s["with"]["path"] for s in aggregate["steps"] if "actions/cache/" in s.get("uses", "")
    }
    assert cached == {".mps-pipeline/history"} and history.DEFAULT_FILE.startswith("history/")
    # the sweep writes results/<runner>/shard-<n>.xml, which collect_reports reads
    sweep = " ".join(s.get("run", "") for s in workflow["jobs"]["sweep"]["steps"])
    assert '"$RUNNER_TEMP/junit/$RUNNER_CONFIG/shard-$SHARD.xml"' in sweep
    # the OpInfo metadata the Macs export lands in the cache `nightly` reads it from
    (export,) = [
        s for s in workflow["jobs"]["sweep"]["steps"] if "-m pipeline backlog" in s.get("run", "")
    ]
    argv = shlex.split(
        " ".join(
            export["run"].replace("\\\n", " ").split("-m pipeline ", 1)[1].split(">")[0].split()
        )
    )
    assert build_parser("backlog").parse_args(argv).state_dir == "$RUNNER_TEMP/mps-state"
    (download,) = [s for s in aggregate["steps"] if s.get("with", {}).get("pattern") == "opinfo-*"]
    assert download["with"]["path"] == ".mps-pipeline/cache"
