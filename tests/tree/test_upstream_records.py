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


# --- MPSGraph code found by its names (issue 8, item 6) ---------------------------------

OPS = "aten/src/ATen/native/mps/operations"


def line_of(rel: str, text: str, root: Path = ROOT) -> int:
    """The 1-based line of the first line of ``root/rel`` containing ``text``."""
    lines = (root / rel).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def mpsgraph_details(record) -> list[tuple[str, str, int]]:
    check = item(record, "mpsgraph")
    assert not check.ok
    return [(d.text, d.span.path, d.span.start) for d in check.details]


@pytest.mark.parametrize(
    ("op", "name", "kind", "written"),
    [
        # (g) macro-generated TORCH_IMPL_FUNC and plain function, (a) the unary macro
        ("minimum", "minimum_out_mps", "macro", "CREATE_MPS_STRUCTURED_BINARY_OP_FUNC(minimum"),
        (
            "logical_and",
            "logical_and_out_mps",
            "macro",
            "CREATE_MPS_BINARY_COMPARISON_OP_FUNC(logical_and",
        ),
        ("atanh", "atanh_out_mps", "macro", "CREATE_MPS_STRUCTURED_UNARY_TORCH_IMPL_FUNC(atanh"),
        # (f) the hand-written TORCH_IMPL_FUNC of a half-done migration
        ("logaddexp", "logaddexp_out_mps", "TORCH_IMPL_FUNC", "TORCH_IMPL_FUNC(logaddexp_out_mps)"),
    ],
)
def test_implementations_and_their_includes_fail_the_mpsgraph_item(index, op, name, kind, written):
    record = index.record(op, find_references=False)
    rel = f"{OPS}/{'UnaryOps' if op == 'atanh' else 'BinaryOps'}.mm"
    assert mpsgraph_details(record) == [
        (f"{kind} {name}", rel, line_of(rel, written)),
        (f"#include <ATen/ops/{op}_native.h>", rel, line_of(rel, f"ops/{op}_native.h")),
    ]
    assert of_record(record) == "migrate"


def test_plain_mps_functions_fail_the_mpsgraph_item(index):
    record = index.record("logit", find_references=False)
    rel = f"{OPS}/UnaryOps.mm"
    assert mpsgraph_details(record)[:2] == [
        ("function logit_out_mps", rel, line_of(rel, "Tensor& logit_out_mps(")),
        ("function logit_mps", rel, line_of(rel, "Tensor logit_mps(")),
    ]


def test_mpsgraph_stub_fails_the_mpsgraph_item(index):
    # (a) REGISTER_MPS_UNARY_STUB: the yaml row is shared, the stub's body is MPSGraph
    record = index.record("acosh", find_references=False)
    rel = f"{OPS}/UnaryOps.mm"
    assert record.mpsgraph == () and item(record, "dispatch").ok
    assert mpsgraph_details(record) == [
        (
            "REGISTER_MPS_UNARY_STUB: acosh_stub registered with an MPSGraph body",
            rel,
            line_of(rel, "REGISTER_MPS_UNARY_STUB(acosh, acosh);"),
        )
    ]
    assert of_record(record) == "migrate"


def test_half_done_migration_is_migrate_though_every_row_is_folded(index):
    # (f) no yaml row names logaddexp_out_mps any more: it is found by its name alone
    record = index.record("logaddexp", find_references=False)
    assert item(record, "dispatch").ok and item(record, "functor").ok
    assert item(record, "stub").ok
    assert record.old_names == ("logaddexp_out_mps",)
    assert of_record(record) == "migrate"


def test_hand_folded_macro_implementation_is_found_by_its_name(tmp_path):
    root = tmp_path / "upstream"
    shutil.copytree(ROOT, root)
    yaml = root / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(
        yaml.read_text().replace(
            "    CPU, CUDA, MTIA: minimum_out\n    MPS: minimum_out_mps\n",
            "    CPU, CUDA, MTIA, MPS: minimum_out\n",
        )
    )
    record = index_of(root, tmp_path / "cache").record("minimum", find_references=False)
    assert item(record, "dispatch").ok
    assert [(i.name, i.macro) for i in record.mpsgraph] == [
        ("minimum_out_mps", "CREATE_MPS_STRUCTURED_BINARY_OP_FUNC")
    ]
    assert of_record(record) == "migrate"


def test_include_left_after_the_implementation_is_gone(tmp_path):
    root = tmp_path / "upstream"
    shutil.copytree(ROOT, root)
    host = root / OPS / "BinaryOps.mm"
    text = host.read_text()
    start = text.index("// half-done")
    end = text.index("} // namespace at::native")
    host.write_text(text[:start] + text[end:])
    record = index_of(root, tmp_path / "cache").record("logaddexp", find_references=False)
    assert record.mpsgraph == ()
    rel = f"{OPS}/BinaryOps.mm"
    assert mpsgraph_details(record) == [
        (
            "#include <ATen/ops/logaddexp_native.h> left without an implementation",
            rel,
            line_of(rel, "ops/logaddexp_native.h", root),
        )
    ]
    assert of_record(record) == "migrate"


def test_native_kernel_files_own_includes_are_not_leftovers(index):
    record = index.record("atan2", find_references=False)
    assert item(record, "mpsgraph").ok and of_record(record) == "done"
