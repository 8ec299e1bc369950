"""A PR's targeted run as the comment and the commit status show it: :class:`PrResults`.

The model and its rendering, nothing else: the values come from the PR flow
(:mod:`pipeline.flows.pr`, which builds, tests and posts) or from an uploaded
``results.json`` (``--post-from``), whose every field is checked by
:mod:`pipeline.results.pr` before use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import PipelineError
from pipeline.guide.review.base import Finding
from pipeline.report import render
from pipeline.report.kernel import from_json as kernel_from_json
from pipeline.report.kernel import render_markdown as kernel_markdown
from pipeline.report.math import render_markdown as math_markdown
from pipeline.report.pr_comment import MARKER, build_comment, code_span, commit_status_for
from pipeline.report.review import render_markdown as review_markdown
from pipeline.report.speed import render_markdown as speed_markdown
from pipeline.results import baseline as baselines
from pipeline.results import table as tables
from pipeline.results.device import Device
from pipeline.results.pr import (
    SCHEMA,
    STATUS_DESCRIPTION_MAX,
    baseline_from_json,
    commit_id,
    math_from_json,
    strings,
    table_from_json,
    want,
)
from pipeline.results.speed import verdict_from_dict
from pipeline.run.shaders import ShaderCheck


@dataclass(frozen=True)
class PrResults:
    """What a PR's targeted run found: all the comment and the commit status are made of.

    ``results.json`` holds exactly this (``to_json`` / ``from_json``), so the comment can be
    rebuilt where neither the tree nor the tools are (``--post-from``).
    """

    pr: int
    base: str  # commit id
    head: str | None  # commit id; None: the work tree
    impact: Mapping[str, Any]  # Impact.to_dict()
    build_needed: bool
    build_ok: bool
    build_error: str | None  # the first compiler error, when the build failed
    test_error: str | None  # why the selected tests gave no results
    selectors: tuple[str, ...]  # the pytest -k selectors of the run
    run: str | None  # the run's folder under the results directory (junit.xml, pytest.log)
    table: tables.DtypeTable | None
    xfail_decisions: tuple[Mapping[str, Any], ...]
    xfail_diff: str  # unified diff of common_mps.py; never applied
    # the failing tests against the nightly history; None: not compared (all of them new)
    baseline: baselines.Baseline | None = None
    # the review checks' findings (``review --json``'s document); None: not run
    review: Mapping[str, Any] | None = None
    # kernel speed against main's: {"runner", "threshold", "nights", "verdicts"}; None: not run
    speed: Mapping[str, Any] | None = None
    # check-math of the changed kernels files (``check-math --json``'s document); None: not run
    math: Mapping[str, Any] | None = None
    # check-kernel of the changed kernel files: {"schema", "files": [check-kernel documents],
    # "errors"}, or {"schema", "skipped"}; None: not run
    kernels: Mapping[str, Any] | None = None
    # the build's shader check and toolchain (ShaderCheck.to_dict()); None: no build ran
    build_check: Mapping[str, Any] | None = None
    # the device the tests ran on (Device.to_dict()); None: not a Mac, or no tests ran
    device: Mapping[str, Any] | None = None

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
        return commit_status_for(self.counts, self.build_ok, classes)

    def title(self) -> str:
        """The comment's heading: what was selected, of how many consistency tests."""
        impact = self.impact
        selected, total = impact["selected"], impact["total"]
        if impact["full_sweep"]:
            return f"MPS consistency tests: full sweep ({selected:,} tests)"
        if not selected:
            return "MPS targeted tests: no consistency test affected"
        ops = len(impact["operators"])
        share = f"{selected / total:.1%}" if total else "?"
        return (
            f"MPS targeted tests: {ops} operator{'' if ops == 1 else 's'}, "
            f"{selected:,} of {total:,} consistency tests ({share})"
        )

    def comment(self, footer: str = "") -> str:
        """The comment's Markdown; ``footer`` is appended (a link to the workflow run)."""
        notes = []
        if self.impact["full_sweep"]:
            why = "; ".join(self.impact["full_sweep_reasons"])
            notes.append(f"Full sweep: {render.escape_markdown(why)}")
        if self.device is not None:
            device = Device.from_dict(self.device, "device")
            vm = " (a VM: its timings are not a Mac's)" if device.paravirtual else ""
            notes.append(render.escape_markdown(f"Tested on {device.label()}{vm}."))
        if self.build_check is not None:
            check = ShaderCheck.from_dict(self.build_check)
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
            operators=[(o["operator"], "; ".join(o["reasons"])) for o in self.impact["operators"]],
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
        if "skipped" in self.kernels:
            return (
                f"_check-kernel skipped: {render.escape_markdown(str(self.kernels['skipped']))}_\n"
            )
        reports = [kernel_from_json(d) for d in self.kernels["files"]]
        errors = [f"- not checked: {render.escape_markdown(e)}" for e in self.kernels["errors"]]
        return "\n".join([kernel_markdown(reports) if reports else "", *errors]).strip() + "\n"

    def _math(self) -> str:
        """check-math's table (or why it did not run), rendered here from data."""
        if self.math is None:
            return ""
        found = math_from_json(self.math)
        if isinstance(found, str):
            return f"_check-math skipped: {render.escape_markdown(found)}_\n"
        return math_markdown(found)

    def _sections(self) -> list[str]:
        """The review and speed sections, rendered here from data (also in --post-from)."""
        out = []
        if self.review is not None:
            findings = [Finding.from_dict(f, f"results.json: review.findings[{i}]")
                        for i, f in enumerate(self.review.get("findings") or [])]  # fmt: skip
            out.append(review_markdown(findings, strings(self.review.get("notes", []), "notes")))
        if self.speed is not None:
            verdicts = [verdict_from_dict(v, f"speed.verdicts[{i}]")
                        for i, v in enumerate(self.speed.get("verdicts") or [])]  # fmt: skip
            out.append(speed_markdown(verdicts, str(self.speed.get("runner")),
                                      float(self.speed.get("threshold", 1.1)),
                                      int(self.speed.get("nights", 0)),
                                      str(self.speed.get("device", "unknown"))))  # fmt: skip
        return out

    def to_json(self) -> dict[str, Any]:
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
            "impact": dict(self.impact),
            "device": None if self.device is None else dict(self.device),
            "build": {
                "needed": self.build_needed,
                "ok": self.build_ok,
                "error": self.build_error,
                "check": None if self.build_check is None else dict(self.build_check),
            },
            "tests": {
                "selectors": list(self.selectors),
                "error": self.test_error,
                "run": self.run,
                "counts": self.counts,
            },
            "table": None if self.table is None else self.table.to_dict(),
            "xfails": {
                "decisions": [dict(d) for d in self.xfail_decisions],
                "diff": self.xfail_diff,
            },
            "baseline": self.judged.to_dict(),
            "review": None if self.review is None else dict(self.review),
            "speed": None if self.speed is None else dict(self.speed),
            "math": None if self.math is None else dict(self.math),
            "kernels": None if self.kernels is None else dict(self.kernels),
        }

    @classmethod
    def from_json(cls, data: Any, pr: int) -> PrResults:
        """Read results.json back, checking every field used: it is data from another job,
        which ran the PR's code. Refuses results of another PR."""
        want(data, dict, "the top level")
        if data.get("schema") != SCHEMA:
            raise PipelineError(
                f"results.json has schema {data.get('schema')!r}, this version reads {SCHEMA}: "
                "write and post the results with the same mps-pipeline version"
            )
        if want(data.get("pr"), int, "pr") != pr:
            raise PipelineError(
                f"the results are for PR #{data['pr']}, not #{pr}; refusing to post them"
            )
        base = commit_id(data.get("base"), "base")
        head = None if data.get("head") is None else commit_id(data.get("head"), "head")
        impact = want(data.get("impact"), dict, "impact")
        for i, op in enumerate(want(impact.get("operators"), list, "impact.operators")):
            want(op, dict, f"impact.operators[{i}]")
            want(op.get("operator"), str, f"impact.operators[{i}].operator")
            strings(op.get("reasons"), f"impact.operators[{i}].reasons")
        want(impact.get("full_sweep"), bool, "impact.full_sweep")
        strings(impact.get("full_sweep_reasons"), "impact.full_sweep_reasons")
        want(impact.get("selected"), int, "impact.selected")
        want(impact.get("total"), int, "impact.total")
        build = want(data.get("build"), dict, "build")
        tests = want(data.get("tests"), dict, "tests")
        table = want(data.get("table"), (dict, type(None)), "table")
        xfails = want(data.get("xfails"), dict, "xfails")
        decisions = want(xfails.get("decisions"), list, "xfails.decisions")
        for i, d in enumerate(decisions):
            want(d, dict, f"xfails.decisions[{i}]")
        table = None if table is None else table_from_json(table)
        math = want(data.get("math"), (dict, type(None)), "math")
        if math is not None:
            math_from_json(math)  # refused now, before anything is posted
        kernels = want(data.get("kernels"), (dict, type(None)), "kernels")
        if kernels is not None and "skipped" not in kernels:
            strings(kernels.get("errors"), "kernels.errors")
            for i, doc in enumerate(want(kernels.get("files"), list, "kernels.files")):
                try:
                    kernel_from_json(want(doc, dict, f"kernels.files[{i}]"))
                except ValueError as exc:  # refused now, before anything is posted
                    raise PipelineError(f"results.json: kernels.files[{i}]: {exc}") from None
        device = want(data.get("device"), (dict, type(None)), "device")
        if device is not None:
            Device.from_dict(device, "results.json: device")  # refused before posting
        check = want(build.get("check"), (dict, type(None)), "build.check")
        if check is not None:
            try:
                ShaderCheck.from_dict(check)
            except ValueError as exc:
                raise PipelineError(f"results.json: build.check: {exc}") from None
        return cls(
            pr=pr,
            base=base,
            head=head,
            impact=impact,
            build_needed=want(build.get("needed"), bool, "build.needed"),
            build_ok=want(build.get("ok"), bool, "build.ok"),
            build_error=want(build.get("error"), (str, type(None)), "build.error"),
            test_error=want(tests.get("error"), (str, type(None)), "tests.error"),
            selectors=strings(tests.get("selectors"), "tests.selectors"),
            run=want(tests.get("run"), (str, type(None)), "tests.run"),
            table=table,
            xfail_decisions=tuple(decisions),
            xfail_diff=want(xfails.get("diff"), str, "xfails.diff"),
            baseline=baseline_from_json(data.get("baseline"), table),
            review=want(data.get("review"), (dict, type(None)), "review"),
            speed=want(data.get("speed"), (dict, type(None)), "speed"),
            math=math,
            kernels=kernels,
            build_check=check,
            device=device,
        )


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped (an error's headline)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
