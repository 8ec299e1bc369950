"""Run selected tests of test_mps.py under pytest with JUnit XML, a live progress bar and a log.

Selection is pytest's ``-k`` with the selectors (substrings such as
``test_output_match_atan2_``) joined by `` or ``. A per-PR selection is a few selectors; the
``-k`` expression is kept under ``K_EXPRESSION_LIMIT`` characters by splitting a long list into
batches, one pytest run each: the first writes ``junit_path``, batch ``i`` writes
``junit_path.with_suffix(".<i>.xml")``, all of them append to the one log, and
``TestRunResult.junit_paths`` lists every report (feed them to
``pipeline.results.junit.parse_reports``). Batches keep pytest's own ``-k`` semantics exactly
and need nothing installed in the interpreter under test, at the price of importing the test
file once per batch.

pytest runs with ``-v`` rather than ``-q``: verbose mode prints one line per test as it
finishes, which is what the progress bar counts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.results.junit import DISPLAY_ORDER
from pipeline.run.progress import ProgressDisplay, progress_display, stream, strip_ansi

K_EXPRESSION_LIMIT = 8_000
# The plugin that makes pytest's verbose line say XPASS where the JUnit report does.
PLUGIN_DIR = Path(__file__).resolve().parent / "pytest_plugin"
PLUGIN = "mps_pipeline_outcomes"
# What pytest's -k grammar accepts as one identifier (plus nothing that is a keyword).
_SELECTOR = re.compile(r"[\w:+\-.\[\]\\/]+")
_KEYWORDS = {"or", "and", "not", "true", "false", "none"}
_COLLECTED = re.compile(r"collected (\d+) items?(?: / (\d+) deselected)?(?: / (\d+) selected)?")
_RESULT = re.compile(r"(?P<nodeid>\S+::\S+) (?P<word>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_WORDS = {
    "PASSED": "pass",
    "FAILED": "fail",
    "ERROR": "error",
    "SKIPPED": "skip",
    "XFAIL": "xfail",
    "XPASS": "xpass",
}
# Outcome names in display order. junit is already loaded wherever this module is (migrate).
OUTCOMES = tuple(o.value for o in DISPLAY_ORDER)
# pytest exit codes that mean "the tests ran" (1: some failed) or "nothing matched" (5).
_RAN = (0, 1)
_NOTHING_COLLECTED = 5
# Is pytest importable by the interpreter under test? find_spec locates it without importing
# it: the probe costs one interpreter start-up (~25 ms measured; `import pytest` is ~140 ms),
# so it runs before every test run and nothing is cached.
_PYTEST_PROBE = (
    "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('pytest') else 3)"
)
_NO_PYTEST = 3
PROBE_TIMEOUT = 60
# Lines of a pytest log that say what went wrong (searched from the end of the log).
_ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:[\w.]*(?:Error|Exception|Exit)\b|Fatal Python error\b|error:)"
    r"|No module named |can't open file "
)
_BANNER = re.compile(r"^[=_!*-]{3,}")
_LOG_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class TestRequest:
    """One targeted run of ``test_file`` (relative to ``cwd``) with ``python -m pytest``.

    Empty ``selectors`` run the whole file. ``env`` entries are added to the inherited
    environment. ``extra_args`` go last on the pytest command line.
    """

    __test__ = False  # not a pytest test class, despite the name

    python: str
    test_file: str
    cwd: Path
    selectors: tuple[str, ...]
    junit_path: Path
    log_path: Path
    timeout: float
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        for selector in self.selectors:
            if not _SELECTOR.fullmatch(selector) or selector.lower() in _KEYWORDS:
                raise ValueError(
                    f"test selector {selector!r} is not a plain pytest -k name "
                    "(letters, digits, _ - . : / [ ] only)"
                )


@dataclass(frozen=True)
class TestRunResult:
    """What a run produced. ``counts`` are per outcome (pass fail error xfail xpass skip) as
    pytest printed them; the JUnit reports are the authority, ``counts`` are for display."""

    __test__ = False

    returncode: int
    seconds: float
    junit_path: Path
    log_path: Path
    timed_out: bool
    collected: int | None
    counts: dict[str, int]
    junit_paths: tuple[Path, ...] = ()
    running: str | None = None
    message: str = ""
    batches: int = 1

    @property
    def ran(self) -> bool:
        """True when pytest ran the selection to the end (some tests may have failed)."""
        return not self.timed_out and self.returncode in _RAN


@dataclass
class _Tally:
    """Per-line state of a pytest run: what was collected and how each test ended."""

    bar: ProgressDisplay
    collected: int | None = None
    batch_collected: int | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    partial: str | None = None
    usage_error: str | None = None

    def on_line(self, raw: str) -> None:
        line = strip_ansi(raw).rstrip()
        self.partial = None
        if (count := parse_collected(line)) is not None and self.batch_collected is None:
            self.batch_collected = count
            self.collected = (self.collected or 0) + count
        elif result := parse_test_line(line):
            # A teardown error prints the test a second time: keep the last word.
            self.outcomes[result[0]] = result[1]
        elif "::" in line and raw.endswith(" "):
            # -v prints "nodeid " before running a test; seen last, it is the one that hung.
            self.partial = line.strip()
        elif line.startswith("ERROR: ") and self.usage_error is None:
            self.usage_error = line
        else:
            return
        self.bar.update(len(self.outcomes), self.collected, _counts_text(self.counts()))

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for outcome in self.outcomes.values():
            counts[outcome] += 1
        return counts


def parse_collected(line: str) -> int | None:
    """How many tests will run, from ``collected N items [/ D deselected / S selected]``."""
    match = _COLLECTED.search(strip_ansi(line))
    if match is None:
        return None
    collected, deselected, selected = (int(g) if g else None for g in match.groups())
    if selected is not None:
        return selected
    if collected is None:  # not optional in the pattern
        return None
    return collected - (deselected or 0)


def parse_test_line(line: str) -> tuple[str, str] | None:
    """``(nodeid, outcome)`` from a pytest ``-v`` result line, outcome as in OUTCOMES."""
    match = _RESULT.match(strip_ansi(line))
    if match is None:
        return None
    nodeid, word = match.groups()
    return nodeid, _WORDS[word]


def with_plugin(env: Mapping[str, str]) -> dict[str, str]:
    """``env``, a child's whole environment, with the plugin's folder first on its
    PYTHONPATH: the child's pytest loads the plugin, and still finds what the path had."""
    inherited = env.get("PYTHONPATH", "")
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(PLUGIN_DIR), inherited) if p)}


def k_expression(selectors: Sequence[str]) -> str:
    """The ``-k`` expression that selects any of ``selectors``."""
    return " or ".join(selectors)


def selector_batches(
    selectors: Sequence[str], limit: int = K_EXPRESSION_LIMIT
) -> tuple[tuple[str, ...], ...]:
    """Split ``selectors`` so that each batch's ``-k`` expression stays within ``limit``
    characters (a single longer selector gets a batch of its own). Order is kept."""
    batches: list[list[str]] = []
    size = 0
    for selector in selectors:
        extra = len(selector) + (len(" or ") if batches and batches[-1] else 0)
        if batches and batches[-1] and size + extra <= limit:
            batches[-1].append(selector)
            size += extra
        else:
            batches.append([selector])
            size = len(selector)
    return tuple(tuple(batch) for batch in batches)


def junit_path_for(junit_path: Path, batch: int) -> Path:
    """Where batch ``batch`` (0-based) writes its JUnit report."""
    return junit_path if batch == 0 else junit_path.with_suffix(f".{batch}.xml")


def pytest_command(request: TestRequest, selectors: Sequence[str], junit_path: Path) -> list[str]:
    """The command line of one pytest run over ``selectors`` (all tests when empty)."""
    command = [request.python, "-m", "pytest", request.test_file]
    if selectors:
        command += ["-k", k_expression(selectors)]
    return [
        *command,
        f"--junitxml={junit_path}",
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN,
        "-v",
        "-rN",
        "--color=no",
        *request.extra_args,
    ]


def run(request: TestRequest, *, progress: bool = True) -> TestRunResult:
    """Run the selected tests with a live pass/fail/xfail progress bar (stderr).

    The timeout covers all batches together; on timeout the process group is killed and the
    JUnit file of the batch that was running may be missing or truncated. Raises
    PipelineError when the interpreter or the working directory is missing.
    """
    if not request.cwd.is_dir():
        raise PipelineError(f"test working directory {request.cwd} does not exist")
    batches = selector_batches(request.selectors, K_EXPRESSION_LIMIT) or ((),)
    env = with_plugin({**os.environ, **(request.env or {}), "PYTHONUNBUFFERED": "1"})
    check_pytest(request.python, cwd=request.cwd, env=env)
    request.junit_path.parent.mkdir(parents=True, exist_ok=True)
    junit_paths: list[Path] = []
    returncodes: list[int] = []
    seconds = 0.0
    timed_out = False

    with progress_display("tests", progress) as bar:
        tally = _Tally(bar)
        for i, batch in enumerate(batches):
            remaining = request.timeout - seconds
            if remaining <= 0:
                timed_out = True
                break
            junit = junit_path_for(request.junit_path, i)
            # A stale report from an earlier run must not pass for this run's.
            junit.unlink(missing_ok=True)
            tally.batch_collected = None
            try:
                outcome = stream(
                    pytest_command(request, batch, junit),
                    cwd=request.cwd,
                    log_path=request.log_path,
                    timeout=remaining,
                    on_line=tally.on_line,
                    env=env,
                    append=i > 0,
                )
            except FileNotFoundError as exc:
                raise _not_found(request.python, exc) from exc
            seconds += outcome.seconds
            returncodes.append(outcome.returncode)
            if junit.exists():
                junit_paths.append(junit)
            if outcome.timed_out:
                timed_out = True
                break

    returncode = _combined_returncode(returncodes)
    result = TestRunResult(
        returncode=returncode,
        seconds=seconds,
        junit_path=request.junit_path,
        log_path=request.log_path,
        timed_out=timed_out,
        collected=tally.collected,
        counts=tally.counts(),
        junit_paths=tuple(junit_paths),
        running=tally.partial if timed_out else None,
        batches=len(batches),
    )
    return _with_message(result, request, tally)


def _not_found(python: str, exc: OSError) -> PipelineError:
    return PipelineError(
        f"cannot run tests: {exc.filename or python!r} not found; set "
        "python= (the 'python' key of .mps-pipeline.yaml) or MPS_PIPELINE_PYTHON"
    )


def check_pytest(python: str, *, cwd: Path, env: Mapping[str, str] | None = None) -> None:
    """Raise PipelineError (exit 2) unless ``python -m pytest`` would find pytest.

    The probe runs like the tests do (same ``cwd``, ``env`` added to the inherited
    environment), so a pytest reachable only through PYTHONPATH counts. A probe that cannot
    tell (the interpreter crashes, hangs) lets the run go ahead: its log then says why.
    """
    try:
        probe = subprocess.run(
            [python, "-c", _PYTEST_PROBE],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
        )
    except FileNotFoundError as exc:
        raise _not_found(python, exc) from exc
    except (OSError, subprocess.TimeoutExpired):
        return
    if probe.returncode == _NO_PYTEST:
        shown = shutil.which(python) or python
        raise PipelineError(
            f"python={shown} has no pytest: pip install pytest into it "
            "(or set python= / MPS_PIPELINE_PYTHON to an interpreter that has it)"
        )


def last_error(log_path: Path) -> str:
    """What went wrong, from the end of a pytest log: its last error line (``E   ...Error:
    ...``, ``No module named ...``), else its last few lines; "" when the log is empty."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [
        line
        for raw in text.splitlines()
        if (line := strip_ansi(raw).strip())
        and not line.startswith("$ ")  # the command line the log starts with
        and not _BANNER.match(line)
    ]
    for line in reversed(lines):
        if _ERROR_LINE.search(line):
            return re.sub(r"^E\s+", "", line)
    return "\n".join(lines[-3:])


def _combined_returncode(returncodes: Sequence[int]) -> int:
    """0 when every batch passed or selected nothing (and one passed); else the first
    failure's code; 5 when no batch selected anything."""
    for code in returncodes:
        if code not in (0, _NOTHING_COLLECTED):
            return code
    if returncodes and all(code == _NOTHING_COLLECTED for code in returncodes):
        return _NOTHING_COLLECTED
    return 0


def _with_message(result: TestRunResult, request: TestRequest, tally: _Tally) -> TestRunResult:
    """One line (two for a log excerpt) saying how the run ended; the caller adds the log."""
    done = sum(result.counts.values())
    if result.timed_out:
        where = f" while running {result.running}" if result.running else ""
        total = "?" if result.collected is None else result.collected
        message = (
            f"tests timed out after {request.timeout:g}s{where} ({done} of {total} finished); "
            "pytest was stopped"
        )
    elif result.returncode in _RAN and result.junit_paths:
        message = _counts_text(result.counts) or "no test ran"
    elif result.returncode == _NOTHING_COLLECTED:
        message = (
            f"no test in {request.test_file} matches the selection "
            f"({', '.join(request.selectors[:3]) or 'all'}"
            f"{', ...' if len(request.selectors) > 3 else ''}): check the test names"
        )
    elif result.returncode == 4:
        message = f"pytest usage error: {tally.usage_error or last_error(request.log_path)}"
    else:
        # 0 or 1 with no report: pytest did not start (`No module named pytest`) or died
        what = "was interrupted" if result.returncode == 2 else "exited"
        error = last_error(request.log_path) or "the log is empty"
        if "\n" in error:  # no error line: the log's last lines, indented under this one
            error = "the log ends:\n    " + error.replace("\n", "\n    ")
        message = f"pytest {what} with status {result.returncode}: {error}"
    return replace(result, message=message)


def _counts_text(counts: Mapping[str, int]) -> str:
    return " ".join(f"{name} {counts[name]}" for name in OUTCOMES if counts.get(name))


def new_run_dir(results_dir: Path, label: str) -> Path:
    """Create ``results_dir/<UTC timestamp>-<label>/`` and point ``results_dir/latest`` at it.

    Two calls in the same second get distinct directories (``-2``, ``-3``... suffixes).
    ``latest`` is a relative symlink, replaced atomically; where symlinks cannot be made a
    ``LATEST`` text file holds the directory's name instead.
    """
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{re.sub(r'[^A-Za-z0-9._-]+', '-', label).strip('-.') or 'run'}"
    name, n = base, 1
    while True:
        try:
            (results_dir / name).mkdir()
            break
        except FileExistsError:
            n += 1
            name = f"{base}-{n}"
    _point_latest(results_dir, name)
    return results_dir / name


def _point_latest(results_dir: Path, name: str) -> None:
    tmp = results_dir / f".latest-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(name, target_is_directory=True)
        os.replace(tmp, results_dir / "latest")
    except OSError:
        tmp.unlink(missing_ok=True)
        marker = results_dir / ".LATEST.tmp"
        marker.write_text(name + "\n")
        os.replace(marker, results_dir / "LATEST")
        return
    # A LATEST file left from a filesystem without symlinks would contradict the link.
    (results_dir / "LATEST").unlink(missing_ok=True)
