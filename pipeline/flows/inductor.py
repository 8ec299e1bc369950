"""Run the Inductor MPS test files a change selected (``Impact.inductor_tests``), whole.

Each file is its own pytest run, since the runner takes one test file; the reports are
merged into the run folder's ``junit.xml``. A selected file the tree lacks is listed as
missing, never run and never passed; a file that gave no report makes the whole run an
error, naming the file and its log.
"""

from __future__ import annotations

from pathlib import Path

from pipeline import sandbox
from pipeline.config import Settings
from pipeline.results import junit
from pipeline.results.inductor import InductorRun
from pipeline.run import tests as test_runner


def run_inductor_tests(settings: Settings, files: tuple[str, ...], label: str) -> InductorRun:
    """One pytest run per file of ``files`` (tree-relative) into a new results folder."""
    present = tuple(f for f in files if (settings.root / f).is_file())
    missing = tuple(f for f in files if f not in present)
    if not present:
        return InductorRun((), missing, error="no selected Inductor test file is in the tree")
    run_dir = test_runner.new_run_dir(settings.results_dir, label)
    reports: list[Path] = []
    for i, file in enumerate(present):
        result = test_runner.run(
            test_runner.TestRequest(
                python=settings.python,
                test_file=file,
                cwd=settings.root,
                selectors=(),
                junit_path=run_dir / f"junit-{i}.xml",
                log_path=run_dir / f"pytest-{Path(file).stem}.log",
                timeout=settings.test_timeout,
                extra_args=settings.pytest_args,
                env=sandbox.TEST_ENV if settings.is_sandbox else None,
            )
        )
        if not result.ran or not result.junit_path.is_file():
            folder = run_dir.relative_to(settings.results_dir).as_posix()
            error = f"{file}: pytest produced no JUnit report: {result.message}"
            return InductorRun(present, missing, error=error, run=folder)
        reports.extend(result.junit_paths or (result.junit_path,))
    merged = run_dir / "junit.xml"
    junit.merge_reports(reports, merged)
    cases = junit.parse_report(merged).cases
    return InductorRun.from_cases(
        present, missing, cases, run_dir.relative_to(settings.results_dir).as_posix()
    )
