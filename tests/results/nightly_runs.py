"""Nightly results from real pytest runs, laid out as the nightly workflow downloads them.

The reports come from real pytest runs of a tiny generated unittest file whose tests carry
the sandbox's operator names (so the sandbox's common_mps.py xfail entries apply); an
environment variable picks which tests fail. The ``nights`` fixture (tests/conftest.py)
serves them to the analysis tests (tests/results/test_nightly.py) and the command's
(tests/commands/test_nightly.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pipeline.flows import nightly
from pipeline.guide.backlog import backlog
from pipeline.report.nightly import publish
from pipeline.sandbox import TEST_ENV

RUNNERS = ("macos-m1-14", "macos-m2-15", "macos-m2-26")

TINY = """
import os
import unittest
from pathlib import Path

FAIL = set(os.environ.get("TINY_FAIL", "").split(","))
ONCE = os.environ.get("TINY_FAIL_ONCE")  # a file: fail the first attempt only


def check(name):
    if name in FAIL:
        raise AssertionError(f"{name}: mismatch <script>alert('x')</script> at index 3")


class TestConsistencyMPS(unittest.TestCase):
    @unittest.expectedFailure
    def test_output_match_atan2_mps_int64(self):
        check("atan2_int64")

    @unittest.expectedFailure
    def test_output_match_atan2_mps_int32(self):
        check("atan2_int32")

    def test_output_match_atan2_mps_float32(self):
        check("atan2_float32")

    @unittest.expectedFailure
    def test_output_match_fmod_mps_float16(self):
        check("fmod_float16")

    @unittest.expectedFailure
    def test_output_match_hypot_mps_float32(self):
        check("hypot_float32")

    @unittest.expectedFailure
    def test_output_match_hypot_mps_float16(self):
        check("hypot_float16")

    def test_output_match_sub_mps_float32(self):
        if ONCE and not Path(ONCE).exists():
            Path(ONCE).write_text("failed once")
            raise AssertionError("first attempt fails")
"""

BASE_FAIL = "hypot_float16"


def _pytest(workdir: Path, out: Path, *args: str, **env: str) -> tuple[subprocess.Popen, Path]:
    """Start pytest on the tiny file; plugins are not auto-loaded (a third faster)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_tiny.py", "-q", "-p", "no:cacheprovider",
         f"--junitxml={out}", "-o", "junit_family=xunit2", *args],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **TEST_ENV, "TINY_FAIL": BASE_FAIL, **env},
    )  # fmt: skip
    return proc, out


# each scenario's JUnit files, by name ("good" has 2 shards)
REPORTS = {
    "good": ("good-1.xml", "good-2.xml"),
    "bad": ("bad.xml",),
    "flaky": ("flaky.xml",),
    "old": ("old.xml",),
}


def reports_in(work: Path) -> dict[str, tuple[Path, ...]]:
    """The JUnit files ``tiny_reports(work)`` wrote, by scenario."""
    return {scenario: tuple(work / name for name in names) for scenario, names in REPORTS.items()}


def tiny_reports(work: Path) -> dict[str, tuple[Path, ...]]:
    """JUnit files of real pytest runs in ``work`` (run side by side), by scenario
    (``reports_in``).

    good: atan2 int64/int32, fmod float16 and hypot float32 xpass, hypot float16 xfails.
    bad: the same, but atan2 int64 fails again (xfail) and atan2 float32 fails.
    flaky: like good, and sub float32 fails its first attempt, passes its rerun.
    old: like good, but atan2 int64 still fails (xfail): what an older macOS would show.
    """
    (work / "test_tiny.py").write_text(TINY)
    rerun = ("-p", "pytest_rerunfailures", "--reruns", "1")
    out = reports_in(work)
    runs = {
        "good": [
            _pytest(work, out["good"][0], "-k", "atan2"),
            _pytest(work, out["good"][1], "-k", "not atan2"),
        ],
        "bad": [_pytest(work, out["bad"][0], TINY_FAIL=f"{BASE_FAIL},atan2_int64,atan2_float32")],
        "flaky": [_pytest(work, out["flaky"][0], *rerun, TINY_FAIL_ONCE=str(work / "once"))],
        "old": [_pytest(work, out["old"][0], TINY_FAIL=f"{BASE_FAIL},atan2_int64")],
    }
    for proc, report in (job for jobs in runs.values() for job in jobs):
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode in (0, 1) and report.is_file(), output
    return out


class Nights:
    """Lays out results/<runner>/shard-<n>.xml like the workflow's download, night by night."""

    def __init__(self, base: Path, reports: dict[str, tuple[Path, ...]]) -> None:
        self.base, self.reports, self.count = base, reports, 0

    def results(self, default: str = "good", **per_runner: str) -> Path:
        self.count += 1
        results = self.base / f"night-{self.count}"
        for runner in RUNNERS:
            scenario = per_runner.get(runner.replace("-", "_"), default)
            if scenario == "missing":
                continue
            for n, report in enumerate(self.reports[scenario], 1):
                dest = results / runner / f"shard-{n}.xml"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(report, dest)
        return results


def sandbox_sweep(root: Path, results: Path, macos: dict[str, str], tests: str) -> None:
    """Run the built sandbox's own test/test_mps.py (``-k tests``) once per runner, side by
    side, each on its simulated macOS release (runner -> ``MPS_SIM_MACOS_VERSION``): the
    reports land in ``results/<runner>/shard-1.xml``, as the workflow downloads them."""
    from pipeline.sandbox import backend

    sweeps = []
    for runner, version in macos.items():
        report = results / runner / "shard-1.xml"
        report.parent.mkdir(parents=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "test/test_mps.py", "-k", tests,
             f"--junitxml={report}"],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **TEST_ENV, backend.MACOS_ENV: version},
        )  # fmt: skip
        sweeps.append((proc, report))
    for proc, report in sweeps:
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1) and report.is_file(), output


def run(settings, results: Path, **kw) -> dict:
    """Record and publish a nightly as the command does; its summary.json."""
    outcome = nightly.run_nightly(settings, results, backlog_of=backlog, **kw)
    publish(outcome)
    return outcome.summary.to_json()


def proposed(summary: dict) -> dict[str, tuple[str, list[str] | None]]:
    return {d["key"]: (d["action"], d["new_dtypes"]) for d in summary["proposals"]}
