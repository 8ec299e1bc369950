"""docsgen's cut of a run for the README: what it keeps and what it cuts (real runs of it
are tests/test_first_hour.py's; this is the rule, on the lines those runs print)."""

from __future__ import annotations

from docsgen.__main__ import CUT, _short

RUN = """\
.  audit:atan2
atan2  workflow: migrate  overloads: 3 (1 to change)  consistency tests: 9
 ✗ MPS dispatch on every overload (shared kernel, not a separate *_mps row)
     atan2.out: MPS -> atan2_out_mps (separate MPS row)  aten/src/ATen/native/native_functions.yaml:329
3/8 checks pass
.  check_math:atan2
check-math: 1 functor(s) (0 from the cache), 9 dtype(s): 9 ok
compiler: g++ (Debian 12.2.0-14+deb12u1) 12.2.0; headers: the torch wheel's /venv/torch/include/c10/metal
dtype    ┃ out      ┃ torch    ┃ checked ┃ matched ┃ mismatched ┃ verdict
float32  │ float32  │ float32  │ 3172    │ 3172    │ 0          │ ok
.  drop_xfails:atan2
xfail UNIMPLEMENTED_XFAILLIST['atan2']: delete — int64: xpass on local
--- a/torch/testing/_internal/common_mps.py
+++ b/torch/testing/_internal/common_mps.py
-            "atan2": [torch.int64],

verified: 9 run in 1.9s (pass 9)
.  summary:atan2
# atan2: migrate_op summary

Every checklist item passes.
verdict: atan2: Every checklist item passes.
summary: /x/summary.md
"""  # noqa: E501


def test_the_long_parts_are_cut_and_the_answers_kept() -> None:
    assert _short(RUN.splitlines()) == [
        ".  audit:atan2",
        "atan2  workflow: migrate  overloads: 3 (1 to change)  consistency tests: 9",
        CUT,
        "3/8 checks pass",
        ".  check_math:atan2",
        "check-math: 1 functor(s) (0 from the cache), 9 dtype(s): 9 ok",
        CUT,
        ".  drop_xfails:atan2",
        "xfail UNIMPLEMENTED_XFAILLIST['atan2']: delete — int64: xpass on local",
        CUT,
        "verified: 9 run in 1.9s (pass 9)",
        ".  summary:atan2",
        CUT,
        "verdict: atan2: Every checklist item passes.",
        "summary: /x/summary.md",
    ]


def test_a_verdict_on_the_sandbox_ends_the_summarys_cut_too() -> None:
    lines = [
        ".  summary:atan2",
        "# atan2: migrate_op summary",
        "verdict (on the bundled sandbox, not a checkout of yours): atan2: Every checklist "
        "item passes.",
        "summary: /x/summary.md",
    ]
    assert _short(lines) == [lines[0], CUT, *lines[2:]]
