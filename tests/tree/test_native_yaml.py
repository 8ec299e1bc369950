"""pipeline.tree.native_yaml: entries, dispatch rows, kinds, errors; torchgen as the reference."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.errors import ParseError, UnreadableFileError
from pipeline.tree import native_yaml
from pipeline.tree.native_yaml import DispatchRow, operator_name, parse, read
from pipeline.tree.span import Span
from tests.conftest import per_release

FIXTURE = Path(__file__).parent.parent / "fixtures" / "native_yaml" / "ops.yaml"
PATH = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture(scope="module")
def model() -> native_yaml.NativeFunctions:
    return parse(FIXTURE.read_text(), PATH)


def entry(model: native_yaml.NativeFunctions, full_name: str) -> native_yaml.NativeFunction:
    (found,) = [e for e in model.entries if e.full_name == full_name]
    return found


def test_every_entry_in_file_order(model):
    assert len(model.entries) == 19
    assert model.path == PATH
    assert model.warnings == ()
    assert [e.full_name for e in model.entries[:5]] == [
        "blend.Tensor_out",
        "blend.Tensor",
        "blend_.Tensor",
        "blend.Scalar_out",
        "blend.Scalar",
    ]


def test_entry_fields(model):
    out = entry(model, "blend.Tensor_out")
    assert (out.name, out.operator, out.overload) == ("blend", "blend", "Tensor_out")
    assert (
        out.schema == "blend.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)"
    )
    assert out.structured is True
    assert out.structured_inherits == "TensorIteratorBase"
    assert out.structured_delegate is None
    assert out.dispatch == (
        DispatchRow(("CPU", "CUDA"), "blend_out", 10, "    CPU, CUDA: blend_out"),
        DispatchRow(("MPS",), "blend_out_mps", 11, "    MPS: blend_out_mps  # MPSGraph version"),
    )
    inplace = entry(model, "blend_.Tensor")
    assert (inplace.name, inplace.operator, inplace.overload) == ("blend_", "blend", "Tensor")
    assert inplace.structured is False
    assert inplace.structured_delegate == "blend.Tensor_out"
    assert inplace.dispatch == ()


def test_comma_groups_are_expanded_whatever_the_spacing(model):
    scalar_out = entry(model, "blend.Scalar_out")
    assert [row.keys for row in scalar_out.dispatch] == [
        ("MPS",),
        ("CPU", "CUDA", "XPU"),
        ("SparseCPU", "SparseCUDA"),
    ]
    # The comment line between rows is not a row; the next row keeps its own line number.
    assert [row.line for row in scalar_out.dispatch] == [28, 30, 31]
    assert scalar_out.kernel_for("XPU") == "blend_scalar_out"
    assert scalar_out.kernel_for("MPS") == "blend_scalar_out_mps"
    assert scalar_out.kernel_for("MTIA") is None


def test_flow_style_dispatch_rows_share_their_line(model):
    glint = entry(model, "glint")
    assert [(row.keys, row.kernel, row.line) for row in glint.dispatch] == [
        (("CPU",), "glint", 99),
        (("CUDA",), "glint", 99),
        (("MPS",), "glint_mps", 99),
    ]
    assert glint.dispatch[0].text == "  dispatch: {CPU: glint, CUDA: glint, MPS: glint_mps}"
    assert entry(model, "_jagged_view").dispatch == ()


def test_autogen_is_split(model):
    assert entry(model, "blend.Scalar").autogen == ("blend.Scalar_out2", "blend_.Scalar_out2")
    assert entry(model, "blend.Tensor_out").autogen == ()


def test_span_runs_from_func_line_to_last_content_line(model):
    # Trailing comment lines inside scatter_sum.out (line 64) and the blank lines and
    # comments before the next entry are not part of the entry.
    assert entry(model, "blend.Tensor_out").span == Span(PATH, 5, 12)
    assert entry(model, "blend.Scalar").span == Span(PATH, 34, 39)
    assert entry(model, "scatter_sum.out").span == Span(PATH, 60, 63)
    assert entry(model, "glint_").span == Span(PATH, 101, 104)
    assert str(entry(model, "warp").span) == f"{PATH}:50"


@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_span_ends_at_content_for_every_value_shape(monkeypatch, loader):
    monkeypatch.setattr(native_yaml, "_LOADER", loader)
    text = (FIXTURE.parent / "spans.yaml").read_text()
    spans = {e.name: (e.span.start, e.span.end) for e in parse(text, "spans.yaml").entries}
    assert spans == {
        "literal": (2, 5),  # the block scalar's trailing blank line is not content
        "wrapped": (8, 11),
        "listed": (12, 14),
        "folded": (15, 18),
        "quoted": (19, 21),
        "empty_value": (22, 23),
        "last": (25, 25),  # no newline at the end of the file is fine too
    }
    assert parse(text, "spans.yaml").entries[1].schema == "wrapped(Tensor x) -> Tensor"


@pytest.mark.parametrize(
    ("name", "operator"),
    [
        ("atan2", "atan2"),
        ("atan2_", "atan2"),
        ("_foreach_add_", "_foreach_add"),
        ("_foreach_add", "_foreach_add"),
        ("__and__", "__and__"),
        ("__iand__", "__iand__"),
        ("_", "_"),
    ],
)
def test_operator_name(name, operator):
    assert operator_name(name) == operator


def test_operator_names_in_model(model):
    assert entry(model, "_foreach_blend_.List").operator == "_foreach_blend"
    assert entry(model, "__iand__.Tensor").operator == "__iand__"
    assert entry(model, "__and__.Tensor").overload == "Tensor"


@pytest.mark.parametrize(
    ("full_name", "kind"),
    [
        ("blend.Tensor_out", "mps_specific"),
        ("blend.Scalar_out", "mps_specific"),
        ("blend.Tensor", "delegate"),
        ("warp.out", "shared"),
        ("warp", "delegate"),
        ("scatter_sum", "mps_specific"),
        ("ripple", "none"),
        ("ripple_", "none"),
        ("ripple_like", "composite"),
        ("shimmer", "composite"),  # no dispatch: torchgen's implicit CompositeImplicitAutograd
        ("_foreach_blend_.List", "mps_specific"),
        ("glint", "mps_specific"),
        ("glint_", "none"),  # SparseMPS is not MPS
    ],
)
def test_mps_kind(model, full_name, kind):
    assert entry(model, full_name).mps_kind == kind


def test_mps_kernel_of_another_row_counts_as_shared():
    text = "- func: f(Tensor self) -> Tensor\n  dispatch:\n    MPS: f_impl\n    CPU: f_impl\n"
    (only,) = parse(text, "x.yaml").entries
    assert only.mps_kind == "shared"


def test_operators_group_overloads_in_file_order(model):
    ops = model.operators()
    assert [e.full_name for e in ops["blend"]] == [
        "blend.Tensor_out",
        "blend.Tensor",
        "blend_.Tensor",
        "blend.Scalar_out",
        "blend.Scalar",
    ]
    assert [e.full_name for e in ops["ripple"]] == ["ripple", "ripple_"]
    assert "ripple_like" in ops
    assert list(ops)[:3] == ["blend", "warp", "scatter_sum"]


def test_python_loader_gives_the_same_model(model, monkeypatch):
    monkeypatch.setattr(native_yaml, "_LOADER", yaml.SafeLoader)
    assert parse(FIXTURE.read_text(), PATH) == model


def test_crlf_text_gives_the_same_lines(model):
    crlf = parse(FIXTURE.read_text().replace("\n", "\r\n"), PATH)
    assert crlf == model


def test_empty_file_has_no_entries():
    assert parse("", "x.yaml").entries == ()
    assert parse("# only a comment\n", "x.yaml").entries == ()


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        # YAML syntax errors: the line comes from the loader's mark.
        ("- func: a(Tensor x) -> Tensor\n  dispatch:\n    CPU: [a\n", 4, "invalid YAML"),
        ("- func: a(Tensor x) -> Tensor\n   bad: indentation\n  x: 1\n", 2, "invalid YAML"),
        # Structural errors: the line is the entry's.
        ("- func: a(Tensor x) -> Tensor\n\n- variants: method\n  tags: core\n", 3, "no `func:`"),
        ("- func: a(Tensor x) -> Tensor\n- just a string\n", 2, "not a mapping"),
        ("- func: a(Tensor x) -> Tensor\n  dispatch: a_impl\n", 1, "not a mapping"),
        ("- func: a\n  dispatch:\n    CPU: [a, b]\n", 1, "not of the form"),
        (
            "- func: a(Tensor x) -> Tensor\n\n- func: b(Tensor x) -> Tensor\n"
            "  dispatch:\n    CPU: [b_cpu]\n",
            3,
            "not a kernel",
        ),
        ("- func: b(Tensor x) -> Tensor\n  dispatch:\n    CPU:\n", 1, "not a kernel"),
        ("- func: b(Tensor x) -> Tensor\n  dispatch:\n    CPU, : b\n", 1, "empty name"),
        ("- func: b(Tensor x) -> Tensor\n  structured: maybe\n", 1, "True or False"),
        ("func: a(Tensor x) -> Tensor\n", 1, "list of"),
    ],
)
def test_malformed_input_names_file_and_line(text, line, words):
    with pytest.raises(ParseError) as info:
        parse(text, "native_functions.yaml")
    assert info.value.path == "native_functions.yaml"
    assert info.value.line == line
    assert words in str(info.value)
    assert str(info.value).startswith(f"native_functions.yaml:{line}: ")


def test_read_missing_file_is_an_input_error(tmp_path):
    # the core file: without it every check would pass on an empty tree
    with pytest.raises(UnreadableFileError) as info:
        read(tmp_path)
    assert str(info.value) == f"{native_yaml.PATTERNS[0]}: not found"
    assert info.value.exit_code == 2


def test_read_finds_the_file_under_root(tmp_path):
    dest = tmp_path / native_yaml.PATTERNS[0]
    dest.parent.mkdir(parents=True)
    dest.write_text(FIXTURE.read_text())
    result = read(tmp_path)
    assert result.path == native_yaml.PATTERNS[0]
    assert len(result.entries) == 19
    assert result.entries[0].span.path == native_yaml.PATTERNS[0]


# --- released wheels (OLDEST and NEWEST, tests/releases.py) ----------------------------------

# Read from each release's file: its entries, and how many serve MPS in each way (the
# migration moves rows from mps_specific to shared release after release).
REAL_KINDS = {
    "2.13.0": {"entries": 2584, "mps_specific": 293, "shared": 240, "delegate": 385},
    "2.15.0": {"entries": 2590, "mps_specific": 279, "shared": 282, "delegate": 390},
}


@pytest.fixture(scope="module")
def real_model(real_native_yaml):
    return parse(real_native_yaml.read_text(encoding="utf-8"), PATH)


@pytest.fixture(scope="module")
def torchgen_mps(real_release) -> dict[str, str]:
    """The release's own torchgen's MPS kernel per operator name (a second or two: once)."""
    return real_release.torchgen_mps()


@pytest.mark.realdata
def test_real_file_every_entry(real_model, real_native_yaml, real_release):
    text = real_native_yaml.read_text(encoding="utf-8")
    count = per_release(REAL_KINDS, real_release)["entries"]
    assert len(real_model.entries) == count
    assert len(real_model.entries) == sum(1 for ln in text.splitlines() if ln.startswith("- func:"))
    assert len({e.full_name for e in real_model.entries}) == count
    lines = text.splitlines()
    for e in real_model.entries:
        assert lines[e.span.start - 1].startswith(f"- func: {e.full_name}(")
        assert lines[e.span.end - 1].strip()
        for row in e.dispatch:
            assert row.text == lines[row.line - 1]


@pytest.mark.slow
@pytest.mark.realdata
def test_real_mps_kernels_match_torchgen(real_model, torchgen_mps):
    ours = {e.full_name: e.kernel_for("MPS") for e in real_model.entries}
    theirs = {name: torchgen_mps.get(name) for name in ours}
    assert ours == theirs
    # torchgen adds autogen'd ops to the index; every MPS kernel it knows is one of ours.
    assert set(torchgen_mps) <= set(ours)


@pytest.mark.realdata
def test_real_mps_kinds(real_model, real_release):
    kinds: dict[str, int] = {}
    for e in real_model.entries:
        kinds[e.mps_kind] = kinds.get(e.mps_kind, 0) + 1
    expected = per_release(REAL_KINDS, real_release)
    assert {k: kinds[k] for k in ("mps_specific", "shared", "delegate")} == {
        k: expected[k] for k in ("mps_specific", "shared", "delegate")
    }
    assert sum(kinds.values()) == expected["entries"]
    atan2 = {e.full_name: e for e in real_model.operators()["atan2"]}
    assert atan2["atan2.out"].mps_kind == "shared"
    assert atan2["atan2_"].mps_kind == "delegate"
