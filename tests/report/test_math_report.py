"""check-math's table: Markdown for the migrate summary and the PR comment, the terminal."""

from __future__ import annotations

import io

from rich.console import Console

from pipeline.report.math import NOT_COVERED, render_markdown, render_terminal
from pipeline.report.pr_comment import build_comment
from pipeline.results.math import Counterexample, DtypeCheck, FunctorCheck, Kind, MathReport

REPORT = MathReport(
    (
        FunctorCheck(
            "maximum",
            "aten/src/ATen/native/mps/kernels/BinaryKernel.metal",
            "maximum",
            (
                DtypeCheck("maximum", "float32", "float32", "float32", checked=10, matched=10),
                DtypeCheck(
                    "maximum",
                    "float16",
                    "float16",
                    "float16",
                    checked=10,
                    matched=8,
                    special=2,
                    counterexamples=(Counterexample(("nan", "1.0"), "1.0", "nan", Kind.SPECIAL),),
                ),
            ),
        ),
        FunctorCheck("oops", "k.metal", None, compile_error="k.metal:15: 'x' was not declared"),
    ),
    compiler="g++ 12",
    headers="the torch wheel",
)


def test_markdown_table() -> None:
    text = render_markdown(REPORT)
    assert "| `maximum` | float32 | 10 | 10 | 0 | ok |" in text
    assert "| `maximum` | float16 | 10 | 8 | 2 (2 nan/inf) | mismatch |" in text
    assert "`(nan, 1.0)`: kernel `1.0`, torch `nan`" in text
    assert "- `oops` does not compile: `k.metal:15: 'x' was not declared`" in text
    assert NOT_COVERED in text


def test_pr_comment_carries_the_table() -> None:
    body = build_comment(
        marker="<!-- m -->", title="t", build_ok=True, math=render_markdown(REPORT)
    )
    assert "#### Functor math on the host" in body
    assert "| `maximum` | float16 |" in body and "Not covered:" in body


def test_terminal() -> None:
    out = io.StringIO()
    render_terminal(REPORT, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "check-math: 2 functor(s) (0 from the cache), 2 dtype(s): 1 ok, 1 mismatch" in text
    assert "float16: (nan, 1.0): kernel 1.0, torch nan [nan/inf]" in text
    assert "oops (k.metal) vs no reference: does not compile: k.metal:15" in text
