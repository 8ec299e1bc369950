"""A PR's targeted run on disk: where results.json lives, and the checks that read it back.

``results.json`` is written on the self-hosted Mac, which ran the PR's code, and read in
another job that holds a write token (``pr-report --post-from``): every field is checked
before use, with a message naming where in the file it went wrong. The model that is
written and read is :class:`pipeline.report.pr.PrResults`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import read
from pipeline.results import baseline as baselines
from pipeline.results.math import SCHEMA as MATH_SCHEMA
from pipeline.results.math import (
    Agreement,
    Counterexample,
    DtypeCheck,
    FunctorCheck,
    MathReport,
    MathSkipped,
)
from pipeline.results.table import DtypeTable

SCHEMA = 1
# GitHub keeps this much of a commit status description (the comment says the rest)
STATUS_DESCRIPTION_MAX = 140
RESULTS_JSON = "results.json"
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def results_folder(settings: Settings, pr: int) -> Path:
    """``<state_dir>/results/pr-<N>/``: results.json and comment.md of PR ``pr``."""
    return settings.results_dir / f"pr-{pr}"


def read_results_json(folder: Path, pr: int) -> Any:
    """The parsed results.json of PR ``pr`` in ``folder`` (or ``folder/pr-<N>/``: a whole
    results directory); not checked yet (``PrResults.from_json`` does)."""
    candidates = (folder / RESULTS_JSON, folder / f"pr-{pr}" / RESULTS_JSON)
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise PipelineError(
            f"no {RESULTS_JSON} in {folder} or {folder / f'pr-{pr}'}: pass the folder that "
            "`pr-report --results-only` wrote (<state_dir>/results/)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{path} is not valid JSON: {exc}") from None
    return data


def commit_id(value: str, where: str) -> str:
    """``value``, read at ``where`` of results.json, checked to be a full commit id (SHA-1 or
    SHA-256)."""
    if not _SHA.fullmatch(value):
        raise DocumentError(RESULTS_JSON, where, "is not a full commit id")
    return value


def baseline_from(data: object, table: DtypeTable | None) -> baselines.Baseline:
    """results.json's ``baseline`` read back, checked against ``table``: it must classify
    exactly the table's failing tests, and only as new without a nightly. A results.json
    without one (null: an earlier version of schema 1) counts every failure new."""
    if data is None:
        return baselines.without_history(table)
    found = read(baselines.Baseline, data, RESULTS_JSON, "baseline")
    if found.night is not None and found.night.commit:
        commit_id(found.night.commit, "baseline.nightly.commit")
    for i, case in enumerate(found.failures):
        where = f"baseline.cases[{i}].class"
        if case.klass not in baselines.CLASSES:
            known = ", ".join(baselines.CLASSES)
            raise DocumentError(RESULTS_JSON, where, f"is {case.klass!r}, not one of {known}")
        if found.night is None and case.klass != baselines.NEW:
            problem = f"is {case.klass!r} without a nightly to compare with"
            raise DocumentError(RESULTS_JSON, where, problem)
    got = [((c.kind, c.stem, c.dtype), c.outcome) for c in found.failures]
    if got != baselines.failing(table):
        problem = "are not the failing tests of the table"
        raise DocumentError(RESULTS_JSON, "baseline.cases", problem)
    return found


@dataclass(frozen=True)
class _SkippedDoc:
    """check-math's document when it did not run."""

    schema: int
    skipped: str


@dataclass(frozen=True)
class DtypeDoc:
    """One dtype of a functor in check-math's ``--json`` (:func:`pipeline.report.math.to_json`
    writes it, :func:`math_from` reads it): a :class:`DtypeCheck`, with its status and
    mismatched count for readers."""

    dtype: str
    output_dtype: str
    torch_dtype: str | None
    status: Agreement
    checked: int
    matched: int
    mismatched: int
    precision: int
    nan_inf: int
    value: int
    crashes: int
    subnormal: int
    refused: int
    edge_inputs: int
    sample_inputs: int
    upcast: bool
    findings: tuple[str, ...]
    counterexamples: tuple[Counterexample, ...]
    no_reference: str | None
    known: str | None

    @classmethod
    def of(cls, d: DtypeCheck) -> DtypeDoc:
        return cls(
            d.dtype, d.output, d.torch_dtype, d.status, d.checked, d.matched, d.mismatched,
            d.precision, d.special, d.exact, d.crashes, d.subnormal, d.refused, d.edge,
            d.samples, d.upcast, d.findings, d.counterexamples, d.no_reference, d.known,
        )  # fmt: skip

    def check(self, kernel: str, where: str) -> DtypeCheck:
        """The check, whose status and mismatched count must be what the document says."""
        check = DtypeCheck(
            kernel, self.dtype, self.output_dtype, self.torch_dtype, checked=self.checked,
            matched=self.matched, precision=self.precision, special=self.nan_inf,
            exact=self.value, crashes=self.crashes, subnormal=self.subnormal,
            refused=self.refused, edge=self.edge_inputs, samples=self.sample_inputs,
            upcast=self.upcast, counterexamples=self.counterexamples, findings=self.findings,
            no_reference=self.no_reference, known=self.known,
        )  # fmt: skip
        if self.status is not check.status:
            problem = f"{str(self.status)!r} is not what its counts give ({check.status})"
            raise DocumentError(RESULTS_JSON, f"{where}.status", problem)
        if self.mismatched != check.mismatched:
            problem = f"is not what its counts give ({check.mismatched})"
            raise DocumentError(RESULTS_JSON, f"{where}.mismatched", problem)
        return check


@dataclass(frozen=True)
class FunctorDoc:
    kernel: str
    file: str
    reference: str | None
    compile_error: str | None
    failure: str | None
    not_modelled: tuple[str, ...]
    set_aside: tuple[str, ...]
    built_with: str | None
    cached: bool
    skipped_dtypes: tuple[str, ...]
    dtypes: tuple[DtypeDoc, ...]

    @classmethod
    def of(cls, f: FunctorCheck) -> FunctorDoc:
        return cls(
            f.kernel, f.file, f.reference, f.compile_error, f.failure, f.not_modelled,
            f.set_aside, f.built_with, f.cached, f.skipped, tuple(map(DtypeDoc.of, f.dtypes)),
        )  # fmt: skip

    def check(self, where: str) -> FunctorCheck:
        return FunctorCheck(
            kernel=self.kernel,
            file=self.file,
            reference=self.reference,
            dtypes=tuple(
                d.check(self.kernel, f"{where}.dtypes[{i}]") for i, d in enumerate(self.dtypes)
            ),
            compile_error=self.compile_error,
            failure=self.failure,
            not_modelled=self.not_modelled,
            set_aside=self.set_aside,
            built_with=self.built_with,
            skipped=self.skipped_dtypes,
            cached=self.cached,
        )


@dataclass(frozen=True)
class MathDoc:
    """check-math's ``--json`` document; ``ok``, ``counts`` and ``not_covered`` are for
    readers, made of the rest."""

    schema: int
    ok: bool
    compiler: str
    headers: str
    counts: dict[str, int]
    functors: tuple[FunctorDoc, ...]
    not_covered: str
    warnings: tuple[str, ...]

    @classmethod
    def of(cls, report: MathReport, not_covered: str) -> MathDoc:
        return cls(
            MATH_SCHEMA, not report.failed, report.compiler, report.headers, report.counts(),
            tuple(map(FunctorDoc.of, report.functors)), not_covered, report.warnings,
        )  # fmt: skip


def math_from(data: object, where: str) -> MathReport | MathSkipped:
    """check-math's report back from its ``--json`` document (as results.json's ``math``,
    at ``where``), every key checked; a dtype's ``status`` must be the one its counts give.
    A ``{"schema", "skipped"}`` document gives why check-math did not run."""
    if isinstance(data, dict) and "skipped" in data:
        skipped = read(_SkippedDoc, data, RESULTS_JSON, where)
        _math_schema(skipped.schema, where)
        return MathSkipped(skipped.skipped)
    doc = read(MathDoc, data, RESULTS_JSON, where)
    _math_schema(doc.schema, where)
    functors = tuple(f.check(f"{where}.functors[{i}]") for i, f in enumerate(doc.functors))
    return MathReport(functors, compiler=doc.compiler, headers=doc.headers, warnings=doc.warnings)


def _math_schema(schema: int, where: str) -> None:
    if schema != MATH_SCHEMA:
        raise DocumentError(RESULTS_JSON, f"{where}.schema", f"is {schema}, not {MATH_SCHEMA}")
