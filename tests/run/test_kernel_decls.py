# ruff: noqa: E501 - preprocessed text is one long line per expanded macro
"""Reading a .metal file's kernels out of its preprocessed text, and the rewrites the host
build makes (pipeline.run.kernel_decls): pure text, no compiler."""

from __future__ import annotations

from pipeline.run.kernel_decls import (
    own_lines,
    parse_kernels,
    rewrite_threadgroup,
    segments,
    strip_instantiations,
)

PREPROCESSED = """# 1 "/t/K.metal"
template <typename T>
[[max_total_threads_per_threadgroup(kThreads)]] [[kernel]] void sum_rows(
    constant T* in, device T* out [[buffer(1)]], uint tid [[thread_position_in_threadgroup]]) {
}
kernel void plain(device float* x, texture2d<float> t [[texture(0)]], uint i [[thread_position_in_grid]]) {}
# 20 "/t/K.metal"
template [[host_name("sum_rows_" "float")]] [[kernel]] void sum_rows<float>(constant float * in, device float * out [[buffer(1)]], uint tid [[thread_position_in_threadgroup]]);
# 1 "/elsewhere.h"
[[kernel]] void not_ours(device float* x) {}
"""


def test_instantiations_and_plain_kernels_with_their_parameters():
    found = {k.host_name: k for k in parse_kernels(PREPROCESSED, "/t/K.metal")}
    assert set(found) == {"plain", "sum_rows_float"}
    k = found["sum_rows_float"]
    assert (k.function, k.template_args, k.line, k.max_threads) == (
        "sum_rows",
        "float",
        20,
        "kThreads",
    )
    kinds = [(p.name, p.kind, p.index, p.attr) for p in k.params]
    assert kinds == [
        ("in", "buffer", 0, ""),
        ("out", "buffer", 1, ""),
        ("tid", "attr", -1, "thread_position_in_threadgroup"),
    ]
    assert k.params[0].type == "constant float *"
    assert found["plain"].not_modelled == ("t: texture2d",)


UNNAMED = """# 1 "/t/F.metal"
template <typename T>
kernel void fill(device T* out [[buffer(0)]], constant T& v [[buffer(2)]], uint2 i [[thread_position_in_grid]]) {}
template <typename T>
kernel void fill(device T* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {}
template [[host_name("fill_float")]] kernel void fill<float>(device float*, constant float&, uint2);
template [[host_name("fill1_int")]] kernel void fill<int>(device int*, uint);
template [[host_name("named_int")]] kernel void fill<int>(device int* o, unsigned int);
template [[host_name("neg_dense_float")]] kernel void ::c10::metal:: unary_dense<float, neg_functor>(device float* out [[buffer(0)]], constant float* in [[buffer(1)]], uint i [[thread_position_in_grid]]);
"""


def test_unnamed_instantiation_parameters_take_the_primary_templates_attributes():
    found = {k.host_name: k for k in parse_kernels(UNNAMED, "/t/F.metal")}
    kinds = [(p.type, p.kind, p.index, p.attr) for p in found["fill_float"].params]
    assert kinds == [
        ("device float*", "buffer", 0, ""),
        ("constant float&", "buffer", 2, ""),
        ("uint2", "attr", -1, "thread_position_in_grid"),
    ]
    # the overload with as many parameters is the primary
    assert [p.kind for p in found["fill1_int"].params] == ["buffer", "attr"]
    qualified = found["neg_dense_float"]
    assert (qualified.function, qualified.template_args) == (
        "::c10::metal::unary_dense",
        "float, neg_functor",
    )
    named = found["named_int"].params
    assert (named[0].name, named[1].type, named[1].attr) == (
        "o",
        "unsigned int",
        "thread_position_in_grid",
    )


HEADER_TEMPLATE = """# 1 "/inc/c10/metal/indexing.h"
namespace c10 { namespace metal {
template <typename T, typename F>
kernel void unary_dense(device T* out, constant T* in, uint i);
template <typename T, typename F>
kernel void unary_dense(device T* out [[buffer(0)]], constant T* in [[buffer(1)]], uint i [[thread_position_in_grid]]) {}
}}
# 1 "/usr/include/c++/12/array"
template <typename T> kernel void unary_dense(device T* out, uint i) {}
# 3 "/t/U.metal"
template [[host_name("neg_float")]] kernel void ::c10::metal:: unary_dense<float, neg_functor>(device float* output, constant float* input, uint index);
"""


def test_a_header_templates_attributes_reach_an_instantiation_in_the_file():
    (k,) = parse_kernels(HEADER_TEMPLATE, "/t/U.metal")
    assert (k.host_name, k.function, k.line) == ("neg_float", "::c10::metal::unary_dense", 3)
    assert [(p.name, p.kind, p.attr) for p in k.params] == [
        ("output", "buffer", ""),
        ("input", "buffer", ""),
        ("index", "attr", "thread_position_in_grid"),
    ]


def test_threadgroup_memory_becomes_static_and_poisoned_lines_kept():
    text = "void k(threadgroup float* p) {\n  threadgroup float shared[N];\n  threadgroup float* q = p;\n}\n"
    out = rewrite_threadgroup(text, "K.metal")
    assert out.count("\n") == text.count("\n")
    assert "static float shared[N];" in out
    assert "::mps_kernel::threadgroup_local(&shared, &shared__mps_tg);" in out
    assert "threadgroup float* p" in out and "threadgroup float* q = p;" in out


def test_explicit_instantiations_are_blanked_in_place():
    text = 'x;\ntemplate [[host_name("a")]] [[kernel]] void f<float>(constant float* a [[buffer(0)]]); int y;\n'
    out = strip_instantiations(text)
    assert len(out) == len(text) and out.count("\n") == 2
    assert "template" not in out and out.strip().endswith("int y;")


VOID_KERNEL = """# 1 "/t/S.metal"
template <typename T0, typename T1>
void kernel
i0(device T0* output, constant T1* input, uint index [[thread_position_in_grid]]) {}
void helper(device float* x) {}
template [[host_name("i0_float_half")]] void kernel i0<float, half>(device float*, constant half*, uint);
"""


def test_the_kernel_keyword_after_the_return_type():
    """`void kernel name(` is a kernel as `kernel void name(` is (upstream's SpecialOps);
    a plain function is none."""
    (k,) = parse_kernels(VOID_KERNEL, "/t/S.metal")
    assert (k.host_name, k.function, k.template_args) == ("i0_float_half", "i0", "float, half")
    assert [(p.kind, p.index, p.attr) for p in k.params] == [
        ("buffer", 0, ""),
        ("buffer", 1, ""),
        ("attr", -1, "thread_position_in_grid"),
    ]


def test_a_limit_named_by_template_parameters_takes_the_instantiations_arguments():
    """Upstream's ReduceOps bounds a kernel by ``TG_X * TG_Y``, its template parameters:
    each instantiation's limit reads them given, or defaulted, outside the template."""
    text = """# 1 "/t/R.metal"
template <typename T, uint TG_X = 32, uint TG_Y = TG_X / 4>
[[max_total_threads_per_threadgroup(TG_X * TG_Y)]] kernel void outer(device T* out [[buffer(0)]], uint2 t [[thread_position_in_threadgroup]]) {
}
template [[host_name("outer_float")]] kernel void outer<float, 16>(device float* out [[buffer(0)]], uint2 t [[thread_position_in_threadgroup]]);
template [[host_name("outer_half")]] kernel void outer<half>(device half* out [[buffer(0)]], uint2 t [[thread_position_in_threadgroup]]);
"""
    found = {k.host_name: k.max_threads for k in parse_kernels(text, "/t/R.metal")}
    assert found == {"outer_float": "(16) * ((16) / 4)", "outer_half": "(32) * ((32) / 4)"}


def test_segments_are_the_runs_between_line_markers():
    text = '# 1 "/a.h"\nint a;\n\n# 7 "/k.metal" 2\nx\ny\n# 1 "/b.h" 1\nz'
    runs = [(s.path, s.line, s.lines(text)) for s in segments(text)]
    assert runs == [("/a.h", 1, ["int a;", ""]), ("/k.metal", 7, ["x", "y"]), ("/b.h", 1, ["z"])]
    assert own_lines(text, "/k.metal") == [(7, "x"), (8, "y")]
