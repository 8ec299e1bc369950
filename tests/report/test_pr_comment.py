"""The PR comment: escaping of test-derived text, fences, the size limit, the commit status."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from pipeline.report import render
from pipeline.report.pr_comment import (
    GITHUB_COMMENT_LIMIT,
    build_comment,
    code_block,
    code_span,
    commit_status_for,
    defuse,
    escape_markdown,
)
from pipeline.report.render import neutralize_references
from pipeline.results.junit import Outcome
from pipeline.results.table import build_table
from tests.report.pr_samples import case

MARKER = "<!-- mps-pipeline:pr -->"
ZWJ = "\u200d"  # what escape_markdown and defuse put after "@" and "#"
DIFF = """\
--- a/torch/testing/_internal/common_mps.py
+++ b/torch/testing/_internal/common_mps.py
@@ -120,7 +120,6 @@ def mps_ops_modifier(ops):
     UNIMPLEMENTED_XFAILLIST = {
         "logaddexp2": None,
-        "hypot": [torch.float16, torch.bfloat16],
         "igamma": None,
@@ -301,3 +300,2 @@ def mps_ops_modifier(ops):
     ON_MPS_XFAILLIST = {
-        "-- odd key": [torch.int8],
         "cumprod": None,
"""


def _table(rows: int, op: str = "hypot", width: int = 40) -> str:
    lines = [f"#### {op}", "", "| test | dtype | before | after |", "| --- | --- | :-: | :-: |"]
    lines += [
        f"| `test_output_match_{op}_{i:05d}{'x' * width}` | float16 | xfail | pass |"
        for i in range(rows)
    ]
    return "\n".join(lines)


def _comment(**kw) -> str:
    args = {"marker": MARKER, "title": "MPS targeted tests", "build_ok": True}
    return build_comment(**(args | kw))


# -- escaping ----------------------------------------------------------------------------


def test_mentions_and_html_in_test_derived_text_are_defused():
    body = _comment(
        build_ok=False,
        build_error="BinaryKernel.metal:12: error: use of undeclared identifier 'x' @someone",
        operators=[("<img src=x>", "test_foo_<img src=x> cc @someone and @pytorch/mps-team")],
        table="| test | result |\n|---|---|\n| test_<img src=x>_@someone | fail |",
        counts={"fail": 1, "@evil": 2},
    )
    outside_code = re.sub(r"(`+)[^\n]*?\1", "", body)
    assert "<img" not in outside_code
    # GitHub links no mention inside a code span; everywhere else a ZWJ breaks it
    assert not re.search(r"@(?!\u200d)\w", outside_code), "an @-mention survived"
    assert "`BinaryKernel.metal:12: error: use of undeclared identifier 'x' @someone`" in body
    assert f"@{ZWJ}someone" in body and f"@{ZWJ}pytorch/mps" in body
    assert "&lt;img src=x&gt;" in body  # shown, not rendered
    assert "`<img src=x>`" in body  # the op name sits in a code span, where HTML is inert


def test_escape_markdown_is_the_one_in_render():
    assert escape_markdown is render.escape_markdown
    assert escape_markdown("@someone") == f"@{ZWJ}someone"
    assert escape_markdown("<img src=x>") == "&lt;img src=x&gt;"
    assert escape_markdown("a *b* _c_ [d](e) `f` | #12") == (
        f"a \\*b\\* \\_c\\_ \\[d\\](e) \\`f\\` \\| #{ZWJ}12"
    )
    # an entity would render as "@": the ampersand is escaped first
    assert escape_markdown("&#64;someone &commat;x") == f"&amp;#{ZWJ}64;someone &amp;commat;x"
    assert escape_markdown("two\nlines") == "two lines"


# What GitHub links in text (never in code): @-mentions, issue references, issue URLs.
REFERENCES = (
    "see GH-12, gh-3, #34, pytorch/pytorch#56, https://github.com/pytorch/pytorch/issues/78, "
    "HTTP://www.GitHub.com/octo/my_repo/pull/9 and github.com/o/r/issues/10 cc @someone"
)
LINKED = {
    "mention": re.compile(r"@[A-Za-z0-9]"),
    "#N": re.compile(r"#[0-9]"),
    "GH-N": re.compile(r"(?<![A-Za-z0-9_])GH-[0-9]", re.I),
    # GitHub's autolinker (cmark-gfm): a scheme before "://", or "www."
    "URL": re.compile(r"(?:https?|ftp)://|(?<![A-Za-z0-9_])www\.", re.I),
    "issue URL": re.compile(r"github\.com/[^/\s]+/[^/\s]+/(?:issues|pull)/[0-9]", re.I),
}
_GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _linkable_text(body: str) -> list[str]:
    """The text nodes GitHub runs its autolinker and reference filters over, as a
    CommonMark + tables parser sees the comment: escapes and entities resolved, code spans,
    code blocks and link targets left out."""
    texts = []
    for token in _GFM.parse(body):
        if token.type == "html_block":  # the marker, and the <details> the comment adds
            assert re.fullmatch(r"<!-- mps-pipeline:\w+ -->|</?details>.*", token.content.strip())
        for child in token.children or ():
            assert child.type != "html_inline", f"raw HTML: {child.content!r}"
            if child.type == "text":
                texts.append(child.content)
    return texts


def _assert_nothing_links(body: str) -> None:
    for text in _linkable_text(body):
        for what, pattern in LINKED.items():
            assert not pattern.search(text), f"{what} would link in {text!r}"


def test_references_in_test_derived_text_are_neutralized():
    """In every place untrusted text reaches, nothing links; the text still reads the same."""
    table = render.render_markdown(
        build_table(
            [case("float32", Outcome.FAIL, f"AssertionError: {REFERENCES}")],
            names={"atan2": f"atan2 {REFERENCES}"},
        )
    )
    body = _comment(
        build_ok=False,
        build_error=f"K.metal:1: error: {REFERENCES}",
        operators=[(f"op {REFERENCES}", f"changed: {REFERENCES}")],
        table=f"Full sweep: {escape_markdown(REFERENCES)}\n\n{table}",
        counts={"fail": 1},
        xfail_diff=f"--- a/x\n+++ b/x\n@@ -1 +0,0 @@\n-# {REFERENCES}\n",
    )
    _assert_nothing_links(body)
    texts = _linkable_text(body)
    # shown, and read the same once the invisible joiners are gone
    assert sum(REFERENCES in text.replace(ZWJ, "") for text in texts) >= 3
    # code spans and blocks are left as they are: GitHub links nothing there
    assert f"`K.metal:1: error: {REFERENCES}`" in body and f"`op {REFERENCES}`" in body
    assert f"-# {REFERENCES}\n" in body
    assert f"GH-{ZWJ}12" in body and f"pytorch/pytorch#{ZWJ}56" in body
    assert f"https{ZWJ}://github{ZWJ}.com/pytorch/pytorch/issues/78" in body
    assert f"HTTP{ZWJ}://www{ZWJ}.GitHub{ZWJ}.com/octo/my\\_repo/pull/9" in body


@pytest.mark.parametrize(
    ("text", "neutral"),
    [
        ("GH-12 gh-3", f"GH-{ZWJ}12 gh-{ZWJ}3"),
        ("#1 o/r#2", f"#{ZWJ}1 o/r#{ZWJ}2"),
        ("https://github.com/o/r/issues/1", f"https{ZWJ}://github{ZWJ}.com/o/r/issues/1"),
        ("http://github.com/o/r/pull/2/files", f"http{ZWJ}://github{ZWJ}.com/o/r/pull/2/files"),
        ("www.github.com/o/r/pull/3", f"www{ZWJ}.github{ZWJ}.com/o/r/pull/3"),
        ("github.com/o/r/issues/4", f"github{ZWJ}.com/o/r/issues/4"),
        # not references: left alone
        ("SIGH-1 x#y https://github.com/o/r/actions/runs/5", None),
        ("https://github.com/o/r/issues", None),
    ],
)
def test_neutralize_references(text, neutral):
    neutral = text if neutral is None else neutral
    assert neutralize_references(text) == neutral
    assert neutralize_references(neutral) == neutral  # idempotent
    assert defuse(text) == neutral  # defuse is the same mechanism
    assert escape_markdown(text) == neutral.replace("_", "\\_")


def test_defuse_neutralizes_references_outside_code_only():
    text = "| GH-1 `GH-2` | https://github.com/a_b/c/issues/3 | `#4` #5 |"
    once = defuse(text)
    assert once == (
        f"| GH-{ZWJ}1 `GH-2` | https{ZWJ}://github{ZWJ}.com/a_b/c/issues/3 | `#4` #{ZWJ}5 |"
    )
    assert defuse(once) == once
    escaped = escape_markdown("https://github.com/a_b/c/issues/3")
    assert defuse(escaped) == escaped == f"https{ZWJ}://github{ZWJ}.com/a\\_b/c/issues/3"


def test_code_span_survives_backticks():
    assert code_span("a``b") == "```a``b```"
    assert code_span("`x`") == "`` `x` ``"


def test_defuse_is_idempotent_and_keeps_code_spans():
    text = "| `<b>` | <i>x</i> @bob &#64;al #3 \\<ok |"
    once = defuse(text)
    assert defuse(once) == once
    assert once == f"| `<b>` | &lt;i>x&lt;/i> @{ZWJ}bob &amp;#{ZWJ}64;al #{ZWJ}3 \\<ok |"


def test_a_diff_containing_a_fence_gets_a_longer_fence():
    diff = DIFF.replace('"igamma": None,', '"igamma": None,  # ```` not a fence')
    body = _comment(xfail_diff=diff)
    block = re.search(r"^(`{5,})diff\n(.*?)\n\1$", body, re.M | re.S)
    assert block is not None, body
    assert block.group(2) == diff.rstrip("\n")


def test_code_block_fence_is_longer_than_any_run():
    assert code_block("x ``` y", "diff").startswith("````diff\n")
    assert code_block("plain").startswith("```\n")


def test_an_already_fenced_diff_is_not_double_fenced():
    body = _comment(xfail_diff=f"```diff\n{DIFF}```\n")
    assert body.count("```diff") == 1 and "```diff\n--- a/torch" in body


# -- layout -----------------------------------------------------------------------------------


def test_comment_layout():
    body = _comment(
        operators=[("hypot", "native_functions.yaml: hypot.out dispatch changed")],
        table=_table(2),
        xfail_diff=DIFF,
        counts={"pass": 10, "xfail": 1, "skip": 2},
        footer="[workflow run](https://github.com/octo/pytorch/actions/runs/1)",
    )
    assert body.startswith(MARKER + "\n## MPS targeted tests\n")
    assert "**Build:** ✅ succeeded" in body
    assert "**Tests:** 10 passed · 1 xfailed · 2 skipped" in body
    assert "- `hypot`: native\\_functions.yaml: hypot.out dispatch changed" in body
    assert "| test | dtype | before | after |" in body
    assert "### Expected failures that can go" in body
    assert body.rstrip().endswith("[workflow run](https://github.com/octo/pytorch/actions/runs/1)")
    assert "truncated" not in body


def test_failed_build_shows_first_error_line_only():
    body = _comment(build_ok=False, build_error="a.mm:3: error: `x` undeclared\nnote: more\n")
    assert "**Build:** ❌ failed: ``a.mm:3: error: `x` undeclared``" in body
    assert "note: more" not in body


def test_long_operator_lists_fold():
    ops = [(f"op{i}", "changed") for i in range(25)]
    body = _comment(operators=ops)
    assert "### Operators selected (25)" in body and "<details>" in body


# -- the 65,536-character limit -------------------------------------------------------------


def test_a_70000_character_table_is_cut_by_whole_rows_with_a_note():
    table = _table(1000)
    assert len(table) > 70_000
    body = _comment(table=table, xfail_diff=DIFF, counts={"pass": 1000})
    assert len(body) < GITHUB_COMMENT_LIMIT
    original_rows = set(table.splitlines())
    shown = [line for line in body.splitlines() if line.startswith("| `test_output")]
    assert shown and all(row in original_rows for row in shown)  # whole rows only
    assert shown == table.splitlines()[4 : 4 + len(shown)]  # the first rows, in order
    assert "| test | dtype | before | after |\n| --- | --- | :-: | :-: |" in body
    note = (
        f"_…table truncated: {len(shown)} of 1000 rows shown; "
        "full results in the workflow artifacts_"
    )
    assert note in body
    assert DIFF.rstrip("\n") in body  # the diff is untouched while tables can give


def test_the_largest_table_is_cut_first():
    small = _table(5, op="atan2")
    body = _comment(table=small + "\n\n" + _table(1000, op="hypot"))
    assert len(body) < GITHUB_COMMENT_LIMIT
    assert small in body
    assert "rows shown" in body and "5 of 5" not in body


def test_the_diff_is_cut_by_whole_hunks_as_a_last_resort():
    hunk = "@@ -1,2 +1,1 @@\n context\n-" + "x" * 2000 + "\n"
    diff = "--- a/f\n+++ b/f\n" + hunk * 60
    body = _comment(table=_table(1000), xfail_diff=diff)
    assert len(body) < GITHUB_COMMENT_LIMIT
    assert "_…table truncated: 0 of 1000 rows shown" in body
    match = re.search(r"_…diff truncated: (\d+) of 60 hunks shown", body)
    assert match and 0 < int(match.group(1)) < 60
    assert body.count("@@ -1,2 +1,1 @@") == int(match.group(1))
    assert body.count("--- a/f") == 1


def test_budget_is_always_respected():
    huge = [("op" * 50, "r" * 5000)] * 200
    body = _comment(operators=huge, budget=5000, build_error="e" * 10_000, build_ok=False)
    assert len(body) <= 5000


def test_the_last_resort_cut_keeps_whole_lines_and_the_marker():
    """Text that no cut can shorten (a table's leading text) is cut at a line boundary: a
    cut inside a code span would turn what it held into text GitHub links."""
    lines = [f"`@dev{i} GH-{i} https://github.com/o/r/issues/{i}` " + "y" * 1500 for i in range(60)]
    body = _comment(table="\n".join(lines))
    note = "\n\n_…comment truncated; full results in the workflow artifacts_\n"
    assert body.startswith(MARKER + "\n") and body.endswith(note)
    assert len(body) <= GITHUB_COMMENT_LIMIT
    kept = body.removesuffix(note)
    assert kept.endswith("\n") and _comment(table="\n".join(lines), budget=10**6).startswith(kept)
    _assert_nothing_links(body)


def test_hunk_parsing_honours_line_counts():
    """A removed line starting with "-- " stays in its hunk (and is not a file header)."""
    body = _comment(xfail_diff=DIFF, budget=len(_comment(xfail_diff=DIFF)) - 1)
    assert "_…diff truncated: 1 of 2 hunks shown" in body
    assert '"-- odd key"' not in body and '"hypot"' in body


# -- commit status -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "build_ok", "state", "text"),
    [
        ({"pass": 30, "xfail": 2}, False, "failure", "MPS build failed"),
        ({"pass": 30, "fail": 2, "error": 1}, True, "failure", "2 failed, 1 errored, 30 passed"),
        ({"pass": 3, "xpass": 2}, True, "failure", "2 unexpectedly passed, 3 passed"),
        ({"pass": 30, "xfail": 2, "skip": 1}, True, "success", "30 passed, 2 xfailed, 1 skipped"),
        ({}, True, "success", "no MPS consistency tests affected"),
    ],
)
def test_commit_status_for(counts, build_ok, state, text):
    got_state, description = commit_status_for(counts, build_ok)
    assert got_state == state
    assert description.startswith(text)
    assert len(description) <= 140


@pytest.mark.parametrize(
    ("classes", "state", "text"),
    [
        ({"new": 1, "already_failing": 1, "flaky": 0}, "failure",
         "1 new failure (1 already failing on main): 2 failed, 30 passed"),
        ({"new": 2, "already_failing": 0, "flaky": 0}, "failure",
         "2 new failures: 2 failed, 30 passed"),
        ({"new": 0, "already_failing": 1, "flaky": 1}, "success",
         "no new failures (1 already failing on main, 1 flaky): 2 failed, 30 passed"),
        # classes that count nothing (not what a run writes): the counts decide, as before
        ({"new": 0, "already_failing": 0, "flaky": 0}, "failure", "2 failed, 30 passed"),
    ],
)  # fmt: skip
def test_commit_status_with_a_baseline_fails_for_new_failures_only(classes, state, text):
    assert commit_status_for({"pass": 30, "fail": 2}, True, classes) == (state, text)
    assert commit_status_for({"pass": 30}, True, classes) == ("success", "30 passed")
    assert commit_status_for({"pass": 30, "fail": 2}, False, classes)[0] == "failure"


def test_the_failing_tests_lead_and_each_class_is_capped():
    from pipeline.report.pr_comment import MAX_LISTED_FAILURES
    from pipeline.results.baseline import Baseline, Failure, Night

    def failures(klass: str, n: int) -> list[Failure]:
        return [
            Failure(f"op{i}", "output_match", "float32", Outcome.FAIL, klass, f"why {i}", {})
            for i in range(n)
        ]

    night = Night("2026-03-01T03:17:00.000000Z", "c" * 40, ("macos-m1-14",))
    many = [*failures("new", MAX_LISTED_FAILURES + 5), *failures("flaky", 2)]
    body = _comment(
        counts={"fail": len(many)},
        operators=[("op0", "x")],
        baseline=Baseline("macos-m1-14", night, 5, "", tuple(many)),
    )
    new = body.split("### ❌ New failures (25)\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(new) == MAX_LISTED_FAILURES + 1
    assert new[0] == "- `test_output_match_op0_mps_float32` (failed): why 0"
    assert new[-1] == "- _…5 more in results.json (the workflow artifacts)_"
    assert body.index("### ❌ New failures") < body.index("### Flaky (2)")
    assert body.index("### Flaky (2)") < body.index("### Operators selected")
    assert "the last 5 nightlies, up to the nightly of 2026-03-01, commit `cccccccccccc`" in body
    assert "Already failing on main" not in body


def test_a_fence_in_the_table_text_cannot_swallow_the_comment():
    body = _comment(table="legend\n```\n" + _table(2), xfail_diff=DIFF)
    assert "\n\\```\n" in body
    assert re.search(r"^```diff$", body, re.M)  # the diff's fence still opens a block


def test_the_comment_renders_our_legend_as_markup_and_their_html_as_text():
    """Rendered as GitHub does (CommonMark with tables and the raw HTML it allows): the
    Legend folds, while HTML from test output, even a folding tag with attributes, is text."""
    results = [
        case("float32", Outcome.FAIL, "<script>alert(1)</script><details open>x"),
        case("float16", Outcome.PASS),
    ]
    table = render.render_markdown(build_table(results))
    html = MarkdownIt("commonmark").enable("table").render(_comment(table=table))
    assert "<details><summary>Legend</summary>" in html and "</details>" in html
    assert "&lt;details>" not in html and "&amp;lt;details" not in html
    assert "<script" not in html and "<details open>" not in html
    assert "&lt;script&gt;" in html or "&amp;lt;script" in html
