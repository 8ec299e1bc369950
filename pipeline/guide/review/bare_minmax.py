"""Unqualified ``min``/``max``/``fmin``/``fmax`` in a functor (pytorch#177747): with ``using
namespace metal`` they are ``metal::min``/``max``, which return the other operand for a NaN,
where torch propagates it; ``c10::metal::min``/``max`` do."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.guide.review.base import Finding, Review, Severity, lines_matching

ID = "bare-minmax"
SEVERITY = Severity.ERROR
TITLE = "min/max without c10::metal:: (NaN is not propagated)"
# a call of min/max/fmin/fmax with what qualifies it: none, metal::, or something else
_CALL = re.compile(r"((?:::)?(?:[\w>]+::)*)\b(fmin|fmax|min|max)\s*\(")
_MEMBER = re.compile(r"(?:\.|->)\s*\Z")


def check(review: Review) -> Iterator[Finding]:
    for changed in review.changed_functors():
        fn = changed.functor
        lines = changed.code.split("\n")
        for line, match in lines_matching(_CALL, changed.code, fn.span.start):
            qualifier = match.group(1)
            before = lines[line - fn.span.start][: match.start()]
            if _MEMBER.search(before) or qualifier not in ("", "::", "metal::", "::metal::"):
                continue  # c10::metal::max, x.max(), numeric_limits<T>::max()
            name = match.group(2)
            if name.startswith("f"):  # NaN-ignoring on purpose only in torch.fmin/fmax
                why = f"ignores a NaN operand; write c10::metal::{name[1:]} unless " + (
                    f"torch.{name}'s NaN-ignoring result is meant"
                )
            else:
                why = f"does not propagate NaN; write c10::metal::{name}"
            yield Finding(
                fn.span.path, line, ID, SEVERITY,
                f"{fn.name}_functor calls {qualifier}{name}(), which is metal::{name}: {why}",
            )  # fmt: skip
