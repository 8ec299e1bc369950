"""nox sessions: tests, lint, bench. Thin: the work lives in pipeline/ and tests/."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

# The CPU wheel on this machine's disk; an unpinned `torch` would pull a multi-GB CUDA build.
TORCH = "torch==2.13.0"


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]", TORCH)


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The whole suite, slow end-to-end tests included (pass -m 'not slow' to skip those)."""
    _install(session)
    session.run("pytest", *session.posargs, env={"MPS_PIPELINE_CI": "1"})


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff on the package, tests, dodo.py and noxfile.py."""
    session.install("ruff")
    session.run("ruff", "check", "pipeline", "tests", "dodo.py", "noxfile.py")


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
