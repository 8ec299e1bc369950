// Metal's math, common, relational, integer and geometric functions (see mps_shim.h).
//
// metal:: has float and half overloads (half computed in float, rounded back), so an integer
// or bfloat argument converts as on Metal; precise:: and fast:: have float ones only. Vector
// arguments apply the scalar function per component. max/min/fmax/fmin return the other
// argument when one is NaN, as the MSL specification says: c10::metal::max exists because of
// that.
#pragma once

namespace mps_shim {
// clang has no -fsingle-precision-constant: an unsuffixed constant is a double there, and a
// call with one would be ambiguous between the float and half overloads. Metal has no
// double: such a call takes the float overload (the constant's own arithmetic, before the
// call, runs in double with clang; g++ makes it float, as Metal does).
template <typename... A>
using if_double = std::enable_if_t<
    (std::is_same_v<A, double> || ...) && (std::is_arithmetic_v<A> && ...),
    bool>;

// sinpi/cospi/tanpi reduce the argument before pi multiplies it, so that sinpi(n) and
// tanpi(n) are exactly +-0 and cospi(n + 0.5) is +0 (MSL, as IEEE 754's sinPi): sin(pi * x)
// in float is not, and lgamma's reflection then gave a finite value at a negative integer
// where the GPU gives inf. The reduction is exact; the rest runs in double.
constexpr double pi = 3.141592653589793238462643383279502884;
inline double sinpi(float x) {
  const float r = __builtin_fmodf(x, 2.0f);
  return r == __builtin_truncf(r) ? __builtin_copysign(0.0, x) : __builtin_sin(pi * r);
}
inline double cospi(float x) {
  const float r = __builtin_fmodf(__builtin_fabsf(x), 2.0f);
  return r == 0.5f || r == 1.5f ? 0.0 : __builtin_cos(pi * r);
}
} // namespace mps_shim

namespace metal {

#define MPS_SHIM_DOUBLE1(NAME)                            \
  template <typename A, mps_shim::if_double<A> = true>    \
  inline auto NAME(A x) {                                 \
    return NAME(float(x));                                \
  }
#define MPS_SHIM_DOUBLE2(NAME)                                      \
  template <typename A, typename B, mps_shim::if_double<A, B> = true> \
  inline auto NAME(A x, B y) {                                      \
    return NAME(float(x), float(y));                                \
  }
#define MPS_SHIM_DOUBLE3(NAME)                                                  \
  template <typename A, typename B, typename C, mps_shim::if_double<A, B, C> = true> \
  inline auto NAME(A x, B y, C z) {                                             \
    return NAME(float(x), float(y), float(z));                                  \
  }

#define MPS_SHIM_VEC1(NAME)                                  \
  template <typename T, unsigned N>                               \
  inline auto NAME(const vec<T, N>& v) {                     \
    vec<decltype(NAME(v[0])), N> r;                          \
    for (int i = 0; i < N; ++i)                              \
      r[i] = NAME(v[i]);                                     \
    return r;                                                \
  }
#define MPS_SHIM_VEC2(NAME)                                                   \
  template <typename T, unsigned N>                                                \
  inline auto NAME(const vec<T, N>& a, const vec<T, N>& b) {                  \
    vec<decltype(NAME(a[0], b[0])), N> r;                                     \
    for (int i = 0; i < N; ++i)                                               \
      r[i] = NAME(a[i], b[i]);                                                \
    return r;                                                                 \
  }
#define MPS_SHIM_VEC3(NAME)                                                    \
  template <typename T, unsigned N>                                                 \
  inline auto NAME(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) { \
    vec<decltype(NAME(a[0], b[0], c[0])), N> r;                                \
    for (int i = 0; i < N; ++i)                                                \
      r[i] = NAME(a[i], b[i], c[i]);                                           \
    return r;                                                                  \
  }

// float and half overloads of a one-argument float function, plus vectors
#define MPS_SHIM_F1(NAME, EXPR)                   \
  inline float NAME(float x) {                    \
    return EXPR;                                  \
  }                                               \
  inline half NAME(half hx) {                     \
    const float x = float(hx);                    \
    return half(EXPR);                            \
  }                                               \
  MPS_SHIM_VEC1(NAME)                             \
  MPS_SHIM_DOUBLE1(NAME)
#define MPS_SHIM_F1_FLOAT(NAME, EXPR) \
  inline float NAME(float x) {        \
    return EXPR;                      \
  }                                   \
  MPS_SHIM_VEC1(NAME)
#define MPS_SHIM_F2(NAME, EXPR)                       \
  inline float NAME(float x, float y) {               \
    return EXPR;                                      \
  }                                                   \
  inline half NAME(half hx, half hy) {                \
    const float x = float(hx), y = float(hy);         \
    return half(EXPR);                                \
  }                                                   \
  MPS_SHIM_VEC2(NAME)                                 \
  MPS_SHIM_DOUBLE2(NAME)
#define MPS_SHIM_F2_FLOAT(NAME, EXPR)   \
  inline float NAME(float x, float y) { \
    return EXPR;                        \
  }                                     \
  MPS_SHIM_VEC2(NAME)
#define MPS_SHIM_F3(NAME, EXPR)                                 \
  inline float NAME(float x, float y, float z) {                \
    return EXPR;                                                \
  }                                                             \
  inline half NAME(half hx, half hy, half hz) {                 \
    const float x = float(hx), y = float(hy), z = float(hz);    \
    return half(EXPR);                                          \
  }                                                             \
  MPS_SHIM_VEC3(NAME)                                           \
  MPS_SHIM_DOUBLE3(NAME)
#define MPS_SHIM_F3_FLOAT(NAME, EXPR)            \
  inline float NAME(float x, float y, float z) { \
    return EXPR;                                 \
  }                                              \
  MPS_SHIM_VEC3(NAME)

// The one list of float math functions, written once for metal::, precise:: and fast::.
#define MPS_SHIM_MATH(F1, F2, F3)                                                     \
  F1(acos, __builtin_acosf(x))                                                       \
  F1(acosh, __builtin_acoshf(x))                                                     \
  F1(asin, __builtin_asinf(x))                                                       \
  F1(asinh, __builtin_asinhf(x))                                                     \
  F1(atan, __builtin_atanf(x))                                                       \
  F1(atanh, __builtin_atanhf(x))                                                     \
  F1(ceil, __builtin_ceilf(x))                                                       \
  F1(cos, __builtin_cosf(x))                                                         \
  F1(cosh, __builtin_coshf(x))                                                       \
  F1(cospi, float(mps_shim::cospi(x)))                                               \
  F1(exp, __builtin_expf(x))                                                         \
  F1(exp2, __builtin_exp2f(x))                                                       \
  F1(exp10, __builtin_powf(10.0f, x))                                                \
  F1(fabs, __builtin_fabsf(x))                                                       \
  F1(floor, __builtin_floorf(x))                                                     \
  F1(fract, __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f))                \
  F1(log, __builtin_logf(x))                                                         \
  F1(log2, __builtin_log2f(x))                                                       \
  F1(log10, __builtin_log10f(x))                                                     \
  F1(rint, __builtin_rintf(x))                                                       \
  F1(round, __builtin_roundf(x))                                                     \
  F1(rsqrt, 1.0f / __builtin_sqrtf(x))                                               \
  F1(sin, __builtin_sinf(x))                                                         \
  F1(sinh, __builtin_sinhf(x))                                                       \
  F1(sinpi, float(mps_shim::sinpi(x)))                                               \
  F1(sqrt, __builtin_sqrtf(x))                                                       \
  F1(tan, __builtin_tanf(x))                                                         \
  F1(tanh, __builtin_tanhf(x))                                                       \
  F1(tanpi, float(mps_shim::sinpi(x) / mps_shim::cospi(x)))                          \
  F1(trunc, __builtin_truncf(x))                                                     \
  F2(atan2, __builtin_atan2f(x, y))                                                  \
  F2(copysign, __builtin_copysignf(x, y))                                            \
  F2(divide, x / y)                                                                  \
  F2(fdim, __builtin_fdimf(x, y))                                                    \
  F2(fmax, __builtin_fmaxf(x, y))                                                    \
  F2(fmin, __builtin_fminf(x, y))                                                    \
  F2(fmod, __builtin_fmodf(x, y))                                                    \
  F2(pow, __builtin_powf(x, y))                                                      \
  F2(powr, __builtin_powf(x, y))                                                     \
  F3(fma, __builtin_fmaf(x, y, z))                                                   \
  F3(fmax3, __builtin_fmaxf(__builtin_fmaxf(x, y), z))                               \
  F3(fmin3, __builtin_fminf(__builtin_fminf(x, y), z))                               \
  F3(fmedian3, __builtin_fmaxf(__builtin_fminf(x, y), __builtin_fminf(__builtin_fmaxf(x, y), z)))

MPS_SHIM_MATH(MPS_SHIM_F1, MPS_SHIM_F2, MPS_SHIM_F3)

// nextafter steps in the argument's own type: half's next value, not float's rounded back
MPS_SHIM_F2_FLOAT(nextafter, __builtin_nextafterf(x, y))
inline half nextafter(half x, half y) {
  if (x != x || y != y) {
    return half(__builtin_nanf(""));
  }
  if (x == y) {
    return y;
  }
  if (x == half(0.0f)) {
    const ushort tiny = 1;
    return half(__builtin_copysignf(float(__builtin_bit_cast(half, tiny)), float(y)));
  }
  const ushort bits = __builtin_bit_cast(ushort, x);
  const bool away = (x < y) == (x > half(0.0f));
  return __builtin_bit_cast(half, ushort(away ? bits + 1 : bits - 1));
}
MPS_SHIM_DOUBLE2(nextafter)

// abs is fabs for floating point and the integer absolute value for integers
MPS_SHIM_F1(abs, __builtin_fabsf(x))
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T abs(T x) {
  if constexpr (std::is_signed_v<T>) {
    return x < 0 ? T(-x) : x;
  } else {
    return x;
  }
}

// max/min: floating point as fmax/fmin (NaN loses), integers as usual (declared first:
// the vector forms find them by name where they are defined, an int having no namespace)
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T max(T x, T y) {
  return x > y ? x : y;
}
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T min(T x, T y) {
  return x < y ? x : y;
}
MPS_SHIM_F2(max, __builtin_fmaxf(x, y))
MPS_SHIM_F2(min, __builtin_fminf(x, y))
// a vector and a scalar, the scalar for every component (upstream's UpSample writes
// max(1.0, scales) of a float2); the scalar takes the vector's element type
#define MPS_SHIM_VEC_SCALAR(NAME)                                               \
  template <typename T, unsigned N>                                             \
  inline auto NAME(const vec<T, N>& a, typename vec<T, N>::element_type b) {    \
    return NAME(a, vec<T, N>(b));                                               \
  }                                                                             \
  template <typename T, unsigned N>                                             \
  inline auto NAME(typename vec<T, N>::element_type a, const vec<T, N>& b) {    \
    return NAME(vec<T, N>(a), b);                                               \
  }
MPS_SHIM_VEC_SCALAR(max)
MPS_SHIM_VEC_SCALAR(min)
#undef MPS_SHIM_VEC_SCALAR
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T max3(T x, T y, T z) {
  return max(max(x, y), z);
}
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T min3(T x, T y, T z) {
  return min(min(x, y), z);
}
MPS_SHIM_F3(max3, __builtin_fmaxf(__builtin_fmaxf(x, y), z))
MPS_SHIM_F3(min3, __builtin_fminf(__builtin_fminf(x, y), z))

template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
MPS_SHIM_F3(clamp, __builtin_fminf(__builtin_fmaxf(x, y), z))
MPS_SHIM_F3(mix, x + (y - x) * z)
MPS_SHIM_F1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))
MPS_SHIM_F1(sign, x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == x ? __builtin_copysignf(0.0f, x) : 0.0f)
MPS_SHIM_F2(step, y < x ? 0.0f : 1.0f)

// the ones with an out-parameter
inline float sincos(float x, thread float& c) {
  c = __builtin_cosf(x);
  return __builtin_sinf(x);
}
inline half sincos(half x, thread half& c) {
  c = half(__builtin_cosf(float(x)));
  return half(__builtin_sinf(float(x)));
}
inline float modf(float x, thread float& i) {
  return __builtin_modff(x, &i);
}
inline float frexp(float x, thread int& e) {
  return __builtin_frexpf(x, &e);
}
inline half frexp(half x, thread int& e) {
  return half(__builtin_frexpf(float(x), &e));
}
inline float ldexp(float x, int e) {
  return __builtin_ldexpf(x, e);
}
inline half ldexp(half x, int e) {
  return half(__builtin_ldexpf(float(x), e));
}
inline int ilogb(float x) {
  return __builtin_ilogbf(x);
}

// ---- relational ----------------------------------------------------------------------
#define MPS_SHIM_REL1(NAME, EXPR)   \
  inline bool NAME(float x) {       \
    return EXPR;                    \
  }                                 \
  inline bool NAME(half hx) {       \
    const float x = float(hx);      \
    return EXPR;                    \
  }                                 \
  MPS_SHIM_VEC1(NAME)               \
  MPS_SHIM_DOUBLE1(NAME)
#define MPS_SHIM_REL2(NAME, EXPR)            \
  inline bool NAME(float x, float y) {       \
    return EXPR;                             \
  }                                          \
  inline bool NAME(half hx, half hy) {       \
    const float x = float(hx), y = float(hy); \
    return EXPR;                             \
  }                                          \
  MPS_SHIM_VEC2(NAME)                        \
  MPS_SHIM_DOUBLE2(NAME)
MPS_SHIM_REL1(isnan, __builtin_isnan(x))
MPS_SHIM_REL1(isinf, __builtin_isinf(x))
MPS_SHIM_REL1(isfinite, __builtin_isfinite(x))
MPS_SHIM_REL1(isnormal, __builtin_isnormal(x))
MPS_SHIM_REL1(signbit, __builtin_signbit(x))
MPS_SHIM_REL2(isunordered, __builtin_isunordered(x, y))
MPS_SHIM_REL2(isordered, !__builtin_isunordered(x, y))

template <unsigned N>
inline bool all(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i)
    if (!v[i])
      return false;
  return true;
}
template <unsigned N>
inline bool any(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i)
    if (v[i])
      return true;
  return false;
}
inline bool all(bool b) {
  return b;
}
inline bool any(bool b) {
  return b;
}

// select(a, b, c): b where c, else a
template <typename T>
inline T select(T a, T b, bool c) {
  return c ? b : a;
}
template <typename T, unsigned N>
inline vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = c[i] ? b[i] : a[i];
  return r;
}

// ---- integer -------------------------------------------------------------------------
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T clz(T x) {
  using U = std::make_unsigned_t<T>;
  const U u = U(x);
  if (u == 0)
    return T(sizeof(T) * 8);
  return T(__builtin_clzll((unsigned long long)u) - int(64 - sizeof(T) * 8));
}
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T ctz(T x) {
  using U = std::make_unsigned_t<T>;
  const U u = U(x);
  if (u == 0)
    return T(sizeof(T) * 8);
  return T(__builtin_ctzll((unsigned long long)u));
}
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T popcount(T x) {
  using U = std::make_unsigned_t<T>;
  return T(__builtin_popcountll((unsigned long long)U(x)));
}
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T absdiff(T x, T y) {
  return x > y ? T(x - y) : T(y - x);
}
template <typename T, enable_if_t<std::is_integral_v<T>, bool> = true>
inline T mulhi(T x, T y) {
  return T((__int128(x) * __int128(y)) >> (sizeof(T) * 8));
}

// ---- geometric -----------------------------------------------------------------------
template <typename T, unsigned N>
inline T dot(const vec<T, N>& a, const vec<T, N>& b) {
  T r = T(0);
  for (int i = 0; i < N; ++i)
    r += a[i] * b[i];
  return r;
}
template <typename T, unsigned N>
inline T length(const vec<T, N>& a) {
  return T(__builtin_sqrtf(float(dot(a, a))));
}
// Metal's cross is for float3 and half3 only (files define their own for other types)
template <typename T, std::enable_if_t<std::is_same_v<T, float> || std::is_same_v<T, half>, bool> = true>
inline vec<T, 3> cross(const vec<T, 3>& a, const vec<T, 3>& b) {
  return vec<T, 3>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}

namespace precise {
MPS_SHIM_MATH(MPS_SHIM_F1_FLOAT, MPS_SHIM_F2_FLOAT, MPS_SHIM_F3_FLOAT)
MPS_SHIM_F1_FLOAT(abs, __builtin_fabsf(x))
MPS_SHIM_F2_FLOAT(max, __builtin_fmaxf(x, y))
MPS_SHIM_F2_FLOAT(min, __builtin_fminf(x, y))
inline float sincos(float x, thread float& c) {
  c = __builtin_cosf(x);
  return __builtin_sinf(x);
}
} // namespace precise

namespace fast {
MPS_SHIM_MATH(MPS_SHIM_F1_FLOAT, MPS_SHIM_F2_FLOAT, MPS_SHIM_F3_FLOAT)
MPS_SHIM_F1_FLOAT(abs, __builtin_fabsf(x))
MPS_SHIM_F2_FLOAT(max, __builtin_fmaxf(x, y))
MPS_SHIM_F2_FLOAT(min, __builtin_fminf(x, y))
inline float sincos(float x, thread float& c) {
  c = __builtin_cosf(x);
  return __builtin_sinf(x);
}
} // namespace fast

} // namespace metal

#undef MPS_SHIM_MATH
#undef MPS_SHIM_F1
#undef MPS_SHIM_F1_FLOAT
#undef MPS_SHIM_F2
#undef MPS_SHIM_F2_FLOAT
#undef MPS_SHIM_F3
#undef MPS_SHIM_F3_FLOAT
#undef MPS_SHIM_REL1
#undef MPS_SHIM_REL2
#undef MPS_SHIM_VEC1
#undef MPS_SHIM_VEC2
#undef MPS_SHIM_VEC3
#undef MPS_SHIM_DOUBLE1
#undef MPS_SHIM_DOUBLE2
#undef MPS_SHIM_DOUBLE3
