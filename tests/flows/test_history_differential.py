"""The same answers on both backends: the same nights (real pytest reports, speed figures,
commits with suspects) recorded in an SQLite file and on the session's PostgreSQL server,
and every output compared: each night's summary.json (proposals and their diff,
regressions and their suspects, flaky tests, the dashboard's chart data) and dashboard
files, the shard plan, the speed judgements and the PR baseline."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pipeline.__main__ import main
from pipeline.config import load_settings
from pipeline.flows.speed import judge
from pipeline.guide.backlog import backlog
from pipeline.report.nightly import publish
from pipeline.results import baseline, device, history
from pipeline.results import speed as speeds
from pipeline.results.junit import parse_reports
from pipeline.results.table import merge_runs
from pipeline.workspace import prepare
from tests.impact.test_suspects import three_commits
from tests.results.nightly_runs import RUNNERS
from tests.results.test_device import mac

# each night: (scenario per runner, which commit it tested): "before" the three commits or
# HEAD after them; the m1's last night regresses, with suspects
NIGHTS = (
    ({}, "before"),
    ({"macos_m2_15": "flaky"}, "before"),
    ({}, "before"),
    ({"macos_m2_26": "old"}, "before"),
    ({}, "before"),
    ({"macos_m1_14": "bad"}, "head"),
)


def _speed_json(folder: Path, night: int, runner: str) -> None:
    """A runner's kernel timings of one night: the same figures on both sides."""
    rng = random.Random(f"{night}-{runner}")
    results = [
        {"op": op, "dtype": dtype, "shape": shape, "layout": "contiguous",
         "times": [rng.uniform(1e-6, 2e-6) for _ in range(5)]}
        for op in ("atan2", "hypot") for dtype in ("float32", "float16")
        for shape in ("small", "large")
    ]  # fmt: skip
    doc = {"schema": speeds.SCHEMA_VERSION, "device": "mps", "results": results}
    (folder / runner / speeds.SPEED_JSON).write_text(json.dumps(doc))


def _record(settings, nights, at, dash: Path, before: str) -> list[tuple[dict, dict]]:
    """Every night recorded in the history ``at``; each night's summary and dashboard files."""
    out = []
    for day, (scenarios, tested) in enumerate(NIGHTS, 1):
        results = nights.results(**scenarios)
        for runner in RUNNERS:
            _speed_json(results, day, runner)
            device.write(results / runner, mac(runner))
        outcome = nightly_run(
            settings, results, at, dash, day, before if tested == "before" else None
        )
        files = publish(outcome)
        shown = {f.name: f.read_bytes() for f in files if f.suffix != ".xml"}
        out.append((outcome.summary.to_json(), shown))
    return out


def nightly_run(settings, results, at, dash, day, commit):
    from pipeline.flows.nightly import run_nightly

    return run_nightly(
        settings, results, history_at=at, dashboard_dir=dash, backlog_of=backlog,
        started=f"2026-11-{day:02d}T03:17:00Z", commit=commit, source=f"night-{day}",
        min_passes=2, flaky_window=3, keep=30,
    )  # fmt: skip


@pytest.mark.slow
def test_the_same_nights_give_the_same_answers_on_sqlite_and_postgresql(
    tmp_path, nightly_reports, pg_url, capsys
):
    from tests.results.nightly_runs import Nights

    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}))
    before, shas = three_commits(settings.root)
    file_at = history.HistoryLocation.parse(tmp_path / "nightly.sqlite")
    server_at = history.HistoryLocation.parse(pg_url)
    # the same result folders for both: night-N is laid out once and recorded twice
    on_file = _record(settings, Nights(tmp_path / "r", nightly_reports), file_at,
                      tmp_path / "dash-file", before)  # fmt: skip
    on_server = _record(settings, Nights(tmp_path / "r2", nightly_reports), server_at,
                        tmp_path / "dash-server", before)  # fmt: skip

    for day, ((file_summary, file_shown), (server_summary, server_shown)) in enumerate(
        zip(on_file, on_server, strict=True), 1
    ):
        assert server_summary == file_summary, f"night {day}'s summary.json"
        assert server_shown == file_shown, f"night {day}'s dashboard"
    last = on_file[-1][0]
    # the comparison compared something: each kind of answer is there to compare
    assert last["regressions"] and any(r["suspects"] for r in last["regressions"])
    assert {r["suspects"][0]["commit"] for r in last["regressions"]} == {shas["own"]}
    assert any(summary["flaky"] for summary, _ in on_file)
    assert any(summary["proposals"] and summary["diff"] for summary, _ in on_file)
    assert len(last["history"]) == len(NIGHTS) * len(RUNNERS)

    plans = []
    for at in (file_at, server_at):
        out = tmp_path / f"shards-{at.backend.value}.json"
        where = at.url or str(at.path)
        state = str(settings.state_dir)
        argv = ["shards", "--num-shards", "2", "--history", where, "--out", str(out)]
        assert main([*argv, "--state-dir", state, "--json"]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    assert plans[0] == plans[1] and any(s["seconds"] for s in plans[0]["shards"])

    pr_cases = parse_reports(tuple(Path(p) for p in nightly_reports["bad"])).cases
    table = merge_runs({"macos-m1-14": pr_cases}, {})
    measured = [
        speeds.Measurement("atan2", "float32", "small", "contiguous", (3e-6,) * 5),
        speeds.Measurement("hypot", "float16", "large", "contiguous", (1.5e-6,) * 5),
    ]
    answers = []
    for at in (file_at, server_at):
        judged = judge(settings, measured, at, "macos-m2-15", mac("macos-m2-15"))
        classified = baseline.classify(at, table, runner="macos-m1-14")
        db = history.reader(at)
        try:
            direct = (
                history.flipping(db, 4),
                history.outcome_counts(db, 10),
                history.durations(db, 3),
                speeds.nightly_medians(db, mac("macos-m1-14").device_class, 7),
            )
        finally:
            db.close()
        answers.append((judged, classified, direct))
    assert answers[0] == answers[1]
    judged, classified, _ = answers[0]
    assert {v.judgement for v in judged.verdicts} == {speeds.Judgement.SLOWER, speeds.Judgement.OK}
    assert classified.failures
