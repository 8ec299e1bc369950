"""check-kernel's report: one line per kernel, its findings under it; a Markdown table (the
migrate summary, the PR comment); and its JSON, written and read back."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.fields import Fields
from pipeline.report.pr_comment import code_span
from pipeline.report.render import escape_markdown
from pipeline.results.kernel import SCHEMA, Finding, KernelCheck, KernelFileReport, KernelStatus
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


def from_fields(f: Fields) -> KernelFileReport:
    """A ``check-kernel --json`` document read back (pr-report's --post-from): every key
    popped and checked, nothing left over."""
    schema = f.pop("schema", int)
    if schema != SCHEMA:
        raise f.error("schema", f"schema {schema}, not {SCHEMA}")
    f.strings("schedules")  # for readers: the schedules each input ran under
    report = KernelFileReport(
        file=f.pop("file", str),
        kernels=tuple(_kernel_from_fields(k) for k in f.objs("kernels")),
        compiler=f.pop("compiler", str),
        headers=f.pop("headers", str),
        seconds=float(f.pop("seconds", float, int)),
        cached=f.pop("cached", bool),
        spec=f.pop("spec", str, type(None)),
        set_aside=f.strings("set_aside"),
    )
    f.done()
    return report


def _kernel_from_fields(f: Fields) -> KernelCheck:
    findings = []
    for finding in f.objs("findings"):
        findings.append(Finding(finding.pop("input", str), finding.pop("message", str)))
        finding.done()
    check = KernelCheck(
        kernel=f.pop("kernel", str),
        line=f.pop("line", int),
        status=f.enum("status", KernelStatus),
        findings=tuple(findings),
        inputs=f.pop("inputs", int),
        detail=f.pop("detail", str),
        reported=f.strings("reported"),
    )
    f.done()
    return check


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
