// Included after the checkout's c10/metal/indexing.h and before the .metal file: the only
// thing it changes is the core REGISTER_* macros. Each registration of the functor being
// built (the one named by `#define MPS_MATH_WANT_<kernel> ~, 1`) records its kernel name,
// its input / output / alpha Metal types, the type the functor really returns, and a runner
// that calls the header's own dense kernel template (binary_dense, unary_dense...) for one
// element. Registrations of other functors expand to nothing, so one translation unit per
// functor instantiates only that functor's kernels.
#pragma once

#include "mps_abi.h"
#include "mps_shim.h"

namespace mps_math {

constexpr int kMaxRegistrations = 1024;
inline Registration* table() {
  static Registration t[kMaxRegistrations];
  return t;
}
inline int& count() {
  static int n = 0;
  return n;
}
struct Registrar {
  explicit Registrar(const Registration& r) {
    if (count() < kMaxRegistrations) {
      table()[count()++] = r;
    }
  }
};

template <typename T>
constexpr const char* type_name() {
  return "?";
}
#define MPS_MATH_TYPE_NAME(T)               \
  template <>                               \
  constexpr const char* type_name<T>() {    \
    return #T;                              \
  }
MPS_MATH_TYPE_NAME(float)
MPS_MATH_TYPE_NAME(half)
MPS_MATH_TYPE_NAME(bfloat)
MPS_MATH_TYPE_NAME(float2)
MPS_MATH_TYPE_NAME(half2)
MPS_MATH_TYPE_NAME(long)
MPS_MATH_TYPE_NAME(int)
MPS_MATH_TYPE_NAME(short)
MPS_MATH_TYPE_NAME(char)
MPS_MATH_TYPE_NAME(uchar)
MPS_MATH_TYPE_NAME(bool)
MPS_MATH_TYPE_NAME(ushort)
MPS_MATH_TYPE_NAME(uint)
MPS_MATH_TYPE_NAME(ulong)
#undef MPS_MATH_TYPE_NAME

template <typename T>
constexpr int size_of() {
  if constexpr (std::is_void_v<T>) {
    return 0;
  } else {
    return int(sizeof(T));
  }
}

// The dense kernels changed shape over time (unary_dense gained `numel` for ILP): each
// caller takes the form the checkout's indexing.h has. Pointers are offset to the element,
// so the kernel always runs its element 0 and a fault belongs to exactly one input.
template <typename T, typename F, typename = void>
struct unary_call {
  using R = c10::metal::result_of<F, T>;
  static void go(R* out, T* in) {
    c10::metal::unary_dense<T, F>(out, in, 0u);
  }
};
template <typename T, typename F>
struct unary_call<
    T,
    F,
    std::void_t<decltype(c10::metal::unary_dense<T, F>(
        std::declval<c10::metal::result_of<F, T>*>(),
        std::declval<T*>(),
        std::declval<uint&>(),
        0u))>> {
  using R = c10::metal::result_of<F, T>;
  static void go(R* out, T* in) {
    uint numel = 1;
    c10::metal::unary_dense<T, F>(out, in, numel, 0u);
  }
};

template <typename T, typename F>
struct unary_runner {
  using R = c10::metal::result_of<F, T>;
  static void run(void* out, const void* const* in, const void*) {
    unary_call<T, F>::go(static_cast<R*>(out), static_cast<T*>(const_cast<void*>(in[0])));
  }
};

template <typename T, typename F, typename OMT>
struct binary_runner {
  using R = c10::metal::result_of<F, T, T>;
  static void run(void* out, const void* const* in, const void*) {
    c10::metal::binary_dense<T, F, OMT>(
        static_cast<R*>(out),
        static_cast<T*>(const_cast<void*>(in[0])),
        static_cast<T*>(const_cast<void*>(in[1])),
        0u);
  }
};

template <typename T, typename F, typename OMT>
struct ternary_runner {
  using R = c10::metal::result_of<F, T, T, T>;
  static void run(void* out, const void* const* in, const void*) {
    c10::metal::ternary_dense<T, F, OMT>(
        static_cast<R*>(out),
        static_cast<T*>(const_cast<void*>(in[0])),
        static_cast<T*>(const_cast<void*>(in[1])),
        static_cast<T*>(const_cast<void*>(in[2])),
        0u);
  }
};

template <typename T, typename A, typename F>
struct binary_alpha_runner {
  using R = c10::metal::result_of<F, T, T, A>;
  static void run(void* out, const void* const* in, const void* alpha) {
    A a;
    __builtin_memcpy(&a, alpha, sizeof(A));
    c10::metal::binary_alpha_dense<T, A, F>(
        static_cast<R*>(out),
        static_cast<T*>(const_cast<void*>(in[0])),
        static_cast<T*>(const_cast<void*>(in[1])),
        a,
        0u);
  }
};

template <typename T, typename A, typename F>
struct unary_alpha_runner {
  using R = c10::metal::result_of<F, T, A>;
  static void run(void* out, const void* const* in, const void* alpha) {
    A a;
    __builtin_memcpy(&a, alpha, sizeof(A));
    c10::metal::unary_alpha_dense<T, A, F>(
        static_cast<R*>(out), static_cast<T*>(const_cast<void*>(in[0])), a, 0u);
  }
};

} // namespace mps_math

// A type with commas goes through a macro in parentheses: MPS_MATH_T((pair<a, b>)).
namespace mps_math {
template <typename T>
struct unwrap;
template <typename T>
struct unwrap<void(T)> {
  using type = T;
};
} // namespace mps_math
#define MPS_MATH_T(P) typename ::mps_math::unwrap<void P>::type
namespace mps_math {
template <typename Runner>
constexpr RunFn run_of() {
  return &Runner::run;
}
} // namespace mps_math

// ---- selecting the functor being built --------------------------------------------------
#define MPS_MATH_CAT(a, b) MPS_MATH_CAT_(a, b)
#define MPS_MATH_CAT_(a, b) a##b
#define MPS_MATH_SECOND(a, b, ...) b
#define MPS_MATH_IS_PROBE(...) MPS_MATH_SECOND(__VA_ARGS__, 0, ~)
#define MPS_MATH_WANTED(NAME) MPS_MATH_IS_PROBE(MPS_MATH_WANT_##NAME)
#define MPS_MATH_IF_1(...) __VA_ARGS__
#define MPS_MATH_IF_0(...) static_assert(true, "")
#define MPS_MATH_IF(c) MPS_MATH_CAT(MPS_MATH_IF_, c)

#define MPS_MATH_RECORD(N, NAME, DTYPEI, DTYPEO, DTYPEA, ARITY, RUNNER, RESULT)  \
  static ::mps_math::Registrar MPS_MATH_CAT(mps_math_registration_, N)({       \
      #NAME,                                                                   \
      #DTYPEI,                                                                 \
      #DTYPEO,                                                                 \
      ::mps_math::type_name<MPS_MATH_T(RESULT)>(),                             \
      ::mps_math::type_name<DTYPEA>(),                                         \
      ARITY,                                                                   \
      int(sizeof(DTYPEI)),                                                     \
      int(sizeof(MPS_MATH_T(RESULT))),                                         \
      ::mps_math::size_of<DTYPEA>(),                                           \
      __LINE__,                                                                \
      ::mps_math::run_of<MPS_MATH_T(RUNNER)>()})

#define MPS_MATH_UNARY(N, NAME, DTYPEI, DTYPEO)                              \
  MPS_MATH_RECORD(                                                           \
      N,                                                                     \
      NAME,                                                                  \
      DTYPEI,                                                                \
      DTYPEO,                                                                \
      void,                                                                  \
      1,                                                                     \
      (::mps_math::unary_runner<DTYPEI, NAME##_functor>),                    \
      (::c10::metal::result_of<NAME##_functor, DTYPEI>))
#define MPS_MATH_BINARY(N, NAME, DTYPEI, DTYPEO, OMT)                         \
  MPS_MATH_RECORD(                                                           \
      N,                                                                     \
      NAME,                                                                  \
      DTYPEI,                                                                \
      DTYPEO,                                                                \
      void,                                                                  \
      2,                                                                     \
      (::mps_math::binary_runner<DTYPEI, NAME##_functor, OMT>),              \
      (::c10::metal::result_of<NAME##_functor, DTYPEI, DTYPEI>))
#define MPS_MATH_TERNARY(N, NAME, DTYPEI, DTYPEO, OMT)                        \
  MPS_MATH_RECORD(                                                           \
      N,                                                                     \
      NAME,                                                                  \
      DTYPEI,                                                                \
      DTYPEO,                                                                \
      void,                                                                  \
      3,                                                                     \
      (::mps_math::ternary_runner<DTYPEI, NAME##_functor, OMT>),             \
      (::c10::metal::result_of<NAME##_functor, DTYPEI, DTYPEI, DTYPEI>))
#define MPS_MATH_BINARY_ALPHA(N, NAME, DTYPEI, DTYPEA, DTYPEO)                \
  MPS_MATH_RECORD(                                                           \
      N,                                                                     \
      NAME,                                                                  \
      DTYPEI,                                                                \
      DTYPEO,                                                                \
      DTYPEA,                                                                \
      2,                                                                     \
      (::mps_math::binary_alpha_runner<DTYPEI, DTYPEA, NAME##_functor>),     \
      (::c10::metal::result_of<NAME##_functor, DTYPEI, DTYPEI, DTYPEA>))
#define MPS_MATH_UNARY_ALPHA(N, NAME, DTYPEI, DTYPEA, DTYPEO)                 \
  MPS_MATH_RECORD(                                                           \
      N,                                                                     \
      NAME,                                                                  \
      DTYPEI,                                                                \
      DTYPEO,                                                                \
      DTYPEA,                                                                \
      1,                                                                     \
      (::mps_math::unary_alpha_runner<DTYPEI, DTYPEA, NAME##_functor>),      \
      (::c10::metal::result_of<NAME##_functor, DTYPEI, DTYPEA>))

// ---- the core macros of c10/metal/indexing.h, redefined -------------------------------
#undef REGISTER_UNARY_OP
#undef REGISTER_UNARY_ALPHA_OP
#undef REGISTER_BINARY_OP_
#undef REGISTER_BINARY_OP
#undef REGISTER_OPMATH_BINARY_OP
#undef REGISTER_BINARY_ALPHA_OP
#undef REGISTER_BINARY_CASTOUT_OP
#undef REGISTER_BINARY_INDEXING_OP
#undef REGISTER_TERNARY_OP_
#undef REGISTER_TERNARY_OP
#undef REGISTER_OPMATH_TERNARY_OP

#define REGISTER_UNARY_OP(NAME, DTYPEI, DTYPEO) \
  MPS_MATH_IF(MPS_MATH_WANTED(NAME))(MPS_MATH_UNARY(__COUNTER__, NAME, DTYPEI, DTYPEO))
#define REGISTER_UNARY_ALPHA_OP(NAME, DTYPEI, DTYPEA, DTYPEO) \
  MPS_MATH_IF(MPS_MATH_WANTED(NAME))                          \
  (MPS_MATH_UNARY_ALPHA(__COUNTER__, NAME, DTYPEI, DTYPEA, DTYPEO))
#define REGISTER_BINARY_OP_(NAME, DTYPEI, DTYPEO, OMT) \
  MPS_MATH_IF(MPS_MATH_WANTED(NAME))(MPS_MATH_BINARY(__COUNTER__, NAME, DTYPEI, DTYPEO, OMT))
#define REGISTER_BINARY_OP(NAME, DTYPEI, DTYPEO) \
  REGISTER_BINARY_OP_(NAME, DTYPEI, DTYPEO, DTYPEI)
#define REGISTER_OPMATH_BINARY_OP(NAME, DTYPEI, DTYPEO) \
  REGISTER_BINARY_OP_(NAME, DTYPEI, DTYPEO, ::c10::metal::opmath_t<DTYPEI>)
// the current form carries the alpha type; older trees have (NAME, DTYPEI, DTYPEO)
#define MPS_MATH_PICK4(_1, _2, _3, _4, NAME, ...) NAME
#define REGISTER_BINARY_ALPHA_OP(...) \
  MPS_MATH_PICK4(__VA_ARGS__, MPS_MATH_ALPHA4, MPS_MATH_ALPHA3, ~, ~)(__VA_ARGS__)
#define MPS_MATH_ALPHA4(NAME, DTYPEI, DTYPEA, DTYPEO) \
  MPS_MATH_IF(MPS_MATH_WANTED(NAME))                  \
  (MPS_MATH_BINARY_ALPHA(__COUNTER__, NAME, DTYPEI, DTYPEA, DTYPEO))
#define MPS_MATH_ALPHA3(NAME, DTYPEI, DTYPEO) MPS_MATH_ALPHA4(NAME, DTYPEI, DTYPEI, DTYPEO)
// the castout and indexing variants add kernels, not math
#define REGISTER_BINARY_CASTOUT_OP(NAME, DTYPEI, DTYPEO) static_assert(true, "")
#define REGISTER_BINARY_INDEXING_OP(NAME, DTYPE) static_assert(true, "")
#define REGISTER_TERNARY_OP_(NAME, DTYPEI, DTYPEO, OMT) \
  MPS_MATH_IF(MPS_MATH_WANTED(NAME))(MPS_MATH_TERNARY(__COUNTER__, NAME, DTYPEI, DTYPEO, OMT))
#define REGISTER_TERNARY_OP(NAME, DTYPEI, DTYPEO) \
  REGISTER_TERNARY_OP_(NAME, DTYPEI, DTYPEO, DTYPEI)
#define REGISTER_OPMATH_TERNARY_OP(NAME, DTYPEI, DTYPEO) \
  REGISTER_TERNARY_OP_(NAME, DTYPEI, DTYPEO, ::c10::metal::opmath_t<DTYPEI>)
