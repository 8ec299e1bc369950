"""The stub declaration reader: DECLARE_DISPATCH and the function types behind it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.errors import ParseError
from pipeline.tree import dispatch
from pipeline.tree.span import Span

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dispatch"
NATIVE = "aten/src/ATen/native"


def parse(name: str) -> dispatch.DispatchHeader:
    return dispatch.parse((FIXTURES / name).read_text(), f"{NATIVE}/{name}")


@pytest.fixture(scope="module")
def binary() -> dispatch.DispatchHeader:
    return parse("Binary.h")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / NATIVE)
    return tmp_path


def _types(header: dispatch.DispatchHeader) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {d.stub: (d.fn_type, d.params) for d in header.decls if d.namespace == "at::native"}


def test_using_typedef_and_pointer_forms_resolve(binary) -> None:
    assert _types(binary) == {
        "logaddexp_stub": ("structured_binary_fn", ("TensorIteratorBase&",)),
        "gcd_stub": ("binary_fn", ("TensorIterator&",)),
        "sub_stub": ("binary_fn_alpha", ("TensorIteratorBase&", "const Scalar&")),
        "huber_stub": ("binary_fn_double", ("TensorIterator&", "double")),
        "lcm_stub": ("legacy_binary_fn", ("TensorIterator&",)),  # typedef R (*NAME)(...)
        "nextafter_stub": ("older_binary_fn", ("TensorIterator&",)),  # typedef of a typedef
        "ge_stub": ("comparison_fn", ("TensorIteratorBase&",)),  # alias of an alias
        "heaviside_stub": ("at::native::binary_fn", ("TensorIterator&",)),
        "clamp_scalar_stub": (
            "void(*)(TensorIteratorBase&, const Scalar& lo, const Scalar& hi)",
            ("TensorIteratorBase&", "const Scalar&", "const Scalar&"),
        ),
        "masked_stub": (
            "void(*)(TensorIteratorBase&, std::array<bool, 3> mask)",
            ("TensorIteratorBase&", "std::array<bool, 3>"),
        ),
        "left_shift_stub": ("binary_fn", ("TensorIterator&",)),
        "right_shift_stub": ("binary_fn", ("TensorIterator&",)),
    }
    aliases = {a.name: (a.target, a.params) for a in binary.aliases}
    assert aliases["binary_fn"] == ("void(*)(TensorIterator&)", ("TensorIterator&",))
    assert aliases["older_binary_fn"] == ("legacy_binary_fn", None)
    assert aliases["shape_pair"] == ("std::pair<int64_t, int64_t>", None)


def test_spans_with_and_without_semicolon_and_over_lines(binary) -> None:
    by_stub = {d.stub: d.span for d in binary.decls if d.namespace == "at::native"}
    path = f"{NATIVE}/Binary.h"
    lines = (FIXTURES / "Binary.h").read_text().splitlines()
    assert lines[by_stub["gcd_stub"].start - 1] == "DECLARE_DISPATCH(binary_fn, gcd_stub);"
    logaddexp = "DECLARE_DISPATCH(structured_binary_fn, logaddexp_stub)"
    assert lines[by_stub["logaddexp_stub"].start - 1] == logaddexp
    clamp = by_stub["clamp_scalar_stub"]
    assert clamp == Span(path, clamp.start, clamp.start + 2)
    assert lines[clamp.end - 1].strip() == "clamp_scalar_stub);"
    # macro-generated declarations sit on the line of the call that makes them
    assert lines[by_stub["left_shift_stub"].start - 1] == "DECLARE_SHIFT(left);"


def test_iterator_param_only_for_a_lone_iterator_reference(binary) -> None:
    by_stub = {d.stub: d for d in binary.decls if d.namespace == "at::native"}
    assert by_stub["logaddexp_stub"].iterator_param == "TensorIteratorBase&"
    assert by_stub["gcd_stub"].iterator_param == "TensorIterator&"
    for extra in ("sub_stub", "huber_stub", "clamp_scalar_stub", "masked_stub"):
        assert by_stub[extra].iterator_param is None
    qualified = dispatch.StubDecl("s", "fn", ("at::TensorIteratorBase&",), Span("h", 1, 1))
    assert qualified.iterator_param == "at::TensorIteratorBase&"
    tensor = dispatch.StubDecl("s", "fn", ("Tensor&",), Span("h", 1, 1))
    assert tensor.iterator_param is None


def test_unresolvable_types_are_unrecognised_not_dropped(binary) -> None:
    found = {u.text: u.reason for u in binary.unrecognised}
    assert found == {
        "DECLARE_DISPATCH(shape_pair, not_a_function_stub)": (
            f"shape_pair is 'std::pair<int64_t, int64_t>' ({NATIVE}/Binary.h:29), "
            "not a function pointer type"
        ),
        "DECLARE_DISPATCH(undeclared_fn, mystery_stub)": (
            f"undeclared_fn is not declared in {NATIVE}/Binary.h"
        ),
    }
    assert binary.warnings == ()


def test_comments_strings_and_defines_are_not_declarations(binary) -> None:
    stubs = {d.stub for d in binary.decls} | {u.text for u in binary.unrecognised}
    assert not any(word in s for s in stubs for word in ("commented_out", "string_stub", "note_fn"))


def test_namespaces_and_the_stub_lookup_prefer_at_native(binary) -> None:
    gcd = [(d.namespace, d.params[0]) for d in binary.decls if d.stub == "gcd_stub"]
    assert gcd == [("at::native::cpublas", "int64_t"), ("at::native", "TensorIterator&")]
    decls = dispatch.DispatchDecls((binary,), ())
    assert decls.stub("gcd_stub").namespace == "at::native"
    assert decls.stub("nope_stub") is None
    cpublas = "namespace at::native::cpublas {\nDECLARE_DISPATCH(void(*)(), s)\n}"
    only_elsewhere = dispatch.DispatchDecls((dispatch.parse(cpublas, "x.h"),), ())
    assert only_elsewhere.stub("s").namespace == "at::native::cpublas"


def test_parse_alone_sees_only_its_own_aliases() -> None:
    unary = parse("Unary.h")
    assert [d.stub for d in unary.decls] == ["neg_stub"]
    reasons = {u.text.split(", ")[1].rstrip(")"): u.reason for u in unary.unrecognised}
    assert reasons["rsub_stub"] == f"structured_binary_fn is not declared in {NATIVE}/Unary.h"
    assert unary.includes == (f"{NATIVE}/Binary.h", f"{NATIVE}/Special.h")


def test_read_resolves_aliases_across_headers(tree: Path) -> None:
    decls = dispatch.read(tree)
    assert decls.warnings == ()
    assert [f.path for f in decls.files] == [
        f"{NATIVE}/{name}"
        for name in ("Binary.h", "Loss.h", "Reduce.h", "Scan.h", "Special.h", "Unary.h")
    ]
    assert decls.stub("rsub_stub").params == ("TensorIteratorBase&",)  # included header
    assert decls.stub("bessel_stub").params == ("TensorIteratorBase&", "int64_t")  # "Special.h"
    assert decls.stub("smooth_stub").params == ("TensorIterator&", "double")  # only in Loss.h
    # two headers disagree and neither is included: no guess
    assert decls.stub("amax_stub") is None
    (unary,) = [f for f in decls.files if f.path.endswith("Unary.h")]
    (amax,) = unary.unrecognised
    assert amax.reason == (
        f"reduce_fn is declared differently in {NATIVE}/Reduce.h:5, {NATIVE}/Scan.h:5, "
        "none of them included here"
    )
    assert decls.stub("mystery_stub") is None
    (binary,) = [f for f in decls.files if f.path.endswith("Binary.h")]
    assert any(
        u.reason == f"no `using undeclared_fn = ...` or typedef undeclared_fn in {NATIVE}/*.h"
        for u in binary.unrecognised
    )


def test_if_branches_opening_a_namespace_twice_do_not_stop_the_reader(tree: Path) -> None:
    bessel = dispatch.read(tree).stub("bessel_j_stub")
    assert bessel is not None and bessel.params == ("TensorIteratorBase&", "int64_t")


def test_a_stub_declared_twice_is_a_warning(tree: Path) -> None:
    extra = tree / NATIVE / "Extra.h"
    extra.write_text("namespace at::native {\nDECLARE_DISPATCH(unary_fn, neg_stub)\n}\n")
    (warning,) = dispatch.read(tree).warnings
    assert warning == (
        f"{NATIVE}/Unary.h:15: neg_stub is already declared at {NATIVE}/Extra.h:2: "
        "a stub declared twice does not compile"
    )
    twice = "using f = void(*)(TensorIterator&);\nDECLARE_DISPATCH(f, a_stub)\n" * 2
    assert "a_stub is already declared at x.h:2" in dispatch.parse(twice, "x.h").warnings[0]


def test_macro_that_does_not_expand_is_unrecognised() -> None:
    text = (
        "#define DECLARE_PAIR(A, B) DECLARE_DISPATCH(fn, A##_stub)\n"
        "using fn = void(*)(TensorIteratorBase&);\n"
        "DECLARE_PAIR(only_one);\n"
    )
    (u,) = dispatch.parse(text, "x.h").unrecognised
    assert u.span == Span("x.h", 3, 3) and u.reason.startswith("cannot expand DECLARE_PAIR")


def test_wrong_argument_count_is_unrecognised() -> None:
    (u,) = dispatch.parse("DECLARE_DISPATCH(only_a_stub);\n", "x.h").unrecognised
    assert u.reason == "DECLARE_DISPATCH takes 2 arguments (type, stub), got 1"


def test_unbalanced_declaration_is_a_parse_error() -> None:
    with pytest.raises(ParseError) as info:
        dispatch.parse("// ok\nDECLARE_DISPATCH(void(*)(TensorIterator&, s_stub);\n", "x.h")
    assert info.value.path == "x.h" and info.value.line == 2


def test_missing_headers_are_a_warning(tmp_path: Path) -> None:
    decls = dispatch.read(tmp_path)
    assert decls.files == () and decls.warnings == (
        f"no file matches {NATIVE}/*.h under {tmp_path}",
    )


@pytest.mark.realdata
def test_the_wheels_headers_read_without_unrecognised_entries(
    tmp_path: Path, real_stub_headers: Path
) -> None:
    (tmp_path / "aten/src/ATen").mkdir(parents=True)
    (tmp_path / NATIVE).symlink_to(real_stub_headers)
    decls = dispatch.read(tmp_path)
    assert decls.warnings == ()
    assert all(f.unrecognised == () for f in decls.files)
    # every DECLARE_DISPATCH line of the headers is one declaration (382 in 2.13 and 2.15)
    written = sum(
        1
        for header in real_stub_headers.glob("*.h")
        for line in header.read_text().splitlines()
        if line.startswith("DECLARE_DISPATCH(")
    )
    assert sum(len(f.decls) for f in decls.files) == written > 300
    assert all(d.params for f in decls.files for d in f.decls)  # every type resolved
    assert decls.stub("atan2_stub").iterator_param == "TensorIteratorBase&"
    assert decls.stub("logit_stub").params == ("TensorIteratorBase&", "const Scalar&")
    # copy_stub is declared in at::native (Copy.h) and in at::native::cpublas (CPUBlas.h)
    assert decls.stub("copy_stub").span.path == f"{NATIVE}/Copy.h"
