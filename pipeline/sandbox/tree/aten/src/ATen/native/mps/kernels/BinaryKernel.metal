#include <c10/metal/indexing.h>
#include <c10/metal/special_math.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

// Comparisons only differ by the operator they apply, so one line defines each.
#define DEFINE_BINARY_COMPARISON_FUNCTOR(NAME, OP) \
  struct NAME##_functor {                          \
    template <typename T>                          \
    inline bool operator()(const T a, const T b) { \
      return a OP b;                               \
    }                                              \
  }

struct copysign_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(::metal::copysign(float(a), float(b)));
  }
  // Integral inputs promote to float, as on CPU
  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline float operator()(const T a, const T b) {
    return ::metal::copysign(float(a), float(b));
  }
};

struct maximum_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    // c10::metal::max propagates NaN like torch.maximum does
    return c10::metal::max(a, b);
  }
};

struct hypot_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    const float fa = float(a);
    const float fb = float(b);
    return static_cast<T>(precise::sqrt(fa * fa + fb * fb));
  }
};

struct atan2_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(precise::atan2(float(a), float(b)));
  }
  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline float operator()(const T a, const T b) {
    return precise::atan2(float(a), float(b));
  }
};

struct fmod_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return c10::metal::fmod(a, b);
  }
};

// div with rounding_mode=None: integers divide in float
struct div_true_functor {
  template <typename T, enable_if_t<!is_integral_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    return c10::metal::div(a, b);
  }
  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline float operator()(const T a, const T b) {
    return c10::metal::div(float(a), float(b));
  }
};

struct div_floor_functor {
  template <typename T, enable_if_t<!is_integral_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    // Python's floor division, as torch computes it: from fmod, so 1 // -inf is -1
    const float fa = float(a), fb = float(b);
    if (fb == 0) {
      return static_cast<T>(fa / fb);
    }
    const float mod = ::metal::fmod(fa, fb);
    float quot = (fa - mod) / fb;
    if (mod != 0 && (fb < 0) != (mod < 0)) {
      quot -= 1;
    }
    if (quot == 0) {
      return static_cast<T>(::metal::copysign(0.0f, fa / fb));
    }
    const float floored = ::metal::floor(quot);
    return static_cast<T>(quot - floored > 0.5f ? floored + 1 : floored);
  }
  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    const T quot = a / b;
    // C++ division truncates; step down when the signs differ and it was inexact
    return ((a < 0) != (b < 0) && quot * b != a) ? quot - 1 : quot;
  }
};

struct div_trunc_functor {
  template <typename T, enable_if_t<!is_integral_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    return T(::metal::trunc(c10::metal::div(a, b)));
  }
  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {
    return a / b;
  }
};

DEFINE_BINARY_COMPARISON_FUNCTOR(lt, <);

#define REGISTER_INTEGER_BINARY_OP_NO_BOOL(NAME) \
  REGISTER_BINARY_OP(NAME, long, long);          \
  REGISTER_BINARY_OP(NAME, int, int);            \
  REGISTER_BINARY_OP(NAME, short, short);        \
  REGISTER_BINARY_OP(NAME, uchar, uchar);        \
  REGISTER_BINARY_OP(NAME, char, char)

#define REGISTER_INTEGER_BINARY_OP(NAME)    \
  REGISTER_INTEGER_BINARY_OP_NO_BOOL(NAME); \
  REGISTER_BINARY_OP(NAME, bool, bool)

#define REGISTER_INT2FLOAT_BINARY_OP(NAME) \
  REGISTER_BINARY_OP(NAME, long, float);   \
  REGISTER_BINARY_OP(NAME, int, float);    \
  REGISTER_BINARY_OP(NAME, short, float);  \
  REGISTER_BINARY_OP(NAME, uchar, float);  \
  REGISTER_BINARY_OP(NAME, char, float);   \
  REGISTER_BINARY_OP(NAME, bool, float)

#define REGISTER_FLOAT_BINARY_OP(NAME)    \
  REGISTER_BINARY_OP(NAME, float, float); \
  REGISTER_BINARY_OP(NAME, half, half);   \
  REGISTER_BINARY_OP(NAME, bfloat, bfloat)

#define REGISTER_OPMATH_FLOAT_BINARY_OP(NAME)    \
  REGISTER_OPMATH_BINARY_OP(NAME, float, float); \
  REGISTER_OPMATH_BINARY_OP(NAME, half, half);   \
  REGISTER_OPMATH_BINARY_OP(NAME, bfloat, bfloat)

#define REGISTER_COMPARISON_OP(NAME)      \
  REGISTER_BINARY_OP(NAME, float, bool);  \
  REGISTER_BINARY_OP(NAME, half, bool);   \
  REGISTER_BINARY_OP(NAME, bfloat, bool); \
  REGISTER_BINARY_OP(NAME, long, bool);   \
  REGISTER_BINARY_OP(NAME, int, bool);    \
  REGISTER_BINARY_OP(NAME, short, bool);  \
  REGISTER_BINARY_OP(NAME, uchar, bool);  \
  REGISTER_BINARY_OP(NAME, char, bool);   \
  REGISTER_BINARY_OP(NAME, bool, bool)

REGISTER_FLOAT_BINARY_OP(copysign);
REGISTER_INT2FLOAT_BINARY_OP(copysign);
REGISTER_FLOAT_BINARY_OP(maximum);
REGISTER_INTEGER_BINARY_OP(maximum);
REGISTER_FLOAT_BINARY_OP(hypot);
REGISTER_FLOAT_BINARY_OP(atan2);
REGISTER_INT2FLOAT_BINARY_OP(atan2);
REGISTER_OPMATH_FLOAT_BINARY_OP(fmod);
REGISTER_INTEGER_BINARY_OP_NO_BOOL(fmod);
REGISTER_OPMATH_FLOAT_BINARY_OP(div_true);
REGISTER_INT2FLOAT_BINARY_OP(div_true);
REGISTER_OPMATH_FLOAT_BINARY_OP(div_floor);
REGISTER_INTEGER_BINARY_OP_NO_BOOL(div_floor);
REGISTER_FLOAT_BINARY_OP(div_trunc);
REGISTER_INTEGER_BINARY_OP_NO_BOOL(div_trunc);
REGISTER_COMPARISON_OP(lt);

// Complex division works on float2/half2 pairs (x = real, y = imaginary)
REGISTER_OPMATH_BINARY_OP(div_true, float2, float2);
REGISTER_OPMATH_BINARY_OP(div_true, half2, half2);
