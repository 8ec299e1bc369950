"""The export flow: a night's results, or the history's last nights, as HUD rows
(:mod:`pipeline.results.hud`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.results import history, junit
from pipeline.results.hud import CiRun, HudRow, night_of, rows
from pipeline.results.nightly import collect_reports
from pipeline.tree.git import head_commit


def from_results(
    settings: Settings,
    results: Path,
    *,
    ci: CiRun,
    started: str | None = None,
    commit: str | None = None,
) -> tuple[tuple[HudRow, ...], list[str]]:
    """Every runner's reports under ``results`` (laid out as for ``nightly``) as rows, and
    the warnings of reading them; no readable test case at all is an input error."""
    reports, found = collect_reports(results, settings.runners)
    warnings = list(found)
    when = history.timestamp(started)
    tested = head_commit(settings.root) if commit is None else commit
    cases = {}
    for runner, paths in reports.items():
        parsed = junit.parse_reports(paths)
        warnings.extend(parsed.warnings)
        if parsed.cases:
            cases[night_of(when, runner, tested, ci, settings.runner_macos)] = parsed.cases
    if not cases:
        raise PipelineError(f"--results {results}: no JUnit report held a test case to export")
    return tuple(rows(cases)), warnings


def from_history(settings: Settings, at: history.HistoryLocation, nights: int) -> Iterator[HudRow]:
    """The last ``nights`` nightlies of the history ``at``, oldest first, as rows."""
    db = history.reader(at)
    try:
        for night in reversed(history.nightlies(db, nights)):
            for run in night.runs:
                ci = CiRun.from_source(run.source)
                one = night_of(run.started, run.runner, run.commit, ci, settings.runner_macos)
                yield from rows({one: history.run_cases(db, run.id)})
    finally:
        db.close()
