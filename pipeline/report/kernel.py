"""check-kernel's report: one line per kernel, its findings under it; and its JSON."""

from __future__ import annotations

from typing import Any

from pipeline.results.kernel import SCHEMA, KernelFileReport, KernelStatus
from pipeline.run.kernel_run import SCHEDULES, schedule_name


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


def to_json(report: KernelFileReport) -> dict[str, Any]:
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
