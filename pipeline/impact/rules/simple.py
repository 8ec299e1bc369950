"""The kinds of file that need no reading: shared MPS infrastructure and test
infrastructure ask for the full sweep, Inductor's Metal code generator for the Inductor MPS
tests; any other file is ignored."""

from __future__ import annotations

from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import Context


def mps_other(change: ChangedFile, ctx: Context) -> None:
    """MPS code outside the operators (runtime, c10/metal, native/mps outside operations/)."""
    ctx.found.full(f"{change.path} changed: shared MPS infrastructure", build=True)


def test_mps(change: ChangedFile, ctx: Context) -> None:
    """The ``test.file`` setting's file: every consistency test may differ."""
    ctx.found.full(f"{change.path} changed: every consistency test may differ", build=False)


def testing(change: ChangedFile, ctx: Context) -> None:
    """Other Python under ``torch/testing/``."""
    ctx.found.full(f"{change.path} changed: shared test infrastructure", build=False)


def inductor_codegen(change: ChangedFile, ctx: Context) -> None:
    """Inductor's Metal code generator: no eager kernel, but every kernel Inductor writes."""
    ctx.found.inductor[f"{change.path} changed: Inductor's generated Metal code"] = None


def ignored(change: ChangedFile, ctx: Context) -> None:
    """A file no MPS operator's build or test depends on."""
    ctx.found.ignored.append(change.path)
