"""The comment's Inductor MPS tests section and results.json's ``inductor``, from data."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pipeline.errors import DocumentError
from pipeline.fields import read
from pipeline.report.pr import PrResults
from pipeline.results.inductor import InductorRun
from tests.report.pr_samples import sample

FILES = ("test/inductor/test_mps_basic.py", "test/inductor/test_torchinductor.py")
REASON = (
    "c10/metal/special_math.h: c10::metal::erfinv is called by Inductor's generated Metal "
    'code (torch/_inductor/codegen/mps.py: c10::metal::{name} with "erfinv")'
)


def with_inductor(run: InductorRun | None, **changes) -> PrResults:
    base = sample(**changes)
    impact = replace(base.impact, inductor_tests=FILES, inductor_reasons=(REASON,))
    return replace(base, impact=impact, inductor=run)


def test_a_passing_run_keeps_the_status_and_gets_its_section() -> None:
    run = InductorRun(FILES, counts={"pass": 12, "skip": 3}, run="20250101T000000Z-pr-7-inductor")
    results = with_inductor(run, xfail_diff="")
    assert results.status() == sample(xfail_diff="").status()  # the consistency tests' say
    alone = with_inductor(run, table=None, selectors=())
    assert alone.status() == (
        "success",
        "no MPS consistency test affected; Inductor MPS tests: pass 12, skip 3",
    )
    comment = results.comment()
    assert "#### Inductor MPS tests" in comment and "c10::metal::erfinv is called" in comment
    assert f"Ran `{FILES[0]}`, `{FILES[1]}`: pass 12, skip 3" in comment
    again = PrResults.from_json(results.to_json(), 7)
    assert again.inductor == run and again.impact.inductor_reasons == (REASON,)


@pytest.mark.parametrize(
    ("run", "description"),
    [
        (InductorRun(FILES, counts={"pass": 1, "error": 1}, failed=("a::b",)), "pass 1, error 1"),
        (InductorRun(FILES[:1], missing=FILES[1:], counts={"pass": 1}), "not in the tree"),
        (InductorRun(FILES, error="pytest produced no JUnit report"), "could not run: pytest"),
    ],
)
def test_a_failing_missing_or_unrun_file_fails_the_status(run, description) -> None:
    results = with_inductor(run, table=None, selectors=())
    state, text = results.status()
    assert state == "failure" and text.startswith("Inductor MPS tests: ") and description in text


def test_selected_but_not_run_says_why() -> None:
    comment = with_inductor(None, build_ok=False, build_error="error: x").comment()
    assert "_Not run: the build failed_" in comment


def test_counts_that_are_not_outcomes_are_refused() -> None:
    doc = InductorRun(FILES, counts={"pass": 1}).to_dict() | {"counts": {"passed": 1}}
    with pytest.raises(DocumentError, match="'passed': 1 is not an outcome's count"):
        read(InductorRun, doc, "results.json", "inductor")
