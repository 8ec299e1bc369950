"""The shared C-family toolkit: lexing layers, directives and macro expansion."""

from __future__ import annotations

import pytest

from pipeline.tree import cpp


def test_lex_keeps_offsets_and_lines():
    text = 'a = "x{";  // c {\n#define M(x) \\\n  x + 1\nb /* { */;\n'
    src = cpp.lex(text, "k.metal")
    assert len(src.code) == len(src.masked) == len(text)
    assert src.code.count("\n") == text.count("\n")
    assert '"x{"' in src.code and "{" not in src.masked
    (d,) = src.directives
    assert (d.line, d.end_line, d.text) == (2, 3, "#define M(x) x + 1")
    assert src.line_of(text.index("b /*")) == 4


def test_expand_supports_stringify_paste_variadics_and_empty_arguments():
    macros = {
        m.name: m
        for m in map(
            cpp.parse_define,
            [
                "#define STR(x) #x",
                "#define CAT(a, b) a##b",
                "#define FIRST(x, ...) x: __VA_ARGS__",
                "#define SUFFIX(n) n##_functor",
            ],
        )
    }
    assert cpp.expand('STR(a "b")', macros) == '"a \\"b\\""'
    assert cpp.expand("CAT(half, 2)", macros) == "half2"
    assert cpp.expand("FIRST(1, 2, 3)", macros) == "1: 2, 3"
    assert cpp.expand("SUFFIX()", macros) == "_functor"
    with pytest.raises(cpp.MacroError):
        cpp.expand("CAT(1)", macros)


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        ("TensorIteratorBase&", "TensorIteratorBase&"),
        ("TensorIterator & iter", "TensorIterator&"),
        ("const Scalar& alpha", "const Scalar&"),
        ("Scalar a", "Scalar"),
        ("const double", "const double"),
        ("double", "double"),
        ("long long", "long long"),
        ("unsigned long n", "unsigned long"),
        ("const int64_t", "const int64_t"),
        ("int64_t dim = -1", "int64_t"),
        ("Generator *gen", "Generator*"),
        ("std::optional<Generator> gen", "std::optional<Generator>"),
        ("c10::Scalar", "c10::Scalar"),
        ("at::TensorIteratorBase &it", "at::TensorIteratorBase&"),
        ("TensorIteratorBase& iter", "TensorIteratorBase&"),
    ],
)
def test_param_type_drops_names_and_defaults(param: str, expected: str) -> None:
    assert cpp.param_type(param) == expected
