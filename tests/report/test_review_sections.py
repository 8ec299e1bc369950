"""The PR comment's review and speed sections: rendered from results.json's data, defused,
and read back the same by --post-from."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from pipeline.errors import PipelineError
from pipeline.guide.review import ReviewDocument
from pipeline.guide.review.base import Finding, Severity
from pipeline.report.review import render_terminal
from pipeline.results.speed import Judgement, SpeedReport, Verdict
from tests.report.pr_samples import sample

FINDINGS = (
    Finding("aten/src/ATen/native/mps/kernels/BinaryKernel.metal", 40, "bare-minmax",
            Severity.ERROR, "maximum_functor calls max(), which is metal::max: @someone <b>"),
    Finding("aten/src/ATen/native/mps/operations/BinaryOps.mm", 73, "mpsgraph-left",
            Severity.ERROR, "logaddexp has a Metal kernel, but ... fixes #12"),
)  # fmt: skip
VERDICTS = (
    Verdict("atan2", "float16", "large", "strided", 2.4e-4, 1.6e-4, 1.5, 1.03, Judgement.SLOWER),
    Verdict("atan2", "float32", "small", "contiguous", 3.0e-6, 2.9e-6, 1.03, 1.2, Judgement.OK),
)
SPEED = SpeedReport("macos-m2-15", (), 1.1, 7, VERDICTS)


def test_the_comment_has_both_sections_defused():
    results = sample(review=ReviewDocument(FINDINGS, ("bare-minmax", "mpsgraph-left"), ("a note",)),
                     speed=SPEED)  # fmt: skip
    body = results.comment()
    assert "### Review checks" in body and "### Kernel speed against main" in body
    assert "**bare-minmax** `aten/src/ATen/native/mps/kernels/BinaryKernel.metal:40`" in body
    assert "@someone" not in body and "<b>" not in body and "#12" not in body
    assert "| `atan2` | float16 | large | strided | 240.0 µs | 160.0 µs | **1.50×** | 1.03× |" in (
        body
    )
    assert "1 of 2 benchmarks slower than 1.10×" in body
    # the review comes before the per-dtype table, right after the failing tests
    assert body.index("### Review checks") < body.index("| dtype")


def test_results_json_round_trips_the_sections():
    results = sample(review=ReviewDocument(FINDINGS, ("bare-minmax",)), speed=SPEED)
    data = json.loads(json.dumps(results.to_json()))
    again = type(results).from_json(data, 7)
    assert again.comment() == results.comment()
    data["speed"]["verdicts"][0]["judgement"] = "faster"
    with pytest.raises(PipelineError, match="speed.verdicts\\[0\\].judgement is 'faster'"):
        type(results).from_json(data, 7).comment()
    data["speed"]["verdicts"][0]["judgement"] = "slower"
    data["review"]["findings"][1]["severity"] = "fatal"
    with pytest.raises(PipelineError, match="review.findings\\[1\\].severity is 'fatal'"):
        type(results).from_json(data, 7)
    data["review"]["findings"][1].update(severity="error", line="73")
    with pytest.raises(PipelineError, match="review.findings\\[1\\].line must be int"):
        type(results).from_json(data, 7)


def test_without_either_section_the_comment_is_as_before():
    assert "### Review checks" not in sample().comment()
    assert "### Kernel speed" not in sample().comment()


def test_the_terminal_counts_what_it_printed_in_the_words_its_lines_use():
    info = Finding("aten/src/ATen/native/mps/kernels/BinaryKernel.metal", 9, "dtype-coverage",
                   Severity.INFO, "the OpInfo says int8; no registration covers it")  # fmt: skip
    note = "check-math: not run: no C++ compiler"
    for findings, notes, count in (
        ((), (note,), "review: 0 errors, 0 warnings, 0 info, 1 note"),
        ((*FINDINGS, info), (), "review: 2 errors, 0 warnings, 1 info, 0 notes"),
        ((info,), (note, note), "review: 0 errors, 0 warnings, 1 info, 2 notes"),
    ):
        console = Console(record=True, width=200, file=io.StringIO())
        render_terminal(findings, notes, console)
        lines = console.export_text().splitlines()
        assert lines[-1] == count
        assert sum(line.startswith("note: ") for line in lines) == len(notes)
        assert sum(": info [" in line for line in lines) == (info in findings)
        assert sum(": error [" in line for line in lines) == len(findings) - (info in findings)
