"""``fast::`` math in a new or changed functor: Metal's fast variants trade accuracy (and
NaN/inf handling) for speed, which the consistency tests then catch as flaky tolerances."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.guide.review.base import Finding, Review, Severity, lines_matching

ID = "fast-math"
SEVERITY = Severity.WARNING
TITLE = "metal::fast:: math in a functor"
_FAST = re.compile(r"(?<![\w:])(?:::)?(?:metal::)?fast::(\w+)")


def check(review: Review) -> Iterator[Finding]:
    for changed in review.changed_functors():
        fn = changed.functor
        for line, match in lines_matching(_FAST, changed.code, fn.span.start):
            yield Finding(
                fn.span.path, line, ID, SEVERITY,
                f"{fn.name}_functor calls {match.group(0)}: fast math loses precision and "
                f"NaN/inf handling; use precise::{match.group(1)} or the c10::metal helper",
            )  # fmt: skip
