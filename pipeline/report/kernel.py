"""check-kernel's report: one line per kernel, its findings under it; a Markdown table (the
migrate summary, the PR comment); and its JSON, written and read back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.report.pr_comment import code_span
from pipeline.report.render import escape_markdown
from pipeline.results.kernel import SCHEMA, KernelCheck, KernelFileReport, KernelStatus
from pipeline.run.kernel_run import SCHEDULES, schedule_name

SHOWN_FINDINGS = 3  # per kernel in the Markdown table


def render_lines(report: KernelFileReport) -> list[str]:
    cached = "cached" if report.cached else f"built in {report.seconds:.1f} s"
    schedules = ", ".join(schedule_name(s, seed) for s, seed in SCHEDULES)
    out = [
        f"{report.file}: {len(report.kernels)} kernel(s), {report.checked} checked "
        f"({cached}; {report.compiler}; headers: {report.headers}; schedules: {schedules})"
    ]
    if report.set_aside:
        out.append(f"  set aside (not compiled on the host): {', '.join(report.set_aside)}")
    for k in report.kernels:
        line = f"  {k.status.value:<14} {k.kernel} (line {k.line})"
        if k.status in (KernelStatus.OK, KernelStatus.FAILED):
            line += f": {k.inputs} inputs x {len(SCHEDULES)} schedules"
        if k.detail:
            line += f": {k.detail}"
        out.append(line)
        out += [f"      {f.input}: {f.message}" for f in k.findings]
        out += [f"      reported, as torch refuses it too: {m}" for m in k.reported]
    if report.checked == 0:
        out.append("nothing was checked: no kernel of the file both built and has a launch spec")
    return out


def to_json(report: KernelFileReport) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "file": report.file,
        "compiler": report.compiler,
        "headers": report.headers,
        "spec": report.spec,
        "cached": report.cached,
        "seconds": round(report.seconds, 3),
        "set_aside": list(report.set_aside),
        "schedules": [schedule_name(s, seed) for s, seed in SCHEDULES],
        "kernels": [
            {
                "kernel": k.kernel,
                "line": k.line,
                "status": k.status.value,
                "inputs": k.inputs,
                "detail": k.detail,
                "findings": [{"input": f.input, "message": f.message} for f in k.findings],
                "reported": list(k.reported),
            }
            for k in report.kernels
        ],
    }


@dataclass(frozen=True)
class KernelFileDoc:
    """A ``check-kernel --json`` document (:func:`to_json`), as pr-report's --post-from
    reads it back; ``schedules`` is for readers: the schedules each input ran under."""

    schema: int
    file: str
    compiler: str
    headers: str
    spec: str | None
    cached: bool
    seconds: float
    set_aside: tuple[str, ...]
    schedules: tuple[str, ...]
    kernels: tuple[KernelCheck, ...]

    def __post_init__(self) -> None:
        if self.schema != SCHEMA:
            raise ValueError(f"schema {self.schema}, not {SCHEMA}")

    def report(self) -> KernelFileReport:
        return KernelFileReport(
            file=self.file,
            kernels=self.kernels,
            compiler=self.compiler,
            headers=self.headers,
            seconds=self.seconds,
            cached=self.cached,
            spec=self.spec,
            set_aside=self.set_aside,
        )


def render_markdown(reports: Sequence[KernelFileReport]) -> str:
    """The table of the migrate summary and the PR comment: one row per kernel checked or
    not, its findings (the first few) beside it."""
    lines = []
    for report in reports:
        lines += [
            f"**{escape_markdown(report.file)}**: {len(report.kernels)} kernel(s), "
            f"{report.checked} checked _({escape_markdown(report.compiler)}; headers: "
            f"{escape_markdown(report.headers)})_",
            "",
            "| kernel | status | inputs | findings |",
            "|---|---|---|---|",
        ]
        for k in report.kernels:
            shown = [f"{f.input}: {f.message}" for f in k.findings[:SHOWN_FINDINGS]]
            if len(k.findings) > SHOWN_FINDINGS:
                shown.append(f"{len(k.findings) - SHOWN_FINDINGS} more")
            what = "; ".join(escape_markdown(x) for x in shown or ([k.detail] if k.detail else []))
            lines.append(f"| {code_span(k.kernel)} | {k.status.value} | {k.inputs} | {what} |")
        lines.append("")
    return "\n".join(lines).strip() + "\n"
