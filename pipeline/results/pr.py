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
from pipeline.results import baseline as baselines
from pipeline.results import table as tables
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


def want(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """``value`` when it is of ``kind`` (a type or a tuple of them), else a PipelineError
    naming ``where`` in results.json it sits."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int to isinstance, never to a reader of results.json
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise PipelineError(
            f"results.json: {where} must be {names}, got {type(value).__name__}; "
            "was the folder written by `pr-report --results-only`?"
        )
    return value


def strings(value: Any, where: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings, checking it is a list of them."""
    return tuple(want(v, str, f"{where}[{i}]") for i, v in enumerate(want(value, list, where)))


def commit_id(value: Any, where: str) -> str:
    """``value`` checked to be a full commit id (SHA-1 or SHA-256)."""
    if not _SHA.fullmatch(want(value, str, where)):
        raise PipelineError(f"results.json: {where} is not a full commit id")
    return value


def outcome(value: Any, where: str) -> Outcome:
    """``value`` checked to be an outcome's name (``pass``, ``fail``...)."""
    if want(value, str, where) not in {o.value for o in Outcome}:
        raise PipelineError(f"results.json: {where} {value!r} is unknown")
    return Outcome(value)


def baseline_from_json(data: Any, table: tables.DtypeTable | None) -> baselines.Baseline:
    """``baseline`` back from ``Baseline.to_dict()``, checked against ``table``: it must
    classify exactly the table's failing tests, and only as new without a nightly. A
    results.json without one (an earlier version of schema 1) counts every failure new."""
    if data is None:
        return baselines.without_history(table)
    want(data, dict, "baseline")
    runner = want(data.get("runner"), (str, type(None)), "baseline.runner")
    night = None
    if (nightly := want(data.get("nightly"), (dict, type(None)), "baseline.nightly")) is not None:
        commit = want(nightly.get("commit"), str, "baseline.nightly.commit")
        night = baselines.Night(
            want(nightly.get("started"), str, "baseline.nightly.started"),
            commit and commit_id(commit, "baseline.nightly.commit"),
            strings(nightly.get("runners"), "baseline.nightly.runners"),
        )
    failures = []
    for i, case in enumerate(want(data.get("cases"), list, "baseline.cases")):
        at = f"baseline.cases[{i}]"
        want(case, dict, at)
        klass = want(case.get("class"), str, f"{at}.class")
        if klass not in baselines.CLASSES or (night is None and klass != baselines.NEW):
            raise PipelineError(
                f"results.json: {at}.class {klass!r} is unknown"
                if klass not in baselines.CLASSES
                else f"results.json: {at}.class is {klass!r} without a nightly to compare with"
            )
        main = want(case.get("main"), dict, f"{at}.main")
        failures.append(
            baselines.Failure(
                want(case.get("stem"), str, f"{at}.stem"),
                want(case.get("kind"), str, f"{at}.kind"),
                want(case.get("dtype"), str, f"{at}.dtype"),
                outcome(case.get("outcome"), f"{at}.outcome"),
                klass,
                want(case.get("reason"), str, f"{at}.reason"),
                {
                    want(r, str, f"{at}.main"): outcome(o, f"{at}.main[{r!r}]")
                    for r, o in main.items()
                },
            )
        )
    got = [((f.kind, f.stem, f.dtype), f.outcome) for f in failures]
    if got != baselines.failing(table):
        raise PipelineError(
            "results.json: baseline.cases are not the failing tests of the table; was the "
            "folder written by `pr-report --results-only`?"
        )
    window = want(data.get("flaky_window"), int, "baseline.flaky_window")
    note = want(data.get("note"), str, "baseline.note")
    return baselines.Baseline(runner, night, window, note, tuple(failures))


def table_from_json(data: dict[str, Any]) -> tables.DtypeTable:
    """A DtypeTable back from ``DtypeTable.to_dict()``, every field checked."""
    rows = []
    for i, row in enumerate(want(data.get("rows"), list, "table.rows")):
        where = f"table.rows[{i}]"
        want(row, dict, where)
        cells = []
        for dtype, cell in want(row.get("cells"), dict, f"{where}.cells").items():
            runners = want(want(cell, dict, f"{where}.cells").get("runners"), dict, where)
            results = []
            for runner, r in runners.items():
                at = f"{where}.cells[{dtype!r}].runners[{runner!r}]"
                outcome = want(want(r, dict, at).get("outcome"), str, f"{at}.outcome")
                if outcome not in {o.value for o in Outcome}:
                    raise PipelineError(f"results.json: {at}.outcome {outcome!r} is unknown")
                results.append(
                    tables.RunnerResult(
                        runner,
                        Outcome(outcome),
                        want(r.get("flaky"), bool, f"{at}.flaky"),
                        want(r.get("attempts"), int, f"{at}.attempts"),
                        want(r.get("message"), str, f"{at}.message"),
                    )
                )
            cells.append(tables.Cell(dtype, tuple(results)))
        rows.append(
            tables.Row(
                want(row.get("stem"), str, f"{where}.stem"),
                want(row.get("kind"), str, f"{where}.kind"),
                want(row.get("name"), str, f"{where}.name"),
                tuple(cells),
            )
        )
    return tables.DtypeTable(
        tuple(rows),
        strings(data.get("dtypes"), "table.dtypes"),
        strings(data.get("runners"), "table.runners"),
        want(data.get("ignored"), int, "table.ignored"),
    )


def math_from_json(data: Any) -> MathReport | MathSkipped:
    """check-math's report back from its ``--json`` document (as results.json's ``math``),
    every field the comment renders checked; a dtype's ``status`` must be the one its
    counts give. A ``{"schema", "skipped"}`` document gives why check-math did not run."""
    want(data, dict, "math")
    if data.get("schema") != MATH_SCHEMA:
        raise PipelineError(f"results.json: math.schema is {data.get('schema')!r}, not 1")
    if "skipped" in data:
        return MathSkipped(want(data["skipped"], str, "math.skipped"))
    functors = []
    for i, f in enumerate(want(data.get("functors"), list, "math.functors")):
        at = f"math.functors[{i}]"
        want(f, dict, at)
        kernel = want(f.get("kernel"), str, f"{at}.kernel")
        dtypes = [
            _dtype_check(kernel, d, f"{at}.dtypes[{j}]")
            for j, d in enumerate(want(f.get("dtypes"), list, f"{at}.dtypes"))
        ]
        functors.append(
            FunctorCheck(
                kernel=kernel,
                file=want(f.get("file"), str, f"{at}.file"),
                reference=want(f.get("reference"), (str, type(None)), f"{at}.reference"),
                dtypes=tuple(dtypes),
                compile_error=want(
                    f.get("compile_error"), (str, type(None)), f"{at}.compile_error"
                ),
                failure=want(f.get("failure"), (str, type(None)), f"{at}.failure"),
                skipped=strings(f.get("skipped_dtypes"), f"{at}.skipped_dtypes"),
                cached=want(f.get("cached"), bool, f"{at}.cached"),
            )
        )
    return MathReport(
        tuple(functors),
        compiler=want(data.get("compiler"), str, "math.compiler"),
        headers=want(data.get("headers"), str, "math.headers"),
        warnings=strings(data.get("warnings"), "math.warnings"),
    )


def _dtype_check(kernel: str, d: Any, at: str) -> DtypeCheck:
    want(d, dict, at)
    counts = {
        key: want(d.get(key), int, f"{at}.{key}")
        for key in ("checked", "matched", "precision", "nan_inf", "value", "crashes",
                    "subnormal", "refused", "edge_inputs", "sample_inputs")
    }  # fmt: skip
    examples = []
    for k, c in enumerate(want(d.get("counterexamples"), list, f"{at}.counterexamples")):
        where = f"{at}.counterexamples[{k}]"
        want(c, dict, where)
        kind = want(c.get("kind"), str, f"{where}.kind")
        if kind not in {x.value for x in Kind}:
            raise PipelineError(f"results.json: {where}.kind {kind!r} is unknown")
        examples.append(
            Counterexample(
                strings(c.get("inputs"), f"{where}.inputs"),
                want(c.get("kernel"), str, f"{where}.kernel"),
                want(c.get("torch"), str, f"{where}.torch"),
                Kind(kind),
            )
        )
    check = DtypeCheck(
        kernel=kernel,
        dtype=want(d.get("dtype"), str, f"{at}.dtype"),
        output=want(d.get("output_dtype"), str, f"{at}.output_dtype"),
        torch_dtype=want(d.get("torch_dtype"), (str, type(None)), f"{at}.torch_dtype"),
        checked=counts["checked"],
        matched=counts["matched"],
        precision=counts["precision"],
        special=counts["nan_inf"],
        exact=counts["value"],
        crashes=counts["crashes"],
        subnormal=counts["subnormal"],
        refused=counts["refused"],
        edge=counts["edge_inputs"],
        samples=counts["sample_inputs"],
        upcast=want(d.get("upcast"), bool, f"{at}.upcast"),
        counterexamples=tuple(examples),
        findings=strings(d.get("findings"), f"{at}.findings"),
        no_reference=want(d.get("no_reference"), (str, type(None)), f"{at}.no_reference"),
        known=want(d.get("known"), (str, type(None)), f"{at}.known"),
    )
    if want(d.get("status"), str, f"{at}.status") != str(check.status):
        raise PipelineError(
            f"results.json: {at}.status {d['status']!r} is not what its counts give "
            f"({check.status}); was it written by `check-math --json`?"
        )
    return check
