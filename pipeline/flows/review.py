"""The review flow: a diff -> the review checks' findings (``mps-pipeline review``, and the
PR comment's review section).

The checks run over the tree on disk (the PR's head, where the work tree is) and the diff
against ``base``. The ``c10/metal`` helpers come from the checkout (``c10/metal/*.h``),
else from the headers the installed torch wheel ships (``torch/include/c10/metal``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.guide.review import enabled, run_checks
from pipeline.guide.review.base import ChangedFunctor, FileChange, Finding, MathResult, Review
from pipeline.impact.changes import ChangedFile, changed_files
from pipeline.results.math import Agreement, FunctorCheck
from pipeline.tree.git import default_base
from pipeline.tree.index import TreeIndex, load_index
from pipeline.tree.metal_functions import Function, helpers
from pipeline.tree.text import read_text

HEADERS = "c10/metal"  # in a checkout


@dataclass(frozen=True)
class ReviewReport:
    base: str
    findings: tuple[Finding, ...]
    ran: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def blocking(self) -> bool:
        return any(f.severity.value == "error" for f in self.findings)


def helper_headers(root: Path) -> tuple[dict[str, str], str | None]:
    """The ``c10/metal/*.h`` texts by tree path, and where they came from (None: nowhere)."""
    folder = root / HEADERS
    if not folder.is_dir():
        spec = importlib.util.find_spec("torch")  # located, never imported (seconds)
        locations = list(spec.submodule_search_locations or []) if spec else []
        wheel = [Path(p, "include", HEADERS) for p in locations]
        folder = next((p for p in wheel if p.is_dir()), folder)
    if not folder.is_dir():
        return {}, None
    texts = {f"{HEADERS}/{p.name}": read_text(p, f"{HEADERS}/{p.name}")
             for p in sorted(folder.glob("*.h"))}  # fmt: skip
    return texts, str(folder)


def file_changes(changes: Sequence[ChangedFile]) -> tuple[FileChange, ...]:
    return tuple(FileChange(c.path, c.old_text, c.new_text, c.new_ranges) for c in changes)


def math_result(functor: FunctorCheck) -> MathResult:
    """check-math's verdict on one functor, as the review check reads it."""
    if functor.compile_error:
        return MathResult(functor.kernel, False, f"does not compile: {functor.compile_error}")
    if functor.failure:
        return MathResult(functor.kernel, False, functor.failure)
    for d in functor.dtypes:
        if d.status is Agreement.MISMATCH:
            first = d.counterexamples[0] if d.counterexamples else None
            where = (
                f": ({', '.join(first.inputs)}) gives {first.kernel}, torch {first.torch}"
                if first is not None
                else ""
            )
            return MathResult(functor.kernel, False, f"{d.dtype}, {d.mismatched} wrong{where}")
    return MathResult(functor.kernel, True, "")


def changed_functors_math(
    settings: Settings, functors: Sequence[ChangedFunctor]
) -> tuple[dict[str, MathResult] | None, str]:
    """check-math of the functors the diff adds or changes, file by file: the others of a
    changed file are not this change's (None and why when it cannot run here)."""
    from pipeline.flows import math  # a compiler and torch: only when a functor changed

    by_file: dict[str, set[str]] = {}
    for changed in functors:
        by_file.setdefault(changed.change.path, set()).add(changed.functor.name)
    results: dict[str, MathResult] = {}
    try:
        for path, kernels in sorted(by_file.items()):
            report = math.run_check(settings, file=path, kernels=kernels)
            results.update((f.kernel, math_result(f)) for f in report.functors)
    except PipelineError as exc:
        return None, f"check-math: not run: {exc}"
    return results, ""


def check_changes(
    settings: Settings,
    changes: Sequence[ChangedFile],
    *,
    index: TreeIndex | None = None,
    helper_functions: Sequence[Function] | None = None,
    math_results: Mapping[str, MathResult] | None = None,
    base: str = "",
) -> ReviewReport:
    """The enabled checks over ``changes`` (config ``review.disable`` names the others)."""
    ran = enabled(settings.review.disable)
    notes: list[str] = []
    if helper_functions is None:
        texts, where = helper_headers(settings.root)
        helper_functions = helpers(texts)
        if where is None and "helper-exists" in ran:
            notes.append("helper-exists: no c10/metal headers in the checkout or torch wheel")
    review = Review(
        changes=file_changes(changes),
        index=index or load_index(settings.tree),
        helpers=tuple(helper_functions),
        math=math_results,
    )
    if math_results is None and "check-math" in ran:
        review.math, note = changed_functors_math(settings, review.changed_functors())
        if note:
            notes.append(note)
    return ReviewReport(base, run_checks(review, ran), ran, tuple(notes))


def review(
    settings: Settings,
    base: str | None = None,
    head: str | None = None,
    *,
    math_results: Mapping[str, MathResult] | None = None,
) -> ReviewReport:
    """The review of ``base..head`` (``head`` None: the work tree; ``base`` None: the merge
    base with main)."""
    base = base or default_base(settings.root, head)
    changes = changed_files(settings.root, base, head)
    return check_changes(settings, changes, math_results=math_results, base=base)
