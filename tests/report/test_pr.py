"""PrResults: results.json written and read back (checked), the comment, the status."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from pipeline.errors import PipelineError
from pipeline.impact.model import AffectedOp
from pipeline.report.clip import MAX_LINE_CHARS
from pipeline.report.pr import PrResults
from pipeline.report.pr_comment import GITHUB_COMMENT_LIMIT, MARKER, commit_status_for
from tests.report.pr_samples import sample


def tampered(data: dict, path: tuple, value: object) -> dict:
    """A copy of results.json ``data`` with the field at ``path`` set to ``value``."""
    bad = json.loads(json.dumps(data))
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return bad


def test_results_json_round_trips_and_is_checked():
    results = sample()
    data = json.loads(json.dumps(results.to_json()))
    assert PrResults.from_json(data, 7) == replace(results, baseline=results.judged)
    assert data["status"] == {"state": "failure", "description": "6 unexpectedly passed, 3 passed"}
    with pytest.raises(PipelineError, match="for PR #7, not #8"):
        PrResults.from_json(data, 8)
    for path, value, message in [
        (("schema",), 2, "schema 2"),
        (
            ("table", "rows", 0, "cells", "int8", "runners", "local", "outcome"),
            "pwned",
            "outcome is 'pwned', not one of",
        ),
        (("table", "rows", 0, "name"), ["x"], r"table.rows\[0\].name must be str"),
        (("build", "ok"), 1, "build.ok must be bool"),
        (("head",), "main", "head is not a full commit id"),
        (("impact", "operators"), [{"operator": 1, "reasons": []}], "operator must be str"),
    ]:
        with pytest.raises(PipelineError, match=message):
            PrResults.from_json(tampered(data, path, value), 7)


def test_a_tampered_results_folder_cannot_put_markdown_or_mentions_in_the_comment():
    """The table is re-rendered from data: whatever a row name holds is shown literally."""
    data = json.loads(json.dumps(sample().to_json()))
    data["table"]["rows"][0]["name"] = "[approve](https://evil.example) <img src=x> @maintainer"
    body = PrResults.from_json(data, 7).comment()
    assert "\\[approve\\](https://evil.example) &lt;img src=x&gt; @\u200dmaintainer" in body
    assert "<img" not in body and "[approve](" not in body
    # an xpass's message is replaced by what an xpass means: its text never reaches the page
    assert "its xfail entry can go" in body
    assert "@someone" not in body and "Unexpected success" not in body


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


def test_a_200_kb_line_of_test_output_is_capped_in_the_comment_and_the_status():
    """A test error, an operator name, a row name, a sweep reason: 200 kB each, one line."""
    huge = "E   RuntimeError: " + "x" * 200_000
    results = sample(test_error=f"{huge}\n  full log: x", table=None)
    results = replace(
        results,
        impact=replace(
            results.impact,
            operators=(AffectedOp(huge, (huge,)),),
            full_sweep=True,
            full_sweep_reasons=(huge,),
        ),
    )
    body = results.comment()
    assert body.startswith(MARKER + "\n") and len(body) <= GITHUB_COMMENT_LIMIT
    longest = max(map(len, body.splitlines()))
    assert longest <= MAX_LINE_CHARS + 40, longest
    left_out = [int(n) for n in re.findall(r"x… \[(\d+) more characters\]", body)]
    assert len(left_out) == 2 and min(left_out) > len(huge) - MAX_LINE_CHARS  # error, reason
    state, description = results.status()
    assert state == "error" and len(description) == 140 and description.endswith("x…")
    assert json.loads(json.dumps(results.to_json()))["tests"]["error"].startswith(huge)


def test_a_huge_table_row_is_capped_before_it_is_defused():
    table = sample().table
    data = json.loads(json.dumps(sample().to_json()))
    data["table"]["rows"][0]["name"] = "a" * 5_000 + " @maintainer GH-1 <img src=x>"
    body = PrResults.from_json(data, 7).comment()
    assert table is not None and "@maintainer" not in body
    row = next(line for line in body.splitlines() if line.startswith("| aaaa"))
    assert re.fullmatch(r"\| a{1998}… \[\d+ more characters\]", row)


def test_check_math_table_is_in_results_json_and_rendered_from_it_in_the_comment():
    """The functor math goes into results.json as check-math's document; the comment (also
    from --post-from) renders it from that data, every field checked on the way in."""
    from tests.report.test_math_report import REPORT

    results = sample(math=REPORT)
    data = json.loads(json.dumps(results.to_json()))
    assert data["math"]["functors"][0]["dtypes"][1]["status"] == "mismatch"
    back = PrResults.from_json(data, 7)
    assert back == replace(results, baseline=results.judged)
    body = back.comment()
    assert "#### Functor math on the host" in body
    assert "| `maximum` | float16 | 10 | 8 | 2 (2 nan/inf) | mismatch |" in body
    assert "- `oops` does not compile: `k.metal:15: 'x' was not declared`" in body
    assert "subnormal flushing on the GPU" in body  # what it does not cover, said once
    assert body.index("Functor math") > body.index("| atan2 |")  # after the test tables
    assert "<br>" not in body and "&lt;br" not in body
    assert "Functor math" not in sample().comment()  # no check-math run: no section
    for path, value, message in [
        (("math",), [], "math must be dict or null"),
        (("math", "schema"), 2, "math.schema is 2, not 1"),
        (("math", "functors", 0, "dtypes", 1, "status"), "ok", "not what its counts give"),
        (("math", "functors", 0, "dtypes", 0, "checked"), "10", r"dtypes\[0\].checked must be"),
        (("math", "functors", 0, "dtypes", 1, "counterexamples", 0, "kind"), "x", "is 'x', not"),
        (("math", "functors", 1, "compile_error"), 3, r"functors\[1\].compile_error must be"),
    ]:
        with pytest.raises(PipelineError, match=message):
            PrResults.from_json(tampered(data, path, value), 7)


def test_a_tampered_math_document_cannot_put_mentions_or_html_in_the_comment():
    from tests.report.test_math_report import REPORT

    data = json.loads(json.dumps(sample(math=REPORT).to_json()))
    functor = data["math"]["functors"][0]
    functor["kernel"] = "max`<img src=x>` @maintainer"
    functor["dtypes"][1]["findings"] = ["<script>x</script> cc @org/team #12"]
    body = PrResults.from_json(data, 7).comment()
    # outside code, HTML is escaped and mentions defused
    assert "&lt;script&gt;x&lt;/script&gt; cc @\u200dorg/team #\u200d12" in body
    assert "<script" not in body and "@org/team" not in body
    # the name stays one code span (GitHub renders and links nothing in code), in its cell
    assert "| ``max`<img src=x>` @maintainer`` | float16 |" in body


def test_results_json_is_read_key_by_key_and_a_key_it_does_not_know_is_refused():
    """torchgen's from_yaml: every key popped and checked where the file is read, none left."""
    from pipeline.errors import DocumentError

    data = json.loads(json.dumps(sample().to_json()))
    assert PrResults.from_json(data, 7).impact == sample().impact
    for path, value, message in [
        (("impact", "extra"), 1, r"impact has unknown key\(s\) 'extra'"),
        (("build", "ok"), "yes", "build.ok must be bool, got str"),
        (("impact", "operators", 0, "reasons"), None, r"impact.operators\[0\].reasons must be"),
        (("surprise",), {}, r"the top level has unknown key\(s\) 'surprise'"),
    ]:
        with pytest.raises(DocumentError, match=message):
            PrResults.from_json(tampered(data, path, value), 7)


def test_check_kernel_of_the_changed_kernel_files_is_a_section_rendered_from_results_json():
    from pipeline.results.kernel import (
        Finding,
        KernelCheck,
        KernelFileReport,
        KernelsSection,
        KernelStatus,
    )

    race = Finding("length 1025", "a race: missing barrier? forward and reverse differ")
    report = KernelFileReport(
        "aten/src/ATen/native/mps/kernels/SoftMax.metal",
        (KernelCheck("softmax_tree_float_int", 41, KernelStatus.FAILED, (race,), 12),
         KernelCheck("softmax_rows_float_int", 11, KernelStatus.OK, (), 14)),
        "g++ 12", "torch 2.15.0's c10/metal", 1.5, False, "SoftMax.yaml",
    )  # fmt: skip
    kernels = KernelsSection((report,), ("Scan.metal: bad spec",))
    results = sample(kernels=kernels)
    data = json.loads(json.dumps(results.to_json()))
    back = PrResults.from_json(data, 7)
    assert back == replace(results, baseline=results.judged)
    body = back.comment()
    assert "#### Whole kernels on the host" in body
    assert (
        "| `softmax_tree_float_int` | failed | 12 | length 1025: a race: missing barrier?" in body
    )
    assert "- not checked: Scan.metal: bad spec" in body
    skipped = sample(kernels=KernelsSection(skipped="no torch")).comment()
    assert "_check-kernel skipped: no torch_" in skipped
    assert "Whole kernels" not in sample().comment()  # no kernel file changed: no section
    for path, value, message in [
        (("kernels", "files", 0, "kernels", 0, "status"), "fine", "kernels.files\\[0\\]"),
        (("kernels", "files", 0, "schema"), 2, "schema 2"),
        (("kernels", "errors"), "x", "kernels.errors"),
        (("kernels", "files", 0, "kernels", 1, "seen"), 1, r"kernels\[1\] has unknown key"),
        (("kernels", "files", 0, "cached"), "no", r"kernels.files\[0\].cached must be bool"),
    ]:
        with pytest.raises(PipelineError, match=message):
            PrResults.from_json(tampered(data, path, value), 7)
