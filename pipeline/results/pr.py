"""A PR's targeted run on disk: where results.json lives, and the checks that read it back.

``results.json`` is written on the self-hosted Mac, which ran the PR's code, and read in
another job that holds a write token (``pr-report --post-from``): every field is checked
before use, with a message naming where in the file it went wrong. The model that is
written and read is :class:`pipeline.report.pr.PrResults`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.fields import Fields
from pipeline.results import baseline as baselines
from pipeline.results.junit import Outcome
from pipeline.results.math import SCHEMA as MATH_SCHEMA
from pipeline.results.math import (
    Counterexample,
    DtypeCheck,
    FunctorCheck,
    Kind,
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


def commit_id(f: Fields, key: str, value: str) -> str:
    """``value``, read at ``key`` of ``f``, checked to be a full commit id (SHA-1 or
    SHA-256)."""
    if not _SHA.fullmatch(value):
        raise f.error(key, "is not a full commit id")
    return value


def baseline_from_fields(f: Fields | None, table: DtypeTable | None) -> baselines.Baseline:
    """``baseline`` back from ``Baseline.to_dict()``, checked against ``table``: it must
    classify exactly the table's failing tests, and only as new without a nightly. A
    results.json without one (an earlier version of schema 1) counts every failure new."""
    if f is None:
        return baselines.without_history(table)
    runner = f.pop("runner", str, type(None))
    night = None
    if (nightly := f.obj_or_none("nightly")) is not None:
        started, commit = nightly.pop("started", str), nightly.pop("commit", str)
        night = baselines.Night(started, commit and commit_id(nightly, "commit", commit),
                                nightly.strings("runners"))  # fmt: skip
        nightly.done()
    failures = tuple(_failure_from(case, night is not None) for case in f.objs("cases"))
    got = [((c.kind, c.stem, c.dtype), c.outcome) for c in failures]
    if got != baselines.failing(table):
        raise f.error("cases", "are not the failing tests of the table")
    found = baselines.Baseline(runner, night, f.pop("flaky_window", int), f.pop("note", str),
                               failures)  # fmt: skip
    f.pop("counts", dict)  # for readers: the cases'
    f.done()
    return found


def _failure_from(f: Fields, with_nightly: bool) -> baselines.Failure:
    klass = f.pop("class", str)
    if klass not in baselines.CLASSES:
        raise f.error("class", f"is {klass!r}, not one of {', '.join(baselines.CLASSES)}")
    if not with_nightly and klass != baselines.NEW:
        raise f.error("class", f"is {klass!r} without a nightly to compare with")
    stem, kind, dtype = f.pop("stem", str), f.pop("kind", str), f.pop("dtype", str)
    outcome, reason = f.enum("outcome", Outcome), f.pop("reason", str)
    main = f.obj("main")
    found = baselines.Failure(stem, kind, dtype, outcome, klass, reason,
                              {r: main.enum(r, Outcome) for r in main.names()})  # fmt: skip
    f.pop("test", str)  # for readers: made of the rest
    for done in (main, f):
        done.done()
    return found


def math_from_fields(f: Fields) -> MathReport | MathSkipped:
    """check-math's report back from its ``--json`` document (as results.json's ``math``),
    every key checked; a dtype's ``status`` must be the one its counts give. A
    ``{"schema", "skipped"}`` document gives why check-math did not run."""
    schema = f.pop("schema", int)
    if schema != MATH_SCHEMA:
        raise f.error("schema", f"is {schema}, not {MATH_SCHEMA}")
    if (skipped := f.pop("skipped", str, type(None))) is not None:
        f.done()
        return MathSkipped(skipped)
    report = MathReport(
        tuple(_functor_from(x) for x in f.objs("functors")),
        compiler=f.pop("compiler", str),
        headers=f.pop("headers", str),
        warnings=f.strings("warnings"),
    )
    f.pop("ok", bool)  # for readers: the functors'
    f.pop("counts", dict)
    f.pop("not_covered", str)
    f.done()
    return report


def _functor_from(f: Fields) -> FunctorCheck:
    kernel = f.pop("kernel", str)
    found = FunctorCheck(
        kernel=kernel,
        file=f.pop("file", str),
        reference=f.pop("reference", str, type(None)),
        dtypes=tuple(_dtype_check(kernel, d) for d in f.objs("dtypes")),
        compile_error=f.pop("compile_error", str, type(None)),
        failure=f.pop("failure", str, type(None)),
        not_modelled=f.strings("not_modelled"),
        set_aside=f.strings("set_aside"),
        built_with=f.pop("built_with", str, type(None)),
        skipped=f.strings("skipped_dtypes"),
        cached=f.pop("cached", bool),
    )
    f.done()
    return found


def _counterexample(f: Fields) -> Counterexample:
    found = Counterexample(f.strings("inputs"), f.pop("kernel", str), f.pop("torch", str),
                           f.enum("kind", Kind))  # fmt: skip
    f.done()
    return found


def _dtype_check(kernel: str, f: Fields) -> DtypeCheck:
    check = DtypeCheck(
        kernel=kernel,
        dtype=f.pop("dtype", str),
        output=f.pop("output_dtype", str),
        torch_dtype=f.pop("torch_dtype", str, type(None)),
        checked=f.pop("checked", int),
        matched=f.pop("matched", int),
        precision=f.pop("precision", int),
        special=f.pop("nan_inf", int),
        exact=f.pop("value", int),
        crashes=f.pop("crashes", int),
        subnormal=f.pop("subnormal", int),
        refused=f.pop("refused", int),
        edge=f.pop("edge_inputs", int),
        samples=f.pop("sample_inputs", int),
        upcast=f.pop("upcast", bool),
        counterexamples=tuple(_counterexample(c) for c in f.objs("counterexamples")),
        findings=f.strings("findings"),
        no_reference=f.pop("no_reference", str, type(None)),
        known=f.pop("known", str, type(None)),
    )
    if (status := f.pop("status", str)) != str(check.status):
        raise f.error("status", f"{status!r} is not what its counts give ({check.status})")
    if f.pop("mismatched", int) != check.mismatched:
        raise f.error("mismatched", f"is not what its counts give ({check.mismatched})")
    f.done()
    return check
