"""Running the math flow on fixture functors with the real compiler, headers and torch."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from pipeline.flows import math as flow
from pipeline.guide.math import Target
from pipeline.results.math import FunctorCheck, Known, MathReport
from pipeline.run import cxx, reference
from pipeline.tree.source import TreeSource
from tests.conftest import math_cache

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_math"


def fixture_root(tmp_path: Path) -> Path:
    """A private copy of the fixture functors (their caches stay out of the repository)."""
    root = tmp_path / "tree"
    if not root.exists():
        shutil.copytree(FIXTURES, root)
    return root


def run_flow(
    tmp_path: Path,
    compiler: cxx.Compiler,
    include: Path,
    targets: list[Target],
    known: tuple[Known, ...] = (),
) -> MathReport:
    root = fixture_root(tmp_path)
    source = TreeSource(root, tmp_path / "cache", sys.executable, None)
    headers = cxx.Headers(include, "the torch wheel")
    # the session's check-math cache, as for torch's answers: the driver, named by a digest
    # of its source and the compiler, is built once a session instead of once a test; an
    # object is named by its .metal file's path too, so a test builds its own copy's
    builder = cxx.Builder(compiler, headers, root, math_cache())
    runners = flow.Runners(builder, lambda cases: reference.references(source, cases, math_cache()))
    return flow.check(targets, runners, known=known, scratch=tmp_path / "scratch")


def target(tmp_path: Path, file: str, kernel: str, fn: str | None = None) -> Target:
    root = fixture_root(tmp_path)
    return Target(kernel, root / file, file, kernel, None, fn or kernel, None)


def by_dtype(check: FunctorCheck) -> dict[str, object]:
    return {d.dtype: d for d in check.dtypes}
