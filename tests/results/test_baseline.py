"""A PR run's failing tests against the nightly history: real SQLite files in tmp_path.

The end-to-end cases (real pytest runs recorded by `nightly`, the comment and the commit
status on the emulated GitHub) are in tests/commands/test_pr_report.py.
"""

from __future__ import annotations

import json

import pytest

from pipeline import state as layout
from pipeline.config import defaults, load_settings
from pipeline.errors import PipelineError
from pipeline.report.pr import PrResults
from pipeline.results import baseline, history
from pipeline.results.baseline import ALREADY_FAILING, FLAKY, NEW
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import build_table
from tests.report.pr_samples import sample

P, F, E, X, XP, S = (Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.XFAIL, Outcome.XPASS,
                     Outcome.SKIP)  # fmt: skip
M1, M2, M3 = "macos-m1-14", "macos-m2-15", "macos-m2-26"
MAIN = "c" * 40


def case(
    stem: str, dtype: str, outcome: Outcome, *, flaky: bool = False, cls: str = ""
) -> CaseResult:
    name = f"test_output_match_{stem}_mps_{dtype}"
    return CaseResult(cls or "test_mps.TestConsistencyMPS", name, "output_match", stem, dtype,
                      outcome, flaky, 1 + flaky, "m", 0.5, "x")  # fmt: skip


def pr_table(*cases: CaseResult):
    # pytest run from the tree root names the class differently: matched by stem and dtype
    return build_table([case(c.stem, c.dtype, c.outcome, cls="test.test_mps.X") for c in cases])


@pytest.fixture
def db(tmp_path):
    conn = history.connect(tmp_path / "nightly.sqlite")
    yield conn
    conn.close()


def record(db, day: int, commit: str = MAIN, **runs: list[CaseResult]) -> None:
    """One nightly on 2026-03-<day>; runner names as keywords (m1 -> macos-m1-14)."""
    names = {"m1": M1, "m2": M2, "m3": M3}
    history.record_nightly(
        db,
        {names[r]: cases for r, cases in runs.items()},
        commit=commit,
        started=history.timestamp(f"2026-03-{day:02d}T03:17:00Z"),
    )


def judged(result: baseline.Baseline) -> dict[str, tuple[str, str]]:
    return {f"{f.stem} {f.dtype}": (f.klass, f.reason) for f in result.failures}


def test_new_already_failing_and_not_in_the_nightly(db):
    record(db, 1, commit="a" * 40, m1=[case("atan2", "bool", P)])
    record(
        db, 2, m1=[case("atan2", "bool", F), case("atan2", "int8", P), case("atan2", "int16", X),
                   case("atan2", "int32", XP), case("fmod", "float16", P)],
        m2=[case("atan2", "bool", E), case("atan2", "int8", P), case("atan2", "int16", S)],
    )  # fmt: skip
    table = pr_table(
        case("atan2", "bool", F), case("atan2", "int8", F), case("atan2", "int16", F),
        case("atan2", "int32", XP), case("atan2", "uint8", E), case("atan2", "float32", P),
    )  # fmt: skip
    result = baseline.compare(db, table)
    on = "in the nightly of 2026-03-02"
    at = f"{on} (commit cccccccccccc)"
    assert judged(result) == {
        "atan2 int8": (NEW, f"passed on {M1}, {M2} {on}"),
        "atan2 int16": (NEW, f"xfailed on {M1}; was skipped on {M2} {on}"),
        # an xpass on main fails main's strict suite too
        "atan2 int32": (ALREADY_FAILING, f"unexpectedly passed on {M1} {at}"),
        "atan2 uint8": (NEW, "not in the nightly of 2026-03-02 (never run there)"),
        "atan2 bool": (ALREADY_FAILING, f"failed on {M1}; errored on {M2} {at}"),
    }  # fmt: skip
    assert result.night == baseline.Night(history.timestamp("2026-03-02T03:17Z"), MAIN, (M1, M2))
    assert result.note == "" and result.window == defaults()["nightly.flaky_window"]
    assert result.counts == {NEW: 3, ALREADY_FAILING: 2, FLAKY: 0}
    bool_case = next(f for f in result.failures if f.dtype == "bool")
    assert bool_case.main == {M1: F, M2: E} and bool_case.test == "test_output_match_atan2_mps_bool"


def test_the_same_configuration_decides_when_the_runner_is_known(db):
    record(db, 1, m1=[case("atan2", "bool", F)], m2=[case("atan2", "bool", X)])
    table = pr_table(case("atan2", "bool", F))
    assert judged(baseline.compare(db, table, runner=M2)) == {
        "atan2 bool": (NEW, f"xfailed on {M2} in the nightly of 2026-03-01")
    }
    assert judged(baseline.compare(db, table, runner=M1))["atan2 bool"][0] == ALREADY_FAILING
    assert judged(baseline.compare(db, table))["atan2 bool"] == (
        ALREADY_FAILING, f"failed on {M1} in the nightly of 2026-03-01 (commit {MAIN[:12]})"
    )  # fmt: skip
    assert baseline.compare(db, table, runner=M2).night.runners == (M2,)

    # a configuration the history never ran: every runner of the latest nightly, said so
    unknown = baseline.compare(db, table, runner=M3)
    assert unknown.runner == M3 and unknown.night.runners == (M1, M2)
    assert unknown.note == (
        f"the nightly history has no run of {M3}: compared with every runner of the latest nightly"
    )
    assert judged(unknown)["atan2 bool"][0] == ALREADY_FAILING


def test_a_runner_missing_from_the_latest_nightly_is_compared_with_its_latest_run(db):
    record(db, 1, commit="a" * 40, m1=[case("atan2", "bool", F)], m2=[case("atan2", "bool", F)])
    record(db, 2, m1=[case("atan2", "bool", P)])  # m2's job did not run that night
    table = pr_table(case("atan2", "bool", F))
    result = baseline.compare(db, table, runner=M2)
    assert result.night.started.startswith("2026-03-01") and result.night.commit == "a" * 40
    assert result.note == (
        f"the latest nightly (2026-03-02) has no run of {M2}: compared with its latest run, "
        "of 2026-03-01"
    )
    assert judged(result)["atan2 bool"] == (
        ALREADY_FAILING, f"failed on {M2} in the nightly of 2026-03-01 (commit aaaaaaaaaaaa)"
    )  # fmt: skip
    assert judged(baseline.compare(db, table))["atan2 bool"][0] == NEW  # the latest: m1 passed


def test_flaky_is_a_flip_and_a_flip_back_or_disagreeing_attempts(db):
    for day, outcome in enumerate((P, F, P, F), 1):
        record(db, day, m1=[case("atan2", "bool", outcome), case("atan2", "int8", P)],
               m2=[case("atan2", "bool", F), case("atan2", "int8", P, flaky=day == 4)])  # fmt: skip
    table = pr_table(case("atan2", "bool", F), case("atan2", "int8", F))
    flips = f"its outcome flipped over the last 4 nightlies on {M1} (pass → fail → pass → fail)"
    assert judged(baseline.compare(db, table)) == {
        "atan2 bool": (FLAKY, flips),
        "atan2 int8": (FLAKY, f"its attempts disagreed in the nightly of 2026-03-04 on {M2}"),
    }
    # on m2 alone, bool failed every night: already failing; and int8's rerun was m2's
    assert judged(baseline.compare(db, table, runner=M2))["atan2 bool"][0] == ALREADY_FAILING
    assert judged(baseline.compare(db, table, runner=M1)) == {
        "atan2 bool": (FLAKY, flips),
        "atan2 int8": (NEW, f"passed on {M1} in the nightly of 2026-03-04"),
    }
    # the window: the last two nightlies hold one change only
    assert judged(baseline.compare(db, table, runner=M1, window=2))["atan2 bool"][0] == (
        ALREADY_FAILING
    )


def test_no_history_no_nightly_no_failures(db, tmp_path):
    table = pr_table(case("atan2", "bool", F), case("atan2", "int8", P))
    none = baseline.classify(None, table, runner=M1)
    assert none.night is None and none.note == "no nightly baseline" and none.runner == M1
    assert judged(none) == {"atan2 bool": (NEW, "no nightly baseline")}
    empty = baseline.compare(db, table)
    assert empty.night is None and empty.note == (
        "no nightly baseline: the history holds no nightly yet"
    )
    record(db, 1, m1=[case("atan2", "bool", F)])
    assert baseline.compare(db, pr_table(case("atan2", "int8", P))).failures == ()
    assert baseline.compare(db, None).failures == ()


def test_which_history(tmp_path):
    state = tmp_path / "state"
    settings = load_settings({"root": "sandbox", "state_dir": str(state)}, env={})
    assert baseline.history_at(settings, None) is None  # and nothing is created
    assert not state.exists()
    default = state / layout.HISTORY
    history.connect(default).close()
    assert baseline.history_at(settings, None) == history.HistoryLocation.parse(default)
    given = tmp_path / "given.sqlite"
    with pytest.raises(PipelineError, match="--history .*given.sqlite: no such file"):
        baseline.history_at(settings, str(given))
    given.write_bytes(default.read_bytes())
    assert baseline.history_at(settings, str(given)).path == given
    server = "postgresql://pr:s3cret@127.0.0.1:1/h"  # a server is taken as named: it says
    assert baseline.history_at(settings, server).is_server


# -- results.json ---------------------------------------------------------------------------


def _results(db) -> PrResults:
    record(db, 1, m1=[case("atan2", "int64", XP), case("atan2", "int32", X)])
    results = sample()  # atan2: 3 pass, 6 xpass
    return PrResults(**{**results.__dict__, "baseline": baseline.compare(db, results.table)})


def test_the_classes_round_trip_through_results_json_and_are_checked(db):
    results = _results(db)
    data = json.loads(json.dumps(results.to_json()))
    assert PrResults.from_json(data, 7) == results
    assert data["baseline"]["counts"] == {"new": 5, "already_failing": 1, "flaky": 0}
    assert data["baseline"]["cases"][0] == {
        "test": "test_output_match_atan2_mps_int64", "stem": "atan2", "kind": "output_match",
        "dtype": "int64", "outcome": "xpass", "class": "already_failing",
        "reason": f"unexpectedly passed on {M1} in the nightly of 2026-03-01 (commit cccccccccccc)",
        "main": {M1: "xpass"},
    }  # fmt: skip
    assert data["status"] == {
        "state": "failure",
        "description": "5 new failures (1 already failing on main): 6 unexpectedly passed, "
        "3 passed",
    }

    def broken(change) -> dict:
        bad = json.loads(json.dumps(data))
        change(bad["baseline"])
        return bad

    for change, message in [
        (lambda b: b["cases"][0].update({"class": "fine"}), r"cases\[0\].class is 'fine', not"),
        (lambda b: b["cases"][0].update({"outcome": "meh"}), "outcome is 'meh', not one of"),
        (lambda b: b["cases"][0]["main"].update({M1: "ok"}), "is 'ok', not one of"),
        (lambda b: b["cases"].pop(), "not the failing tests of the table"),
        (lambda b: b["cases"][0].update({"dtype": "int8"}), "not the failing tests of the table"),
        (lambda b: b["cases"][0].update({"outcome": "fail"}), "not the failing tests"),
        (lambda b: b.update({"nightly": None}), "'already_failing' without a nightly"),
        (lambda b: b["nightly"].update({"commit": "main"}), "commit is not a full commit id"),
        (lambda b: b.update({"runner": 3}), "baseline.runner must be str or null"),
        (lambda b: b.update({"cases": {}}), "baseline.cases must be list"),
    ]:
        with pytest.raises(PipelineError, match=message):
            PrResults.from_json(broken(change), 7)
    # written by a version without the field: every failure is new, nothing compared
    del data["baseline"]
    old = PrResults.from_json(data, 7)
    assert old.baseline == baseline.without_history(old.table) and old.judged.night is None
    assert old.status() == ("failure", "6 unexpectedly passed, 3 passed")


def test_a_tampered_baseline_cannot_put_markdown_or_mentions_in_the_comment(db):
    data = json.loads(json.dumps(_results(db).to_json()))
    data["baseline"]["cases"][0]["reason"] = "[ok](https://evil.example) <b>x</b> @admin #1"
    data["baseline"]["note"] = "@team see <script>"
    data["baseline"]["nightly"]["runners"] = ["`x` @someone"]
    body = PrResults.from_json(data, 7).comment()
    assert "\\[ok\\](https://evil.example) &lt;b&gt;x&lt;/b&gt; @\u200dadmin #\u200d1" in body
    assert "_@\u200dteam see &lt;script&gt;._" in body and "(\\`x\\` @\u200dsomeone)" in body
    assert "<b>" not in body and "<script" not in body and "[ok](" not in body
