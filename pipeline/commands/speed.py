"""`speed [OP ...] [--device mps|cpu] [--compare --runner NAME]`: the kernel micro-benchmark.

Without ``--compare`` (the nightly, on each Mac): time each operator (default: every
backlog operator and every one with a Metal functor), write ``speed.json`` for the
aggregation to record and print the figures. Without an MPS device (no Mac), say so once
and exit 2: ``--device cpu`` times the kernels on the CPU. With ``--compare`` (the PR job,
on the PR's build): judge the figures against main's in the nightly history from the same
device class (none for ``--device cpu``: "no baseline"); exit 1 when one is slower than
``speed.threshold`` and outside main's night-to-night spread.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import EXIT_OK, EXIT_WORK_LEFT, NoDeviceError, PipelineError, WorkLeftError
from pipeline.flows.speed import judge, measure
from pipeline.options import HISTORY
from pipeline.report.console import terminal
from pipeline.report.speed import (
    not_timed_lines,
    render_figures,
    render_markdown,
    render_paths,
    render_upstream,
)
from pipeline.results.baseline import RUNNER_ENV, history_at
from pipeline.run.speed import MAX_RUN_TIME, MIN_RUN_TIME


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="*", metavar="OP", help="operators (default: see above)")
    parser.add_argument("--device", default="mps", choices=("mps", "cpu"), help="default: mps")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="where speed.json goes (default: <state_dir>/speed)"
    )
    parser.add_argument(
        "--min-run-time", type=float, default=MIN_RUN_TIME, metavar="S",
        help=f"seconds each benchmark is timed at least (default {MIN_RUN_TIME})",
    )  # fmt: skip
    parser.add_argument(
        "--max-run-time", type=float, default=MAX_RUN_TIME, metavar="S",
        help="seconds a benchmark whose blocks still spread widely is timed at most "
        f"(default {MAX_RUN_TIME})",
    )  # fmt: skip
    parser.add_argument("--compare", action="store_true", help="judge against main's figures")
    HISTORY.add_to(parser)
    parser.add_argument(
        "--runner", metavar="NAME", help=f"this runner's configuration (default: ${RUNNER_ENV})"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    if not 0 < args.min_run_time <= args.max_run_time:
        raise PipelineError(
            "speed: --min-run-time must be a positive number of seconds, at most --max-run-time"
        )
    runner: str = args.runner or os.environ.get(RUNNER_ENV) or ""
    if args.compare and not runner:
        raise PipelineError(f"speed --compare: name the runner (--runner or ${RUNNER_ENV})")
    try:
        result = measure(
            settings, args.ops, device=args.device, folder=args.out,
            min_run_time=args.min_run_time, max_run_time=args.max_run_time,
        )  # fmt: skip
    except NoDeviceError as exc:
        raise exc.suggesting("to time the kernels on the CPU, pass --device cpu") from None
    for line in not_timed_lines(result.errors):
        print(f"warning: not timed: {line}", file=sys.stderr)
    if not result.measurements:
        raise WorkLeftError(
            f"speed: nothing was timed on {result.device}: every benchmark failed (the "
            "warnings above say why)"
        )
    if not args.compare:
        render_figures(result.measurements, result.device, terminal())
    beside = [
        *render_paths(result.measurements, result.forced),
        *render_upstream(result.measurements, result.upstream),
    ]
    if beside:
        sys.stdout.write("\n".join(beside))
    if result.upstream_error:
        print(f"warning: {result.upstream_error}", file=sys.stderr)
    print(f"speed: {len(result.measurements)} benchmarks on {result.device}: {result.path}",
          file=sys.stderr)  # fmt: skip
    if not args.compare:
        return EXIT_OK
    path = history_at(settings, args.history)
    if path is None:
        raise PipelineError("speed --compare: no nightly history here; pass --history FILE_OR_URL")
    report = judge(settings, result.measurements, path, runner, result.machine)
    label = result.machine.label() if result.machine is not None else f"{result.device} (unknown)"
    sys.stdout.write(render_markdown(replace(report, device=label)))
    return EXIT_WORK_LEFT if report.slower else EXIT_OK
