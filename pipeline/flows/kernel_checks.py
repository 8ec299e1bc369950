"""check-kernel in the flows: the migrate chain's stage for an operator without an
element-wise functor, the kernel files a PR changes, and every kernel file (``check-kernel
--all``, which the nightly runs) with the findings that are new since the last run.

Which kernels are an operator's: the host names of the launch-spec entries (and of the
launches read from the ``.mm`` host code) that are one of the operator's kernel names, or
start with one followed by ``_`` (``softmax`` -> ``softmax_rows_float_int``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from pipeline import state
from pipeline.config import Settings
from pipeline.errors import ConfigError, DocumentError, WorkLeftError
from pipeline.fields import dump, read
from pipeline.flows import kernel
from pipeline.flows.request import Request
from pipeline.fsio import write_atomic
from pipeline.report.kernel import render_lines, render_markdown, to_json
from pipeline.results.kernel import KernelFileReport, KernelsSection
from pipeline.run import reference
from pipeline.tree import host_launch, launch, paths
from pipeline.tree.index import load_index

LAST_RUN = "history/check-kernel.json"  # beside the nightly history, saved with it


def kernel_files(settings: Settings) -> list[Path]:
    return sorted((settings.root / paths.KERNELS_DIR).glob("*.metal"))


def _belongs(host_name: str, names: Sequence[str]) -> bool:
    return any(host_name == n or host_name.startswith(f"{n}_") for n in names)


def _literal_prefix(pattern: str) -> str:
    """The host names a read launch gives, up to their first type part."""
    return re.sub(r"\\(.)", r"\1", pattern.split(host_launch.TYPE_PART)[0])


def for_operator(
    settings: Settings, names: Sequence[str]
) -> tuple[list[KernelFileReport], list[str]]:
    """check-kernel of the kernels an operator goes by ``names``, one report per file; and
    what could not be checked, with why (a launch read, but no entry to compare it by)."""
    launches = host_launch.read_launches(settings.root)
    reports, notes = [], []
    for metal in kernel_files(settings):
        spec_path = launch.spec_path(settings.kernel_specs, metal)
        spec = launch.read_spec(spec_path) if spec_path.is_file() else None
        mine = [n for n in kernel.resolve(spec, launches) if _belongs(n, names)]
        if mine:
            reports.append(kernel.run_check(settings, str(metal), kernels=mine))
    if not reports:  # a launch of it read, but no entry saying what to compare it with
        for h in launches:
            prefix = _literal_prefix(h.kernel)
            if h.kernel and _belongs(prefix, names):
                notes.append(
                    f"{h.where} launches {prefix}... but no launch spec in "
                    f"{settings.kernel_specs} has an entry for it (reference, inputs: "
                    "docs/check-kernel.md)"
                )
    return reports, notes


def stage(request: Request, console: Console, no_functor: str) -> None:
    """check_math's stage for an operator with no element-wise functor: its whole kernels,
    when a launch spec (or a launch read from the host code) gives one; a finding stops the
    chain before the build. Skipped, saying why, when no kernel of it can be checked."""
    settings = request.settings
    files = state.op_files(settings, request.op)
    record = load_index(settings.tree).record(request.op, find_references=False)
    try:
        reports, notes = for_operator(settings, record.kernel_names)
    except reference.NoTorchError as exc:
        reports, notes = [], [str(exc)]
    if not any(r.checked for r in reports):
        why = "; ".join(notes + [f"{r.file}: no kernel of it checked" for r in reports])
        skipped = f"{no_functor}; and check-kernel: {why or 'no kernel file launches it'}"
        note = f"check-math skipped: {skipped}"
        console.print(note, markup=False, highlight=False)
        state.write_text(files.math_json, json.dumps({"schema": 1, "skipped": skipped}))
        state.write_text(files.math_md, f"_{note}_\n")
        return
    for r in reports:
        console.print("\n".join(render_lines(r)), markup=False, highlight=False)
    doc = {"schema": 1, "kernels": [to_json(r) for r in reports], "notes": notes}
    state.write_text(files.math_json, json.dumps(doc, indent=2))
    state.write_text(files.math_md, render_markdown(reports))
    bad = [k.kernel for r in reports for k in r.kernels if k.failed]
    if bad:
        raise WorkLeftError(
            f"check-kernel: {', '.join(bad)} fail(s) on the host (above); fix the kernel "
            "before building"
        )


def for_files(settings: Settings, metals: Sequence[Path]) -> KernelsSection | None:
    """check-kernel of those of ``metals`` (a PR's changed kernel files) that have a launch
    spec; skipped, saying why, when it cannot run here at all (no torch, no compiler); None
    when no file has a spec (an element-wise file's functors are check-math's)."""
    metals = [m for m in metals if launch.spec_path(settings.kernel_specs, m).is_file()]
    if not metals:
        return None
    try:
        runners = kernel.runners_for(settings)
    except ConfigError as exc:
        return KernelsSection(skipped=str(exc))
    reports, errors = [], []
    for metal in metals:
        try:
            reports.append(kernel.run_check(settings, str(metal), runners=runners))
        except ConfigError as exc:  # a bad launch spec: this file only
            errors.append(f"{metal.name}: {exc}")
    return KernelsSection(tuple(reports), tuple(errors))


@dataclass(frozen=True)
class AllRun:
    """Every kernel file checked: the reports, the files that could not be (why), and the
    findings not in the last run's record."""

    reports: tuple[KernelFileReport, ...]
    errors: tuple[str, ...]
    new: tuple[str, ...]


def _last_findings(record: Path) -> frozenset[str]:
    """The findings the last run recorded; none when there was no run yet (or the record
    is damaged): every finding is new."""
    try:
        last = read(_LastRun, json.loads(record.read_text(encoding="utf-8")), record.name)
    except (OSError, ValueError, DocumentError):
        return frozenset()
    return frozenset(last.findings)


@dataclass(frozen=True)
class _LastRun:
    """``check-kernel.json``: the findings of the last ``check-kernel --all``."""

    schema: int
    findings: tuple[str, ...]


def _finding_keys(reports: Sequence[KernelFileReport]) -> list[str]:
    """One line per finding (and per kernel that does not compile), the same across runs."""
    out = []
    for r in reports:
        for k in r.kernels:
            if k.failed and not k.findings:
                out.append(f"{r.file}: {k.kernel}: {k.status.value}")
            out += [f"{r.file}: {k.kernel}: {f.input}: {f.message}" for f in k.findings]
    return out


def check_all(settings: Settings) -> AllRun:
    """check-kernel of every kernel file of the tree; the findings recorded in
    ``<state_dir>/history/check-kernel.json`` for the next run to tell new ones by."""
    runners = kernel.runners_for(settings)
    reports, errors = [], []
    for metal in kernel_files(settings):
        try:
            reports.append(kernel.run_check(settings, str(metal), runners=runners))
        except ConfigError as exc:
            errors.append(f"{metal.name}: {exc}")
    record = settings.state_dir / LAST_RUN
    last = _last_findings(record)
    found = _finding_keys(reports)
    record.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(record, json.dumps(dump(_LastRun(1, tuple(found))), indent=1))
    return AllRun(tuple(reports), tuple(errors), tuple(f for f in found if f not in last))
