"""A PR's targeted run as the comment and the commit status show it: :class:`PrResults`.

The model and its rendering, nothing else: the values come from the PR flow
(:mod:`pipeline.flows.pr`, which builds, tests and posts) or from an uploaded
``results.json`` (``--post-from``), whose every field is checked by
:mod:`pipeline.results.pr` before use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import read, schema_of
from pipeline.guide.review import ReviewDocument
from pipeline.impact.model import Impact, ImpactJson
from pipeline.report import render
from pipeline.report.inductor import render_markdown as inductor_markdown
from pipeline.report.inductor import summary as inductor_summary
from pipeline.report.kernel import KernelFileDoc
from pipeline.report.kernel import render_markdown as kernel_markdown
from pipeline.report.kernel import to_json as kernel_to_json
from pipeline.report.math import render_markdown as math_markdown
from pipeline.report.math import to_json as math_json
from pipeline.report.pr_comment import MARKER, build_comment, code_span, commit_status_for
from pipeline.report.review import render_markdown as review_markdown
from pipeline.report.speed import render_markdown as speed_markdown
from pipeline.results import baseline as baselines
from pipeline.results import table as tables
from pipeline.results.decide import XfailDecision, XfailDecisionJson
from pipeline.results.device import Device, DeviceJson
from pipeline.results.inductor import InductorJson, InductorRun
from pipeline.results.kernel import SCHEMA as KERNEL_SCHEMA
from pipeline.results.kernel import KernelsSection
from pipeline.results.math import MathReport, MathSkipped
from pipeline.results.pr import (
    RESULTS_JSON,
    SCHEMA,
    STATUS_DESCRIPTION_MAX,
    baseline_from,
    commit_id,
    math_from,
)
from pipeline.results.speed import SpeedReport
from pipeline.run.shaders import ShaderCheck


class StatusJson(TypedDict):
    state: str
    description: str


class BuildJson(TypedDict):
    needed: bool
    ok: bool
    error: str | None
    check: dict[str, object] | None  # ShaderCheck.to_dict's


class PrTestsJson(TypedDict):
    selectors: list[str]
    error: str | None
    run: str | None
    counts: dict[str, int]


class XfailsJson(TypedDict):
    decisions: list[XfailDecisionJson]
    diff: str


class KernelsJson(TypedDict):
    """check-kernel's section: ``skipped``, or ``files`` and ``errors``."""

    schema: int
    skipped: NotRequired[str]
    files: NotRequired[list[dict[str, object]]]  # report.kernel.to_json's, one per file
    errors: NotRequired[list[str]]


class PrResultsJson(TypedDict):
    """results.json, as docs/machine-output.md documents it."""

    schema: int
    pr: int
    base: str
    head: str | None
    title: str
    status: StatusJson
    impact: ImpactJson
    device: DeviceJson | None
    build: BuildJson
    tests: PrTestsJson
    table: tables.TableJson | None
    xfails: XfailsJson
    baseline: baselines.BaselineJson
    review: dict | None  # ReviewDocument.to_json's
    speed: dict[str, object] | None  # SpeedReport.to_dict's
    math: object  # report.math.to_json's, MathSkipped.to_dict's or None
    kernels: KernelsJson | None
    inductor: InductorJson | None


@dataclass(frozen=True)
class PrResults:
    """What a PR's targeted run found: all the comment and the commit status are made of.

    ``results.json`` holds exactly this (``to_json`` / ``from_json``), so the comment can be
    rebuilt where neither the tree nor the tools are (``--post-from``).
    """

    pr: int
    base: str  # commit id
    head: str | None  # commit id; None: the work tree
    impact: Impact
    build_needed: bool
    build_ok: bool
    build_error: str | None  # the first compiler error, when the build failed
    test_error: str | None  # why the selected tests gave no results
    selectors: tuple[str, ...]  # the pytest -k selectors of the run
    run: str | None  # the run's folder under the results directory (junit.xml, pytest.log)
    table: tables.DtypeTable | None
    xfail_decisions: tuple[XfailDecision, ...]
    xfail_diff: str  # unified diff of common_mps.py; never applied
    # the failing tests against the nightly history; None: not compared (all of them new)
    baseline: baselines.Baseline | None = None
    # the review checks' findings; None: not run
    review: ReviewDocument | None = None
    # kernel speed against main's; None: not run
    speed: SpeedReport | None = None
    # check-math of the affected operators' functors, or why it did not run; None: not run
    math: MathReport | MathSkipped | None = None
    # the build's shader check and toolchain; None: no build ran, or it recorded none
    build_check: ShaderCheck | None = None
    # the device the tests ran on; None: not a Mac, or no tests ran
    device: Device | None = None
    # check-kernel of the changed kernel files with a launch spec; None: not run
    kernels: KernelsSection | None = None
    # the Inductor MPS tests impact.inductor_tests selected; None: none selected, or not run
    inductor: InductorRun | None = None

    @property
    def judged(self) -> baselines.Baseline:
        """The failing tests, each with its class (all new when nothing was compared)."""
        if self.baseline is not None:
            return self.baseline
        return baselines.without_history(self.table)

    @property
    def counts(self) -> dict[str, int]:
        """Tests per outcome, the ones that occur."""
        return {k: n for k, n in self.table.counts().items() if n} if self.table else {}

    def status(self) -> tuple[str, str]:
        """The commit status ``(state, description)``."""
        if self.build_ok and self.test_error is not None:
            # as GitHubClient.set_status posts it, so that what is printed is what is posted
            description = " ".join(
                f"MPS tests could not run: {first_line(self.test_error)}".split()
            )
            if len(description) > STATUS_DESCRIPTION_MAX:
                description = description[: STATUS_DESCRIPTION_MAX - 1] + "…"
            return "error", description
        judged = self.judged
        classes = None if judged.night is None else judged.counts
        state, description = commit_status_for(self.counts, self.build_ok, classes)
        inductor = self.inductor
        if state != "success" or inductor is None:
            return state, description
        if not inductor.ok:  # a failing or unrun Inductor test is never a pass
            return "failure", f"Inductor MPS tests: {inductor_summary(inductor)}"[:140]
        if not self.counts:
            lead = "no MPS consistency test affected; "
            return state, f"{lead}Inductor MPS tests: {inductor_summary(inductor)}"[:140]
        return state, description

    def title(self) -> str:
        """The comment's heading: what was selected, of how many consistency tests."""
        impact = self.impact
        selected, total = impact.selected, impact.total
        if impact.full_sweep:
            return f"MPS consistency tests: full sweep ({selected:,} tests)"
        if not selected:
            return "MPS targeted tests: no consistency test affected"
        ops = len(impact.operators)
        share = f"{selected / total:.1%}" if total else "?"
        return (
            f"MPS targeted tests: {ops} operator{'' if ops == 1 else 's'}, "
            f"{selected:,} of {total:,} consistency tests ({share})"
        )

    def comment(self, footer: str = "") -> str:
        """The comment's Markdown; ``footer`` is appended (a link to the workflow run)."""
        notes = []
        if self.impact.full_sweep:
            why = "; ".join(self.impact.full_sweep_reasons)
            notes.append(f"Full sweep: {render.escape_markdown(why)}")
        if (device := self.device) is not None:
            vm = " (a VM: its timings are not a Mac's)" if device.paravirtual else ""
            notes.append(render.escape_markdown(f"Tested on {device.label()}{vm}."))
        if (check := self.build_check) is not None:
            notes.append(render.escape_markdown(f"Build: {check.describe()}; "
                                                f"{check.toolchain.describe()}."))  # fmt: skip
        if not self.build_ok:
            notes.append("_No tests ran: the build failed._")
        elif self.test_error is not None:
            error = render.escape_markdown(first_line(self.test_error))
            notes.append(f"_The tests could not run:_ {error}")
        elif not self.selectors:
            notes.append("_No MPS consistency test covers this change._")
        # Rendered here, from data, also in --post-from: no Markdown is taken from the folder.
        table = render.render_markdown(self.table) if self.table else ""
        tested = "the work tree" if self.head is None else code_span(self.head[:12])
        lines = [f"Tested {tested} against base {code_span(self.base[:12])}", footer.strip()]
        return build_comment(
            marker=MARKER,
            title=self.title(),
            build_ok=self.build_ok,
            build_error=self.build_error,
            operators=[(o.operator, "; ".join(o.reasons)) for o in self.impact.operators],
            table="\n\n".join([*notes, table.strip()]).strip(),
            xfail_diff=self.xfail_diff,
            counts=self.counts,
            baseline=self.judged,
            footer=" · ".join(line for line in lines if line),
            sections=self._sections(),
            math=self._math(),
            kernels=self._kernels(),
        )

    def _kernels(self) -> str:
        """check-kernel's tables of the changed kernel files (or why it did not run)."""
        if self.kernels is None:
            return ""
        if self.kernels.skipped is not None:
            return f"_check-kernel skipped: {render.escape_markdown(self.kernels.skipped)}_\n"
        errors = [f"- not checked: {render.escape_markdown(e)}" for e in self.kernels.errors]
        tables = kernel_markdown(self.kernels.files) if self.kernels.files else ""
        return "\n".join([tables, *errors]).strip() + "\n"

    def _math(self) -> str:
        """check-math's table (or why it did not run), rendered here from data."""
        if self.math is None:
            return ""
        if isinstance(self.math, MathSkipped):
            return f"_check-math skipped: {render.escape_markdown(self.math.reason)}_\n"
        return math_markdown(self.math)

    def _sections(self) -> list[str]:
        """The review and speed sections, rendered here from data (also in --post-from)."""
        out = []
        if self.impact.inductor_tests:
            why_not = "the build failed" if not self.build_ok else "no result recorded"
            out.append(inductor_markdown(self.impact.inductor_reasons, self.inductor, why_not))
        if self.review is not None:
            out.append(review_markdown(self.review.findings, self.review.notes))
        if self.speed is not None:
            out.append(speed_markdown(self.speed))
        return out

    def to_json(self) -> PrResultsJson:
        """results.json (schema ``SCHEMA``, documented in docs/machine-output.md); ``title``
        and ``status`` are for readers, not read back."""
        state, description = self.status()
        return {
            "schema": SCHEMA,
            "pr": self.pr,
            "base": self.base,
            "head": self.head,
            "title": self.title(),
            "status": {"state": state, "description": description},
            "impact": self.impact.to_dict(),
            "device": None if self.device is None else self.device.to_dict(),
            "build": {
                "needed": self.build_needed,
                "ok": self.build_ok,
                "error": self.build_error,
                "check": None if self.build_check is None else self.build_check.to_dict(),
            },
            "tests": {
                "selectors": list(self.selectors),
                "error": self.test_error,
                "run": self.run,
                "counts": self.counts,
            },
            "table": None if self.table is None else self.table.to_dict(),
            "xfails": {
                "decisions": [d.to_dict() for d in self.xfail_decisions],
                "diff": self.xfail_diff,
            },
            "baseline": self.judged.to_dict(),
            "review": None if self.review is None else self.review.to_json(),
            "speed": None if self.speed is None else self.speed.to_dict(),
            "math": self._math_json(),
            "kernels": None if self.kernels is None else _kernels_json(self.kernels),
            "inductor": None if self.inductor is None else self.inductor.to_dict(),
        }

    def _math_json(self) -> object:
        if self.math is None:
            return None
        if isinstance(self.math, MathSkipped):
            return self.math.to_dict()
        return math_json(self.math)

    @classmethod
    def from_json(cls, data: Any, pr: int) -> PrResults:
        """Read results.json back, every key checked, none left over: it is data from
        another job, which ran the PR's code. Refuses results of another PR."""
        if isinstance(data, dict) and (schema := schema_of(data)) != SCHEMA:
            raise PipelineError(
                f"results.json has schema {schema!r}, this version reads {SCHEMA}: "
                "write and post the results with the same mps-pipeline version"
            )
        doc = read(_ResultsDoc, data, RESULTS_JSON)
        if doc.pr != pr:
            raise PipelineError(
                f"the results are for PR #{doc.pr}, not #{pr}; refusing to post them"
            )
        return doc.results()


@dataclass(frozen=True)
class _BuildDoc:
    needed: bool
    ok: bool
    error: str | None
    check: dict[str, object] | None  # ShaderCheck.to_dict's, which ShaderCheck.from_dict reads


@dataclass(frozen=True)
class _TestsDoc:
    selectors: tuple[str, ...]
    error: str | None
    run: str | None
    counts: dict[str, int]  # for readers: the table's


@dataclass(frozen=True)
class _XfailsDoc:
    decisions: tuple[XfailDecision, ...]
    diff: str


@dataclass(frozen=True)
class _KernelsDoc:
    """check-kernel's section: ``skipped``, or ``files`` and ``errors``."""

    schema: int
    skipped: str | None = None
    files: tuple[KernelFileDoc, ...] = ()
    errors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.schema != KERNEL_SCHEMA:
            raise ValueError(f"schema {self.schema}, not {KERNEL_SCHEMA}")

    def section(self) -> KernelsSection:
        if self.skipped is not None:
            return KernelsSection(skipped=self.skipped)
        return KernelsSection(tuple(f.report() for f in self.files), self.errors)


@dataclass(frozen=True)
class _ResultsDoc:
    """results.json as read back (:meth:`PrResults.to_json` writes it); ``title``, ``status``
    and ``tests.counts`` are for readers, made again from the rest. The sections whose
    readers take the raw value (or check more than their types) are kept as the objects
    they are."""

    schema: int
    pr: int
    base: str
    head: str | None
    title: str
    status: dict[str, object]
    impact: dict[str, object]  # Impact.from_json
    device: Device | None
    build: _BuildDoc
    tests: _TestsDoc
    table: dict[str, object] | None  # DtypeTable.read
    xfails: _XfailsDoc
    baseline: dict[str, object] | None  # baseline_from: checked against the table
    review: dict[str, object] | None  # ReviewDocument.from_json
    speed: SpeedReport | None
    math: dict[str, object] | None  # math_from
    kernels: _KernelsDoc | None
    inductor: InductorRun | None

    def results(self) -> PrResults:
        """The results, each section read and checked."""
        table = None if self.table is None else tables.DtypeTable.read(self.table, RESULTS_JSON,
                                                                       "table")  # fmt: skip
        build, tests = self.build, self.tests
        return PrResults(
            pr=self.pr,
            base=commit_id(self.base, "base"),
            head=None if self.head is None else commit_id(self.head, "head"),
            impact=Impact.from_json(self.impact, RESULTS_JSON, "impact"),
            build_needed=build.needed,
            build_ok=build.ok,
            build_error=build.error,
            test_error=tests.error,
            selectors=tests.selectors,
            run=tests.run,
            table=table,
            xfail_decisions=self.xfails.decisions,
            xfail_diff=self.xfails.diff,
            baseline=baseline_from(self.baseline, table),
            review=None if self.review is None
            else ReviewDocument.from_json(self.review, RESULTS_JSON, "review"),
            speed=self.speed,
            math=None if self.math is None else math_from(self.math, "math"),
            build_check=None if build.check is None else _shader_check(build.check),
            device=self.device,
            kernels=None if self.kernels is None else self.kernels.section(),
            inductor=self.inductor,
        )  # fmt: skip


def _kernels_json(section: KernelsSection) -> KernelsJson:
    if section.skipped is not None:
        return {"schema": KERNEL_SCHEMA, "skipped": section.skipped}
    files = [kernel_to_json(r) for r in section.files]
    return {"schema": KERNEL_SCHEMA, "files": files, "errors": list(section.errors)}


def _shader_check(data: dict[str, object]) -> ShaderCheck:
    try:
        return ShaderCheck.from_dict(data)
    except ValueError as exc:  # refused now, before anything is posted
        raise DocumentError(RESULTS_JSON, "build.check", str(exc)) from None


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped (an error's headline)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
