"""`python -m pipeline shards`: plans from a history of real nightly runs, and the workflow.

The planning itself is tested in tests/results/test_shards.py.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pipeline import state as layout
from pipeline.__main__ import build_parser, main
from pipeline.commands import shards as command
from pipeline.config import load_settings
from pipeline.results import shards
from pipeline.tree.opinfo import load_opinfos
from pipeline.workspace import prepare

WORKFLOW = Path(__file__).parents[2] / "ci" / "workflows" / "mps-nightly.yml"


@pytest.fixture
def settings(tmp_path):
    return prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path))


def _suite(settings) -> list[str]:
    return [
        t for r in load_opinfos(settings.tree) for k in settings.test_kinds for t in r.test_ids(k)
    ]


def _shards(capsys, settings, *args: str) -> tuple[int, str, str]:
    code = main(["shards", *args, "--state-dir", str(settings.state_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def _record(capsys, settings, nights, **scenario) -> None:
    assert main(["nightly", "--results", str(nights.results(**scenario)), "--state-dir",
                 str(settings.state_dir)]) in (0, 1)  # fmt: skip
    capsys.readouterr()


def test_plans_the_suite_from_real_nightly_runs(capsys, settings, nights):
    for _ in range(2):
        _record(capsys, settings, nights)
    db_path = settings.state_dir / layout.HISTORY
    before = db_path.read_bytes()
    code, out, _ = _shards(capsys, settings, "--num-shards", "3", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == shards.SCHEMA and [s["index"] for s in doc["shards"]] == [1, 2, 3]
    # every test of the tree's suite in exactly one shard
    counts = Counter(t for s in doc["shards"] for t in s["tests"])
    suite = _suite(settings)
    assert set(counts) == set(suite) and set(counts.values()) == {1} and len(suite) > 100
    # JUnit times have 3 decimals: a shard of fast sandbox tests may add up to 0
    assert all(isinstance(s["seconds"], float) and s["seconds"] >= 0 for s in doc["shards"])
    # the tiny runs' durations were read: their tests weigh what pytest measured
    measured = "TestConsistencyMPS::test_output_match_atan2_mps_float32"
    assert measured in counts
    # written where the next run starts from, and the history was only read
    plan = settings.state_dir / layout.SHARD_PLAN
    assert json.loads(plan.read_text()) == doc
    assert db_path.read_bytes() == before

    code, out, err = _shards(capsys, settings, "--num-shards", "3")
    assert code == 0 and not err.count("warning")
    assert f"shard plan: {len(suite)} tests (the tree's " in out and f"→ {plan}" in out
    assert "tests measured" in out and "by their operator's median" in out
    assert "slowest / mean shard: " in out and "by count (--shard-id/--num-shards)" in out
    assert f"stability: 0 tests moved since {plan}, {len(suite)} kept, 0 new, 0 gone" in out
    assert json.loads(plan.read_text()) == doc  # an unchanged history: the identical plan


def test_without_history_a_plan_by_count_with_a_note(capsys, settings, tmp_path):
    out_file = tmp_path / "plan.json"
    code, out, _ = _shards(capsys, settings, "--num-shards", "2", "--out", str(out_file))
    assert code == 0
    assert "note: no durations in the last 7 nightlies" in out and "a plan by count" in out
    assert "slowest / mean shard: unknown (no times)" in out
    assert "stability: no previous plan" in out
    doc = json.loads(out_file.read_text())
    assert [s["seconds"] for s in doc["shards"]] == [None, None]
    sizes = [len(s["tests"]) for s in doc["shards"]]
    assert abs(sizes[0] - sizes[1]) <= 1 and sum(sizes) == len(_suite(settings))
    assert not (settings.state_dir / layout.SHARD_PLAN).exists()  # --out, not the default


def test_reports_without_times_plan_by_count_and_the_balance_is_unknown(capsys, settings, tmp_path):
    # a night whose reports carry no times (every time="0"), on each configured runner
    cases = "".join(
        f'<testcase classname="test.test_mps.TestConsistencyMPS" name="{t.split("::")[1]}" '
        'time="0"/>'
        for t in _suite(settings)[:20]
    )
    for runner in settings.runners:
        report = tmp_path / "results" / runner / "shard-1.xml"
        report.parent.mkdir(parents=True)
        report.write_text(f'<testsuites><testsuite name="pytest" time="0">{cases}</testsuite>'
                          "</testsuites>")  # fmt: skip
    assert main(["nightly", "--results", str(tmp_path / "results"), "--state-dir",
                 str(settings.state_dir)]) == 0  # fmt: skip
    capsys.readouterr()
    code, out, _ = _shards(capsys, settings, "--num-shards", "3")
    assert code == 0
    assert "note: the 20 tests' durations in the last 7 nightlies" in out
    assert "are all 0 s (reports without times): a plan by count" in out
    assert "slowest / mean shard: unknown (no times)" in out and "1.000" not in out
    doc = json.loads((settings.state_dir / layout.SHARD_PLAN).read_text())
    sizes = [len(s["tests"]) for s in doc["shards"]]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == len(_suite(settings))
    assert [s["seconds"] for s in doc["shards"]] == [None, None, None]


def test_a_damaged_history_is_exit_2_and_untouched(capsys, settings):
    db_path = settings.state_dir / layout.HISTORY
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    code, _, err = _shards(capsys, settings, "--num-shards", "2")
    assert code == 2 and "not a valid mps-pipeline history (an empty file" in err
    assert db_path.read_bytes() == b"" and not (settings.state_dir / "shards.json").exists()


def test_previous_plans(capsys, settings, tmp_path):
    # an explicit --previous must be readable
    code, _, err = _shards(capsys, settings, "--num-shards", "2", "--previous",
                           str(tmp_path / "nope.json"))  # fmt: skip
    assert code == 2 and "shards: --previous" in err and "cannot read the previous plan" in err
    # a damaged default plan: a warning, and a new plan over it
    plan = settings.state_dir / layout.SHARD_PLAN
    plan.write_text('{"schema": 1, "shards": 3}')
    code, out, err = _shards(capsys, settings, "--num-shards", "2")
    assert code == 0 and "warning: " in err and "planning from scratch" in err
    assert "stability: no previous plan" in out
    doc = json.loads(plan.read_text())
    # --previous FILE is where the plan starts from: shard 2 of it stays shard 2
    other = tmp_path / "other.json"
    swapped = {"schema": 1, "shards": [dict(doc["shards"][1], index=1),
                                       dict(doc["shards"][0], index=2)]}  # fmt: skip
    other.write_text(json.dumps(swapped))
    code, out, _ = _shards(capsys, settings, "--num-shards", "2", "--previous", str(other))
    assert code == 0 and f"stability: 0 tests moved since {other}" in out
    assert json.loads(plan.read_text())["shards"][0]["tests"] == doc["shards"][1]["tests"]


def test_without_opinfos_the_history_gives_the_suite(capsys, settings, nights, tmp_path):
    _record(capsys, settings, nights)
    code, out, err = _shards(capsys, settings, "--num-shards", "2", "--json",
                             "--opinfo-table", str(tmp_path / "missing.yaml"))  # fmt: skip
    assert code == 0
    assert "warning: the OpInfo metadata cannot be read" in err
    tests = sorted(t for s in json.loads(out)["shards"] for t in s["tests"])
    assert tests == sorted(f"TestConsistencyMPS::{n}" for n in (
        "test_output_match_atan2_mps_int64", "test_output_match_atan2_mps_int32",
        "test_output_match_atan2_mps_float32", "test_output_match_fmod_mps_float16",
        "test_output_match_hypot_mps_float32", "test_output_match_hypot_mps_float16",
        "test_output_match_sub_mps_float32"))  # fmt: skip
    # and with neither, there is nothing to plan
    code, _, err = main(["shards", "--num-shards", "2", "--opinfo-table", "missing.yaml",
                         "--state-dir", str(tmp_path / "empty")]), *capsys.readouterr()  # fmt: skip
    assert code == 2 and "no suite to plan" in err


def test_bad_options(capsys, settings):
    for argv, why in ((["--num-shards", "0"], "at least 1"), (["--num-shards", "2", "--nights",
                      "0"], "--nights must be at least 1")):  # fmt: skip
        code, _, err = _shards(capsys, settings, *argv)
        assert code == 2 and why in err


def test_the_nightly_workflow_plans_and_hands_the_plan_on():
    """The aggregation plans the next night into <state_dir>/shards.json, which its cache
    steps save; the plan job restores it and uploads it; the sweep passes it to run-sweep.sh."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    aggregate = jobs["aggregate"]
    (step,) = [s for s in aggregate["steps"] if "-m pipeline shards" in s.get("run", "")]
    (line,) = [ln for ln in step["run"].splitlines() if "-m pipeline shards" in ln]
    argv = shlex.split(line.split("-m pipeline ", 1)[1].removesuffix("; then"))
    args = build_parser("shards").parse_args([a.replace("$NUM_SHARDS", "3") for a in argv])
    assert args.module is command and args.num_shards == 3 and args.out is None
    assert workflow["env"]["NUM_SHARDS"] == len(jobs["sweep"]["strategy"]["matrix"]["shard"])
    # the aggregation's state dir is the one its cache steps name
    state = aggregate["env"]["MPS_PIPELINE_STATE_DIR"]
    assert state == "${{ github.workspace }}/.mps-pipeline"
    plan_path = f".mps-pipeline/{layout.SHARD_PLAN}"
    caches = {
        (job, s["uses"].split("@")[0]): s
        for job in ("plan", "aggregate")
        for s in jobs[job]["steps"]
        if "mps-nightly-shards-" in s.get("with", {}).get("key", "")
    }
    assert set(caches) == {
        ("plan", "actions/cache/restore"),
        ("aggregate", "actions/cache/restore"),
        ("aggregate", "actions/cache/save"),
    }
    assert {s["with"]["path"] for s in caches.values()} == {plan_path}
    steps = aggregate["steps"]
    save = caches[("aggregate", "actions/cache/save")]
    assert steps.index(caches[("aggregate", "actions/cache/restore")]) < steps.index(step)
    assert steps.index(step) < steps.index(save)
    assert "steps.shards.outputs.planned == 'yes'" in save["if"] and step["id"] == "shards"
    assert "steps.nightly.outputs.status == '0'" in step["if"]
    # handed to the Macs: plan job upload -> sweep download -> MPS_SHARD_PLAN
    (upload,) = [s for s in jobs["plan"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert upload["with"]["path"] == plan_path
    sweep = jobs["sweep"]
    assert sweep["needs"] == "plan" and sweep["if"] == "${{ !cancelled() }}"
    (download,) = [
        s for s in sweep["steps"] if s.get("with", {}).get("name") == upload["with"]["name"]
    ]
    assert download["continue-on-error"] is True
    (run,) = [s for s in sweep["steps"] if "run-sweep.sh" in s.get("run", "")]
    assert run["env"]["MPS_SHARD_PLAN"] == f"{download['with']['path']}/{layout.SHARD_PLAN}"
