"""Synthetic pytest JUnit reports, for benchmarks (``nox -s bench``) and tests only.

Nothing in the pipeline reads these: they exist so the JUnit ingestion can be timed and
exercised at the size of a full nightly sweep without a Mac. The mix of outcomes and both
rerun shapes follow what pytest and PyTorch's CI really write (see FORMATS.md).
"""

from __future__ import annotations

from pipeline.dtypes import MPS_TEST_DTYPES
from pipeline.testid import TestId

_CLASS = "test_mps.TestConsistencyMPS"

# One in every N cases gets the outcome: deterministic so a benchmark is repeatable.
_FAIL_EVERY = 97
_XFAIL_EVERY = 13
_XPASS_EVERY = 89
_SKIP_EVERY = 31
_ERROR_EVERY = 211
_RERUN_CHILDREN_EVERY = 151
_RERUN_REPEAT_EVERY = 173


def _case_name(i: int) -> str:
    dtype = MPS_TEST_DTYPES[i % len(MPS_TEST_DTYPES)]
    op = i // len(MPS_TEST_DTYPES)
    kind = "output_grad_match" if op % 5 == 4 else "output_match"
    return str(TestId(kind, f"op{op}_variant-{op % 3}", dtype))


def _case_xml(i: int) -> str:
    name = _case_name(i)
    head = f'<testcase classname="{_CLASS}" name="{name}" time="0.{i % 1000:03d}"'
    if i % _ERROR_EVERY == 0:
        return (
            f'{head}><error message="failed on setup with &quot;RuntimeError: MPS'
            f' backend &lt;lost&gt;&quot;">trace</error></testcase>'
        )
    if i % _FAIL_EVERY == 0:
        return (
            f'{head}><failure message="AssertionError: Tensor-likes are not close!">'
            "Mismatched elements: 3 / 12 (25.0%)</failure></testcase>"
        )
    if i % _XPASS_EVERY == 0:
        return (
            f'{head}><failure message="Failed: Unexpected success">'
            "Unexpected success</failure></testcase>"
        )
    if i % _XFAIL_EVERY == 0:
        return f'{head}><skipped type="pytest.xfail" message="" /></testcase>'
    if i % _SKIP_EVERY == 0:
        return (
            f'{head}><skipped type="pytest.skip" message="Skipped!">'
            "test_mps.py:1: Skipped!</skipped></testcase>"
        )
    if i % _RERUN_CHILDREN_EVERY == 0:
        # PyTorch CI's shape: a <rerun> child per failed attempt, the final attempt passed.
        return f'{head}><rerun message="AssertionError: flaky">trace</rerun></testcase>'
    if i % _RERUN_REPEAT_EVERY == 0:
        # pytest-rerunfailures >= 16.6.1: an empty <testcase> per rerun attempt, then the result.
        return f"{head} />{head} />"
    return f"{head} />"


def case_name(i: int) -> str:
    """The name of the ``i``-th case of :func:`make_report` (for histories that match it)."""
    return _case_name(i)


def make_report(n_cases: int, *, start: int = 0, suite_time: float = 1.0) -> str:
    """Return a well-formed pytest-style JUnit document with ``n_cases`` distinct test ids.

    For benchmarks and tests only. Cases are consistency tests
    (``TestConsistencyMPS.test_output_match_op<N>_variant-<k>_mps_<dtype>``, every fifth
    operator an ``output_grad_match`` one) with a fixed, repeatable mix of pass, fail,
    error, xfail, xpass and skip, plus flaky cases in both rerun shapes.

    ``start`` numbers the first case (a shard of a larger sweep: cases ``start`` to
    ``start + n_cases - 1``); ``suite_time`` is the testsuite's ``time``, the wall time
    pytest writes there.
    """
    body = "".join(_case_xml(i) for i in range(start, start + n_cases))
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="pytest tests">'
        f'<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="{n_cases}"'
        f' time="{suite_time:.3f}" hostname="synthetic">{body}</testsuite></testsuites>\n'
    )
