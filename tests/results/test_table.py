"""pipeline/results/table.py: rows, dtype order, per-runner cells, counts, JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.results.junit import CaseResult, Outcome, parse_report
from pipeline.results.table import build_table, merge_runs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "junit"


def case(
    stem: str,
    dtype: str,
    outcome: Outcome,
    *,
    kind: str = "output_match",
    flaky: bool = False,
    message: str = "",
) -> CaseResult:
    name = f"test_{kind}_{stem}_mps_{dtype}"
    return CaseResult(
        "test_mps.TestConsistencyMPS", name, kind, stem, dtype, outcome, flaky,
        2 if flaky else 1, message, 0.1, "report.xml",
    )  # fmt: skip


def test_rows_columns_and_names() -> None:
    cases = [
        case("atan2", "int8", Outcome.XFAIL),
        case("atan2", "float32", Outcome.PASS),
        case("atan2", "bfloat16", Outcome.XPASS),
        case("nn_functional_pad_reflect", "float16", Outcome.FAIL),
        case("atan2", "float32", Outcome.XFAIL, kind="output_grad_match"),
        CaseResult(
            "test_mps.TestMPS",
            "test_matmul",
            None,
            None,
            None,
            Outcome.PASS,
            False,
            1,
            "",
            0.0,
            "report.xml",
        ),  # fmt: skip
    ]
    table = build_table(cases, {"nn_functional_pad_reflect": "nn.functional.pad (reflect)"})
    assert table.runners == ("local",)
    # dtypes in the MPS display order, not the order seen
    assert table.dtypes == ("float32", "float16", "bfloat16", "int8")
    assert [(r.name, r.kind) for r in table.rows] == [
        ("atan2", "output_match"),
        ("atan2", "output_grad_match"),
        ("nn.functional.pad (reflect)", "output_match"),
    ]
    assert table.kinds == ("output_match", "output_grad_match")
    assert table.ignored == 1
    atan2 = table.row("atan2")
    assert atan2 is not None and atan2.dtypes == ("float32", "bfloat16", "int8")
    assert table.cell("atan2", "output_match", "bfloat16").outcome is Outcome.XPASS
    assert table.cell("atan2", "output_grad_match", "float32").outcome is Outcome.XFAIL
    assert table.cell("atan2", "output_match", "float16") is None
    assert table.row("nope") is None


def test_counts_and_flaky() -> None:
    table = build_table(
        [
            case("abs", "float32", Outcome.PASS),
            case("abs", "float16", Outcome.PASS, flaky=True),
            case("abs", "int8", Outcome.XPASS),
            case("abs", "bool", Outcome.SKIP),
        ]
    )
    assert table.counts() == {
        "pass": 2, "fail": 0, "error": 0, "xfail": 0, "xpass": 1, "skip": 1,
    }  # fmt: skip
    assert table.flaky_count == 1
    assert table.cell("abs", "output_match", "float16").flaky


def test_merge_runs_keeps_each_runner() -> None:
    table = merge_runs(
        {
            "macos-m1-14": [
                case("abs", "float16", Outcome.XFAIL),
                case("abs", "int8", Outcome.XPASS),
            ],
            "macos-m2-15": [
                case("abs", "float16", Outcome.XPASS),
                case("abs", "int8", Outcome.XPASS),
            ],
            "macos-m2-26": [case("abs", "int8", Outcome.FAIL, message="boom")],
        }
    )
    assert table.runners == ("macos-m1-14", "macos-m2-15", "macos-m2-26")
    half = table.cell("abs", "output_match", "float16")
    assert [(r.runner, r.outcome) for r in half.results] == [
        ("macos-m1-14", Outcome.XFAIL),
        ("macos-m2-15", Outcome.XPASS),
    ]
    assert half.mixed and not half.flaky
    # disagreement shows the most severe outcome
    assert half.outcome is Outcome.XPASS
    int8 = table.cell("abs", "output_match", "int8")
    assert int8.outcome is Outcome.FAIL
    assert int8.for_runner("macos-m2-26").message == "boom"
    assert int8.for_runner("elsewhere") is None
    assert table.counts("macos-m2-15") == {
        "pass": 0, "fail": 0, "error": 0, "xfail": 0, "xpass": 2, "skip": 0,
    }  # fmt: skip
    assert table.counts("macos-m2-26")["fail"] == 1


def test_same_test_twice_for_one_runner_is_folded() -> None:
    table = build_table([case("abs", "int8", Outcome.FAIL), case("abs", "int8", Outcome.PASS)])
    (result,) = table.cell("abs", "output_match", "int8").results
    assert (result.outcome, result.flaky, result.attempts) == (Outcome.PASS, True, 2)


def test_to_dict_is_json() -> None:
    report = parse_report(FIXTURES / "outcomes.xml")
    table = merge_runs({"macos-m2-15": report.cases}, {"hypot": "hypot"})
    data = json.loads(json.dumps(table.to_dict()))
    assert data["runners"] == ["macos-m2-15"]
    assert data["ignored"] == 1
    assert data["counts"]["xpass"] == 3
    hypot = next(r for r in data["rows"] if r["stem"] == "hypot")
    assert hypot["cells"]["int32"] == {
        "outcome": "xpass",
        "flaky": False,
        "mixed": False,
        "runners": {
            "macos-m2-15": {
                "outcome": "xpass",
                "flaky": False,
                "attempts": 1,
                "message": "Failed: Unexpected success",
            }
        },
    }
    assert list(hypot["cells"]) == ["float32", "float16", "bfloat16", "int32", "int16", "int8",
                                    "uint8", "bool"]  # fmt: skip


def test_empty_table() -> None:
    table = build_table([])
    assert table.rows == () and table.dtypes == () and table.kinds == ()
    assert table.to_dict()["rows"] == []
