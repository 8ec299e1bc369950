"""Replay: the preview of every operator the backlog lists, on a tree of real files.

The tree is the OLDEST release's native_functions.yaml, common_mps.py and native/*.h headers
(real DECLARE_DISPATCH declarations), with our upstream-shaped .metal/.mm fixtures (the wheel
has no such files), and the real op_db (the installed wheel's: OLDEST's). Every preview must
complete (exit 0 or 1), or be refused as not element-wise (exit 2, issue 18): never another
input error or a traceback, and every yaml change it shows must touch only that operator's
entries, and in them only the MPS rows.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from pipeline.errors import (
    EXIT_INPUT,
    NotElementwiseError,
    PipelineError,
    UnknownImplementationError,
)
from pipeline.guide.backlog import backlog
from pipeline.guide.families import partners
from pipeline.guide.plan import plan_edits
from pipeline.tree import native_yaml, paths
from pipeline.tree.index import load_index
from pipeline.tree.source import TreeSource
from tests.conftest import oldest_only

pytestmark = [pytest.mark.realdata, pytest.mark.slow]

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
OPINFO_CACHE = Path(tempfile.gettempdir()) / "mps-pipeline-tests" / "opinfo-cache"


@pytest.fixture(scope="module")
def real_tree(
    tmp_path_factory, real_native_yaml: Path, real_common_mps: Path, real_stub_headers: Path
) -> TreeSource:
    pytest.importorskip("expecttest")  # op_db's own import needs it
    root = tmp_path_factory.mktemp("real") / "pytorch"
    for pattern in (paths.KERNELS_METAL, paths.OPERATIONS_MM):
        for src in UPSTREAM.glob(pattern):
            dest = root / src.relative_to(UPSTREAM)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    for header in real_stub_headers.glob("*.h"):
        shutil.copyfile(header, root / paths.NATIVE_DIR / header.name)
    shutil.copyfile(real_native_yaml, root / paths.NATIVE_YAML)
    (root / paths.COMMON_MPS).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(real_common_mps, root / paths.COMMON_MPS)
    # op_db's dump is keyed by a hash of its sources: safe to share between runs
    return TreeSource(root, OPINFO_CACHE, sys.executable, None)


def _entries(text: str) -> dict[str, native_yaml.NativeFunction]:
    return {e.full_name: e for e in native_yaml.parse(text, paths.NATIVE_YAML).entries}


def _content(entry: native_yaml.NativeFunction) -> tuple:
    """An entry without its place in the file (line numbers shift when a row goes)."""
    rows = tuple((row.keys, row.kernel, row.text) for row in entry.dispatch)
    return (entry.schema, entry.structured, entry.structured_delegate, entry.autogen, rows)


@oldest_only
def test_every_backlog_preview_completes_and_folds_only_its_own_mps_rows(real_tree) -> None:
    index = load_index(real_tree)
    items = backlog(index)
    assert len(items) > 250
    before = _entries((real_tree.root / paths.NATIVE_YAML).read_text())
    outcomes: Counter[str] = Counter()
    for item in items:
        try:
            plan = plan_edits(index, item.op)
        except UnknownImplementationError:
            # issue 27: a stub the wheel's tree (no native/*.cpp) cannot show is unknown
            outcomes["unknown"] += 1
            continue
        except PipelineError as exc:
            # issue 18: what is not element-wise is refused (exit 2), on purpose
            assert exc.exit_code != EXIT_INPUT or isinstance(exc, NotElementwiseError), item.op
            outcomes["refused"] += 1
            continue
        outcomes["blocked" if plan.blockers else "complete"] += 1
        yaml = [e for e in plan.edits if e.rel == paths.NATIVE_YAML]
        if not yaml:
            continue
        after = _entries(yaml[0].after)
        assert set(after) == set(before), item.op
        changed = [n for n in before if _content(before[n]) != _content(after[n])]
        # the operator and those migrating with it (its forward or backward, issue 18)
        unit = (item.op, *partners(index, item.op))
        own = {e.full_name for op in unit for e in index.entries_by_operator()[op]}
        assert set(changed) <= own, f"{item.op} also changed {set(changed) - own}"
        for name in changed:
            old, new = before[name], after[name]
            keys = {k for row in old.dispatch + new.dispatch for k in row.keys} - {"MPS"}
            assert {k: old.kernel_for(k) for k in keys} == {k: new.kernel_for(k) for k in keys}
            assert new.mps_kind == native_yaml.MpsKind.SHARED, name
        outcomes["folded"] += bool(changed)
    # every preview completed; the figures the closing note quotes
    print(dict(outcomes), len(items))
    assert outcomes["folded"] > 0
