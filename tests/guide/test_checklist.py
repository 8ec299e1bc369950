"""pipeline/guide/checklist.py: the guide's checklist, item by item, on the sandbox tree."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipeline.config import load_settings
from pipeline.guide import checklist
from pipeline.guide.checklist import Status
from pipeline.guide.workflow import Workflow, of_record
from pipeline.tree import paths
from pipeline.tree.index import TreePart, load_index

ITEMS = ("dispatch", "functor", "dtypes", "stub", "mpsgraph", "old_names", "xfails", "decorators")


def _record(root: Path, op: str = "atan2"):
    overrides = {"root": str(root), "state_dir": str(root / ".state")}
    # the sandbox's own static OpInfo table: no torch import
    overrides["opinfo_table"] = str(root / paths.OPINFO_TABLE)
    settings = load_settings(overrides, env={})
    return load_index(settings.tree).record(op)


def test_atan2_before_migration(sandbox_tree: Path) -> None:
    record = _record(sandbox_tree)
    items = {i.id: i for i in checklist.checklist(record)}
    assert tuple(items) == ITEMS
    assert of_record(record) is Workflow.MIGRATE
    # the functor and its dtypes are written; the yaml, the stub and the MPSGraph code are not
    assert items["functor"].status is Status.PASS and items["dtypes"].ok
    failing = {k for k, i in items.items() if i.status is Status.FAIL}
    assert failing == {"dispatch", "stub", "mpsgraph", "old_names", "xfails"}
    # evidence carries where it is
    assert any(d.span is not None for d in items["mpsgraph"].details)


def test_an_alias_gives_the_same_checklist(sandbox_tree: Path) -> None:
    by_name = checklist.checklist(_record(sandbox_tree, "atan2"))
    by_alias = checklist.checklist(_record(sandbox_tree, "arctan2"))
    assert [(i.id, i.status) for i in by_name] == [(i.id, i.status) for i in by_alias]


def test_a_missing_kernels_folder_makes_the_functor_unknown_not_failed(
    sandbox_tree: Path,
) -> None:
    shutil.rmtree(sandbox_tree / paths.KERNELS_DIR)
    record = _record(sandbox_tree)
    assert any(part is TreePart.KERNELS for part, _ in record.gaps)
    items = {i.id: i for i in checklist.checklist(record)}
    assert items["functor"].status is Status.UNKNOWN and not items["functor"].ok
    assert any(d.text.startswith("unknown: ") for d in items["functor"].details)


def test_required_dtypes_never_ask_for_what_mps_lacks(sandbox_tree: Path) -> None:
    record = _record(sandbox_tree)
    required = checklist.required_dtypes(record)
    assert required and not set(required) & checklist.UNSUPPORTED_ON_MPS
    assert set(required) <= set(record.opinfo_dtypes)
