// A host C++17 stand-in for the Metal Shading Language standard library, so that the
// element-wise functors of aten/src/ATen/native/mps/kernels/*.metal and the c10/metal
// headers they include compile, unmodified, with g++ or clang++ on Linux.
//
// Written from the MSL specification's description of the types and functions (address
// spaces, half, bfloat, vector types, metal:: / precise:: / fast:: math, type traits,
// numeric_limits, as_type). It is a model of the semantics, not of the GPU: math runs in
// float through the host's libm (no fast-math, no subnormal flushing).
//
// No C library header is included: <math.h> and <stdlib.h> would put abs(int), sin(double)...
// in the global namespace, where they would make the Metal code's unqualified calls resolve
// differently (or ambiguously) from the Metal compiler. The math goes through GCC/Clang
// __builtin_* functions instead.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#define __METAL__ 1
#define __METAL_VERSION__ 310
#define __HAVE_BFLOAT__ 1

// Address spaces. The headers overload on them (c10's val_at_offs takes `constant void*`
// and `device void*`; since 2.14 `constant void*` and `device const void*`), so the spaces
// that overloads tell apart must stay distinct types on the host. `device` is volatile
// (distinct from nothing and from const, in every release's pair; a host read or write
// through a volatile pointer gives the same value). `constant` is the default space: it is
// spelled next to const (`constant const char*`, a duplicate const would not compile) and
// in constant expressions (`constexpr constant bool`, where volatile could not be). The
// shim's own class types (bfloat, vectors, atomics) accept volatile operands; a class of
// the headers' own cannot (c10's float8_e4m3fn, read and written in device memory by its
// cast kernels, has no volatile copy or assignment). So `device` is volatile only where
// c10/metal has no float8.h (2.13 pairs `device void*` with `constant void*`; 2.14 is left
// as it was): the releases that ship float8.h (2.15 on) pair `constant void*` with `device
// const void*`, which stay apart without it, and there `device` is nothing, as `thread`
// and `threadgroup` are. On
// the host every space is the same memory, so an overload taken for another space reads
// and writes the same bytes; two overloads the host cannot tell apart do not compile.
// Atomics are atomic in any space (mps_shim_sync.h). clang's address_space attribute would
// keep every space apart, but g++ has no such thing and clang rejects copying a class
// object out of a non-default space or calling its methods.
//
// check-kernel reads a file's kernel signatures from its preprocessed text, where the
// spaces and `kernel` must still be seen: MPS_KERNEL_PARSE leaves them as they are.
#ifndef MPS_KERNEL_PARSE
#if __has_include(<c10/metal/float8.h>)
#define device
#else
#define device volatile
#endif
#define constant
#define thread
#define threadgroup
#define threadgroup_imageblock
#define kernel
#define vertex
#define fragment
#endif

// Metal spells floating constants without a suffix as float; the compiler flag
// -fsingle-precision-constant gives the same, these are the named ones.
#define NAN __builtin_nanf("")
#define INFINITY __builtin_inff()
#define HUGE_VALF __builtin_huge_valf()
#define MAXFLOAT 0x1.fffffep127f
#define FLT_MAX 0x1.fffffep127f
#define FLT_MIN 0x1p-126f
#define FLT_EPSILON 0x1p-23f
#define HALF_MAX 65504.0f
#define HALF_MIN 0x1p-14f
#define HALF_EPSILON 0x1p-10f
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
#define M_E_H M_E_F
#define M_LOG2E_H M_LOG2E_F
#define M_LOG10E_H M_LOG10E_F
#define M_LN2_H M_LN2_F
#define M_LN10_H M_LN10_F
#define M_PI_H M_PI_F
#define M_PI_2_H M_PI_2_F
#define M_PI_4_H M_PI_4_F
#define M_1_PI_H M_1_PI_F
#define M_2_PI_H M_2_PI_F
#define M_2_SQRTPI_H M_2_SQRTPI_F
#define M_SQRT2_H M_SQRT2_F
#define M_SQRT1_2_H M_SQRT1_2_F

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef _Float16 half;

namespace mps_shim {
constexpr uint32_t float_bits(float f) {
  return __builtin_bit_cast(uint32_t, f);
}
constexpr float bits_float(uint32_t u) {
  return __builtin_bit_cast(float, u);
}
template <typename V, typename T>
using if_volatile_of = std::enable_if_t<std::is_same_v<std::remove_cv_t<V>, T>, bool>;
// V is a T in device memory (volatile): `out[i] += x` on a device bfloat or vector
template <typename V, typename T>
using if_device_of = std::enable_if_t<std::is_volatile_v<V> && std::is_same_v<std::remove_cv_t<V>, T>, bool>;
} // namespace mps_shim

namespace mps_shim {
// a built-in scalar other than bfloat (std's traits do not count _Float16 nor __bf16)
template <typename T>
using if_other = std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, _Float16>, bool>;
} // namespace mps_shim

// bfloat: the top 16 bits of a float32; float -> bfloat rounds to nearest even. Two models,
// each refusing what it cannot model (cxx.py builds with the class, and again with the
// built-in type where the class did not compile):
// - the class below: Metal's `c ? bfloat : float` (a float) is ambiguous for it;
// - with MPS_SHIM_NATIVE_BFLOAT (cxx.py's probe, with -fbfloat16-excess-precision=none so
//   that every operation rounds), clang's __bf16, an arithmetic type with Metal's usual
//   arithmetic conversions; clang refuses any conversion between it and half (c10's
//   cast_to<half>(bfloat)), which keeps a bfloat argument off metal::'s half overloads.
#ifdef MPS_SHIM_NATIVE_BFLOAT
typedef __bf16 bfloat;
namespace mps_shim {
constexpr bfloat bfloat_from_bits(uint16_t b) {
  return __builtin_bit_cast(bfloat, b);
}
} // namespace mps_shim
#else
// The class: NaN stays a (quiet) NaN. It converts to float implicitly and does its
// arithmetic in float, rounding the result back, as a bfloat ALU would. Constexpr, as
// Metal's bfloat is a literal type.
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  // From float implicitly, as Metal's built-in bfloat converts (`return precise::log(
  // float(x));` in a T overload, the guide's way of writing functors). The price: a class
  // cannot give Metal's `c ? bfloat : float` (a float), which is ambiguous here and reported
  // as not compiling (upstream's angle_functor), never answered wrongly.
  constexpr bfloat(float f) : bits(from_float(f)) {}
  template <
      typename T,
      std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, _Float16>, bool> = true>
  explicit constexpr bfloat(T v) : bfloat(float(v)) {}
  // a bfloat in device memory (volatile, see the address spaces above)
  template <typename V, mps_shim::if_volatile_of<V, bfloat> = true>
  bfloat(const volatile V& v) : bits(v.bits) {}
  template <typename V>
  void operator=(const V& v) volatile {
    bits = bfloat(v).bits;
  }
  constexpr operator float() const {
    return mps_shim::bits_float(uint32_t(bits) << 16);
  }
  operator float() const volatile {
    return mps_shim::bits_float(uint32_t(bits) << 16);
  }
  explicit constexpr operator _Float16() const {
    return _Float16(float(*this));
  }
  static constexpr bfloat from_bits(uint16_t b) {
    bfloat r{};
    r.bits = b;
    return r;
  }

 private:
  static constexpr uint16_t from_float(float f) {
    const uint32_t u = mps_shim::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      return uint16_t((u >> 16) | 0x40u);
    }
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

namespace mps_shim {
// bfloat with an integer stays bfloat; with a float (or a wider literal) it becomes float.
template <typename T>
using bf_result = std::conditional_t<std::is_integral_v<T>, bfloat, float>;
} // namespace mps_shim

#define MPS_SHIM_BF_OP(OP)                                                   \
  inline bfloat operator OP(bfloat a, bfloat b) {                            \
    return bfloat(float(a) OP float(b));                                     \
  }                                                                          \
  template <typename T, mps_shim::if_other<T> = true>                        \
  inline mps_shim::bf_result<T> operator OP(bfloat a, T b) {                 \
    return mps_shim::bf_result<T>(float(a) OP float(b));                     \
  }                                                                          \
  template <typename T, mps_shim::if_other<T> = true>                        \
  inline mps_shim::bf_result<T> operator OP(T a, bfloat b) {                 \
    return mps_shim::bf_result<T>(float(a) OP float(b));                     \
  }                                                                          \
  template <typename T, mps_shim::if_other<T> = true>                        \
  inline bfloat& operator OP##=(bfloat & a, T b) {                           \
    a = bfloat(float(a) OP float(b));                                        \
    return a;                                                                \
  }                                                                          \
  inline bfloat& operator OP##=(bfloat & a, bfloat b) {                      \
    a = bfloat(float(a) OP float(b));                                        \
    return a;                                                                \
  }
MPS_SHIM_BF_OP(+)
MPS_SHIM_BF_OP(-)
MPS_SHIM_BF_OP(*)
MPS_SHIM_BF_OP(/)
#undef MPS_SHIM_BF_OP
// the same on a bfloat in device memory (rounded once, as above)
#define MPS_SHIM_BF_DEVICE_OP(OP)                                                      \
  template <typename V, typename U, mps_shim::if_device_of<V, bfloat> = true>          \
  inline V& operator OP##=(V & a, const U & b) {                                       \
    a = bfloat(float(bfloat(a)) OP float(b));                                          \
    return a;                                                                          \
  }
MPS_SHIM_BF_DEVICE_OP(+)
MPS_SHIM_BF_DEVICE_OP(-)
MPS_SHIM_BF_DEVICE_OP(*)
MPS_SHIM_BF_DEVICE_OP(/)
#undef MPS_SHIM_BF_DEVICE_OP

#define MPS_SHIM_BF_CMP(OP)                               \
  inline bool operator OP(bfloat a, bfloat b) {           \
    return float(a) OP float(b);                          \
  }                                                       \
  template <typename T, mps_shim::if_other<T> = true>     \
  inline bool operator OP(bfloat a, T b) {                \
    return float(a) OP float(b);                          \
  }                                                       \
  template <typename T, mps_shim::if_other<T> = true>     \
  inline bool operator OP(T a, bfloat b) {                \
    return float(a) OP float(b);                          \
  }
MPS_SHIM_BF_CMP(==)
MPS_SHIM_BF_CMP(!=)
MPS_SHIM_BF_CMP(<)
MPS_SHIM_BF_CMP(<=)
MPS_SHIM_BF_CMP(>)
MPS_SHIM_BF_CMP(>=)
#undef MPS_SHIM_BF_CMP

constexpr bfloat operator-(bfloat a) {
  return bfloat::from_bits(uint16_t(a.bits ^ 0x8000u));
}
constexpr bfloat operator+(bfloat a) {
  return a;
}

namespace mps_shim {
constexpr bfloat bfloat_from_bits(uint16_t b) {
  return bfloat::from_bits(b);
}
} // namespace mps_shim
#endif

namespace mps_shim {
template <typename T>
constexpr bool is_scalar_arith_v =
    std::is_arithmetic_v<T> || std::is_same_v<T, _Float16> || std::is_same_v<T, bfloat>;
} // namespace mps_shim

namespace metal {

// ---- vectors: T x, y[, z, w] with element-wise operators -------------------------------
// The contiguous swizzles (v.xy, v.yz, v.zw, v.xyz, v.yzw) are vectors laid over the same
// components, so they read, write and copy as vectors do; the other two-component ones
// (v.xz, v.yx, upstream's Indexing passes offs.xz) are views over the whole vector that
// convert to a vector and take one. One view assigned the same view of another vector
// (a.xz = b.xz) copies every component: not supported (the view's copy must stay trivial,
// or the vector's would be deleted), and no upstream file writes it.
template <typename T, unsigned N>
struct vec;
template <typename T, unsigned N>
struct vec_storage;
template <typename T, unsigned N, unsigned I, unsigned J>
struct swizzle {
  T c[N]; // the vector's components: a copy of the view reads as the view does
  operator vec<T, 2>() const {
    return vec<T, 2>(c[I], c[J]);
  }
  operator vec<T, 2>() const volatile {
    return vec<T, 2>(T(c[I]), T(c[J]));
  }
  swizzle& operator=(const vec<T, 2>& v) {
    const T a = v.x, b = v.y; // v may be this vector's own components
    c[I] = a;
    c[J] = b;
    return *this;
  }
};
template <typename T>
struct vec_storage<T, 2> {
  T x, y;
};
template <typename T>
struct vec_storage<T, 3> {
  union {
    struct {
      T x, y, z;
    };
    struct {
      vec<T, 2> xy;
    };
    struct {
      T x_;
      vec<T, 2> yz;
    };
    swizzle<T, 3, 0, 2> xz;
    swizzle<T, 3, 1, 0> yx;
    swizzle<T, 3, 2, 0> zx;
    swizzle<T, 3, 2, 1> zy;
  };
};
template <typename T>
struct vec_storage<T, 4> {
  union {
    struct {
      T x, y, z, w;
    };
    struct {
      vec<T, 2> xy, zw;
    };
    struct {
      T x_;
      vec<T, 2> yz;
    };
    struct {
      vec<T, 3> xyz;
    };
    struct {
      T x__;
      vec<T, 3> yzw;
    };
    swizzle<T, 4, 0, 2> xz;
    swizzle<T, 4, 0, 3> xw;
    swizzle<T, 4, 1, 3> yw;
    swizzle<T, 4, 1, 0> yx;
    swizzle<T, 4, 2, 0> zx;
    swizzle<T, 4, 2, 1> zy;
    swizzle<T, 4, 3, 0> wx;
    swizzle<T, 4, 3, 1> wy;
    swizzle<T, 4, 3, 2> wz;
  };
};

template <typename T, unsigned N>
struct vec : vec_storage<T, N> {
  using element_type = T;
  static constexpr int size = N;
  vec() = default;
  // one value for every component (float2(0), uint4 v = 0). Implicit from a built-in
  // scalar only: a bfloat would convert as well to float2 as to float, and Metal's
  // overloads on both (c10's log1p(float) / log1p(float2)) must pick the scalar.
  template <typename S, mps_shim::if_other<S> = true>
  constexpr vec(S s) : vec(std::make_index_sequence<N>{}, T(s)) {}
  explicit constexpr vec(bfloat s) : vec(std::make_index_sequence<N>{}, T(s)) {}
  // one value per component (float2(re, im)); not explicit so {re, im} works too
  template <
      typename A,
      typename B,
      typename... Rest,
      std::enable_if_t<sizeof...(Rest) + 2 == N, bool> = true>
  constexpr vec(A a, B b, Rest... rest) : vec_storage<T, N>{T(a), T(b), T(rest)...} {}
  template <typename U>
  explicit vec(const vec<U, N>& other) {
    for (int i = 0; i < N; ++i) {
      (*this)[i] = T(other[i]);
    }
  }
  // a vector in device memory (volatile, see the address spaces in mps_shim.h)
  template <typename V, mps_shim::if_volatile_of<V, vec> = true>
  vec(const volatile V& other) {
    for (int i = 0; i < N; ++i) {
      (*this)[i] = T(other[i]);
    }
  }
  template <typename U>
  explicit vec(const volatile vec<U, N>& other) {
    for (int i = 0; i < N; ++i) {
      (*this)[i] = T(other[i]);
    }
  }
  template <typename V>
  void operator=(const V& value) volatile {
    const vec v(value);
    for (int i = 0; i < N; ++i) {
      (*this)[i] = v[i];
    }
  }
  T& operator[](int i) {
    return (&this->x)[i];
  }
  const T& operator[](int i) const {
    return (&this->x)[i];
  }
  volatile T& operator[](int i) volatile {
    return (&this->x)[i];
  }
  const volatile T& operator[](int i) const volatile {
    return (&this->x)[i];
  }

 private:
  template <size_t... I>
  constexpr vec(std::index_sequence<I...>, T s) : vec_storage<T, N>{((void)I, s)...} {}
};

template <typename T>
struct is_vec : std::false_type {};
template <typename T, unsigned N>
struct is_vec<vec<T, N>> : std::true_type {};
// V is a vector in device memory (volatile, const or not)
template <typename V>
using if_device_vec =
    std::enable_if_t<std::is_volatile_v<V> && is_vec<std::remove_cv_t<V>>::value, bool>;

#define MPS_SHIM_VEC_OP(OP)                                                    \
  template <typename T, unsigned N>                                                 \
  inline vec<T, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {       \
    vec<T, N> r;                                                               \
    for (int i = 0; i < N; ++i)                                                \
      r[i] = T(a[i] OP b[i]);                                                  \
    return r;                                                                  \
  }                                                                            \
  template <                                                                   \
      typename T,                                                              \
      unsigned N,                                                              \
      typename S,                                                              \
      std::enable_if_t<mps_shim::is_scalar_arith_v<S>, bool> = true>           \
  inline vec<T, N> operator OP(const vec<T, N>& a, S b) {                      \
    vec<T, N> r;                                                               \
    for (int i = 0; i < N; ++i)                                                \
      r[i] = T(a[i] OP T(b));                                                  \
    return r;                                                                  \
  }                                                                            \
  template <                                                                   \
      typename T,                                                              \
      unsigned N,                                                              \
      typename S,                                                              \
      std::enable_if_t<mps_shim::is_scalar_arith_v<S>, bool> = true>           \
  inline vec<T, N> operator OP(S a, const vec<T, N>& b) {                      \
    vec<T, N> r;                                                               \
    for (int i = 0; i < N; ++i)                                                \
      r[i] = T(T(a) OP b[i]);                                                  \
    return r;                                                                  \
  }                                                                            \
  template <typename T, unsigned N, typename U>                                     \
  inline vec<T, N>& operator OP##=(vec<T, N> & a, const U & b) {               \
    a = a OP b;                                                                \
    return a;                                                                  \
  }                                                                            \
  template <                                                                   \
      typename V,                                                              \
      typename U,                                                              \
      mps_shim::if_device_of<V, vec<typename V::element_type, V::size>> = true> \
  inline V& operator OP##=(V & a, const U & b) {                               \
    using W = std::remove_cv_t<V>;                                             \
    a = W(W(a) OP b);                                                          \
    return a;                                                                  \
  }
MPS_SHIM_VEC_OP(+)
MPS_SHIM_VEC_OP(-)
MPS_SHIM_VEC_OP(*)
MPS_SHIM_VEC_OP(/)
MPS_SHIM_VEC_OP(%)
MPS_SHIM_VEC_OP(&)
MPS_SHIM_VEC_OP(|)
MPS_SHIM_VEC_OP(^)
MPS_SHIM_VEC_OP(<<)
MPS_SHIM_VEC_OP(>>)
#undef MPS_SHIM_VEC_OP

#define MPS_SHIM_VEC_CMP(OP)                                                     \
  template <typename T, unsigned N>                                                   \
  inline vec<bool, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {      \
    vec<bool, N> r;                                                              \
    for (int i = 0; i < N; ++i)                                                  \
      r[i] = a[i] OP b[i];                                                       \
    return r;                                                                    \
  }                                                                              \
  template <                                                                     \
      typename T,                                                                \
      unsigned N,                                                                \
      typename S,                                                                \
      std::enable_if_t<mps_shim::is_scalar_arith_v<S>, bool> = true>             \
  inline vec<bool, N> operator OP(const vec<T, N>& a, S b) {                     \
    return a OP vec<T, N>(b);                                                    \
  }                                                                              \
  template <                                                                     \
      typename T,                                                                \
      unsigned N,                                                                \
      typename S,                                                                \
      std::enable_if_t<mps_shim::is_scalar_arith_v<S>, bool> = true>             \
  inline vec<bool, N> operator OP(S a, const vec<T, N>& b) {                     \
    return vec<T, N>(a) OP b;                                                    \
  }
MPS_SHIM_VEC_CMP(==)
MPS_SHIM_VEC_CMP(!=)
MPS_SHIM_VEC_CMP(<)
MPS_SHIM_VEC_CMP(<=)
MPS_SHIM_VEC_CMP(>)
MPS_SHIM_VEC_CMP(>=)
MPS_SHIM_VEC_CMP(&&)
MPS_SHIM_VEC_CMP(||)
#undef MPS_SHIM_VEC_CMP

// a vector in device memory as an operand: its value (`out[i] * scale`, `a[i] == b`)
#define MPS_SHIM_VEC_DEVICE_OP(OP)                                                   \
  template <typename V, typename U, if_device_vec<V> = true>                         \
  inline auto operator OP(V& a, const U& b)->decltype(std::remove_cv_t<V>(a) OP b) { \
    return std::remove_cv_t<V>(a) OP b;                                              \
  }                                                                                  \
  template <                                                                         \
      typename U,                                                                    \
      typename V,                                                                    \
      if_device_vec<V> = true,                                                       \
      std::enable_if_t<!std::is_volatile_v<U>, bool> = true>                         \
  inline auto operator OP(const U& a, V& b)->decltype(a OP std::remove_cv_t<V>(b)) { \
    return a OP std::remove_cv_t<V>(b);                                              \
  }
MPS_SHIM_VEC_DEVICE_OP(+)
MPS_SHIM_VEC_DEVICE_OP(-)
MPS_SHIM_VEC_DEVICE_OP(*)
MPS_SHIM_VEC_DEVICE_OP(/)
MPS_SHIM_VEC_DEVICE_OP(==)
MPS_SHIM_VEC_DEVICE_OP(!=)
MPS_SHIM_VEC_DEVICE_OP(<)
MPS_SHIM_VEC_DEVICE_OP(>)
#undef MPS_SHIM_VEC_DEVICE_OP

template <typename T, unsigned N>
inline vec<T, N> operator-(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = T(-a[i]);
  return r;
}
template <typename T, unsigned N>
inline vec<T, N> operator+(const vec<T, N>& a) {
  return a;
}
template <typename T, unsigned N>
inline vec<T, N> operator~(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = T(~a[i]);
  return r;
}
template <typename T, unsigned N>
inline vec<bool, N> operator!(const vec<T, N>& a) {
  vec<bool, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = !a[i];
  return r;
}

} // namespace metal

// The host's vectors are aligned as their elements: the packed_ types are the same ones
#define MPS_SHIM_VEC_TYPES(T)           \
  typedef metal::vec<T, 2> T##2;        \
  typedef metal::vec<T, 3> T##3;        \
  typedef metal::vec<T, 4> T##4;        \
  typedef metal::vec<T, 2> packed_##T##2; \
  typedef metal::vec<T, 3> packed_##T##3; \
  typedef metal::vec<T, 4> packed_##T##4;
MPS_SHIM_VEC_TYPES(float)
MPS_SHIM_VEC_TYPES(half)
MPS_SHIM_VEC_TYPES(bfloat)
MPS_SHIM_VEC_TYPES(bool)
MPS_SHIM_VEC_TYPES(char)
MPS_SHIM_VEC_TYPES(uchar)
MPS_SHIM_VEC_TYPES(short)
MPS_SHIM_VEC_TYPES(ushort)
MPS_SHIM_VEC_TYPES(int)
MPS_SHIM_VEC_TYPES(uint)
MPS_SHIM_VEC_TYPES(long)
MPS_SHIM_VEC_TYPES(ulong)
#undef MPS_SHIM_VEC_TYPES

#include "mps_shim_traits.h"
#include "mps_shim_math.h"
#include "mps_shim_sync.h"
