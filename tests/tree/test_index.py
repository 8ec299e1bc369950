"""The join: one record per operator from every reader, on the bundled sandbox."""

from __future__ import annotations

import pickle

import pytest

from pipeline.errors import UnknownOperatorError
from pipeline.guide.checklist import checklist
from pipeline.guide.workflow import of_record
from pipeline.tree import index as index_mod
from pipeline.tree.index import build_index, find_references, load_index


def test_atan2_record_joins_every_reader(sandbox_settings) -> None:
    record = load_index(sandbox_settings.tree).record("atan2")
    kinds = {o.func: o.kind for o in record.overloads}
    assert kinds == {"atan2.out": "mps_specific", "atan2": "delegate", "atan2_": "delegate"}
    assert record.old_names == ("atan2_out_mps",)
    assert [f.name for f in record.functors] == ["atan2"]
    assert {("int64", "float32"), ("float32", "float32")} <= {
        (r.input, r.output) for r in record.registrations
    }
    assert [i.name for i in record.mpsgraph] == ["atan2_out_mps"]
    assert [i.op for i in record.includes] == ["atan2"]
    assert record.stubs == ()
    assert [(e.list, e.key) for e in record.xfails] == [("UNIMPLEMENTED_XFAILLIST", "atan2")]
    assert [i.aliases for i in record.opinfos] == [("arctan2",)]
    assert "TestConsistencyMPS::test_output_match_atan2_mps_int64" in record.tests
    assert of_record(record) == "migrate"
    refs = {(name, span.path) for name, span in record.old_name_refs}
    assert ("atan2_out_mps", "aten/src/ATen/native/native_functions.yaml") in refs
    assert ("atan2_out_mps", "aten/src/ATen/native/mps/operations/BinaryOps.mm") in refs


def test_workflows_of_the_sandbox_operators(sandbox_settings) -> None:
    index = load_index(sandbox_settings.tree)
    assert of_record(index.record("hypot")) == "add"
    assert of_record(index.record("copysign")) == "done"
    assert of_record(index.record("trunc")) == "migrate"  # MPSGraph behind a stub
    div = index.record("div")
    assert {i.variant_test_name for i in div.opinfos} >= {"no_rounding_mode", "trunc_rounding"}
    assert "div_true" in div.kernel_names


def test_output_dtypes_are_the_union_of_the_opinfos(sandbox_settings) -> None:
    index = load_index(sandbox_settings.tree)
    atan2 = index.record("atan2")
    assert atan2.output_dtypes["int64"] == "float32" and atan2.output_dtypes["float16"] == "float16"
    # the sandbox's registrations agree with what PyTorch computes
    assert all(atan2.output_dtypes[r.input] == r.output for r in atan2.registrations)
    assert index.record("lt").output_dtypes["int32"] == "bool"
    div = index.record("div")  # true division comes first and wins over trunc's int64
    assert [i.output_dtype("int64") for i in div.opinfos] == ["float32", "int64", "int64"]
    assert div.output_dtypes["int64"] == "float32"
    assert div.output_dtypes["complex64"] == "complex64"  # only no_rounding_mode has it


def test_records_carry_the_declared_stub_type(sandbox_settings) -> None:
    index = load_index(sandbox_settings.tree)
    atan2 = index.record("atan2").stub_decl
    assert atan2.stub == "atan2_stub" and atan2.params == ("TensorIteratorBase&",)
    assert atan2.span.path == "aten/src/ATen/native/BinaryOps.h"
    assert index.record("fmod").stub_decl.iterator_param == "TensorIterator&"
    assert index.record("div").stub_decl is None  # its stubs are div_true_stub, ...
    assert index.dispatch.stub("div_true_stub") is not None
    assert not any(u.span.path.endswith(".h") for u in index.record("atan2").unrecognised)


def test_unreadable_stub_declaration_joins_the_record(sandbox_settings) -> None:
    header = sandbox_settings.root / "aten/src/ATen/native/BinaryOps.h"
    text = header.read_text()
    header.write_text(text.replace("(structured_binary_fn, hypot_stub)", "(hypot_fn, hypot_stub)"))
    record = load_index(sandbox_settings.tree).record("hypot")
    assert record.stub_decl is None
    (u,) = record.unrecognised
    assert u.text == "DECLARE_DISPATCH(hypot_fn, hypot_stub)" and "hypot_fn" in u.reason


def test_alias_and_unknown_operator(sandbox_settings) -> None:
    index = load_index(sandbox_settings.tree)
    assert index.resolve("arctan2") == "atan2"
    with pytest.raises(UnknownOperatorError) as info:
        index.resolve("atan3")
    assert "atan2" in info.value.suggestions
    assert "Did you mean: atan2" in str(info.value)
    # one name spelt that way, ignoring case: that name (torch's operator names are lowercase)
    assert index.resolve("ATAN2") == index.resolve("Atan2") == "atan2"
    assert index.resolve("ARCTAN2") == "atan2"
    with pytest.raises(UnknownOperatorError) as info:
        index.resolve("ATAN3")
    assert "atan2" in info.value.suggestions


def test_cache_is_reused_until_an_input_changes(sandbox_settings, monkeypatch) -> None:
    first = load_index(sandbox_settings.tree)
    assert (sandbox_settings.cache_dir / "index.pickle").is_file()
    calls = []
    monkeypatch.setattr(index_mod, "build_index", lambda s: calls.append(s) or first)
    load_index(sandbox_settings.tree)
    assert calls == []
    yaml = sandbox_settings.root / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(yaml.read_text() + "\n# a comment\n")
    load_index(sandbox_settings.tree)
    assert len(calls) == 1
    header = sandbox_settings.root / "aten/src/ATen/native/UnaryOps.h"
    header.write_text(header.read_text() + "\n// a comment\n")
    load_index(sandbox_settings.tree)
    assert len(calls) == 2


def test_a_rebuild_parses_again_only_the_files_whose_text_changed(sandbox_settings) -> None:
    from pipeline.tree import metal

    root = sandbox_settings.root
    kernels = sorted(root.glob(metal.PATTERNS[0]))
    assert len(kernels) > 1
    first = metal.read(root)
    kernels[0].write_text(kernels[0].read_text() + "\n// a comment\n")
    again = metal.read(root)
    # the changed file read afresh, the others' results kept (the very same objects)
    assert again.files[0] is not first.files[0] and again.files[0].path == first.files[0].path
    assert all(a is b for a, b in zip(again.files[1:], first.files[1:], strict=True))


def test_corrupt_cache_is_rebuilt(sandbox_settings) -> None:
    cache = sandbox_settings.cache_dir / "index.pickle"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(b"not a pickle")
    assert load_index(sandbox_settings.tree).record("atan2").op == "atan2"
    with cache.open("rb") as fh:
        pickle.load(fh)  # the key, ahead of the index
        assert pickle.load(fh).root == sandbox_settings.root


def test_find_references_without_git(sandbox_settings, tmp_path) -> None:
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(sandbox_settings.root, plain, ignore=shutil.ignore_patterns(".git"))
    with_git = find_references(sandbox_settings.root, ["atan2_out_mps"])
    without = find_references(plain, ["atan2_out_mps"])
    assert sorted(with_git) == sorted(without)
    assert with_git


def test_missing_files_are_warnings_not_crashes(sandbox_settings) -> None:
    (sandbox_settings.root / "torch/testing/_internal/common_mps.py").unlink()
    index = build_index(sandbox_settings.tree)
    assert any("common_mps.py" in w for w in index.warnings)
    assert index.record("atan2").xfails == ()


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_gaps_are_by_source_and_the_cache_sees_them_come_and_go(sandbox_settings) -> None:
    kernels = sandbox_settings.root / "aten/src/ATen/native/mps/kernels"
    assert load_index(sandbox_settings.tree).gaps == ()
    (kernels / "Odd.metal").mkdir()  # a folder with a source file's name: matched, said
    gap = "aten/src/ATen/native/mps/kernels/Odd.metal: is a directory, not a file (skipped)"
    index = load_index(sandbox_settings.tree)
    assert index.gaps == ((index_mod.TreePart.KERNELS, gap),) and gap in index.warnings
    assert index.record("atan2").gaps == index.gaps
    (kernels / "Odd.metal").rmdir()
    assert load_index(sandbox_settings.tree).gaps == ()


def test_unrecognised_lines_belong_to_the_ops_they_name(sandbox_settings) -> None:
    metal = sandbox_settings.root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    metal.write_text(
        metal.read_text()
        + "\nREGISTER_MYSTERY_OP(tan, float);\nREGISTER_MYSTERY_OP(atan2, half);\n"
    )
    index = load_index(sandbox_settings.tree)
    texts = [u.text for u in index.record("atan2").unrecognised]
    assert any("atan2, half" in t for t in texts)
    assert not any("(tan," in t for t in texts)  # "tan" is inside "atan2", not a name of it
    assert index.record("hypot").unrecognised == ()  # same file, not named: not hypot's


def test_hand_folded_sandbox_op_keeps_its_mpsgraph_leftovers(sandbox_settings) -> None:
    # the sandbox's style: yaml folded by hand, TORCH_IMPL_FUNC and include still there
    yaml = sandbox_settings.root / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(
        yaml.read_text().replace(
            "    CPU, CUDA: atan2_out\n    MPS: atan2_out_mps\n", "    CPU, CUDA, MPS: atan2_out\n"
        )
    )
    record = load_index(sandbox_settings.tree).record("atan2")
    assert record.pending_overloads == ()
    check = next(i for i in checklist(record) if i.id == "mpsgraph")
    where = {(d.text, d.span.path) for d in check.details}
    assert where == {
        ("TORCH_IMPL_FUNC atan2_out_mps", "aten/src/ATen/native/mps/operations/BinaryOps.mm"),
        ("#include <ATen/ops/atan2_native.h>", "aten/src/ATen/native/mps/operations/BinaryOps.mm"),
    }
    assert not check.ok and of_record(record) == "migrate"
    trunc = load_index(sandbox_settings.tree).record("trunc", find_references=False)
    (stub,) = next(i for i in checklist(trunc) if i.id == "mpsgraph").details
    assert "trunc_stub registered with an MPSGraph body" in stub.text
