"""MPS xfails, skips and tolerances outside common_mps.py (issue 31): the static reader on
tests/fixtures/decorations (see its README) and on the newest wheel's own files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.guide.checklist import checklist
from pipeline.tree import decorations
from pipeline.tree.decorations import DecorationKind, Place
from pipeline.tree.index import build_index
from pipeline.tree.source import TreeSource
from tests.conftest import fetched
from tests.releases import NEWEST

FIXTURE = Path(__file__).parents[1] / "fixtures" / "decorations"
SANDBOX = Path(__file__).parents[2] / "pipeline" / "sandbox" / "tree"
CMI = "torch/testing/_internal/common_methods_invocations.py"


@pytest.fixture(scope="module")
def found() -> decorations.Decorations:
    return decorations.read(FIXTURE)


def line(span) -> str:
    return (FIXTURE / span.path).read_text().splitlines()[span.start - 1]


def test_mps_decorate_infos_are_read_with_their_test_and_dtypes(found):
    (atan2,) = [d for d in found.entries if d.key == "atan2"]
    assert (atan2.kind, atan2.test, atan2.dtypes) == (
        DecorationKind.XFAIL, "TestConsistency.test_output_match", ("int64", "int32"),
    )  # fmt: skip
    assert "DecorateInfo(unittest.expectedFailure" in line(atan2.span)
    # the CUDA skip beside it is no MPS entry
    assert all(d.device_type != "cuda" for d in found.entries)


def test_active_if_on_macos_reaches_mps_and_windows_alone_does_not(found):
    atan = [d for d in found.entries if d.key == "atan"]
    assert [(d.active_if, d.dtypes) for d in atan] == [
        ("IS_MACOS or IS_WINDOWS", ("complex64", "complex128"))
    ]


def test_refs_variants_definitions_and_test_files(found):
    ref = next(d for d in found.entries if d.key == "_refs.clamp_max" and d.kind.expects_failure)
    assert (ref.refers_to, ref.test) == ("clamp_max", "TestCommon.test_python_ref")
    assert {d.key for d in found.entries} >= {"nn.functional.padconstant", "special.erfcx"}
    erfcx = next(d for d in found.entries if d.key == "special.erfcx" and d.kind.expects_failure)
    assert (erfcx.dtypes, erfcx.raw_dtypes) == (None, "floating_types()")  # not a literal
    tests = {d.test: d for d in found.entries if d.place is Place.TEST_FILE}
    assert tests["TestCommon.test_python_ref_meta"].all_ops  # under @ops
    assert tests["TestMPS.test_atan2_int_inputs"].dtypes == ("float16", "int64")
    assert "TestCommon.test_out" not in tests  # no MPS decorator


def test_what_reaches_one_operator(found):
    keys = frozenset({"clamp_max"})
    reached = {(d.key, d.test) for d in found.for_operator("clamp_max", keys)}
    assert reached == {
        ("clamp_max", "TestCommon.test_dtypes"),
        ("_refs.clamp_max", "TestCommon.test_python_ref"),
        ("_refs.clamp_max", "TestCommon.test_python_ref_torch_fallback"),
        ("", "TestCommon.test_python_ref_meta"),  # every @ops test's operator
        ("", "TestTags.test_clamp_max_tags"),  # named after it
    }
    assert ("", "TestMPS.test_atan2_int_inputs") not in reached


def test_a_file_that_is_not_python_is_a_warning_and_no_opinfo_file_a_gap(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(FIXTURE, root)
    (root / "test/test_mps.py").write_text("def broken(:\n")
    (root / CMI).unlink()
    for _ in range(2):  # read again, its parse kept (pipeline.tree.parse_each): still said
        read = decorations.read(root)
        assert any("test/test_mps.py:1" in w and "not valid Python" in w for w in read.warnings)
        assert any("common_methods_invocations.py" in g for g in read.gaps)


def test_audit_lists_each_with_file_line_test_and_dtypes(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(SANDBOX, root)
    shutil.copytree(FIXTURE / "torch", root / "torch", dirs_exist_ok=True)
    shutil.copytree(FIXTURE / "test", root / "test", dirs_exist_ok=True)
    table = root / "torch/testing/_internal/opinfo_table.yaml"
    index = build_index(TreeSource(root, tmp_path / "cache", "python", table))
    record = index.record("atan2", find_references=False)
    item = next(i for i in checklist(record) if i.id == "decorators")
    assert not item.ok
    (detail,) = [d for d in item.details if d.span and d.span.path == CMI]
    assert detail.text.startswith("atan2: xfail TestConsistency.test_output_match")
    assert "[int64, int32]" in detail.text and str(detail.span) == f"{CMI}:21"
    # the test file's decorator on a test named after atan2 is listed with its dtypes
    assert any(
        d.span and d.span.path == "test/test_mps.py" and "[float16, int64]" in d.text
        for d in item.details
    )


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@pytest.mark.realdata
def test_the_newest_wheel_ships_mps_xfails_outside_common_mps():
    root = fetched(NEWEST).root
    read = decorations.read(root)
    assert not read.gaps and not read.warnings
    outside = [d for d in read.entries if d.kind.expects_failure]
    files = {d.span.path for d in outside}
    # 2.15.0: 304 xfails and skips (and 55 tolerances) in common_methods_invocations.py,
    # opinfo/definitions/linalg.py, special.py and _masked.py (docs/performance.md)
    assert len(outside) > 100 and CMI in files
    assert any(p.startswith("torch/testing/_internal/opinfo/definitions/") for p in files)
