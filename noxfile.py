"""nox sessions: tests, fast, lint, bench, screenshots, sample.

Thin: the work lives in pipeline/, tests/, bench/ and docsgen/.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

# The CPU wheel on this machine's disk; an unpinned `torch` would pull a multi-GB CUDA build.
TORCH = "torch==2.13.0"
# The suite starts about a thousand Python processes (the CLI, doit, the sandbox's tests):
# with PYTHONDONTWRITEBYTECODE set, as in this machine's shell, a fresh clone keeps no
# bytecode and each of them compiles our modules again (a migrate_op chain 2.04 -> 1.53
# CPU-s with the caches written). An empty value writes them.
_BYTECODE = {"PYTHONDONTWRITEBYTECODE": ""}


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]", TORCH)


def _fetch_releases(session: nox.Session, *, required: bool) -> None:
    # The released wheels' files the real-data tests read (tests/releases.py), fetched here
    # once rather than by the first test of each xdist worker. Without a network the fast
    # tier goes on and those tests skip, saying so; the whole suite (CI's) stops here.
    session.run("python", "-m", "tests.releases", success_codes=[0] if required else [0, 1])


def _basetemp(session: nox.Session) -> list[str]:
    # The tests' scratch in a folder of this checkout's own (pytest empties it at the start),
    # outside it: tests need a temp folder no git work tree contains. In the shared one
    # pytest ends by deleting older runs' folders, some 450 MB and 40,000 files a whole run
    # leaves, seconds that are not the suite's.
    checkout = hashlib.sha256(str(Path.cwd().resolve()).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"mps-pipeline-{checkout}"
    folder.mkdir(exist_ok=True)  # pytest makes the basetemp, not its parent
    return ["--basetemp", str(folder / "pytest")]


# CI (CI=true, which hosted runners and .ci/run set): what a test needs and cannot find
# (Chromium, the released wheels) fails it there; elsewhere it skips, saying what it needs.
IN_CI = os.environ.get("CI", "").lower() == "true" or os.environ.get("MPS_PIPELINE_CI") == "1"


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The whole suite, slow end-to-end tests included; the 20 slowest tests are listed."""
    _install(session)
    _fetch_releases(session, required=IN_CI)
    # three pytest-xdist workers on this 2-core machine: 388 s against 419 s with two (an
    # eighth of the tests' time is spent waiting: on locks, deadlines, GitHub's settle time)
    session.run(
        "pytest", "-n", "3", "--durations=20", *_basetemp(session), *session.posargs,
        env={"MPS_PIPELINE_CI": "1" if IN_CI else "", **_BYTECODE},
    )  # fmt: skip


@nox.session(python="3.11")
def fast(session: nox.Session) -> None:
    """The fast tier, no slow tests: 56 s on 2 cores, 3 min 11 s under load (docs/performance.md).

    Every test module, without the tests marked slow. 56 s: `nox -s fast` from a fresh clone
    on this project's 2-core machine, as docs/performance.md records it; 3 min 11 s: a new
    user's run on a loaded machine (issue 28). It takes longer the more else the cores run.
    """
    _install(session)
    _fetch_releases(session, required=False)
    # two workers (pytest-xdist): on this 2-core machine 50 s against 280 s in one process
    session.run(
        "pytest", "-m", "not slow", "-n", "2", "--durations=10", *_basetemp(session),
        *session.posargs, env=_BYTECODE,
    )  # fmt: skip


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff; the layers (import-linter contracts in pyproject.toml); mypy on pipeline/."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", "pipeline", "tests", "bench", "docsgen", "dodo.py", "noxfile.py")
    session.run("lint-imports")
    session.run("mypy")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Figures quoted in issue notes: medians and ratios, never pass/fail thresholds."""
    _install(session)
    session.run("python", "-m", "bench", *session.posargs)


@nox.session(python="3.11")
def screenshots(session: nox.Session) -> None:
    """docs/img/dashboard.png: three real nightlies of a demo checkout, in headless Chromium
    (Debian's `chromium`; Playwright drives it and downloads no browser)."""
    _install(session)
    session.run("python", "-m", "docsgen", "screenshot")


@nox.session(python="3.11")
def sample(session: nox.Session) -> None:
    """README.md's sample run: a demo checkout's first and second `migrate atan2`."""
    _install(session)
    session.run("python", "-m", "docsgen", "sample")
