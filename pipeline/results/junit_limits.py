"""What the JUnit reader and the merge refuse, and how they say it: shared by
:mod:`pipeline.results.junit` (which streams) and :mod:`pipeline.results.junit_merge`
(which keeps a tree), so neither imports the other."""

from __future__ import annotations

from pathlib import Path

# Deepest element nesting read (the root is level 1); pytest writes 4 levels, Surefire and
# merged reports a few more. Deeper files are skipped: see the module docstring.
MAX_DEPTH = 64
# A duration longer than this (about 11 days) is no test's: a corrupt or hostile report.
MAX_SECONDS = 1e6


def seconds(text: str | None) -> float:
    """A ``time`` attribute in seconds; 0.0 (unknown) when it is missing, not a number,
    ``NaN``, infinite, negative or beyond :data:`MAX_SECONDS` (a sum of two ``1e308`` would
    be infinite, and JSON has no infinity)."""
    try:
        value = float(text or 0.0)
    except ValueError:
        return 0.0
    return value if 0.0 <= value <= MAX_SECONDS else 0.0


def deep_warning(path: Path) -> str:
    return (
        f"{path}: skipped: its XML nests deeper than {MAX_DEPTH} elements (pytest writes "
        "4: testsuites/testsuite/testcase/failure), which no test report needs"
    )


def refused_warning(path: Path, why: str) -> str:
    return f"{path}: refused and skipped: {why}, which no JUnit writer emits"


def truncated_warning(path: Path, exc: Exception, complete: int) -> str:
    return (
        f"{path}: truncated or malformed JUnit XML ({exc}); kept the {complete} complete"
        " testcase(s) before that point (was the test runner killed?)"
    )
