"""Review checks: what a maintainer of the MPS backend checks by hand in a kernel PR
(pytorch#187827, #177747), as domain rules over a diff and the tree index.

One module per check, each with the same ``check(review) -> Iterable[Finding]``, its stable
``ID``, ``SEVERITY`` and ``TITLE``; :data:`CHECKS` is the one registry (config's
``review.disable`` names its ids).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

from pipeline.errors import ConfigError, DocumentError
from pipeline.fields import read
from pipeline.guide.review import (
    bare_minmax,
    check_math,
    dtype_coverage,
    fast_math,
    helper_exists,
    mpsgraph_left,
)
from pipeline.guide.review.base import Finding, Review, Severity

Check = Callable[[Review], Iterable[Finding]]
_MODULES: tuple[ModuleType, ...] = (
    mpsgraph_left, fast_math, bare_minmax, helper_exists, dtype_coverage, check_math,
)  # fmt: skip
CHECKS: dict[str, ModuleType] = {m.ID: m for m in _MODULES}
SCHEMA_VERSION = 1  # of the review --json document

__all__ = [
    "CHECKS", "Finding", "Review", "ReviewDocument", "Severity", "enabled", "run_checks",
    "to_json",
]  # fmt: skip


def enabled(disable: Sequence[str]) -> tuple[str, ...]:
    """The check ids left once ``disable`` (config ``review.disable``) is taken out."""
    unknown = [c for c in disable if c not in CHECKS]
    if unknown:
        raise ConfigError(
            f"config key 'review.disable': unknown review check {', '.join(unknown)}; "
            f"the checks are {', '.join(CHECKS)}"
        )
    return tuple(c for c in CHECKS if c not in disable)


def run_checks(review: Review, ids: Iterable[str]) -> tuple[Finding, ...]:
    """Every finding of the checks ``ids``, by file and line."""
    found = [f for cid in ids for f in CHECKS[cid].check(review)]
    return tuple(sorted(set(found)))


def to_json(findings: Sequence[Finding], ran: Sequence[str], notes: Sequence[str] = ()) -> dict:
    """The ``review --json`` document (docs/machine-output.md, "review --json")."""
    return {
        "schema": SCHEMA_VERSION,
        "checks": [
            {
                "id": c,
                "severity": CHECKS[c].SEVERITY.value,
                "title": CHECKS[c].TITLE,
                "ran": c in ran,
            }
            for c in CHECKS
        ],  # fmt: skip
        "findings": [f.to_dict() for f in findings],
        "notes": list(notes),
    }


@dataclass(frozen=True)
class ReviewDocument:
    """What the review checks found on a diff: ``review --json``'s document as a value
    (results.json's ``review``)."""

    findings: tuple[Finding, ...]
    ran: tuple[str, ...]  # the checks that ran
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return to_json(self.findings, self.ran, self.notes)

    @classmethod
    def from_json(cls, data: object, doc: str, where: str) -> ReviewDocument:
        """:meth:`to_json` read back, every key checked (it comes from another job)."""
        found = read(_Written, data, doc, where)
        if found.schema not in (None, SCHEMA_VERSION):
            raise DocumentError(doc, f"{where}.schema", f"is not {SCHEMA_VERSION}")
        return cls(found.findings, tuple(c.id for c in found.checks if c.ran), found.notes)


@dataclass(frozen=True)
class _WrittenCheck:
    id: str
    severity: str  # for readers, as are the title
    title: str
    ran: bool


@dataclass(frozen=True)
class _Written:
    """:func:`to_json`'s document as written (``schema`` left out inside results.json)."""

    checks: tuple[_WrittenCheck, ...]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]
    schema: int | None = None
