"""pipeline.edit.native_yaml: folding MPS into the shared CPU/CUDA dispatch row."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from pipeline.edit import native_yaml as editor
from pipeline.edit.native_yaml import NOT_ADDED, YamlFoldResult, fold_mps_dispatch
from pipeline.errors import EditVerificationError, ParseError, UnknownOperatorError
from pipeline.tree.native_yaml import parse
from tests.conftest import per_release

FIXTURES = Path(__file__).parent.parent / "fixtures" / "native_yaml"
PATH = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture(scope="module")
def text() -> str:
    return (FIXTURES / "ops.yaml").read_text()


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines of a line diff."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    removed = [d[2:] for d in diff if d.startswith("- ")]
    added = [d[2:] for d in diff if d.startswith("+ ")]
    return removed, added


def test_fold_every_overload_byte_for_byte(text):
    result = fold_mps_dispatch(text, PATH, "blend")
    assert isinstance(result, YamlFoldResult)
    assert result.edit.after == (FIXTURES / "ops_blend_folded.yaml").read_text()
    assert result.edit.rel == PATH
    assert result.edit.before == text
    assert result.folded == ("blend.Tensor_out", "blend.Scalar_out", "blend.Scalar")
    assert result.manual == ()
    assert result.old_kernels == ("blend_out_mps", "blend_scalar_out_mps", "blend_scalar_mps")
    assert "blend.Tensor_out" in result.edit.summary


def test_fold_touches_only_dispatch_lines(text):
    removed, added = changed_lines(text, fold_mps_dispatch(text, PATH, "blend").edit.after)
    assert removed == [
        "    CPU, CUDA: blend_out",
        "    MPS: blend_out_mps  # MPSGraph version",  # its comment goes with it
        "    MPS: blend_scalar_out_mps",
        "    CPU, CUDA,XPU: blend_scalar_out   # odd spacing is kept",
        "    CPU, CUDA: blend_scalar",
        "    MPS: blend_scalar_mps",
    ]
    assert added == [
        "    CPU, CUDA, MPS: blend_out",
        # The group keeps XPU, its spacing and its trailing comment.
        "    CPU, CUDA,XPU, MPS: blend_scalar_out   # odd spacing is kept",
        "    CPU, CUDA, MPS: blend_scalar",
    ]


def test_folded_entries_share_the_cpu_kernel_and_delegates_are_untouched(text):
    after = parse(fold_mps_dispatch(text, PATH, "blend").edit.after, PATH)
    ops = {e.full_name: e for e in after.operators()["blend"]}
    assert ops["blend.Tensor_out"].kernel_for("MPS") == "blend_out"
    assert ops["blend.Scalar_out"].kernel_for("MPS") == "blend_scalar_out"
    assert ops["blend.Scalar_out"].kernel_for("XPU") == "blend_scalar_out"
    assert ops["blend.Scalar_out"].kernel_for("SparseCPU") == "blend_sparse_scalar_out"
    assert {e.mps_kind for n, e in ops.items() if n in ("blend.Tensor", "blend_.Tensor")} == {
        "delegate"
    }
    assert all(e.mps_kind in ("shared", "delegate") for e in ops.values())


def test_folding_twice_changes_nothing(text):
    once = fold_mps_dispatch(text, PATH, "blend")
    twice = fold_mps_dispatch(once.edit.after, PATH, "blend")
    assert not twice.edit.changed
    assert twice.edit.after == once.edit.after
    assert (twice.folded, twice.manual, twice.old_kernels) == ((), (), ())


def test_already_shared_operator_is_a_no_op(text):
    result = fold_mps_dispatch(text, PATH, "warp")
    assert not result.edit.changed
    assert result.folded == ()
    assert "no MPS dispatch to fold" in result.edit.summary


def test_different_cpu_and_cuda_kernels_need_a_human(text):
    result = fold_mps_dispatch(text, PATH, "scatter_sum")
    assert result.folded == ("scatter_sum.out",)
    ((name, reason),) = result.manual
    assert name == "scatter_sum"
    assert "scatter_sum_cpu" in reason and "scatter_sum_cuda" in reason
    removed, added = changed_lines(text, result.edit.after)
    assert removed == ["    CPU, CUDA: scatter_sum_out", "    MPS: scatter_sum_out_mps"]
    assert added == ["    CPU, CUDA, MPS: scatter_sum_out"]
    # The manual entry keeps its MPSGraph row, and the comment after the folded one survives.
    assert "    MPS: scatter_sum_mps\n" in result.edit.after
    assert "    # trailing comment inside the entry\n" in result.edit.after


def test_add_mps_to_an_entry_without_mps(text):
    result = fold_mps_dispatch(text, PATH, "ripple", add=True)
    assert result.folded == ("ripple", "ripple_")
    assert result.old_kernels == ()
    removed, added = changed_lines(text, result.edit.after)
    assert removed == ["    CPU, CUDA, MTIA: ripple", "    CPU, CUDA: ripple_"]
    assert added == ["    CPU, CUDA, MTIA, MPS: ripple", "    CPU, CUDA, MPS: ripple_"]
    # ripple_like is another operator, composite anyway.
    assert "    CompositeExplicitAutograd: ripple_like\n" in result.edit.after


def test_a_migration_never_adds_mps_to_an_entry_that_had_none(text):
    result = fold_mps_dispatch(text, PATH, "ripple")
    assert not result.edit.changed and result.folded == ()
    assert result.manual == (("ripple", NOT_ADDED), ("ripple_", NOT_ADDED))


def test_entries_without_a_cpu_row_or_in_flow_style_are_manual(text):
    foreach = fold_mps_dispatch(text, PATH, "_foreach_blend")
    assert not foreach.edit.changed
    assert foreach.manual == (("_foreach_blend_.List", "no CPU dispatch row for MPS to join"),)
    glint = fold_mps_dispatch(text, PATH, "glint", add=True)
    assert glint.folded == ("glint_",)
    ((name, reason),) = glint.manual
    assert name == "glint" and "dispatch: {CPU: glint" in reason
    # migrating glint (its MPS row is glint_mps) leaves glint_, which had no MPS, without
    migrated = fold_mps_dispatch(text, PATH, "glint")
    assert not migrated.edit.changed
    assert [name for name, _ in migrated.manual] == ["glint", "glint_"]
    assert migrated.manual[1][1] == NOT_ADDED


def test_crlf_line_endings_are_kept(text):
    crlf = text.replace("\n", "\r\n")
    result = fold_mps_dispatch(crlf, PATH, "blend")
    expected = (FIXTURES / "ops_blend_folded.yaml").read_text().replace("\n", "\r\n")
    assert result.edit.after == expected


def test_unknown_operator_suggests_names(text):
    with pytest.raises(UnknownOperatorError) as info:
        fold_mps_dispatch(text, PATH, "blnd")
    assert "blend" in info.value.suggestions


def test_malformed_entry_names_its_line(text):
    broken = text.replace("    CPU, CUDA: scatter_sum_out\n", "    CPU, CUDA: [scatter_sum_out]\n")
    with pytest.raises(ParseError) as info:
        fold_mps_dispatch(broken, PATH, "blend")
    assert info.value.line == 60  # the `- func: scatter_sum.out` line
    assert str(info.value).startswith(f"{PATH}:60: ")


def test_an_edit_that_changes_more_than_planned_is_refused(text, monkeypatch):
    real_plan = editor._plan

    def wrong_kernel(entry):
        plan = real_plan(entry)
        return plan.__class__(
            plan.entry, plan.shared, plan.new_text.replace("blend_out", "blend_typo"), plan.drop
        )

    monkeypatch.setattr(editor, "_plan", wrong_kernel)
    with pytest.raises(EditVerificationError, match="blend.Tensor_out"):
        fold_mps_dispatch(text, PATH, "blend")


# --- released wheels (OLDEST and NEWEST, tests/releases.py) ----------------------------------

# Operators that still have MPSGraph rows, each with several overloads:
# pow (Tensor/Scalar overloads next to delegates and an already shared one),
# addbmm (in-place, out and functional, XPU in the group), logit (MTIA in the group,
# and an in-place entry with no MPS row at all, which the migration leaves without one).
# Upstream folded pow.Tensor_Tensor_out
# itself in 2.15.
REAL_OPS = {
    "2.13.0": {
        "pow": ("pow.Tensor_Tensor_out", "pow.Scalar_out"),
        "addbmm": ("addbmm_", "addbmm.out", "addbmm"),
        "logit": ("logit", "logit.out"),
    },
    "2.15.0": {
        "pow": ("pow.Scalar_out",),
        "addbmm": ("addbmm_", "addbmm.out", "addbmm"),
        "logit": ("logit", "logit.out"),
    },
}
# the MPS kernels pow's fold leaves unused (the MPSGraph code to delete)
POW_OLD = {
    "2.13.0": ("pow_tensor_tensor_out_mps", "pow_Scalar_out_mps"),
    "2.15.0": ("pow_Scalar_out_mps",),
}


@pytest.fixture(scope="module")
def real_ops(real_release) -> dict[str, tuple[str, ...]]:
    return per_release(REAL_OPS, real_release)


@pytest.fixture(scope="module")
def real_fold(real_native_yaml, real_ops) -> tuple[str, str, list[YamlFoldResult]]:
    before = real_native_yaml.read_text(encoding="utf-8")
    text, results = before, []
    for op in real_ops:
        result = fold_mps_dispatch(text, PATH, op)
        results.append(result)
        text = result.edit.after
    return before, text, results


@pytest.mark.slow
@pytest.mark.realdata
def test_real_fold_changes_exactly_the_dispatch_lines(real_fold, real_ops, real_release):
    before, after, results = real_fold
    for (op, names), result in zip(real_ops.items(), results, strict=True):
        assert result.folded == names, op
        assert result.manual == ((("logit_", NOT_ADDED),) if op == "logit" else ()), op
    assert results[0].old_kernels == per_release(POW_OLD, real_release)

    model = parse(before, PATH)
    names = sum(real_ops.values(), ())
    folded = [e for e in model.entries if e.full_name in names]
    shared = {row.line: row for e in folded for row in e.dispatch if "CPU" in row.keys}
    dropped = {row.line for e in folded for row in e.dispatch if "MPS" in row.keys}
    # one shared row and one MPS row to drop per folded entry (logit_ had none, keeps none)
    assert len(shared) == len(names) and len(dropped) == len(names)

    old_lines, new_lines = before.split("\n"), after.split("\n")
    diff = list(difflib.unified_diff(old_lines, new_lines, n=0, lineterm=""))[2:]
    # One hunk per folded entry: its CPU row (and MPS row, if it had one) become one line.
    assert sum(1 for ln in diff if ln.startswith("@@")) == len(names)
    removed = sorted(ln[1:] for ln in diff if ln.startswith("-"))
    added = sorted(ln[1:] for ln in diff if ln.startswith("+"))
    assert removed == sorted(
        [row.text for row in shared.values()] + [old_lines[n - 1] for n in dropped]
    )
    assert added == sorted(row.text.replace(": ", ", MPS: ", 1) for row in shared.values())
    # Every other byte, in order.
    expected = [
        line.replace(": ", ", MPS: ", 1) if n in shared else line
        for n, line in enumerate(old_lines, 1)
        if n not in dropped
    ]
    assert after == "\n".join(expected)


@pytest.mark.slow
@pytest.mark.realdata
def test_real_fold_is_accepted_by_torchgen(real_fold, real_ops, real_release, tmp_path_factory):
    before, after, _ = real_fold
    tmp = tmp_path_factory.mktemp("native")
    (tmp / "native_functions.yaml").write_text(after, encoding="utf-8")
    index = real_release.torchgen_mps(tmp / "native_functions.yaml")

    old = {e.full_name: e for e in parse(before, PATH).entries}
    for names in real_ops.values():
        for name in names:
            assert index[name] == old[name].kernel_for("CPU") == old[name].kernel_for("CUDA")
    folded = set(sum(real_ops.values(), ()))
    unchanged = {n: e.kernel_for("MPS") for n, e in old.items() if n not in folded}
    assert {n: index.get(n) for n in unchanged} == unchanged
