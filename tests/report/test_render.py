"""pipeline/report/render.py: terminal colours, GitHub Markdown (escaped), JSON."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from pipeline.report.render import escape_markdown, render_json, render_markdown, render_terminal
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import build_table, merge_runs

UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
MENTION = re.compile(r"@[A-Za-z0-9]")
ISSUE_REF = re.compile(r"#[0-9]")


def case(
    stem: str,
    dtype: str,
    outcome: Outcome,
    *,
    kind: str = "output_match",
    flaky: bool = False,
    message: str = "",
) -> CaseResult:
    return CaseResult(
        "test_mps.TestConsistencyMPS", f"test_{kind}_{stem}_mps_{dtype}", kind, stem, dtype,
        outcome, flaky, 1, message, 0.1, "r.xml",
    )  # fmt: skip


HOSTILE = "@user <script>alert(1)</script> | fixes #123 & __init__ `x` [a](b)\nsecond line"


def sample_table():
    return build_table(
        [
            case("atan2", "float32", Outcome.PASS),
            case("atan2", "float16", Outcome.XPASS, message="Failed: Unexpected success"),
            case("atan2", "int8", Outcome.XFAIL),
            case("atan2", "bool", Outcome.SKIP),
            case("hypot", "float32", Outcome.FAIL, message=HOSTILE),
            case("hypot", "float16", Outcome.PASS, flaky=True),
            case("hypot", "int8", Outcome.ERROR, message="failed on setup"),
        ],
        {"hypot": "hypot <b>|</b> @team"},
    )


# --- escaping --------------------------------------------------------------------------------


def test_escape_markdown_defuses_html_mentions_and_pipes() -> None:
    out = escape_markdown("@user <script>alert(1)</script>")
    assert out == "@\u200duser &lt;script&gt;alert(1)&lt;/script&gt;"
    assert "<" not in out and ">" not in out
    assert not MENTION.search(out)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a|b", r"a\|b"),
        ("fixes #123", "fixes #\u200d123"),
        ("AT&T", "AT&amp;T"),
        ("__rsub__", r"\_\_rsub\_\_"),
        ("*bold* `code` [link](x) ~strike~", r"\*bold\* \`code\` \[link\](x) \~strike\~"),
        ("one\ntwo\r\n  three", "one two three"),
        (r"back\slash", r"back\\slash"),
        ("&#64;user", "&amp;#\u200d64;user"),  # an entity cannot smuggle a mention back in
        ("mail me@example.com", "mail me@\u200dexample.com"),
        ("plain text", "plain text"),
    ],
)
def test_escape_markdown_cases(text: str, expected: str) -> None:
    assert escape_markdown(text) == expected


# --- markdown --------------------------------------------------------------------------------


def table_lines(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_markdown_table_shape_and_cells() -> None:
    md = render_markdown(sample_table())
    lines = table_lines(md)
    assert lines[0] == "| Operator | float32 | float16 | int8 | bool |"
    assert lines[1] == "| --- | :-: | :-: | :-: | :-: |"
    # every row has exactly the header's columns, whatever the names and messages hold
    assert {len(UNESCAPED_PIPE.findall(line)) for line in lines} == {6}
    assert lines[2] == "| atan2 | ✓ | **XPASS** | xfail | skip |"
    assert lines[3].endswith("| ✗ fail | ✓\\~ | ✗ error |  |")
    assert "pass 2 · XPASS 1 · FAIL 1 · ERROR 1 · xfail 1 · skip 1 · flaky 1" in md
    assert "Test" not in lines[0]  # one test kind: no kind column


def test_markdown_escapes_everything_from_test_output() -> None:
    md = render_markdown(sample_table())
    assert "<script" not in md and "<b>" not in md
    assert not MENTION.search(md)
    assert not ISSUE_REF.search(md)
    assert "&lt;script&gt;" in md
    (message,) = [line for line in md.splitlines() if "alert" in line]
    assert message.startswith("- hypot &lt;b&gt;\\|&lt;/b&gt; @\u200dteam float32: FAIL: ")
    assert "second line" in message  # one line, not two
    # pytest's "Failed: Unexpected success" read as a failure: an xpass says what it means
    assert "- atan2 float16: XPASS: passes now: its xfail entry can go" in md
    assert "Unexpected success" not in md


def test_markdown_messages_are_capped() -> None:
    cases = [case(f"op{i}", "float32", Outcome.FAIL, message="x" * 500) for i in range(5)]
    md = render_markdown(build_table(cases), max_messages=3)
    messages = [line for line in md.splitlines() if line.startswith("- op")]
    assert len(messages) == 3
    assert all(len(line) < 260 and line.endswith("…") for line in messages)
    assert "- …and 2 more" in md
    assert "Messages" not in render_markdown(build_table(cases), max_messages=0)


def test_markdown_several_runners_and_kinds() -> None:
    table = merge_runs(
        {
            "macos-m1-14": [
                case("abs", "float16", Outcome.XFAIL),
                case("abs", "float16", Outcome.XPASS, kind="output_grad_match"),
            ],
            "macos-m2-15": [
                case("abs", "float16", Outcome.XPASS),
                case("abs", "float16", Outcome.XPASS, kind="output_grad_match"),
            ],
        }
    )
    md = render_markdown(table)
    lines = table_lines(md)
    assert lines[0] == "| Operator | Test | float16 |"
    assert lines[2] == "| abs | output | xX |"  # one glyph per runner: they disagree
    assert lines[3] == "| abs | grad | **XPASS** |"
    assert "one glyph per runner (macos-m1-14, macos-m2-15)" in md


def test_markdown_empty() -> None:
    assert render_markdown(build_table([])) == "_No consistency test results._\n"


# --- terminal --------------------------------------------------------------------------------


def render(table) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="standard", width=160)
    render_terminal(table, console)
    return out.getvalue()


def test_terminal_colours() -> None:
    text = render(sample_table())

    def styled(code: str, label: str) -> bool:
        # rich pads centred cells inside the style
        return re.search(re.escape(f"\x1b[{code}m") + r" *" + re.escape(label), text) is not None

    assert styled("1;32", "XPASS")  # bold green
    assert styled("32", "pass")  # green
    assert styled("31", "FAIL")  # red
    assert styled("1;31", "ERROR")
    assert styled("2", "xfail")  # dim
    assert styled("2", "skip")
    assert styled("33", "~")  # the flaky marker
    assert "MPS consistency results" in text


def test_terminal_shows_names_literally() -> None:
    """Names are data: rich markup in them is not interpreted."""
    table = build_table([case("abs", "int8", Outcome.PASS)], {"abs": "abs [bold]x[/bold]"})
    assert "abs [bold]x[/bold]" in render(table)


def test_terminal_plain_layout() -> None:
    console = Console(record=True, width=160, file=io.StringIO())
    table = merge_runs(
        {
            "macos-m1-14": [
                case("abs", "float16", Outcome.XFAIL),
                case("abs", "int8", Outcome.PASS),
            ],
            "macos-m2-15": [case("abs", "float16", Outcome.XPASS)],
        }
    )
    render_terminal(table, console)
    plain = console.export_text()
    row = next(line for line in plain.splitlines() if "abs" in line)
    assert "xX" in row and "pass" in row
    assert "runners: macos-m1-14, macos-m2-15" in plain
    assert "one glyph per runner" in plain


def test_terminal_empty() -> None:
    assert "no consistency test results" in render(build_table([]))


# --- json ------------------------------------------------------------------------------------


def test_json_round_trips() -> None:
    table = sample_table()
    text = render_json(table)
    assert json.loads(text) == table.to_dict()
    assert "✓" not in text  # data, not glyphs
    assert json.loads(text)["rows"][1]["name"] == "hypot <b>|</b> @team"  # raw in JSON
