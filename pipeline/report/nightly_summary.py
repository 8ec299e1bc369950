"""A recorded nightly as the dashboard, summary.md and ``--json`` show it: :class:`NightlySummary`.

``summary.json`` holds exactly this (:meth:`NightlySummary.to_json`, written by
:func:`pipeline.report.dashboard.write_dashboard`; documented in docs/machine-output.md),
and :meth:`NightlySummary.from_json` reads it back through models whose fields name its
keys (:func:`pipeline.fields.read`), every key checked, nothing left over. The flow
(:mod:`pipeline.flows.nightly`) builds it; the renderers take it.
Figures the document spells out for its readers (``missing_runners``, ``pass_rate``, the
table's and the backlog's counts, a shard's totals) are made from the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import dump, read, schema_of, shown
from pipeline.guide.backlog import BacklogItem
from pipeline.guide.exec_paths import ExecPath
from pipeline.results.decide import XfailDecision, XfailDecisionJson
from pipeline.results.device import UNKNOWN, Device, DeviceJson
from pipeline.results.junit import Outcome
from pipeline.results.nightly import (
    SCHEMA,
    Candidate,
    CandidateJson,
    FlakyTest,
    FlakyTestJson,
    Regression,
    RegressionJson,
    ShardBalance,
    ShardBalanceJson,
    pass_rate,
)
from pipeline.results.table import DtypeTable, TableJson

SUMMARY_JSON = "summary.json"


_OUTCOMES = tuple(o.value for o in Outcome)
_PATHS = tuple(p.value for p in ExecPath)


class BacklogJson(TypedDict):
    error: str | None
    counts: dict[str, int]
    total: int
    items: list[dict]  # BacklogItem.to_dict's


class RunCountsJson(TypedDict):
    started: str
    runner: str
    counts: dict[str, int]
    pass_rate: float | None


class NightPathsJson(TypedDict):
    started: str
    counts: dict[str, int]


class ReportsReadJson(TypedDict):
    total: int
    skipped: list[str]


class SummaryJson(TypedDict):
    """summary.json, as docs/machine-output.md documents it."""

    schema: int
    started: str
    commit: str
    source: str
    runners: list[str]
    required_runners: list[str]
    missing_runners: list[str]
    min_passes: int
    counts: dict[str, dict[str, int]]
    pass_rate: dict[str, float | None]
    table: TableJson
    shards: dict[str, ShardBalanceJson]
    devices: dict[str, DeviceJson | str]  # the string: UNKNOWN
    proposals: list[XfailDecisionJson]
    proposal_note: str
    judged_nightlies: list[str]
    candidates: list[CandidateJson]
    diff: str
    not_judged: list[XfailDecisionJson]
    regressions: list[RegressionJson]
    flaky: list[FlakyTestJson]
    backlog: BacklogJson
    paths: list[NightPathsJson]
    history: list[RunCountsJson]
    reports: ReportsReadJson
    warnings: list[str]


@dataclass(frozen=True)
class Backlog:
    """The ``backlog`` command's list for the tree, or why there is none (``error``)."""

    items: tuple[BacklogItem, ...]
    error: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        """Operators per workflow, in the order the list first names them."""
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.workflow.value] = counts.get(item.workflow.value, 0) + 1
        return counts

    def to_json(self) -> BacklogJson:
        return {
            "error": self.error,
            "counts": self.counts,
            "total": len(self.items),
            "items": [item.to_dict() for item in self.items],
        }


@dataclass(frozen=True)
class RunCounts:
    """One run of the history's chart: a runner's tests per outcome on one night."""

    started: str
    runner: str
    counts: Mapping[str, int]  # every outcome
    _rate: float | None = field(init=False, repr=False, compare=False,
                                metadata=shown(lambda r: r.pass_rate, "pass_rate"))  # fmt: skip

    @property
    def pass_rate(self) -> float | None:
        return pass_rate(self.counts)

    def to_json(self) -> RunCountsJson:
        return cast(RunCountsJson, dump(self))


@dataclass(frozen=True)
class NightPaths:
    """The tree's overloads per MPS path on one night that recorded them."""

    started: str
    counts: Mapping[str, int]  # every path

    def to_json(self) -> NightPathsJson:
        return cast(NightPathsJson, dump(self))


@dataclass(frozen=True)
class ReportsRead:
    """The JUnit files found under --results, and those nothing could be read from."""

    total: int
    skipped: tuple[str, ...]


@dataclass(frozen=True)
class NightlySummary:
    """One recorded nightly: what summary.json, the dashboard and summary.md are made of."""

    started: str  # names the nightly in the history
    commit: str  # the PyTorch commit tested ("" when unknown)
    source: str  # where the results came from ("" if not given)
    runners: tuple[str, ...]  # that sent results, configured ones first
    required_runners: tuple[str, ...]  # the configured ones
    min_passes: int
    counts: Mapping[str, Mapping[str, int]]  # runner -> tonight's tests per outcome
    table: DtypeTable
    shards: Mapping[str, ShardBalance]  # runner -> its reports' wall times
    devices: Mapping[str, Device | None]  # runner -> its device (None: none recorded)
    proposals: tuple[XfailDecision, ...]  # confirmed by history; never keep
    proposal_note: str  # why there are none, when there are none
    judged_nightlies: tuple[str, ...]  # newest first
    candidates: tuple[Candidate, ...]
    diff: str  # what the proposals make together; never applied
    not_judged: tuple[XfailDecision, ...]  # MPS xfails no consistency test reaches
    regressions: tuple[Regression, ...]
    flaky: tuple[FlakyTest, ...]
    backlog: Backlog
    paths: tuple[NightPaths, ...]  # oldest first; tonight's last when the tree was read
    history: tuple[RunCounts, ...]  # the chart's runs, oldest first
    reports: ReportsRead
    warnings: tuple[str, ...]

    @property
    def missing_runners(self) -> tuple[str, ...]:
        """Configured runners that sent no results tonight."""
        return tuple(r for r in self.required_runners if r not in self.runners)

    @property
    def pass_rate(self) -> dict[str, float | None]:
        """Per runner, the share of the tests that ran that passed or xpassed."""
        return {runner: pass_rate(c) for runner, c in self.counts.items()}

    def to_json(self) -> SummaryJson:
        """summary.json (schema ``SCHEMA``, documented in docs/machine-output.md)."""
        return {
            "schema": SCHEMA,
            "started": self.started,
            "commit": self.commit,
            "source": self.source,
            "runners": list(self.runners),
            "required_runners": list(self.required_runners),
            "missing_runners": list(self.missing_runners),
            "min_passes": self.min_passes,
            "counts": {runner: dict(c) for runner, c in self.counts.items()},
            "pass_rate": self.pass_rate,
            "table": self.table.to_dict(compact=True),
            "shards": {runner: s.to_dict() for runner, s in self.shards.items()},
            "devices": {r: UNKNOWN if d is None else d.to_dict() for r, d in self.devices.items()},
            "proposals": [d.to_dict() for d in self.proposals],
            "proposal_note": self.proposal_note,
            "judged_nightlies": list(self.judged_nightlies),
            "candidates": [c.to_dict() for c in self.candidates],
            "diff": self.diff,
            "not_judged": [d.to_dict() for d in self.not_judged],
            "regressions": [r.to_dict() for r in self.regressions],
            "flaky": [f.to_dict() for f in self.flaky],
            "backlog": self.backlog.to_json(),
            "paths": [p.to_json() for p in self.paths],
            "history": [h.to_json() for h in self.history],
            "reports": {"total": self.reports.total, "skipped": list(self.reports.skipped)},
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_json(cls, data: object, doc: str = SUMMARY_JSON) -> NightlySummary:
        """summary.json read back, every key checked, none left over."""
        if isinstance(data, dict) and (schema := schema_of(data)) != SCHEMA:
            raise PipelineError(
                f"{doc} has schema {schema!r}; this version reads {SCHEMA} "
                "(run the nightly again with it)"
            )
        return read(_SummaryDoc, data, doc).summary(doc)


@dataclass(frozen=True)
class _BacklogDoc:
    """:meth:`Backlog.to_json`; ``counts`` and ``total`` are for readers: the items'."""

    error: str | None
    counts: dict[str, int]
    total: int
    items: tuple[object, ...]  # BacklogItem.from_json reads each

    def backlog(self, doc: str) -> Backlog:
        found = Backlog(
            tuple(
                BacklogItem.from_json(item, doc, f"backlog.items[{i}]")
                for i, item in enumerate(self.items)
            ),
            self.error,
        )
        if self.total != len(found.items):
            raise DocumentError(doc, "backlog.total", f"is not the {len(found.items)} items'")
        return found


@dataclass(frozen=True)
class _SummaryDoc:
    """summary.json as read back (:meth:`NightlySummary.to_json` writes it);
    ``missing_runners`` and ``pass_rate`` are for readers, made of the rest."""

    schema: int
    started: str
    commit: str
    source: str
    runners: tuple[str, ...]
    required_runners: tuple[str, ...]
    missing_runners: tuple[str, ...]
    min_passes: int
    counts: dict[str, dict[str, int]]
    pass_rate: dict[str, float | None]
    table: object  # DtypeTable.read
    shards: dict[str, ShardBalance]
    devices: dict[str, Device | str]  # the string: UNKNOWN
    proposals: tuple[XfailDecision, ...]
    proposal_note: str
    judged_nightlies: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    diff: str
    not_judged: tuple[XfailDecision, ...]
    regressions: tuple[Regression, ...]
    flaky: tuple[FlakyTest, ...]
    backlog: _BacklogDoc
    paths: tuple[NightPaths, ...]
    history: tuple[RunCounts, ...]
    reports: ReportsRead
    warnings: tuple[str, ...]

    def summary(self, doc: str) -> NightlySummary:
        for runner, counts in self.counts.items():
            _every(counts, _OUTCOMES, doc, f"counts.{runner}")
        for i, night in enumerate(self.paths):
            _every(night.counts, _PATHS, doc, f"paths[{i}].counts")
        for i, run in enumerate(self.history):
            _every(run.counts, _OUTCOMES, doc, f"history[{i}].counts")
        found = NightlySummary(
            started=self.started,
            commit=self.commit,
            source=self.source,
            runners=self.runners,
            required_runners=self.required_runners,
            min_passes=self.min_passes,
            counts=self.counts,
            table=DtypeTable.read(self.table, doc, "table"),
            shards=self.shards,
            devices={r: _device(d, doc, r) for r, d in self.devices.items()},
            proposals=self.proposals,
            proposal_note=self.proposal_note,
            judged_nightlies=self.judged_nightlies,
            candidates=self.candidates,
            diff=self.diff,
            not_judged=self.not_judged,
            regressions=self.regressions,
            flaky=self.flaky,
            backlog=self.backlog.backlog(doc),
            paths=self.paths,
            history=self.history,
            reports=self.reports,
            warnings=self.warnings,
        )
        if self.missing_runners != found.missing_runners:
            problem = "are not the required runners without results"
            raise DocumentError(doc, "missing_runners", problem)
        return found


def _every(counts: Mapping[str, int], names: tuple[str, ...], doc: str, where: str) -> None:
    """An object with one count per name (every outcome, every MPS path), nothing else."""
    if set(counts) != set(names):
        raise DocumentError(doc, where, f"must hold a count for each of {', '.join(names)}")


def _device(device: Device | str, doc: str, runner: str) -> Device | None:
    """A runner's device, or None for the string ``"unknown"`` (none recorded)."""
    if isinstance(device, str):
        if device != UNKNOWN:
            problem = f"is {device!r}, not a device or {UNKNOWN!r}"
            raise DocumentError(doc, f"devices.{runner}", problem)
        return None
    return device


@dataclass(frozen=True)
class NightlyOutcome:
    """A recorded nightly: its summary, and where its dashboard goes."""

    summary: NightlySummary
    dashboard_dir: Path
    junit_files: tuple[Path, ...]  # one merged report per runner, in dashboard_dir/junit/
