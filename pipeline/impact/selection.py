"""How well the analysis selects: tests chosen versus the suite, and misses, per change."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pipeline.impact.analyze import analyze
from pipeline.impact.changes import ChangedFile, Range, changes_from_list
from pipeline.impact.view import load_view
from pipeline.tree.opinfo import OpInfoRecord

# One benchmark case: the operator whose code was edited, and the edit as ChangedFile
# records or as ``[(path, [(start, end), ...]), ...]`` against the tree on disk.
Case = tuple[str, Sequence[ChangedFile] | Sequence[tuple[str, Sequence[Range]]]]


def _as_changes(root: Path, changes: Sequence[Any]) -> tuple[ChangedFile, ...]:
    if all(isinstance(c, ChangedFile) for c in changes):
        return tuple(changes)
    return changes_from_list(root, changes)


class SelectionRow(TypedDict):
    """One case of :func:`selection_report`."""

    operator: str  # the one whose code was edited
    files: list[str]
    affected: list[str]
    selected: int
    total: int
    fraction: float
    own_tests: int  # the operator's own tests in the suite
    missed: bool
    full_sweep: bool
    build_needed: bool


def selection_report(
    root: Path,
    opinfos: Iterable[OpInfoRecord],
    changes_list: Iterable[Case],
    *,
    kinds: Sequence[str] = ("output_match",),
) -> list[SelectionRow]:
    """For each single-operator change: tests selected out of the suite, and whether the
    edited operator was missed.

    The operator counts as missed when it is not among the affected operators and not
    every one of its own tests was selected (a full sweep never misses; an operator no
    OpInfo covers must be named). The tree under
    ``root`` is read once; each case's changed files are laid over it.
    """
    opinfos = tuple(opinfos)
    base = load_view(root)
    rows: list[SelectionRow] = []
    for operator, raw in changes_list:
        changes = _as_changes(root, raw)
        view = base.with_texts({c.path: c.new_text for c in changes})
        impact = analyze(changes, opinfos=opinfos, view=view, kinds=kinds)
        own = {
            t
            for info in opinfos
            if operator in (info.name, info.aten_name) or operator in info.aliases
            for kind in kinds
            for t in info.test_ids(kind)
        }
        selected = set(impact.test_ids)
        missed = operator not in impact.operator_names and not (own and own <= selected)
        rows.append(
            {
                "operator": operator,
                "files": sorted({c.path for c in changes}),
                "affected": list(impact.operator_names),
                "selected": impact.selected,
                "total": impact.total,
                "fraction": impact.fraction,
                "own_tests": len(own),
                "missed": missed,
                "full_sweep": impact.full_sweep,
                "build_needed": impact.build_needed,
            }
        )
    return rows
