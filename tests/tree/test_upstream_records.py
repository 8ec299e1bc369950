"""The joined record on tests/fixtures/upstream: which functors an operator is found by, and
what the audit reports as MPSGraph code left (see the fixture README for the cases)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.guide.checklist import checklist
from pipeline.guide.workflow import of_record
from pipeline.tree.index import TreeIndex, build_index
from pipeline.tree.source import TreeSource

ROOT = Path(__file__).parent.parent / "fixtures" / "upstream"
TABLE = Path("torch/testing/_internal/opinfo_table.yaml")


def index_of(root: Path, cache: Path) -> TreeIndex:
    return build_index(TreeSource(root, cache, "python", root / TABLE))


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> TreeIndex:
    return index_of(ROOT, tmp_path_factory.mktemp("cache"))


def item(record, id_: str):
    return next(i for i in checklist(record) if i.id == id_)


# --- functors by the names PyTorch uses (issue 8, item 3) --------------------------------


def test_alias_finds_the_aten_operators_functor(index):
    # (a) arctan2 is an OpInfo alias with composite yaml entries of its own
    record = index.record("arctan2", find_references=False)
    assert record.op == "atan2"
    assert "arctan2" not in record.kernel_names
    assert [f.name for f in record.functors] == ["atan2"]
    assert ("int64", "float32") in {(r.input, r.output) for r in record.registrations}
    assert item(record, "functor").ok


def test_stub_kernel_string_that_is_not_the_operator(index):
    # (b) div is served by div_true_stub, whose kernel runs "div_true"
    for name in ("div", "divide"):
        record = index.record(name, find_references=False)
        assert record.op == "div"
        assert [f.name for f in record.functors] == ["div_true"]
        assert {r.kernel for r in record.registrations} == {"div_true"}
        assert item(record, "functor").ok


def test_macro_defined_functor_reached_through_a_dotted_alias(index):
    # (c) DEFINE_UNARY_FLOATING_FUNCTOR(erf); special_erf is the aten name of special.erf
    record = index.record("special_erf", find_references=False)
    assert record.op == "erf"
    (functor,) = record.functors
    assert (functor.name, functor.macro) == ("erf", "DEFINE_UNARY_FLOATING_FUNCTOR")
    assert item(record, "functor").ok


def test_an_alias_with_kernels_of_its_own_is_its_own_operator(index):
    # op_db: OpInfo max/binary has the alias maximum, but maximum.out has the MPS kernel
    record = index.record("maximum", find_references=False)
    assert record.op == "maximum"
    assert [f.name for f in record.functors] == ["maximum"]
    assert {i.key for i in record.opinfos} == {"maximum", "maxbinary"}
    assert item(record, "functor").ok and of_record(record) == "done"
    assert index.record("max", find_references=False).functors == ()  # never via its alias


def test_stub_without_its_module_prefix_before_the_stub_is_registered(tmp_path):
    root = tmp_path / "upstream"
    shutil.copytree(ROOT, root)
    host = root / "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
    host.write_text(
        host.read_text().replace(
            "REGISTER_DISPATCH(special_erfcx_stub, special_erfcx_kernel);\n", ""
        )
    )
    record = index_of(root, tmp_path / "cache").record("special.erfcx", find_references=False)
    assert (record.op, record.stubs) == ("special_erfcx", ())
    assert [f.name for f in record.functors] == ["erfcx"]
    assert item(record, "functor").ok
