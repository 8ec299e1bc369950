"""Every OpInfo of the installed torch's op_db that names a native_functions.yaml operator is
found by that operator (issue 27), on the 2.13.0 wheel's yaml and common_mps.py.

Two views of "names an operator":
- op_db's own spelling: its name, aten_name or an alias, as the yaml spells it
  (``special.bessel_j0`` -> ``special_bessel_j0``, ``nn.functional.elu`` -> ``elu``);
- torch's, independent of that spelling: the OpInfo's name, aten_name or alias as a path under
  ``torch`` that is a builtin function, whose ``__name__`` is the ATen operator it binds
  (``torch.special.bessel_j0.__name__ == "special_bessel_j0"``). Python functions are left
  out of this view: ``torch.masked.sum`` is a function named ``sum`` but not ``aten::sum``.

torch 2.13.0: of 703 OpInfos (op_db's 702 and test_mps.py's one), 605 name a yaml operator by
op_db's spelling, all found (517 before this lookup: the dotted ones were not); 501 bind a
yaml operator as builtins, all found but ``sparse.mm``'s ``reduce`` variant, whose
``torch.sparse.mm`` binds ``_sparse_mm`` (no spelling of "sparse.mm" gives it).
"""

from __future__ import annotations

import sys
import types

import pytest

from pipeline.guide.checklist import Status, checklist
from pipeline.tree.index import build_index
from pipeline.tree.opinfo import OpInfoRecord, operator_spelling
from pipeline.tree.source import TreeSource
from tests.guide.test_replay_real import OPINFO_CACHE
from tests.releases import OLDEST, WheelUnavailable, release_tree

pytestmark = [pytest.mark.realdata, pytest.mark.slow]

# torch.sparse.mm binds _sparse_mm: a rename no spelling of op_db's name can know
RENAMED = {"sparse.mmreduce": "_sparse_mm"}


@pytest.fixture(scope="module")
def index():
    pytest.importorskip("expecttest")  # op_db's own import needs it
    try:
        root = release_tree(OLDEST)  # the release installed: its op_db is the one dumped
    except WheelUnavailable as exc:
        pytest.skip(str(exc))
    return build_index(TreeSource(root, OPINFO_CACHE, sys.executable, None))


def _spelt(info: OpInfoRecord, ops) -> set[str]:
    """The yaml operators its name, aten_name (op_db's default: the name) or aliases spell."""
    spelt = {operator_spelling(n) for n in (info.aten_name, *info.aliases)} | {info.name}
    return spelt & set(ops)


def _bound(info: OpInfoRecord, ops) -> set[str]:
    import torch

    found = set()
    for name in {info.name, info.aten_name, *info.aliases}:
        obj = torch
        for part in name.removeprefix("torch.").split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, types.BuiltinFunctionType) and obj.__name__ in ops:
            found.add(obj.__name__)
    return found


def _missed(index, expected) -> dict[str, set[str]]:
    return {
        key: {op for op in ops if key not in {i.key for i in index.opinfos_for(op)}}
        for key, ops in expected.items()
        if any(key not in {i.key for i in index.opinfos_for(op)} for op in ops)
    }


def test_every_opinfo_naming_a_yaml_operator_is_found_by_it(index) -> None:
    ops = index.entries_by_operator()
    spelt = {i.key: s for i in index.opinfos if (s := _spelt(i, ops))}
    assert len(spelt) >= 600  # 605 with torch 2.13.0
    assert _missed(index, spelt) == {}
    dotted = [i for i in index.opinfos if i.key in spelt and "." in i.aten_name]
    assert len(dotted) >= 80  # 88 with torch 2.13.0: none was found before

    bound = {i.key: b for i in index.opinfos if (b := _bound(i, ops))}
    assert len(bound) >= 500  # 501 with torch 2.13.0
    assert _missed(index, bound) == {k: {v} for k, v in RENAMED.items() if k in bound}


def test_a_dotted_operator_has_its_tests_and_its_common_mps_entry(index) -> None:
    record = index.record("special_airy_ai", find_references=False)
    assert [i.key for i in record.opinfos] == ["special.airy_ai"]
    assert "TestConsistencyMPS::test_output_match_special_airy_ai_mps_float32" in record.tests
    assert ("UNIMPLEMENTED_XFAILLIST", "special.airy_ai") in {
        (e.list, e.key) for e in record.xfails
    }
    items = {i.id: i for i in checklist(record)}
    assert items["xfails"].status is Status.FAIL
    assert index.resolve("special.airy_ai") == "special_airy_ai"
    # nn.functional.* : the python_module nn operators, entries keyed by op_db's name
    silu = index.record("silu", find_references=False)
    assert {"nn.functional.silu"} <= {i.name for i in silu.opinfos}
    assert "nn.functional.silu" in {e.key for e in silu.xfails}
