"""The result of ``check-math`` for each changed functor (the math checked against torch on
CPU, per dtype, with edge values).

The review flow runs check-math on every changed kernels file
(:func:`pipeline.flows.review.changed_functors_math`) and hands the verdicts in as
``Review.math``: functor name -> :class:`MathResult`. None means check-math could not run
here (no compiler, no torch); the flow says so in the report's notes, and this check finds
nothing rather than passing silently.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.guide.review.base import Finding, Review, Severity

ID = "check-math"
SEVERITY = Severity.ERROR
TITLE = "check-math agrees with torch for each changed functor"


def check(review: Review) -> Iterator[Finding]:
    if review.math is None:
        return
    for changed in review.changed_functors():
        fn = changed.functor
        result = review.math.get(fn.name)
        if result is None:
            yield Finding(
                fn.span.path, fn.span.start, ID, Severity.WARNING,
                f"{fn.name}_functor has no check-math result: run mps-pipeline check-math",
            )  # fmt: skip
        elif not result.ok:
            yield Finding(
                fn.span.path, fn.span.start, ID, SEVERITY,
                f"{fn.name}_functor disagrees with torch on CPU: {result.reason}",
            )  # fmt: skip
