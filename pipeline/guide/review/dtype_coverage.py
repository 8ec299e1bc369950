"""Dtype coverage of a changed kernel: the dtypes the operator's OpInfos test on MPS that
no registration covers, and the xfail entries left for dtypes the kernel now registers
(the nightly drops them once they pass; a reviewer wants to know they are there)."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.dtypes import COMPLEX, MPS_TEST_DTYPES
from pipeline.guide.review.base import Finding, Review, Severity

ID = "dtype-coverage"
SEVERITY = Severity.WARNING
TITLE = "registered dtypes against the OpInfo's MPS dtypes, and the xfails left"


def check(review: Review) -> Iterator[Finding]:
    for op, (record, path, line) in sorted(review.changed_operators().items()):
        if not record.registrations or not record.opinfos:
            continue
        registered = set(record.registered_dtypes)
        # complex only where SUPPORTED_COMPLEX_OPS lists the op (else always xfailed)
        tested = [
            d for d in record.opinfo_dtypes
            if d in MPS_TEST_DTYPES and (d not in COMPLEX or record.complex_supported)
        ]  # fmt: skip
        missing = [d for d in tested if d not in registered]
        if missing:
            yield Finding(
                path, line, ID, SEVERITY,
                f"{op}: the OpInfo tests {', '.join(missing)} on MPS, but no kernel is "
                "registered for them (they fall back or fail)",
            )  # fmt: skip
        for entry in record.xfails:
            left = sorted(registered if entry.dtypes is None else registered & set(entry.dtypes))
            if left:
                yield Finding(
                    entry.span.path, entry.span.start, ID, Severity.INFO,
                    f"{entry.key} stays in {entry.list} for {', '.join(left)}, which the "
                    "kernel registers now: the targeted tests tell whether it can go",
                )  # fmt: skip
