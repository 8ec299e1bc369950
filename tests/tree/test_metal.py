"""The Metal reader: functors, registrations expanded down to the core macros, read()."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pipeline.errors import ParseError
from pipeline.tree import metal
from pipeline.tree.span import Span

FIXTURES = Path(__file__).parent.parent / "fixtures" / "metal"

FLOATS = [("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16")]
INTS_NO_BOOL = [(d, d) for d in ("int64", "int32", "int16", "uint8", "int8")]
INT2FLOAT = [(d, "float32") for d in ("int64", "int32", "int16", "uint8", "int8", "bool")]
ALL_TO_BOOL = [
    (d, "bool")
    for d in (
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "uint8",
        "int8",
        "bool",
    )
]


@pytest.fixture(scope="module")
def binary() -> metal.MetalFile:
    path = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    return metal.parse((FIXTURES / "BinaryKernel.metal").read_text(), path)


@pytest.fixture(scope="module")
def unary() -> metal.MetalFile:
    path = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
    return metal.parse((FIXTURES / "UnaryKernel.metal").read_text(), path)


def pairs(f: metal.MetalFile, kernel: str, written: str | None = None, core: str | None = None):
    return [
        (r.input, r.output)
        for r in f.registrations
        if r.kernel == kernel
        and (written is None or r.written_macro == written)
        and (core is None or r.core_macro == core)
    ]


def parse(text: str) -> metal.MetalFile:
    return metal.parse(text, "k.metal")


# --- functors -------------------------------------------------------------------------


def test_functors_have_brace_matched_spans(binary):
    spans = {f.name: (f.span.start, f.span.end, f.macro) for f in binary.functors}
    assert spans["hypot"] == (9, 15, None)  # a "}" in a comment inside the body
    assert spans["maximum"] == (28, 35, None)  # a '{' char literal inside the body
    assert spans["copysign"] == (17, 26, None)
    assert list(spans)[:9] == [
        "hypot",
        "copysign",
        "maximum",
        "bitwise_and",
        "shift_left",
        "lerp_alpha",
        "addcmul",
        "mul",
        "gather_pick",
    ]


def test_functor_generating_macros_without_define_use_the_fallback(binary, unary):
    generated = {(f.name, f.span.start, f.macro) for f in binary.functors if f.macro}
    assert generated == {
        ("lt", 79, "DEFINE_BINARY_COMPARISON_FUNCTOR"),
        ("ge", 80, "DEFINE_BINARY_COMPARISON_FUNCTOR"),
    }
    assert {(f.name, f.macro) for f in unary.functors if f.macro} == {
        ("erfc", "DEFINE_UNARY_FLOATING_FUNCTOR"),
        ("floor", "DEFINE_UNARY_FLOATING_FUNCTOR"),
    }


def test_functor_generating_macro_defined_in_the_file():
    f = parse(
        "#define DEFINE_SHIFT_FUNCTOR(NAME, OP) \\\n"
        "  struct NAME##_functor {                \\\n"
        "    template <typename T>                \\\n"
        "    inline T operator()(T a, T b) {      \\\n"
        "      return a OP b;                     \\\n"
        "    }                                    \\\n"
        "  }\n"
        "DEFINE_SHIFT_FUNCTOR(rshift, >>);\n"
        "MAKE_ANY_FUNCTOR(lshift);\n"
    )
    assert [(x.name, x.span, x.macro) for x in f.functors] == [
        ("rshift", Span("k.metal", 8, 8), "DEFINE_SHIFT_FUNCTOR")
    ]
    assert f.unrecognised == ()  # an unknown non-registration macro is nobody's business


def test_templated_functor_and_struct_that_is_not_a_functor():
    f = parse(
        "template <typename U>\nstruct widen_functor : base {\n  U u;\n};\n"
        "struct Params { float lo; };\n"
    )
    assert [(x.name, x.span.start, x.span.end) for x in f.functors] == [("widen", 1, 4)]


# --- every convenience macro, exact dtype pairs ---------------------------------------


def test_float_binary_op(binary):
    assert pairs(binary, "hypot") == FLOATS
    assert {r.written_macro for r in binary.registrations if r.kernel == "hypot"} == {
        "REGISTER_FLOAT_BINARY_OP"
    }
    assert {r.core_macro for r in binary.registrations if r.kernel == "hypot"} == {
        "REGISTER_BINARY_OP"
    }


def test_int2float_binary_op_registers_integral_inputs_to_float(binary):
    assert pairs(binary, "copysign", "REGISTER_INT2FLOAT_BINARY_OP") == [
        ("int64", "float32"),
        ("int32", "float32"),
        ("int16", "float32"),
        ("uint8", "float32"),
        ("int8", "float32"),
        ("bool", "float32"),
    ]
    assert pairs(binary, "copysign", "REGISTER_FLOAT_BINARY_OP") == FLOATS


def test_integer_binary_op_expands_through_the_no_bool_macro(binary):
    assert pairs(binary, "maximum", "REGISTER_INTEGER_BINARY_OP") == [
        *INTS_NO_BOOL,
        ("bool", "bool"),
    ]
    assert pairs(binary, "bitwise_and") == [*INTS_NO_BOOL, ("bool", "bool")]
    assert pairs(binary, "shift_left", "REGISTER_INTEGER_BINARY_OP_NO_BOOL") == INTS_NO_BOOL


def test_opmath_float_binary_op(binary):
    assert pairs(binary, "mul", "REGISTER_OPMATH_FLOAT_BINARY_OP", "REGISTER_OPMATH_BINARY_OP") == (
        FLOATS
    )


def test_comparison_and_complex_eq_ops_include_castout_variants(binary):
    assert pairs(binary, "ge", core="REGISTER_BINARY_OP") == ALL_TO_BOOL
    assert pairs(binary, "ge", core="REGISTER_BINARY_CASTOUT_OP") == ALL_TO_BOOL
    assert pairs(binary, "lt", "REGISTER_COMPLEX_EQ_OP", "REGISTER_BINARY_OP") == [
        ("complex64", "bool"),
        ("complex32", "bool"),
    ]


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("REGISTER_FLOAT_BINARY_OP", FLOATS),
        ("REGISTER_OPMATH_FLOAT_BINARY_OP", FLOATS),
        ("REGISTER_INT2FLOAT_BINARY_OP", INT2FLOAT),
        ("REGISTER_INTEGER_BINARY_OP", [*INTS_NO_BOOL, ("bool", "bool")]),
        ("REGISTER_INTEGER_BINARY_OP_NO_BOOL", INTS_NO_BOOL),
        ("REGISTER_COMPARISON_OP", ALL_TO_BOOL),
        ("REGISTER_COMPLEX_EQ_OP", [("complex64", "bool"), ("complex32", "bool")]),
    ],
)
def test_convenience_macros_without_their_define_use_the_fallback_table(macro, expected):
    f = parse(f'#include "BinaryMacros.h"\n{macro}(atan2);\n')
    assert pairs(f, "atan2") == expected
    assert {(r.written_macro, r.span.start) for r in f.registrations} == {(macro, 2)}
    assert f.unrecognised == ()


def test_a_local_define_wins_over_the_fallback():
    f = parse(
        "#define REGISTER_FLOAT_BINARY_OP(NAME) REGISTER_BINARY_OP(NAME, float, float)\n"
        "REGISTER_FLOAT_BINARY_OP(hypot);\n"
    )
    assert pairs(f, "hypot") == [("float32", "float32")]


# --- every core macro -----------------------------------------------------------------


def test_core_macros(binary, unary):
    assert pairs(binary, "lerp_alpha", "REGISTER_BINARY_ALPHA_OP") == [
        ("float32", "float32"),
        ("float16", "float16"),
        ("int64", "int64"),  # the older 3-argument form
        ("complex64", "complex64"),
    ]
    assert pairs(binary, "addcmul") == [("float32", "float32"), ("int32", "int32")]
    assert [r.core_macro for r in binary.registrations if r.kernel == "addcmul"] == [
        "REGISTER_OPMATH_TERNARY_OP",
        "REGISTER_TERNARY_OP",
    ]
    assert pairs(binary, "gather_pick", "REGISTER_BINARY_INDEXING_OP") == [("float32", "float32")]
    assert pairs(binary, "mul", core="REGISTER_BINARY_OP") == [("complex32", "complex32")]
    assert pairs(unary, "negate", "REGISTER_UNARY_OP")[:2] == [
        ("int32", "int32"),
        ("int64", "int64"),
    ]
    # the alpha type (a typedef, here) is not part of the dtype pair
    assert pairs(unary, "round_places") == [("float32", "float32"), ("float16", "float16")]
    assert pairs(unary, "clamp_params", "REGISTER_UNARY_ALPHA_OP") == [
        ("float32", "float32"),
        ("bfloat16", "bfloat16"),
    ]


def test_multi_line_registration_call_spans_its_lines(binary):
    complex_alpha = [
        r for r in binary.registrations if r.input == "complex64" and "alpha" in r.kernel
    ]
    assert [r.span for r in complex_alpha] == [Span(binary.path, 159, 163)]


def test_registration_span_is_the_written_line(binary):
    (line,) = {r.span for r in binary.registrations if r.kernel == "hypot"}
    assert line == Span(binary.path, 138, 138)


# --- local wrappers -------------------------------------------------------------------


def test_wrapper_that_swaps_arguments_registers_input_to_output(unary):
    # INSTANTIATE_UNARY_KERNELS2(OUT, IN) -> REGISTER_UNARY_OP(NAME, IN, OUT)
    assert pairs(unary, "exp", "INSTANTIATE_UNARY_KERNELS2") == [
        ("float16", "float16"),
        ("float32", "float32"),
        ("bool", "float32"),
        ("int16", "float32"),
        ("int64", "float32"),
    ]
    assert pairs(unary, "sigmoid") == pairs(unary, "erfc")


def test_token_pasting_wrapper_builds_vector_types(unary):
    assert pairs(unary, "exp", "INSTANTIATE_UNARY_KERNELS_VEC2") == [
        ("complex32", "complex32"),
        ("complex64", "complex64"),
    ]
    assert pairs(unary, "negate", "INSTANTIATE_UNARY_KERNELS_VEC2") == [
        ("complex32", "complex32"),
        ("complex64", "complex64"),
    ]


def test_object_like_and_nested_defines_and_undef():
    f = parse(
        "#define OUT_T float\n"
        "#define PAIR(N, T) REGISTER_UNARY_OP(N, T, OUT_T)\n"
        "#define TWICE(N) PAIR(N, half); PAIR(N, int)\n"
        "TWICE(ceil);\n"
        "#undef TWICE\n"
        "TWICE(floor);\n"
    )
    assert pairs(f, "ceil") == [("float16", "float32"), ("int32", "float32")]
    assert {r.written_macro for r in f.registrations} == {"TWICE"}
    assert pairs(f, "floor") == []
    assert [u.span.start for u in f.unrecognised] == []  # TWICE is not registration-like


def test_registrations_inside_a_namespace_and_multiple_per_line():
    f = parse(
        "namespace extra {\n"
        "REGISTER_UNARY_OP(a, float, float); REGISTER_UNARY_OP(b, half, half);\n"
        "}\n"
    )
    assert [(r.kernel, r.span.start) for r in f.registrations] == [("a", 2), ("b", 2)]


# --- unrecognised, never dropped ------------------------------------------------------


def test_direct_kernel_instantiations_are_unrecognised(binary):
    assert [(u.span.start, u.text) for u in binary.unrecognised] == [
        (180, "INSTANTIATE_FILL_PATTERN(float);"),
        (181, "INSTANTIATE_FILL_PATTERN(half);"),
    ]
    assert all("instantiates kernels directly" in u.reason for u in binary.unrecognised)
    assert binary.warnings == ()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("REGISTER_UNARY_OP(sqrt, T, T);", "type 'T' is not a Metal dtype"),
        ("REGISTER_BINARY_OP(sqrt, double, double);", "type 'double' is not a Metal dtype"),
        ("REGISTER_UNARY_OP(sqrt, float);", "REGISTER_UNARY_OP takes 3 arguments, got 2"),
        ("REGISTER_BINARY_ALPHA_OP(x, float);", "takes 4 or 3 arguments, got 2"),
        ("REGISTER_SPECIAL_OP(sqrt);", "neither defined in this file nor a known registration"),
        ("INSTANTIATE_MYSTERY(float);", "neither defined in this file"),
        ('REGISTER_UNARY_OP("s", float, float);', "is not an identifier"),
    ],
)
def test_unparseable_registration_lines_are_unrecognised(line, reason):
    f = parse(f"struct sqrt_functor {{}};\n{line}\n")
    assert f.registrations == ()
    (u,) = f.unrecognised
    assert (u.span, u.text) == (Span("k.metal", 2, 2), line)
    assert reason in u.reason


def test_partially_expandable_wrapper_keeps_what_it_can_and_reports_the_rest():
    f = parse(
        "#define REGISTER_MIXED(N) REGISTER_UNARY_OP(N, float, float); REGISTER_ODD_OP(N)\n"
        "REGISTER_MIXED(tan);\n"
    )
    assert pairs(f, "tan") == [("float32", "float32")]
    (u,) = f.unrecognised
    assert "REGISTER_ODD_OP" in u.reason and u.span.start == 2


def test_wrapper_called_with_wrong_arity_or_recursively_is_unrecognised():
    f = parse(
        "#define REGISTER_TWO(A, B) REGISTER_UNARY_OP(A, B, B)\n"
        "#define REGISTER_LOOP(N) REGISTER_LOOP(N)\n"
        "REGISTER_TWO(x);\n"
        "REGISTER_LOOP(y);\n"
    )
    reasons = [(u.span.start, u.reason) for u in f.unrecognised]
    assert reasons[0][0] == 3 and "takes 2 argument(s), 1 given" in reasons[0][1]
    assert reasons[1][0] == 4 and "cannot be expanded further" in reasons[1][1]


def test_duplicate_registrations_warn():
    f = parse("REGISTER_UNARY_OP(a, float, float);\nREGISTER_UNARY_OP(a, float, float);\n")
    assert len(f.registrations) == 2
    assert len(f.warnings) == 1 and "k.metal:2" in f.warnings[0]


# --- brace matching and lexing --------------------------------------------------------


def test_tricky_literals_and_comments_do_not_unbalance_braces():
    text = (
        'constant char* s = "}}{";\n'
        'constant char* r = R"X(}\n)" }\n)X";\n'
        "constant int big = 1'000'000;\n"
        "constant char c = '}';\n"
        "// } comment\n"
        "/* { multi\n line } */\n"
        "struct ok_functor {\n  int f() { return '{' == '}'; }\n};\n"
        "#define NOT_CODE {\n"
        "REGISTER_UNARY_OP(ok, float, float);\n"
    )
    f = parse(text)
    assert [(x.name, x.span.start, x.span.end) for x in f.functors] == [("ok", 10, 12)]
    assert pairs(f, "ok") == [("float32", "float32")]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("struct a_functor {\n/* never closed\n", 2, "unterminated /* comment"),
        ('x = "open\n;', 1, "unterminated string"),
        ("struct a_functor {\n  int x;\n", 1, "no matching '}'"),
        ("int x;\n}\n", 2, "unmatched '}'"),
        ("namespace n {\nint x;\n", 1, "never closes"),
    ],
)
def test_malformed_input_raises_parse_error_with_line(text, line, message):
    with pytest.raises(ParseError) as err:
        parse(text)
    assert err.value.line == line and message in str(err.value)


# --- read() ---------------------------------------------------------------------------


def test_read_tree_and_lookups(tmp_path):
    kernels = tmp_path / "aten/src/ATen/native/mps/kernels"
    kernels.mkdir(parents=True)
    for name in ("BinaryKernel.metal", "UnaryKernel.metal"):
        (kernels / name).write_text((FIXTURES / name).read_text())
    tree = metal.read(tmp_path)
    assert [f.path for f in tree.files] == [
        "aten/src/ATen/native/mps/kernels/BinaryKernel.metal",
        "aten/src/ATen/native/mps/kernels/UnaryKernel.metal",
    ]
    assert tree.functor("exp").span.path.endswith("UnaryKernel.metal")
    assert tree.functor("nope") is None
    by_file = Counter(r.span.path.rsplit("/", 1)[1] for r in tree.registrations_for("mul"))
    assert by_file == {"BinaryKernel.metal": 5}
    assert tree.warnings == ()


def test_read_missing_directory_is_a_warning(tmp_path):
    tree = metal.read(tmp_path)
    assert tree.files == () and "no file matches" in tree.warnings[0]
