"""The Metal shim on its own: a C++ program over its types and functions, compiled with the
host compiler and run (each check prints a line the test reads)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pipeline.run import cxx

PROGRAM = r"""
#include "mps_shim.h"
#include <cstdio>
using namespace metal;

static void check(const char* what, bool ok) { std::printf("%s %s\n", ok ? "ok" : "FAIL", what); }

static uint16_t bits(bfloat b) { return b.bits; }

// `constant` is read-only memory: an overload on it differs from `device`
inline int where(constant void*) { return 1; }
inline int where(device void*) { return 2; }

int main() {
  // bfloat: float's top half, rounded to nearest, ties to even
  check("bfloat exact", bits(bfloat(1.0f)) == 0x3f80);
  check("bfloat tie to even (down)", bits(bfloat(as_type<float>(0x3f808000u))) == 0x3f80);
  check("bfloat tie to even (up)", bits(bfloat(as_type<float>(0x3f818000u))) == 0x3f82);
  check("bfloat above half rounds up", bits(bfloat(as_type<float>(0x3f808001u))) == 0x3f81);
  check("bfloat NaN stays NaN", isnan(float(bfloat(NAN))));
  const bfloat tiny = bfloat(as_type<float>(0x3b800000u));
  check("bfloat arithmetic rounds", bits(bfloat(1.0f) + tiny) == 0x3f80);
  // half is _Float16: its arithmetic stays half
  half h = half(1.0f) + half(2.0f);
  check("half is _Float16", is_same_v<decltype(h + h), half> && float(h) == 3.0f);
  check("half max", float(numeric_limits<half>::max()) == 65504.0f);
  check("bfloat max", bits(numeric_limits<bfloat>::max()) == 0x7f7f);
  // a constant of a kernel's type T, bfloat too (upstream's `constexpr T neginf = -...`)
  constexpr bfloat neginf = -numeric_limits<bfloat>::infinity();
  constexpr bfloat one = +bfloat::from_bits(0x3f80);
  check("bfloat constexpr signs", bits(neginf) == 0xff80 && bits(one) == 0x3f80);
  // vectors: element-wise operators, comparisons to bool vectors
  float2 a(1.0f, 2.0f), b(3.0f, -4.0f);
  float2 c = a * b + 1.0f;
  check("float2 element-wise", c.x == 4.0f && c.y == -7.0f);
  check("float2 compare", all(a == a) && any(a != b) && !all(a == b));
  check("half2 from float2", half2(c).y == half(-7.0f));
  check("dot", dot(a, b) == -5.0f);
  // traits: vectors are floating point but not scalar
  check("traits", is_floating_point_v<float2> && !is_scalar_v<float2> && is_scalar_v<half> &&
        is_floating_point_v<bfloat> && is_integral_v<int2> && !is_signed_v<uchar>);
  // max/min lose a NaN (MSL: the other argument); fmax too; precise:: has float math
  check("max loses NaN", metal::max(NAN, 1.0f) == 1.0f && metal::fmax(1.0f, NAN) == 1.0f);
  check("precise::atan2", precise::atan2(1.0f, 1.0f) == __builtin_atan2f(1.0f, 1.0f));
  float cosine;
  check("sincos", precise::sincos(0.0f, cosine) == 0.0f && cosine == 1.0f);
  check("select", select(1.0f, 2.0f, true) == 2.0f);
  check("clz", clz(uint(1)) == 31 && clz(ushort(1)) == 15);
  check("abs int", metal::abs(-3) == 3 && metal::abs(-1.5f) == 1.5f);
  check("address spaces", where(static_cast<constant void*>(nullptr)) == 1 &&
        where(static_cast<device void*>(nullptr)) == 2);
  check("constant float literal", is_same_v<decltype(0.5 * 2.0f), float>);
  // nextafter steps in half's own values; a vector's limits are its element's
  check("nextafter half", float(nextafter(half(INFINITY), half(0.0f))) == 65504.0f &&
        float(nextafter(half(1.0f), half(2.0f))) == 1.0f + 0x1p-10f);
  check("vector limits", numeric_limits<float2>::infinity().y == INFINITY);
  // as_type is global: c10's float8.h calls it unqualified outside metal::
  check("as_type global", ::as_type<uint>(1.0f) == 0x3f800000u);
  // sinpi is exactly zero at integers, however large, with x's sign (lgamma's reflection
  // divides by it: inf at a negative integer); cospi at a half-integer; tanpi from both
  check("sinpi at integers", sinpi(1.0f) == 0.0f && sinpi(-128.0f) == 0.0f &&
        signbit(sinpi(-3.0f)) && sinpi(16777216.0f) == 0.0f && sinpi(0.5f) == 1.0f &&
        sinpi(-1.5f) == 1.0f && float(sinpi(half(2.0f))) == 0.0f);
  check("sinpi between", __builtin_fabsf(precise::sinpi(0.25f) - 0.70710678f) < 1e-7f &&
        __builtin_fabsf(sinpi(1000.25f) - 0.70710678f) < 1e-7f);
  check("cospi and tanpi", cospi(0.5f) == 0.0f && cospi(-2.5f) == 0.0f && cospi(3.0f) == -1.0f &&
        tanpi(1.0f) == 0.0f && tanpi(0.5f) == INFINITY && tanpi(0.25f) == 1.0f);
  check("log of sinpi at an integer", log(abs(sinpi(7.0f))) == -INFINITY);
  return 0;
}
"""


# Metal forms upstream kernels use on device memory and vectors (issue 29's share of files)
KERNEL_FORMS = r"""
#include <metal_common>
#include <metal_geometric>
#include <cstdio>
using namespace metal;

static void check(const char* what, bool ok) { std::printf("%s %s\n", ok ? "ok" : "FAIL", what); }

struct Pointers {
  metal::array<device float*, 2> p;
};

// a vector's size deduced as a uint (upstream's UpSample: template <typename T, uint N>)
template <typename T, uint N>
T last_of(vec<T, N> v) {
  return v[N - 1];
}

int main() {
  // contiguous swizzles read, write and copy only the components they name
  uint4 v(1u, 2u, 3u, 4u);
  uint2 lo = v.xy;
  v.zw = v.xy;
  float3 f(1.0f, 2.0f, 3.0f);
  float2 yz = f.yz * 2.0f;
  check("swizzles", lo.x == 1u && lo.y == 2u && v.z == 1u && v.w == 2u && yz.x == 4.0f &&
        yz.y == 6.0f && v.xyz.z == 1u && sizeof(float4) == 16);
  // the others are views: read into a vector, written from one (Indexing's offs.xz)
  uint2 xz = v.xz;
  auto view = v.xz; // a copy of the view: the components it names, not what follows it
  const uint2 viewed = view;
  uint3 u(5u, 6u, 7u);
  u.zx = u.xz;  // a swap through the view: both read before either is written
  float4 g(1.0f, 2.0f, 3.0f, 4.0f);
  float2 wy = g.wy;
  check("uint vector sizes",
        last_of(float3(1.0f, 2.0f, 3.0f)) == 3.0f && last_of(uint2(4u, 5u)) == 5u);
  // max/min of a scalar and a vector: the scalar for every component
  float2 lifted = max(1.0, float2(0.5f, 2.0f));
  int2 lowered = min(int2(-3, 4), 0);
  check("scalar and vector", lifted.x == 1.0f && lifted.y == 2.0f && lowered.x == -3 &&
        lowered.y == 0);
  check("non-contiguous swizzles", xz.x == 1u && xz.y == 1u && u.x == 7u && u.z == 5u &&
        viewed.x == 1u && viewed.y == 1u &&
        u.y == 6u && wy.x == 4.0f && wy.y == 2.0f);
  // compound assignment in device memory (bfloat rounds once, as bfloat arithmetic does)
  bfloat storage = bfloat(1.5f);
  device bfloat* b = &storage;
  *b *= bfloat(3.0f);
  *b += 1.0f;
  float2 vs(1.0f, 2.0f);
  device float2* dv = &vs;
  *dv += float2(1.0f, 1.0f);
  *dv *= 2.0f;
  check("device compound assignment", float(storage) == 5.5f && vs.x == 4.0f && vs.y == 6.0f);
  // a device vector as an operand
  const device float2* cv = &vs;
  float2 q = *cv / 2.0f + 1.0f - *dv;
  check("device vector operands", q.x == -1.0f && q.y == -2.0f && all(*cv == vs));
  // an array in a struct in device memory
  float x = 7.0f;
  Pointers ps{};
  device Pointers* dp = &ps;
  dp->p[1] = &x;
  check("device array", *dp->p[1] == 7.0f && dp->p.size() == 2);
  // cross (float3 and half3 only), packed vectors
  float3 c = cross(float3(1.0f, 0.0f, 0.0f), float3(0.0f, 1.0f, 0.0f));
  packed_half4 ph(half(1.0f), half(2.0f), half(3.0f), half(4.0f));
  const device packed_half4* dph = &ph;
  check("cross and packed", c.z == 1.0f && c.x == 0.0f && float4(*dph).w == 4.0f);
  return 0;
}
"""


def _run_checks(tmp_path: Path, host_cxx: cxx.Compiler, program: str) -> list[str]:
    source = tmp_path / "shim_test.cpp"
    source.write_text(program)
    exe = tmp_path / "shim_test"
    build = subprocess.run(
        [host_cxx.path, *cxx.FLAGS, f"-I{cxx.SHIM_DIR}", "-o", str(exe), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == program.count('check("')
    return [line for line in lines if not line.startswith("ok ")]


def test_shim_types_and_functions(tmp_path: Path, host_cxx: cxx.Compiler) -> None:
    assert PROGRAM.count('check("') > 20
    failed = _run_checks(tmp_path, host_cxx, PROGRAM)
    assert not failed, failed


def test_shim_device_memory_and_vector_forms(tmp_path: Path, host_cxx: cxx.Compiler) -> None:
    failed = _run_checks(tmp_path, host_cxx, KERNEL_FORMS)
    assert not failed, failed
