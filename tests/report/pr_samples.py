"""A PR's results as a targeted run of atan2 writes them, for tests that need no run."""

from __future__ import annotations

from pipeline.impact.model import AffectedOp, Impact
from pipeline.report.pr import PrResults
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import build_table

INTS = ("int64", "int32", "int16", "int8", "uint8", "bool")


def case(dtype: str, outcome: Outcome, message: str = "") -> CaseResult:
    name = f"test_output_match_atan2_mps_{dtype}"
    return CaseResult("test_mps.TestConsistencyMPS", name, "output_match", "atan2", dtype,
                      outcome, False, 1, message, 0.1, "junit.xml")  # fmt: skip


def sample(**changes) -> PrResults:
    """Results as a targeted run of atan2 writes them, without running anything."""
    fields = {
        "pr": 7,
        "base": "a" * 40,
        "head": "b" * 40,
        "impact": Impact(
            operators=(AffectedOp("atan2", ("BinaryKernel.mm:41 stub changed",)),),
            full_sweep=False,
            full_sweep_reasons=(),
            build_needed=True,
            ignored=(),
            test_ids=(),
            selected=9,
            total=136,
        ),
        "build_needed": True,
        "build_ok": True,
        "build_error": None,
        "test_error": None,
        "selectors": ("test_output_match_atan2_mps_",),
        "run": "20250101T000000Z-pr-7",
        "table": build_table(
            [case(d, Outcome.PASS) for d in ("float32", "float16", "bfloat16")]
            + [case(d, Outcome.XPASS, "Unexpected success @someone") for d in INTS],
            names={"atan2": "atan2"},
        ),
        "xfail_decisions": (),
        "xfail_diff": "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1 @@\n a\n-b\n",
    }
    return PrResults(**(fields | changes))
