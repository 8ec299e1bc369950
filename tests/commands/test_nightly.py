"""`python -m pipeline nightly`: the command line, its exit status, and the workflow's call.

The nightly's analysis is tested in tests/results/test_nightly.py, on the same reports.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.__main__ import build_parser, main
from pipeline.commands import nightly
from pipeline.config import load_settings
from pipeline.results import history
from pipeline.results.junit import Outcome, parse_reports
from pipeline.sandbox import backend
from pipeline.tree import paths
from pipeline.workspace import prepare
from tests.conftest import commit, git
from tests.results.nightly_runs import RUNNERS, sandbox_sweep


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


# runners named without a version: the runners: table says which macOS each one runs
MACOS_TABLE = {"mini-m1": "14.0", "mini-m2": "15.0", "studio-m2": "26.0"}


@pytest.mark.slow
def test_an_xfail_only_the_old_macos_needs_moves_to_a_version_list(tmp_path, capsys, monkeypatch):
    """maximum bfloat16 is xfailed everywhere (ON_MPS_XFAILLIST), but the simulated device
    gets it wrong before macOS 14.4 only (mpsgraph_gaps.yaml). Swept on 14.0, 15.0 and
    26.0, three nights in a row: the nightly proposes moving it into a new
    MACOS_BEFORE_15_0_XFAILLIST; with the diff applied, the sweep is green on all three."""
    monkeypatch.delenv(backend.BUILD_DIR_ENV, raising=False)
    monkeypatch.delenv(backend.MACOS_ENV, raising=False)
    config = tmp_path / "pipeline.yaml"
    config.write_text("runners:\n" + "".join(f'  {r}: "{v}"\n' for r, v in MACOS_TABLE.items()))
    state = tmp_path / "state"
    root = prepare(load_settings({"state_dir": str(state)}, config_path=config, env={})).root
    common_mps = root / paths.COMMON_MPS
    text = common_mps.read_text()
    entry = '            "maximum": [torch.bfloat16],\n'
    assert entry in text and "MACOS_BEFORE_15_0" not in text
    text = text.replace(entry, "", 1)  # out of MACOS_BEFORE_14_4_XFAILLIST, into ON_MPS's
    on_mps = '            "arange": [torch.uint8],\n'
    common_mps.write_text(text.replace(on_mps, on_mps + entry, 1))
    commit(root, "xfail maximum bfloat16 on every macOS")
    ninja = shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")
    build = subprocess.run(
        [ninja, "-C", "build", "torch_cpu"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, build.stdout + build.stderr
    sandbox_sweep(root, tmp_path / "results", MACOS_TABLE, "test_output_match_maximum")

    argv = ["nightly", "--results", str(tmp_path / "results"), "--state-dir", str(state),
            "--config", str(config), "--json"]  # fmt: skip
    summaries = []
    for _ in range(3):
        assert main(argv) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    assert [s["proposals"] for s in summaries[:2]] == [[], []]
    summary = summaries[2]
    (move,) = summary["proposals"]
    assert {k: move[k] for k in ("list", "key", "action", "to_list", "dropped", "new_dtypes")} == {
        "list": "ON_MPS_XFAILLIST",
        "key": "maximum",
        "action": "move",
        "to_list": "MACOS_BEFORE_15_0_XFAILLIST",
        "dropped": ["bfloat16"],
        "new_dtypes": [],
    }
    assert move["reason"].startswith(
        "bfloat16: xfail on mini-m1 (macOS 14.0) and xpass on mini-m2 (macOS 15.0), "
        "studio-m2 (macOS 26.0) in each of the last 3 nightlies ("
    )
    diff = summary["diff"]
    assert "+        MACOS_BEFORE_15_0_XFAILLIST = {\n" in diff
    assert "+                and (MACOS_VERSION < 15.0)\n" in diff
    assert "+                        dtypes=MACOS_BEFORE_15_0_XFAILLIST[key],\n" in diff
    assert (root / paths.COMMON_MPS).read_text() == common_mps.read_text()  # not applied
    dash = state / "dashboard"
    markdown = (dash / "summary.md").read_text()
    assert (
        "maximum'\\]: move → MACOS\\_BEFORE\\_15\\_0\\_XFAILLIST — bfloat16: xfail on" in markdown
    )
    html = (dash / "index.html").read_text()
    assert "<td>move → MACOS_BEFORE_15_0_XFAILLIST</td>" in html
    assert "xfail on mini-m1 (macOS 14.0) and xpass on mini-m2 (macOS 15.0)" in html

    # the proposal, applied: maximum bfloat16 xfails on 14.0 only, and passes elsewhere
    patch = tmp_path / "move.diff"
    patch.write_text(diff)
    git(root, "apply", str(patch))
    sandbox_sweep(root, tmp_path / "applied", MACOS_TABLE, "test_output_match_maximum")
    for runner, version in MACOS_TABLE.items():
        cases = parse_reports(sorted((tmp_path / "applied" / runner).glob("*.xml"))).cases
        outcomes = {c.dtype: c.outcome for c in cases}
        assert outcomes["bfloat16"] == (Outcome.XFAIL if version == "14.0" else Outcome.PASS)
        assert {o for d, o in outcomes.items() if d != "bfloat16"} == {Outcome.PASS}, runner
