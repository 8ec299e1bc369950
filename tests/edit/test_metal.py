"""Metal edits: the skeleton a contributor fills in, and inserting a written functor."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.edit import metal as edit
from pipeline.errors import EditVerificationError
from pipeline.tree import metal

FIXTURES = Path(__file__).parent.parent / "fixtures" / "metal"
UPSTREAM = Path(__file__).parent.parent / "fixtures" / "upstream"
BINARY = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
UNARY = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
ALL_REAL = ("float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
SAME = {d: d for d in ALL_REAL}
# int -> float: floating inputs keep their type, integral ones (and bool) give float32
TO_FLOAT = {d: d if d in edit.FLOATING else "float32" for d in ALL_REAL}
ATAN2 = "return static_cast<T>(precise::atan2(float(a), float(b)));"


def same(dtypes):
    return {d: d for d in dtypes}


@pytest.fixture
def binary_text() -> str:
    return (FIXTURES / "BinaryKernel.metal").read_text()


# --- registration lines and skeleton --------------------------------------------------


def test_registration_lines_prefer_convenience_macros_that_match_exactly():
    assert edit.registration_lines("atan2", 2, TO_FLOAT) == [
        "REGISTER_FLOAT_BINARY_OP(atan2);",
        "REGISTER_INT2FLOAT_BINARY_OP(atan2);",
    ]
    assert edit.registration_lines("gcd", 2, SAME) == [
        "REGISTER_FLOAT_BINARY_OP(gcd);",
        "REGISTER_INTEGER_BINARY_OP(gcd);",
    ]
    no_bool = [d for d in ALL_REAL if d not in ("bool", "bfloat16")]
    assert edit.registration_lines("shl", 2, same(no_bool)) == [
        "REGISTER_INTEGER_BINARY_OP_NO_BOOL(shl);",
        "REGISTER_BINARY_OP(shl, float, float);",
        "REGISTER_BINARY_OP(shl, half, half);",
    ]


def test_registration_lines_fall_back_to_core_lines_per_dtype():
    assert edit.registration_lines("hypot", 2, same(["float16", "complex64", "float32"])) == [
        "REGISTER_BINARY_OP(hypot, float, float);",
        "REGISTER_BINARY_OP(hypot, half, half);",
        "REGISTER_BINARY_OP(hypot, float2, float2);",
    ]
    assert edit.registration_lines("atan2", 2, {"int32": "float32"}) == [
        "REGISTER_BINARY_OP(atan2, int, float);"
    ]
    assert edit.registration_lines("atan2", 2, SAME, text="") == [
        f"REGISTER_BINARY_OP(atan2, {t}, {t});"
        for t in ("float", "half", "bfloat", "long", "int", "short", "char", "uchar", "bool")
    ]
    assert edit.registration_lines("sinc", 1, same(["bfloat16", "int16"])) == [
        "REGISTER_UNARY_OP(sinc, bfloat, bfloat);",
        "REGISTER_UNARY_OP(sinc, short, short);",
    ]
    assert edit.registration_lines("fma", 3, same(["float32"])) == [
        "REGISTER_TERNARY_OP(fma, float, float);"
    ]


@pytest.mark.parametrize(
    ("kernel", "arity", "outputs", "message"),
    [
        ("atan2", 2, {"float64": "float64"}, "no Metal type for float64"),
        ("atan2", 2, {"int64": "float64"}, "no Metal type for float64"),
        ("atan2", 4, {"float32": "float32"}, "arity must be"),
        ("atan-2", 2, {"float32": "float32"}, "not a C identifier"),
        ("atan2", 2, {}, "no dtypes given"),
    ],
)
def test_registration_lines_reject_bad_arguments(kernel, arity, outputs, message):
    with pytest.raises(ValueError, match=message):
        edit.registration_lines(kernel, arity, outputs)


def test_skeleton_shows_functor_with_todo_and_registrations():
    # the guide's atan2: a floating overload returning T, an integral one returning float
    assert edit.functor_skeleton("atan2", 2, TO_FLOAT) == (
        "struct atan2_functor {\n"
        "  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>\n"
        "  inline T operator()(const T a, const T b) {\n"
        "    // TODO: the math: return atan2(a, b) as T\n"
        "  }\n"
        "  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>\n"
        "  inline float operator()(const T a, const T b) {\n"
        "    // TODO: the math: return atan2(a, b) as float\n"
        "  }\n"
        "};\n"
        "\n"
        "REGISTER_FLOAT_BINARY_OP(atan2);\n"
        "REGISTER_INT2FLOAT_BINARY_OP(atan2);\n"
    )
    unary = edit.functor_skeleton("sinc", 1, {"float32": "float32"})
    assert "  template <typename T>\n  inline T operator()(const T x) {\n" in unary
    assert "    // TODO: the math: return sinc(x) as T\n" in unary
    assert unary.endswith("REGISTER_UNARY_OP(sinc, float, float);\n")


# --- body validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("   ", "empty"),
        ("return (a + b;", "unclosed '\\('"),
        ("return a + b);", "unbalanced '\\)'"),
        ("if (a) { return a; ", "unclosed '\\{'"),
        ("return a }", "unbalanced '}'"),
        ("return a + b", "must end with ';' or '}'"),
        ("a + b;", "never returns"),
        ('return "a;', "does not lex"),
        ("#define X 1\nreturn X;", "preprocessor directive"),
    ],
)
def test_invalid_bodies_are_refused(body, message):
    with pytest.raises(ValueError, match=message):
        edit.validate_body(body)


def test_valid_bodies_may_hold_braces_in_strings_comments_and_blocks():
    body = "// } not code\nif (a < b) {\n  return b; /* { */\n}\nreturn a;"
    assert edit.validate_body("  " + body + "\n") == body


# --- add_functor ----------------------------------------------------------------------


def test_add_functor_appends_functor_and_convenience_registrations(binary_text):
    result = edit.add_functor(binary_text, BINARY, "atan2", 2, ATAN2, TO_FLOAT)
    assert result.changed and result.after.startswith(binary_text)
    added = result.after[len(binary_text) :]
    assert added.startswith("\nstruct atan2_functor {\n")
    assert f"    {ATAN2}\n" in added
    assert added.endswith(
        "REGISTER_FLOAT_BINARY_OP(atan2);\nREGISTER_INT2FLOAT_BINARY_OP(atan2);\n"
    )
    parsed = metal.parse(result.after, BINARY)
    (functor,) = [f for f in parsed.functors if f.name == "atan2"]
    assert functor.span.start == binary_text.count("\n") + 2
    regs = {(r.input, r.output) for r in parsed.registrations if r.kernel == "atan2"}
    assert regs == edit.expected_pairs(TO_FLOAT)
    # the body fills both overloads
    assert result.after.count(f"    {ATAN2}\n") == 2
    assert "atan2" in result.summary and "float32" in result.summary


def test_add_functor_uses_core_lines_when_the_file_lacks_the_convenience_macros():
    text = (FIXTURES / "UnaryKernel.metal").read_text()
    result = edit.add_functor(text, UNARY, "sinc_pi", 1, "return x;", same(["float32", "float16"]))
    assert result.after.endswith(
        "REGISTER_UNARY_OP(sinc_pi, float, float);\nREGISTER_UNARY_OP(sinc_pi, half, half);\n"
    )
    binary_only = edit.add_functor(
        "#include <metal_stdlib>", "k.metal", "pow2", 2, "return a;", SAME
    )
    assert "REGISTER_FLOAT_BINARY_OP" not in binary_only.after
    assert binary_only.after.startswith("#include <metal_stdlib>\n\nstruct pow2_functor {")
    assert binary_only.after.count("REGISTER_BINARY_OP(pow2,") == len(ALL_REAL)


def test_add_functor_indents_a_multi_line_body(binary_text):
    body = "if (a < b) {\n  return b;\n}\nreturn a;"
    result = edit.add_functor(binary_text, BINARY, "bigger", 2, body, same(["float32"]))
    assert "    if (a < b) {\n      return b;\n    }\n    return a;\n  }\n};\n" in result.after


def test_add_functor_refuses_an_existing_functor(binary_text):
    with pytest.raises(EditVerificationError, match="hypot_functor already exists at"):
        edit.add_functor(binary_text, BINARY, "hypot", 2, ATAN2, same(["float32"]))
    # generated by a one-line macro counts too
    with pytest.raises(EditVerificationError, match="lt_functor already exists"):
        edit.add_functor(binary_text, BINARY, "lt", 2, "return a < b;", same(["float32"]))


def test_add_functor_refuses_a_duplicate_registration():
    text = "REGISTER_BINARY_OP(atan2, float, float);\n"
    with pytest.raises(EditVerificationError, match="already registered for float32"):
        edit.add_functor(text, "k.metal", "atan2", 2, ATAN2, same(["float32"]))


def test_add_functor_refuses_an_invalid_body_before_touching_anything(binary_text):
    with pytest.raises(ValueError, match="never returns"):
        edit.add_functor(binary_text, BINARY, "atan2", 2, "a + b;", same(["float32"]))


def test_add_functor_verifies_by_reparsing(binary_text, monkeypatch):
    real = edit.registration_lines
    monkeypatch.setattr(
        edit, "registration_lines", lambda *a, **k: real(*a, **k)[:1]
    )  # drops every line but the first: coverage must not pass
    with pytest.raises(EditVerificationError, match="do not cover exactly"):
        edit.add_functor(binary_text, BINARY, "atan2", 2, ATAN2, SAME)


# --- against the upstream-shaped fixtures ---------------------------------------------

UP_UNARY = (UPSTREAM / UNARY).read_text()
UP_BINARY = (UPSTREAM / BINARY).read_text()
KERNELS2_BODY_END = (
    "  REGISTER_UNARY_OP(sqrt, DTYPE1, DTYPE0);         \\\n"
    "  REGISTER_UNARY_OP(sin, DTYPE1, DTYPE0)\n"
)


def _new_registrations(after: str, path: str, kernel: str) -> list[metal.Registration]:
    return [r for r in metal.parse(after, path).registrations if r.kernel == kernel]


def test_an_int_to_float_unary_op_joins_the_instantiate_macro_body():
    result = edit.add_functor(UP_UNARY, UNARY, "expm1", 1, "return x;", TO_FLOAT)
    # one line at the end of the #define body, `\` kept in the column, no `;` on the last
    assert (
        "  REGISTER_UNARY_OP(sqrt, DTYPE1, DTYPE0);         \\\n"
        "  REGISTER_UNARY_OP(sin, DTYPE1, DTYPE0);          \\\n"
        "  REGISTER_UNARY_OP(expm1, DTYPE1, DTYPE0)\n"
        "\nINSTANTIATE_UNARY_KERNELS2(bfloat, bfloat);\n"
    ) in result.after
    # the invocation lines do not change, and no line of its own registers expm1
    assert result.after.count("INSTANTIATE_UNARY_KERNELS2(") == UP_UNARY.count(
        "INSTANTIATE_UNARY_KERNELS2("
    )
    assert "REGISTER_UNARY_OP(expm1, float" not in result.after
    regs = _new_registrations(result.after, UNARY, "expm1")
    assert {(r.input, r.output) for r in regs} == edit.expected_pairs(TO_FLOAT)
    assert {r.written_macro for r in regs} == {"INSTANTIATE_UNARY_KERNELS2"}
    # the functor (the file's scalar traits, the body in both overloads) goes after the
    # functors, before the macro is first invoked
    functor = (
        "DEFINE_UNARY_FLOATING_FUNCTOR(erfcx);\n\n"
        "struct expm1_functor {\n"
        "  template <typename T, enable_if_t<is_scalar_floating_point_v<T>, bool> = true>\n"
        "  inline T operator()(const T x) {\n"
        "    return x;\n"
        "  }\n"
        "  template <typename T, enable_if_t<is_scalar_integral_v<T>, bool> = true>\n"
        "  inline float operator()(const T x) {\n"
        "    return x;\n"
        "  }\n"
        "};\n\n"
        "REGISTER_UNARY_OP(neg, int, int);\n"
    )
    assert functor in result.after
    # nothing else moved: removing the two additions gives the file back
    restored = result.after.replace(
        functor, "DEFINE_UNARY_FLOATING_FUNCTOR(erfcx);\n\nREGISTER_UNARY_OP(neg, int, int);\n"
    )
    assert (
        restored.replace(
            "  REGISTER_UNARY_OP(sin, DTYPE1, DTYPE0);          \\\n"
            "  REGISTER_UNARY_OP(expm1, DTYPE1, DTYPE0)\n",
            "  REGISTER_UNARY_OP(sin, DTYPE1, DTYPE0)\n",
        )
        == UP_UNARY
    )
    assert "via INSTANTIATE_UNARY_KERNELS2" in result.summary


def test_a_same_type_unary_op_gets_one_core_line_per_dtype():
    outputs = same(d for d in ALL_REAL if d != "bool")  # like neg
    result = edit.add_functor(UP_UNARY, UNARY, "negative", 1, "return -x;", outputs)
    assert KERNELS2_BODY_END in result.after and result.after.startswith(UP_UNARY)
    assert result.after.endswith(
        "struct negative_functor {\n"
        "  template <typename T>\n"
        "  inline T operator()(const T x) {\n"
        "    return -x;\n"
        "  }\n"
        "};\n\n"
        + "".join(
            f"REGISTER_UNARY_OP(negative, {t}, {t});\n"
            for t in ("float", "half", "bfloat", "long", "int", "short", "char", "uchar")
        )
    )


def test_a_unary_op_needing_other_pairs_than_the_macro_gives_gets_core_lines():
    outputs = {d: o for d, o in TO_FLOAT.items() if d != "bfloat16"}  # no bfloat
    result = edit.add_functor(UP_UNARY, UNARY, "expm1", 1, "return x;", outputs)
    assert KERNELS2_BODY_END in result.after and result.after.startswith(UP_UNARY)
    added = result.after[len(UP_UNARY) :]
    assert "REGISTER_UNARY_OP(expm1, float, float);\n" in added
    assert "REGISTER_UNARY_OP(expm1, long, float);\n" in added
    assert "bfloat" not in added
    regs = _new_registrations(result.after, UNARY, "expm1")
    assert {(r.input, r.output) for r in regs} == set(outputs.items())


def test_complex_pairs_join_the_vec2_macro_and_get_a_complex_overload():
    outputs = {**TO_FLOAT, "complex64": "complex64", "complex32": "complex32"}
    result = edit.add_functor(UP_UNARY, UNARY, "expm1", 1, "return x;", outputs)
    assert "  REGISTER_UNARY_OP(expm1, DTYPE##2, DTYPE##2)\n" in result.after
    assert "  REGISTER_UNARY_OP(expm1, DTYPE1, DTYPE0)\n" in result.after
    assert "template <typename T, enable_if_t<is_complex_v<T>, bool> = true>" in result.after
    assert "via INSTANTIATE_UNARY_KERNELS2 via INSTANTIATE_UNARY_KERNELS_VEC2" in result.summary
    # only complex64: the VEC2 macro would register complex32 too
    partial = edit.add_functor(
        UP_UNARY, UNARY, "expm1", 1, "return x;", {**TO_FLOAT, "complex64": "complex64"}
    )
    assert partial.after.endswith("REGISTER_UNARY_OP(expm1, float2, float2);\n")


def test_an_int_to_float_binary_op_uses_float_and_int2float_macros():
    result = edit.add_functor(UP_BINARY, BINARY, "xlogy", 2, ATAN2, TO_FLOAT)
    assert result.after.startswith(UP_BINARY)
    assert result.after[len(UP_BINARY) :] == (
        "\nstruct xlogy_functor {\n"
        "  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>\n"
        "  inline T operator()(const T a, const T b) {\n"
        f"    {ATAN2}\n"
        "  }\n"
        "  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>\n"
        "  inline float operator()(const T a, const T b) {\n"
        f"    {ATAN2}\n"
        "  }\n"
        "};\n\n"
        "REGISTER_FLOAT_BINARY_OP(xlogy);\n"
        "REGISTER_INT2FLOAT_BINARY_OP(xlogy);\n"
    )


def test_a_same_type_integer_binary_op_uses_the_integer_macro():
    ints = same(d for d in ALL_REAL if d not in edit.FLOATING)
    result = edit.add_functor(UP_BINARY, BINARY, "gcd", 2, "return a;", ints)
    assert "  template <typename T>\n  inline T operator()(const T a, const T b) {\n" in (
        result.after
    )
    assert result.after.endswith("};\n\nREGISTER_INTEGER_BINARY_OP(gcd);\n")
    both = edit.registration_lines("gcd", 2, SAME, text=UP_BINARY)
    assert both == ["REGISTER_FLOAT_BINARY_OP(gcd);", "REGISTER_INTEGER_BINARY_OP(gcd);"]
    no_bool = {d: d for d in ints if d != "bool"}
    assert edit.registration_lines("shl", 2, no_bool, text=UP_BINARY) == [
        "REGISTER_INTEGER_BINARY_OP_NO_BOOL(shl);"
    ]


def test_bool_outputs_use_the_comparison_macro_only_when_its_group_matches():
    # the fixture's REGISTER_COMPARISON_OP: float, half, long, bool, with castout kernels
    group = {d: "bool" for d in ("float32", "float16", "int64", "bool")}
    result = edit.add_functor(UP_BINARY, BINARY, "gt", 2, "return a > b;", group)
    assert "  template <typename T>\n  inline bool operator()(const T a, const T b) {\n" in (
        result.after
    )
    assert result.after.endswith("REGISTER_COMPARISON_OP(gt);\n")
    # more dtypes: core lines with a bool output, not the macro plus lines without castout
    lines = edit.registration_lines("gt", 2, {d: "bool" for d in ALL_REAL}, text=UP_BINARY)
    assert lines[0] == "REGISTER_BINARY_OP(gt, float, bool);" and len(lines) == len(ALL_REAL)


def test_skeleton_edit_is_the_whole_file_diff_with_a_todo_body():
    result = edit.functor_skeleton_edit(UP_UNARY, UNARY, "expm1", 1, TO_FLOAT)
    assert result.before == UP_UNARY and "TODO: the math" in result.summary
    diff = result.diff()
    assert diff.startswith(f"--- a/{UNARY}\n+++ b/{UNARY}\n")
    assert "+    // TODO: the math: return expm1(x) as float\n" in diff
    assert "+  REGISTER_UNARY_OP(expm1, DTYPE1, DTYPE0)\n" in diff
    # shown as text, the macro line is said in words
    text = edit.functor_skeleton("expm1", 1, TO_FLOAT, text=UP_UNARY)
    assert text.endswith(
        "// add to the body of #define INSTANTIATE_UNARY_KERNELS2: "
        "REGISTER_UNARY_OP(expm1, DTYPE1, DTYPE0)\n"
    )


def test_complex_beside_floating_overloads_use_qualified_scalar_traits_in_binary_files():
    outputs = {**TO_FLOAT, "complex64": "complex64"}
    text = edit.functor_skeleton("xlogy", 2, outputs, text=UP_BINARY)
    # metal's is_floating_point_v holds for float2 too; the file has no c10::metal using
    assert "enable_if_t<c10::metal::is_scalar_floating_point_v<T>, bool> = true>" in text
    assert "enable_if_t<c10::metal::is_complex_v<T>, bool> = true>" in text
    assert "  template <\n      typename T,\n" in text  # too long for one line


def test_a_kind_of_input_with_two_results_is_refused():
    with pytest.raises(ValueError, match="integral inputs give int64, bool->float32"):
        edit.functor_skeleton("odd", 1, {"int64": "int64", "bool": "float32"})


def test_verification_catches_a_macro_edit_that_touches_other_registrations(monkeypatch):
    real = edit._extend_macro

    def clobber(text, directive, line):  # also renames the op on the old last line
        return real(text, directive, line).replace(
            "REGISTER_UNARY_OP(sin, DTYPE1", "REGISTER_UNARY_OP(sinx, DTYPE1"
        )

    monkeypatch.setattr(edit, "_extend_macro", clobber)
    with pytest.raises(EditVerificationError, match="existing registrations changed"):
        edit.add_functor(UP_UNARY, UNARY, "expm1", 1, "return x;", TO_FLOAT)
