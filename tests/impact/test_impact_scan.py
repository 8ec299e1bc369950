"""The light source scans behind the impact rules: C-family units and Python OpInfo calls."""

from __future__ import annotations

import pytest

from pipeline.errors import ParseError
from pipeline.impact import cscan, pyscan
from pipeline.tree.includes import includes

C_SOURCE = """\
#include <c10/metal/utils.h>
#define TWICE(X) \\
  ((X) + (X))
namespace at::native {
namespace {
// helper
template <typename T>
inline T sq(T x) { return x * x; /* { not a brace */ }
constant constexpr int max_ndim = 16;
} // namespace
REGISTER_DISPATCH(a_stub, &a_kernel)
REGISTER_DISPATCH(b_stub, &b_kernel);
TORCH_IMPL_FUNC(c_out_mps)
(const Tensor& self) {
  auto s = "}";
}
struct d_functor {
  inline float operator()(float x) { return sq(x); }
};
template [[host_name("k_float")]] kernel void k<float>(device float* out);
} // namespace at::native
"""


def test_units_find_definitions_names_and_uses() -> None:
    units = {(u.start, u.end): u for u in cscan.units(C_SOURCE)}
    assert units[(1, 1)].kind == "directive"
    assert units[(2, 3)].kind == "define" and units[(2, 3)].defines == {"TWICE"}
    assert units[(7, 8)].defines == {"sq"}  # namespace bodies are top level
    assert units[(9, 9)].defines == {"max_ndim"}
    assert units[(11, 11)].kind == "statement"  # a macro call without ';' ends at its ')'
    assert units[(12, 12)].mentions >= {"REGISTER_DISPATCH", "b_stub", "b_kernel"}
    assert (13, 16) in units  # parameters on the next line, a brace inside a string
    assert units[(17, 19)].defines == {"d_functor"} and "sq" in units[(17, 19)].mentions
    assert units[(20, 20)].defines == frozenset() and "k" in units[(20, 20)].mentions


def test_code_lines_blank_comments_keep_lines_and_columns() -> None:
    code = cscan.code_lines("a; // x\n/* b\n c */ d;\n\n  // only\n")
    assert code == ["a;     ", "    ", "      d;", "", "         ", ""]
    assert cscan.is_code(code, 1, 1) and not cscan.is_code(code, 2, 2)
    assert not cscan.is_code(code, 4, 5)


def test_code_lines_keep_line_structure_through_tricky_literals() -> None:
    text = (
        'auto s = R"SHADER(\n'
        "kernel void k() { /* not a comment */ }\n"
        '\n)SHADER";\n'
        "int mask = 0b11'1111;\n"
        'auto t = "a \\\n b";\n'
        "// the end\n"
    )
    code = cscan.code_lines(text)
    assert len(code) == text.count("\n") + 1
    # the body of an inline shader is code; the blank line inside it is not
    assert [cscan.is_code(code, n, n) for n in range(1, 9)] == [
        True, True, False, True, True, True, True, False
    ]  # fmt: skip
    assert "/* not a comment */" in code[1]


def test_units_blank_literals_and_raise_on_unterminated_comments() -> None:
    text = '#include "Shared.h"\n#define NAME "exp_kernel"\nconstant char* s = "{";\n'
    units = cscan.units(text)
    assert [(u.start, u.kind) for u in units] == [
        (1, "directive"),
        (2, "define"),
        (3, "definition"),
    ]
    assert units[0].mentions == frozenset()  # an include names a file, not code
    assert units[1].mentions == {"define"}
    assert units[2].defines == {"s"}
    with pytest.raises(ParseError, match=r"x\.h:2: unterminated /\* comment"):
        cscan.units("int a;\n/* never closed\n", "x.h")


def test_include_matching_is_by_path_suffix() -> None:
    assert includes('#include <c10/metal/utils.h>\n#import "x.h"\n') == (
        "c10/metal/utils.h",
        "x.h",
    )
    assert cscan.include_matches("c10/metal/utils.h", "c10/metal/utils.h")
    assert cscan.include_matches(
        "ATen/native/mps/kernels/Pool.h", "aten/src/ATen/native/mps/kernels/Pool.h"
    )
    assert not cscan.include_matches("utils.h", "c10/metal/other_utils.h")


PY_SOURCE = '''\
def helper():
    return """
# not a comment: inside a string
"""


def sample_inputs_x(op_info, device, dtype, requires_grad):
    return helper()


op_db = [
    OpInfo("x", sample_inputs_func=sample_inputs_x),
    # a comment
    UnaryUfuncInfo(name="y", variant_test_name="v", decorators=(DecorateInfo(skip, "A"),)),
    OpInfo(make_name(), dtypes=()),
]
'''


def test_opinfo_source_calls_code_lines_and_users() -> None:
    source = pyscan.scan_opinfo_source(PY_SOURCE)
    assert source is not None
    calls = [(c.name, c.variant, c.start) for c in source.calls]
    assert calls == [("x", "", 12), ("y", "v", 14)]  # no DecorateInfo, no computed names
    assert 3 in source.code and 13 not in source.code and 5 not in source.code
    helper = pyscan.enclosing_def(source, 2)
    assert [c.name for c in pyscan.users(source, helper)] == ["x"]
    assert pyscan.innermost_call(source, 14).name == "y"
    assert pyscan.scan_opinfo_source("def (:\n") is None


def test_python_code_lines_by_tokens() -> None:
    lines = pyscan.code_line_numbers("x = 1  # c\n# only\n\ns = '''\n# in a string\n'''\n")
    assert lines == {1, 4, 5, 6}
