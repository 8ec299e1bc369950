"""Impact analysis: from a diff to the operators it affects, and the tests that cover them.

- ``changes``: what changed (``changed_files`` from git, ``changes_from_list`` from a list)
- ``view``: the tree's MPS sources at one version, for lookups across files
- ``model``: the results (``AffectedOp``, ``Impact``) and what the rules share (``Context``,
  ``Findings``, ``Side``, the paths they name)
- ``rules/``: one rule per kind of file (``native_yaml``, ``metal``, ``header``, ``host``,
  ``common_mps``, ``opinfo``, ``shared_cpp``, ``shared_header``, ``simple``) and the
  ``RULES`` registry, kind -> rule
- ``analyze``: ``classify`` (a path's kind) and ``analyze`` (the changes' ``Impact``, each
  change given to its kind's rule); with the settings, ``diff_impact`` (a git diff) and
  ``listed_impact`` (changed lines)
- ``cscan``, ``pyscan``: C-family and Python scanners the rules read code with
- ``selection``: selected-versus-total figures for benchmarks
- ``suspects``: the commits of a range that can affect an operator, ranked (a nightly
  regression's suspects)
"""

from __future__ import annotations

from pipeline.impact.analyze import (
    AffectedOp,
    Impact,
    affected,
    analyze,
    classify,
    diff_impact,
    listed_impact,
    selected_opinfos,
)
from pipeline.impact.changes import ChangedFile, changed_files, changes_from_list
from pipeline.impact.selection import selection_report
from pipeline.impact.view import TreeView, load_view, view_from_texts

__all__ = [
    "AffectedOp",
    "ChangedFile",
    "Impact",
    "TreeView",
    "affected",
    "analyze",
    "changed_files",
    "changes_from_list",
    "classify",
    "diff_impact",
    "listed_impact",
    "load_view",
    "selected_opinfos",
    "selection_report",
    "view_from_texts",
]
