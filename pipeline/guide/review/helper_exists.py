"""A helper function the change writes anew that ``c10/metal/*.h`` already provides: the
same name, or the same number of parameters and the same body shape (a copy with other
names). Kernels should call the shared helper, which is tested and fixed in one place."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.guide.review.base import Finding, Review, Severity
from pipeline.tree.metal_functions import by_name, functions

ID = "helper-exists"
SEVERITY = Severity.WARNING
TITLE = "a helper c10/metal already has"
# bodies shorter than this many tokens (`return a;`) match too much to mean a copy
MIN_SHAPE = 12


def check(review: Review) -> Iterator[Finding]:
    if not review.helpers:
        return
    names = by_name(review.helpers)
    shapes = {(h.params, h.shape): h for h in review.helpers if len(h.shape) >= MIN_SHAPE}
    for change in review.metal_changes():
        assert change.new_text is not None
        for fn in functions(change.new_text, change.path):
            if not change.touches(fn.span.start, fn.span.end):
                continue
            same = names.get(fn.name)
            if same:
                helper = same[0]
                how = "a function of that name"
            elif (fn.params, fn.shape) in shapes:
                helper = shapes[(fn.params, fn.shape)]
                how = "the same signature and body shape"
            else:
                continue
            yield Finding(
                change.path, fn.span.start, ID, SEVERITY,
                f"{fn.name}() is new, but c10/metal has {how}: "
                f"{helper.qualified} ({helper.span}); call it instead",
            )  # fmt: skip
