"""A PR's run of the Inductor MPS tests: which files ran, what each test did, or why none ran.

The consistency table is per operator and dtype; Inductor's tests are neither, so they are
kept apart: counts per outcome and the tests that failed, read from their JUnit report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypedDict, cast

from pipeline.fields import dump
from pipeline.results.junit import DISPLAY_ORDER, FAILING, CaseResult, Outcome


class InductorJson(TypedDict):
    """results.json's ``inductor``."""

    files: list[str]
    missing: list[str]
    counts: dict[str, int]
    failed: list[str]
    error: str | None
    run: str | None


@dataclass(frozen=True)
class InductorRun:
    """The Inductor MPS test files a PR ran, and their results.

    ``missing`` are selected files the tree does not have (not run, never counted as
    passed); ``error`` says why the files that exist gave no results (None: they did).
    """

    files: tuple[str, ...]  # the files run
    missing: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    failed: tuple[str, ...] = ()  # classname::name of each failing test (fail, error, xpass)
    error: str | None = None
    run: str | None = None  # the run's folder under the results directory

    def __post_init__(self) -> None:
        outcomes = {o.value for o in Outcome}
        for outcome, n in self.counts.items():
            if outcome not in outcomes or n < 0:
                raise ValueError(f"counts {outcome!r}: {n!r} is not an outcome's count")

    @classmethod
    def from_cases(
        cls, files: tuple[str, ...], missing: tuple[str, ...], cases: Iterable[CaseResult], run: str
    ) -> InductorRun:
        cases = tuple(cases)
        tally = Counter(c.outcome for c in cases)
        counts = {o.value: tally[o] for o in DISPLAY_ORDER if tally[o]}
        failed = tuple(f"{c.classname}::{c.name}" for c in cases if c.outcome in FAILING)
        return cls(files, missing, MappingProxyType(counts), failed, None, run)

    @property
    def ok(self) -> bool:
        """Every selected file ran and no test failed."""
        return self.error is None and not self.missing and not self.failed

    def to_dict(self) -> InductorJson:
        return cast(InductorJson, dump(self))
