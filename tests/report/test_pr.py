"""PrResults: results.json written and read back (checked), the comment, the status."""

from __future__ import annotations

import json

import pytest

from pipeline.errors import PipelineError
from pipeline.report.pr import PrResults
from pipeline.report.pr_comment import MARKER, commit_status_for
from tests.report.pr_samples import sample


def test_results_json_round_trips_and_is_checked():
    results = sample()
    data = json.loads(json.dumps(results.to_json()))
    assert PrResults.from_json(data, 7) == results
    assert data["status"] == {"state": "failure", "description": "6 unexpectedly passed, 3 passed"}
    with pytest.raises(PipelineError, match="for PR #7, not #8"):
        PrResults.from_json(data, 8)
    for path, value, message in [
        (("schema",), 2, "schema 2"),
        (
            ("table", "rows", 0, "cells", "int8", "runners", "local", "outcome"),
            "pwned",
            "outcome 'pwned' is unknown",
        ),
        (("table", "rows", 0, "name"), ["x"], r"table.rows\[0\].name must be str"),
        (("build", "ok"), 1, "build.ok must be bool"),
        (("head",), "main", "head is not a full commit id"),
        (("impact", "operators"), [{"operator": 1, "reasons": []}], "operator must be str"),
    ]:
        bad = json.loads(json.dumps(data))
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(PipelineError, match=message):
            PrResults.from_json(bad, 7)


def test_a_tampered_results_folder_cannot_put_markdown_or_mentions_in_the_comment():
    """The table is re-rendered from data: whatever a row name holds is shown literally."""
    data = json.loads(json.dumps(sample().to_json()))
    data["table"]["rows"][0]["name"] = "[approve](https://evil.example) <img src=x> @maintainer"
    body = PrResults.from_json(data, 7).comment()
    assert "\\[approve\\](https://evil.example) &lt;img src=x&gt; @\u200dmaintainer" in body
    assert "<img" not in body and "[approve](" not in body
    assert "Unexpected success @\u200dsomeone" in body


def test_comment_and_status_of_a_failed_build_and_of_a_run_without_results():
    broken = sample(build_ok=False, build_error="K.metal:3: error: x", selectors=(), table=None)
    body = broken.comment()
    assert body.startswith(MARKER)
    assert "**Build:** ❌ failed: `K.metal:3: error: x`" in body
    assert "_No tests ran: the build failed._" in body and "**Tests:**" not in body
    assert broken.status() == commit_status_for({}, build_ok=False)
    crashed = sample(
        test_error="pytest produced no JUnit report: exit 2\n  full log: x", table=None
    )
    assert crashed.status() == (
        "error",
        "MPS tests could not run: pytest produced no JUnit report: exit 2",
    )
    assert "_The tests could not run:_ pytest produced no JUnit report" in crashed.comment()
    assert "Tested `bbbbbbbbbbbb` against base `aaaaaaaaaaaa`" in body
