"""`export`: HUD rows from a night's reports and from the history, loaded into a real
ClickHouse engine (chdb, in process) in a table of the HUD test-run table's shape, where a
HUD-style query must give the answers our dashboard gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.__main__ import main
from pipeline.config import load_settings
from pipeline.guide.backlog import backlog
from pipeline.report.nightly import publish
from pipeline.results.junit import parse_reports
from pipeline.workspace import prepare
from tests.conftest import in_ci
from tests.results.nightly_runs import RUNNERS

# The shape of pytorch/test-infra's tests.all_test_runs_by_name (clickhouse_db_schema/):
# its columns and types, the arrays of (message, text, type) included, its engine, partition
# and order; then the columns mps-pipeline adds.
HUD_TABLE = """
CREATE TABLE hud.mps_test_runs
(
    `file` LowCardinality(String),
    `classname` LowCardinality(String),
    `name` String,
    `invoking_file` LowCardinality(String),
    `time_inserted` DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    `job_id` Int64 CODEC(Delta(8), ZSTD(1)),
    `workflow_id` Int64 CODEC(Delta(8), ZSTD(1)),
    `workflow_run_attempt` Int32,
    `status` LowCardinality(String),
    `result` String,
    `time` Float32,
    `duration` Float32,
    `line` Int64 CODEC(T64, ZSTD(1)),
    `failure` Array(Tuple(message String, text String, type String)),
    `error` Array(Tuple(message String, text String, type String)),
    `skipped` Array(Tuple(message String, text String, type String)),
    `rerun` Array(Tuple(message String, text String)),
    `operator` LowCardinality(String),
    `dtype` LowCardinality(String),
    `test_kind` LowCardinality(String),
    `runner` LowCardinality(String),
    `chip` LowCardinality(String),
    `macos` LowCardinality(String),
    `pytorch_commit` String,
    INDEX by_time_inserted time_inserted TYPE minmax GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(time_inserted)
ORDER BY (file, classname, name, time_inserted)
"""
# pass rate per operator x dtype x runner over the last three nights, as the HUD asks its
# tables: a time window back from the newest row
PASS_RATES = """
SELECT operator, dtype, runner,
       countIf(result IN ('pass', 'xpass')) AS worked, countIf(result != 'skip') AS ran
FROM hud.mps_test_runs
WHERE time_inserted >= (SELECT max(time_inserted) FROM hud.mps_test_runs) - INTERVAL 2 DAY
GROUP BY operator, dtype, runner
ORDER BY operator, dtype, runner
"""
PER_NIGHT = """
SELECT toString(time_inserted) AS night, runner,
       countIf(result IN ('pass', 'xpass')) / countIf(result != 'skip') AS rate
FROM hud.mps_test_runs GROUP BY night, runner ORDER BY night, runner
"""


def _chdb():
    try:
        from chdb import session
    except ImportError as exc:
        if in_ci():
            pytest.fail(f"chdb is a dev dependency: {exc}", pytrace=False)
        pytest.skip(f"chdb is not installed ({exc})")
    return session


def _query(db, sql: str) -> list[dict]:
    text = str(db.query(sql, "JSONEachRow"))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _dashboard_rates(summaries: list[dict]) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(operator, dtype, runner) -> (worked, ran) over the nights' dashboard tables."""
    out: dict[tuple[str, str, str], list[int]] = {}
    for summary in summaries:
        table = summary["table"]
        for row in table["rows"]:
            for dtype, cell in row["cells"].items():
                by_runner = (
                    {r: cell for r in table["runners"]} if isinstance(cell, str)
                    else {r: got["outcome"] for r, got in cell["runners"].items()}
                )  # fmt: skip
                for runner, outcome in by_runner.items():
                    counts = out.setdefault((row["stem"], dtype, runner), [0, 0])
                    counts[0] += outcome in ("pass", "xpass")
                    counts[1] += outcome != "skip"
    return {key: (w, r) for key, (w, r) in out.items()}


@pytest.mark.slow
def test_history_rows_in_clickhouse_answer_as_the_dashboard(tmp_path, nights, capsys):
    session = _chdb()
    from pipeline.flows.nightly import run_nightly

    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}))
    summaries = []
    scenarios = ({}, {"macos_m2_15": "flaky"}, {"macos_m1_14": "bad"}, {"macos_m2_26": "old"})
    for day, scenario in enumerate(scenarios, 1):
        outcome = run_nightly(
            settings, nights.results(**scenario), backlog_of=backlog, commit=f"{day:040x}",
            started=f"2026-11-{day:02d}T03:17:00Z",
            source=f"https://github.com/o/r/actions/runs/{900 + day}/attempts/2",
        )  # fmt: skip
        publish(outcome)
        summaries.append(outcome.summary.to_json())
    out = tmp_path / "rows.jsonl"
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["export", "--nights", "3", "--out", str(out), *state]) == 0
    said = capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert f"exported {len(rows):,} rows (3 nightlies, 3 runners" in said
    first = rows[0]
    assert (first["file"], first["classname"], first["invoking_file"]) == (
        "test_tiny.py", "TestConsistencyMPS", "test_tiny"
    )  # fmt: skip
    assert first["time_inserted"] == "2026-11-02 03:17:00.000000"
    assert (first["workflow_id"], first["workflow_run_attempt"]) == (902, 2)
    assert first["pytorch_commit"] == f"{2:040x}"
    assert {(r["runner"], r["chip"], r["macos"]) for r in rows} == {
        ("macos-m1-14", "M1", "14.0"), ("macos-m2-15", "M2", "15.0"), ("macos-m2-26", "M2", "26.0")
    }  # fmt: skip

    db = session.Session(str(tmp_path / "clickhouse"))
    try:
        db.query("CREATE DATABASE hud")
        db.query(HUD_TABLE)
        db.query(f"INSERT INTO hud.mps_test_runs SELECT * FROM file('{out}', 'JSONEachRow')")
        assert _query(db, "SELECT count() AS n FROM hud.mps_test_runs") == [{"n": len(rows)}]
        found = {(r["operator"], r["dtype"], r["runner"]): (int(r["worked"]), int(r["ran"]))
                 for r in _query(db, PASS_RATES)}  # fmt: skip
        assert found == _dashboard_rates(summaries[1:])
        assert any(w < r for w, r in found.values()) and any(w == r for w, r in found.values())
        per_night = {(r["night"][:16], r["runner"]): r["rate"] for r in _query(db, PER_NIGHT)}
        chart = {(h["started"][:16].replace("T", " "), h["runner"]): h["pass_rate"]
                 for h in summaries[-1]["history"][len(RUNNERS):]}  # fmt: skip
        assert per_night.keys() == chart.keys()
        for key, rate in chart.items():
            assert per_night[key] == pytest.approx(rate, abs=1e-12), key
    finally:
        db.close()


def _documented_columns() -> list[str]:
    """The columns of docs/machine-output.md's "export rows" table, in order."""
    text = (Path(__file__).parents[2] / "docs" / "machine-output.md").read_text()
    section = text[text.index("## export rows") :]
    cells = re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+) \|", section, re.MULTILINE)
    return [name for cell in cells for name in re.findall(r"`([a-z_]+)`", cell)]


def test_a_nights_reports_export_one_row_per_case(tmp_path, nights, capsys, monkeypatch):
    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}))
    monkeypatch.setenv("GITHUB_RUN_ID", "12345")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "3")
    results = nights.results(macos_m1_14="bad", macos_m2_15="flaky")
    state = ["--state-dir", str(settings.state_dir)]
    argv = ["export", "--results", str(results), "--commit", "abc", "--job-id", "77",
            "--started", "2026-11-09T01:02:03Z", *state]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = sum(
        len(parse_reports(tuple(Path(results, runner).glob("*.xml"))).cases) for runner in RUNNERS
    )
    assert len(rows) == expected
    assert {(r["job_id"], r["workflow_id"], r["workflow_run_attempt"]) for r in rows} == {
        (77, 12345, 3)
    }
    failed = next(r for r in rows if r["runner"] == "macos-m1-14" and r["result"] == "fail")
    assert failed["status"] == "failure" and "mismatch" in failed["failure"][0]["message"]
    xfail = next(r for r in rows if r["result"] == "xfail")
    assert xfail["status"] == "skipped" and xfail["skipped"][0]["type"] == "pytest.xfail"
    rerun = next(r for r in rows if r["runner"] == "macos-m2-15" and r["operator"] == "sub")
    assert rerun["result"] == "pass" and rerun["rerun"] == [{"message": "", "text": ""}]
    assert {r["time_inserted"] for r in rows} == {"2026-11-09 01:02:03.000000"}
    assert list(rows[0]) == _documented_columns()  # every column documented, in order
