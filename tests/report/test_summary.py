"""pipeline/report/summary.py: summary.md on a terminal, rendered, its verdict said once."""

from __future__ import annotations

from pathlib import Path

from pipeline.report.console import terminal
from pipeline.report.doit_reporter import verdict
from pipeline.report.summary import closing, show

NEXT = (
    "Next: review `git -C /tmp/demo diff`, run `python test/test_mps.py -k "
    "test_output_match_atan2` on a Mac, and open the PR with the `ciflow/mps` label."
)
# summary.md as the summary stage writes it: a heading, a list, check-math's Markdown, a
# failing test's message quoting `<lambda>`, the verdict and the next step last
SUMMARY = f"""# atan2: migrate_op summary

- edited aten/src/ATen/native/native_functions.yaml: fold MPS into shared dispatch of atan2.out
- tests: pass 3, xpass 6

Functor math on the host (check-math):

**check-math: 1 functor(s) (0 from the cache), 9 dtype(s): 9 ok**

_compiler: g++ 12.2.0; headers: the torch wheel's c10/metal_

| functor | dtype | checked | matched | mismatched | verdict | first counterexamples |
| --- | --- | ---: | ---: | --- | --- | --- |
| `atan2` | float32 | 3172 | 3172 | 0 | ok |  |
| `atan2` | int64 | 697 | 697 | 0 | ok |  |

Failing tests (1):
- test_output_match_atan2_mps_int8 [fail] TypeError: <lambda>() takes 1 argument

Every checklist item passes.
{NEXT}
"""


def test_closing_is_the_last_paragraph_as_one_line():
    body, last = closing(SUMMARY)
    assert last == f"Every checklist item passes. {NEXT}"
    assert body.endswith("takes 1 argument") and "Every checklist" not in body
    assert closing("one paragraph\nonly\n") == ("", "one paragraph only")
    assert closing("\n\n") == ("", None)


def test_the_summary_is_printed_rendered_and_the_next_step_once(capsys, tmp_path: Path):
    show(SUMMARY, terminal())  # on a pipe, as a CI log or a test captures it
    (tmp_path / "summary.md").write_text(SUMMARY)
    said = verdict(tmp_path / "summary.md")  # the run's last line, from the doit reporter
    printed = capsys.readouterr().out
    # rendered: no Markdown marks left
    for mark in ("# atan2", "**", "_compiler", "| --- |", "| `atan2` |", "`git"):
        assert mark not in printed, mark
    lines = [line.strip() for line in printed.splitlines()]
    assert "atan2: migrate_op summary" in lines
    assert "compiler: g++ 12.2.0; headers: the torch wheel's c10/metal" in lines
    assert any(line.split() == ["atan2", "int64", "697", "697", "0", "ok"] for line in lines)
    assert "<lambda>() takes 1 argument" in printed  # a message's text, not HTML to drop
    # the verdict and the next step: in the run's last line only
    assert "Next:" not in printed and "Every checklist item passes" not in printed
    assert said is not None and said.count("Next:") == 1 and said.endswith(NEXT)


def test_a_summary_of_one_paragraph_prints_nothing_but_the_verdict(capsys):
    show("Every checklist item passes.\n", terminal())
    assert capsys.readouterr().out == ""
