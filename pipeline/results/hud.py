"""Rows for PyTorch's HUD: one per test case, in the columns of its ClickHouse test-run table.

PyTorch's CI uploads every JUnit report to S3, and a loader fills ClickHouse tables such as
``default.test_run_s3`` and ``tests.all_test_runs`` (their DDL is in pytorch/test-infra,
``clickhouse_db_schema/``), where the HUD's queries read them. A row here has those
columns, spelled as that loader spells them, then ours: the operator, dtype and test kind
the test id encodes, the runner configuration, its chip and macOS version, and the
PyTorch commit tested. Written as JSON Lines (``JSONEachRow``), a night loads with one
``INSERT ... FORMAT JSONEachRow``.

How the columns are filled (docs/machine-output.md says it for every column):

- ``file`` / ``invoking_file`` / ``classname``: pytest's JUnit class name
  ``test_mps.TestConsistencyMPS`` splits into the module (``test_mps``, the file
  ``test_mps.py``) and the class (``TestConsistencyMPS``), as the loader's are.
- ``failure`` / ``error`` / ``skipped`` / ``rerun``: what the JUnit report held, as the
  loader's arrays of ``(message, text, type)``: a fail or an xpass is one failure (a
  unittest expectedFailure that passed is a failure in JUnit), an error one error, a skip
  or an xfail one skipped entry (type ``pytest.skip`` / ``pytest.xfail``), each attempt
  before the last one rerun. Rows from the history carry no message (it is not kept).
- ``status``: the JUnit element that decided (``passed``, ``failure``, ``error``,
  ``skipped``); ``result``: our outcome (``pass``, ``fail``, ``error``, ``xfail``,
  ``xpass``, ``skip``), which tells an xfail from a skip and an xpass from a failure.
- ``job_id`` / ``workflow_id`` / ``workflow_run_attempt``: the GitHub Actions run, when it
  is known (``$GITHUB_RUN_ID``, ``$GITHUB_RUN_ATTEMPT``, ``--job-id``; from the history,
  a night's ``--source`` that is a run's URL); 0 where it is not: the columns are Int64.
- ``chip`` and ``macos``: the runner's (``macos-m2-15``: ``M2``, ``15.0``; the ``runners:``
  table's version first), ``unknown`` where its name does not say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from pipeline import fields
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.macos import macos_version

UNKNOWN = "unknown"
_CHIP = re.compile(r"(?:^|-)(m\d+)(?:-|$)", re.IGNORECASE)
# a night's --source that is a GitHub Actions run's URL: .../actions/runs/<id>[/attempts/<n>]
_RUN_URL = re.compile(r"/actions/runs/(?P<run>\d+)(?:/attempts/(?P<attempt>\d+))?")
_STATUS = {
    Outcome.PASS: "passed",
    Outcome.FAIL: "failure",
    Outcome.XPASS: "failure",
    Outcome.ERROR: "error",
    Outcome.SKIP: "skipped",
    Outcome.XFAIL: "skipped",
}


@dataclass(frozen=True)
class Problem:
    """One entry of a row's ``failure`` / ``error`` / ``skipped`` arrays."""

    message: str
    text: str
    type: str


@dataclass(frozen=True)
class Rerun:
    """One entry of a row's ``rerun`` array: an attempt before the last."""

    message: str
    text: str


@dataclass(frozen=True)
class CiRun:
    """The GitHub Actions run a night's results came from; 0 where not known."""

    workflow_id: int = 0
    attempt: int = 0
    job_id: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str], job_id: int = 0) -> CiRun:
        run, attempt = env.get("GITHUB_RUN_ID", ""), env.get("GITHUB_RUN_ATTEMPT", "")
        return cls(int(run) if run.isdigit() else 0, int(attempt) if attempt.isdigit() else 0,
                   job_id)  # fmt: skip

    @classmethod
    def from_source(cls, source: str) -> CiRun:
        """From a night's ``--source``, when it is a run's URL."""
        found = _RUN_URL.search(source)
        if found is None:
            return cls()
        run, attempt = found.groups()
        return cls(int(run), int(attempt or 1))


@dataclass(frozen=True)
class Night:
    """What every row of one runner's night shares."""

    started: str  # the nightly's ``started`` (UTC, ISO 8601 with microseconds)
    runner: str
    commit: str
    ci: CiRun
    macos: tuple[int, ...] | None  # the runner's, when known


@dataclass(frozen=True)
class HudRow:
    """One test case: the HUD test-run table's columns, then ours."""

    file: str
    classname: str
    name: str
    invoking_file: str
    time_inserted: str
    job_id: int
    workflow_id: int
    workflow_run_attempt: int
    status: str
    result: str
    time: float
    duration: float
    line: int
    failure: tuple[Problem, ...]
    error: tuple[Problem, ...]
    skipped: tuple[Problem, ...]
    rerun: tuple[Rerun, ...]
    operator: str
    dtype: str
    test_kind: str
    runner: str
    chip: str
    macos: str
    pytorch_commit: str

    def to_json(self) -> str:
        """One JSON Lines row (no newline)."""
        return json.dumps(fields.dump(self), ensure_ascii=False, separators=(",", ":"))


def chip(runner: str) -> str:
    """``macos-m2-15`` -> ``M2``; unknown when the name has no M-series part."""
    found = _CHIP.search(runner)
    return found[1].upper() if found else UNKNOWN


def _inserted(started: str) -> str:
    """``started`` in ClickHouse's DateTime64 text: ``2026-11-01 03:17:00.000000``."""
    when = datetime.fromisoformat(started.replace("Z", "+00:00"))
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")


def _problems(case: CaseResult) -> tuple[tuple[Problem, ...], ...]:
    """(failure, error, skipped) of one case."""
    message = case.message
    if case.outcome is Outcome.FAIL:
        return (Problem(message, "", ""),), (), ()
    if case.outcome is Outcome.XPASS:
        return (Problem(message or "Unexpected success", "", ""),), (), ()
    if case.outcome is Outcome.ERROR:
        return (), (Problem(message, "", ""),), ()
    if case.outcome is Outcome.XFAIL:
        return (), (), (Problem(message, "", "pytest.xfail"),)
    if case.outcome is Outcome.SKIP:
        return (), (), (Problem(message, "", "pytest.skip"),)
    return (), (), ()


def row(case: CaseResult, night: Night) -> HudRow:
    """``case`` of ``night`` as a HUD row."""
    module, _, klass = case.classname.rpartition(".")
    failure, error, skipped = _problems(case)
    version = UNKNOWN
    if night.macos:
        version = ".".join(map(str, night.macos + (0,) * (2 - len(night.macos))))
    return HudRow(
        file=f"{module.replace('.', '/')}.py" if module else "",
        classname=klass or case.classname,
        name=case.name,
        invoking_file=module,
        time_inserted=_inserted(night.started),
        job_id=night.ci.job_id,
        workflow_id=night.ci.workflow_id,
        workflow_run_attempt=night.ci.attempt,
        status=_STATUS[case.outcome],
        result=case.outcome.value,
        time=case.time,
        duration=case.time,
        line=0,
        failure=failure,
        error=error,
        skipped=skipped,
        rerun=tuple(Rerun("", "") for _ in range(max(case.attempts - 1, 0))),
        operator=case.stem or "",
        dtype=case.dtype or "",
        test_kind=case.kind or "",
        runner=night.runner,
        chip=chip(night.runner),
        macos=version,
        pytorch_commit=night.commit,
    )


def rows(cases: Mapping[Night, tuple[CaseResult, ...]]) -> Iterator[HudRow]:
    """Every case of every runner's night, in order."""
    for night, found in cases.items():
        for case in found:
            yield row(case, night)


def night_of(
    started: str, runner: str, commit: str, ci: CiRun, table: Mapping[str, tuple[int, ...]]
) -> Night:
    """A runner's night, its macOS version from the ``runners:`` table or its name."""
    return Night(started, runner, commit, ci, macos_version(runner, table))
