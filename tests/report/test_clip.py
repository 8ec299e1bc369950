"""Caps on build and test output: each line, and all a command prints of it."""

from __future__ import annotations

from pipeline.report.clip import MAX_LINE_CHARS, MAX_LOG_CHARS, LogCap, clip_line, clip_lines


def test_clip_line_keeps_the_start_and_says_how_much_is_left_out():
    assert clip_line("x" * MAX_LINE_CHARS) == "x" * MAX_LINE_CHARS
    long = "E   RuntimeError: " + "y" * 200_000
    clipped = clip_line(long)
    assert clipped == long[:MAX_LINE_CHARS] + f"… [{len(long) - MAX_LINE_CHARS} more characters]"
    assert clip_line("abcdef", 4) == "abcd… [2 more characters]"


def test_clip_lines_cuts_each_line_and_keeps_the_line_breaks():
    text = "short\n" + "a" * 10 + "\r\n\nend\n"
    assert clip_lines(text, 5) == "short\naaaaa… [6 more characters]\n\nend\n"
    assert clip_lines("tiny\n", 5) == "tiny\n"


def test_log_cap_caps_the_total_then_prints_nothing():
    cap = LogCap(total=25, line=10)
    assert cap("0123456789") == "0123456789"
    second = "abc\n" + "z" * 30  # lines capped first: 36 characters, 15 of them left
    capped = "abc\nzzzzzzzzzz… [20 more characters]"
    assert cap(second) == capped[:15] + (
        f"… [{len(capped) - 15} more characters; this run prints at most 25 characters of "
        "build and test output, the rest is in its files]"
    )
    assert cap("more") is None and cap("") is None


def test_the_defaults():
    assert (MAX_LINE_CHARS, MAX_LOG_CHARS) == (2_000, 200_000)
    cap = LogCap()
    line = "w" * 200_000
    shown = [cap(line) for _ in range(200)]
    printed = [text for text in shown if text is not None]
    assert len(printed) < 110 and sum(map(len, printed)) < MAX_LOG_CHARS + 200
    assert all(len(text) < MAX_LINE_CHARS + 200 for text in printed)
