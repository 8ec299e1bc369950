"""What a PR's comment adds to its targeted tests: check-math of the affected operators'
functors, the review checks and kernel speed (``pr-report --no-math``, ``--no-review``,
``--speed DEVICE``). The Mac job (no history there) measures; the posting job, which has
main's history, judges the measurements results.json carries.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from pipeline.config import Settings
from pipeline.errors import (
    DeviceRefusedError,
    NoCompilerError,
    NoDeviceError,
    NothingToCheckError,
    NoTorchError,
)
from pipeline.report.pr import PrResults
from pipeline.results import baseline as baselines
from pipeline.results.device import Device
from pipeline.results.kernel import KernelsSection
from pipeline.results.math import MathReport, MathSkipped
from pipeline.results.speed import Measurement, SpeedReport, compare


@dataclass(frozen=True)
class Sections:
    """The sections pr-report's flags ask for, and what judging the speed needs."""

    math: bool
    review: bool
    speed: str | None  # the device to time the kernels on; None: no speed section
    runner: str  # the runner configuration the tests run on; "": unknown
    history: str | None  # the nightly history given, a file or a URL (None: the setting's)


def annotator(settings: Settings, sections: Sections) -> Callable[[PrResults, bool], PrResults]:
    """``annotate(results, loaded)`` for :func:`pipeline.flows.pr.report`: ``loaded``
    results (read back from results.json) only have their measurements judged again."""

    def annotate(results: PrResults, loaded: bool) -> PrResults:
        if loaded:
            speed = results.speed
            if speed is not None and speed.measurements:
                again = judged(settings, sections.history, speed.runner, speed.measurements,
                               speed.machine)  # fmt: skip
                results = replace(results, speed=replace(again, device=speed.device))
            return results
        from pipeline.flows.review import review
        from pipeline.guide.review import ReviewDocument

        ops = [o.operator for o in results.impact.operators]
        if sections.math and ops:
            results = replace(results, math=check_math(settings, ops))
        if sections.math:
            results = replace(results, kernels=changed_kernels(settings, results))
        if sections.review:
            found = review(settings, results.base, results.head)
            document = ReviewDocument(found.findings, found.ran, found.notes)
            results = replace(results, review=document)
        if sections.speed and results.build_ok:
            results = replace(results, speed=measured(settings, sections, ops))
        return results

    return annotate


def check_math(settings: Settings, ops: list[str]) -> MathReport | MathSkipped:
    """check-math of ``ops``' functors, or why it cannot run here (no functor, no compiler,
    no torch), as the migrate chain's stage records it."""
    from pipeline.flows.math import run_check

    try:
        return run_check(settings, ops=ops)
    except (NothingToCheckError, NoCompilerError, NoTorchError) as exc:
        return MathSkipped(str(exc))


def changed_kernels(settings: Settings, results: PrResults) -> KernelsSection | None:
    """check-kernel of the kernel files the PR changes that have a launch spec (None: none)."""
    from pipeline.flows.kernel_checks import for_files
    from pipeline.impact import changed_files
    from pipeline.tree.paths import KERNELS_DIR

    changed = [
        settings.root / c.path for c in changed_files(settings.root, results.base, results.head)
        if c.status != "D" and c.path.startswith(f"{KERNELS_DIR}/") and c.path.endswith(".metal")
    ]  # fmt: skip
    return for_files(settings, changed) if changed else None


def measured(settings: Settings, sections: Sections, ops: list[str]) -> SpeedReport | None:
    """``ops`` timed on this build, judged if a history is here; None (no speed section: the
    tests' comment still goes out) when there is no such device here."""
    from pipeline.flows.speed import measure

    assert sections.speed is not None
    try:
        timed = measure(settings, ops, device=sections.speed) if ops else None
    except NoDeviceError as exc:
        left_out = "the comment has no kernel speed (--speed cpu times the kernels on the CPU)"
        print(f"warning: {exc.suggesting(left_out)}", file=sys.stderr)
        return None
    except DeviceRefusedError as exc:
        print(f"warning: {exc}; the comment has no kernel speed", file=sys.stderr)
        return None
    found = timed.measurements if timed is not None else ()
    machine = timed.machine if timed is not None else None
    # what the Mac's commands said; the CPU's figures name the CPU
    device = machine.label() if machine is not None else f"{sections.speed} (unknown)"
    report = judged(settings, sections.history, sections.runner, tuple(found), machine)
    return replace(report, device=device)


def judged(
    settings: Settings,
    history: str | None,
    runner: str,
    found: tuple[Measurement, ...],
    machine: Device | None,
) -> SpeedReport:
    """``found`` (timed on ``machine``) against main's figures from its device class, when
    there is a history."""
    from pipeline.flows.speed import judge

    path = baselines.history_at(settings, history)
    threshold = settings.review.speed_threshold
    if path is not None and runner:
        return judge(settings, found, path, runner, machine)
    verdicts = compare(found, {}, threshold=threshold, min_nights=1)
    return SpeedReport(runner, found, threshold, 0, verdicts, machine=machine)
