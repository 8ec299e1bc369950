"""Function definitions of Metal sources and the c10/metal headers, with their body shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.tree.metal_functions import functions, helpers, shape

SOURCE = """\
#include <metal_stdlib>
namespace c10 {
namespace metal {
template <typename T>
inline T twice(T x) {
  return x + x; // a comment is not shape
}
} // namespace metal
} // namespace c10
struct twice_functor {
  template <typename T>
  inline T operator()(const T a) {
    return a + a;
  }
};
inline float halve(float value, float unused) {
  return value * 0.5f;
}
REGISTER_UNARY_OP(twice, float, float);
"""


def test_namespace_functions_with_names_params_and_spans():
    found = functions(SOURCE, "k.metal")
    assert [(f.qualified, f.params, f.span.start, f.span.end) for f in found] == [
        ("c10::metal::twice", 1, 4, 7),
        ("halve", 2, 16, 18),
    ]  # the functor's operator() is a member, not a helper


def test_the_shape_ignores_names_numbers_and_comments():
    (twice, halve) = functions(SOURCE, "k.metal")
    assert twice.shape == shape("return y + y;") == ("return", "$", "+", "$", ";")
    assert halve.shape == shape("return a * 2.0f;")
    assert shape("return a + b;") != shape("return a - b;")


def test_a_file_the_lexer_refuses_has_no_functions():
    assert functions("inline int f() { /* never closed", "bad.metal") == ()


@pytest.mark.realdata
def test_the_wheels_headers_give_the_helpers_kernels_should_call(real_c10_include: Path):
    folder = real_c10_include / "c10" / "metal"
    texts = {f"c10/metal/{p.name}": p.read_text() for p in folder.glob("*.h")}
    found = helpers(texts)
    known = {f.qualified for f in found}
    assert {"c10::metal::max", "c10::metal::min", "c10::metal::floor_divide",
            "c10::metal::fmod", "c10::metal::erfinv"} <= known  # fmt: skip
    # every header gives functions: one the lexer refused would give none
    assert [path for path, text in texts.items() if not functions(text, path)] == []
    if "c10/metal/float8.h" in texts:  # new in 2.15: the fp8 conversions, in a namespace
        assert "c10::metal::detail::fp8e4m3fn_from_fp32" in known
