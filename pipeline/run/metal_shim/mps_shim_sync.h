// Metal's atomics, SIMD-group and threadgroup functions (see mps_shim.h).
//
// check-math runs one element at a time on one host thread, so an atomic operation is exact
// as a plain read-modify-write: atomics are modelled. SIMD-group and threadgroup functions
// are not: their result depends on the other lanes and threads of the dispatch, which the
// host run does not have. They are declared, so that headers and kernels using them in
// signatures and bodies compile, and never defined: a functor whose registrations reach one
// fails to link (the object is linked with --no-undefined and --gc-sections, so code that no
// registration reaches does not count), and the link error names
// metal::mps_not_modelled::NAME, which check-math reports as "not modelled" for that functor
// instead of a result. check-kernel (MPS_KERNEL_THREADS) runs whole threadgroups, where they
// are modelled: mps_kernel_simd.h.
#pragma once

namespace metal {

// ---- atomics -------------------------------------------------------------------------
enum memory_order {
  memory_order_relaxed,
  memory_order_acquire,
  memory_order_release,
  memory_order_acq_rel,
  memory_order_seq_cst,
};

template <typename T>
struct atomic {
  T value;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float;
typedef atomic<ulong> atomic_ulong;

namespace detail_atomic {
// the T of an atomic<T> in any address space (device is volatile on the host)
template <typename A>
using value_t = decltype(std::declval<std::remove_cv_t<A>&>().value);
} // namespace detail_atomic

template <typename A>
inline auto atomic_load_explicit(A* object, memory_order) {
  return detail_atomic::value_t<A>(object->value);
}
template <typename A, typename T>
inline void atomic_store_explicit(A* object, T desired, memory_order) {
  object->value = desired;
}
template <typename A, typename T>
inline auto atomic_exchange_explicit(A* object, T desired, memory_order) {
  const detail_atomic::value_t<A> old = object->value;
  object->value = desired;
  return old;
}
template <typename A, typename E, typename T>
inline bool atomic_compare_exchange_weak_explicit(
    A* object,
    E* expected,
    T desired,
    memory_order,
    memory_order) {
  const detail_atomic::value_t<A> current = object->value;
  if (current == *expected) {
    object->value = desired;
    return true;
  }
  *expected = current;
  return false;
}
template <typename A, typename E, typename T>
inline bool atomic_compare_exchange_strong_explicit(
    A* object,
    E* expected,
    T desired,
    memory_order success,
    memory_order failure) {
  return atomic_compare_exchange_weak_explicit(object, expected, desired, success, failure);
}

#define MPS_SHIM_ATOMIC_FETCH(NAME, EXPR)                              \
  template <typename A, typename T>                                    \
  inline auto atomic_fetch_##NAME##_explicit(A* object, T operand, memory_order) { \
    using V = detail_atomic::value_t<A>;                               \
    const V old = object->value;                                       \
    const V arg = V(operand);                                          \
    object->value = V(EXPR);                                           \
    return old;                                                        \
  }
MPS_SHIM_ATOMIC_FETCH(add, old + arg)
MPS_SHIM_ATOMIC_FETCH(sub, old - arg)
MPS_SHIM_ATOMIC_FETCH(and, old & arg)
MPS_SHIM_ATOMIC_FETCH(or, old | arg)
MPS_SHIM_ATOMIC_FETCH(xor, old ^ arg)
MPS_SHIM_ATOMIC_FETCH(min, arg < old ? arg : old)
MPS_SHIM_ATOMIC_FETCH(max, arg > old ? arg : old)
#undef MPS_SHIM_ATOMIC_FETCH

// ---- SIMD-group and threadgroup functions: declared, not modelled ---------------------
enum class mem_flags {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
};
inline constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return mem_flags(int(a) | int(b));
}

} // namespace metal

#ifdef MPS_KERNEL_THREADS
#include "mps_kernel_simd.h"
#else
namespace metal {
namespace mps_not_modelled {

struct simd_vote {
  using vote_t = ulong;
  explicit simd_vote(vote_t v = 0);
  explicit operator vote_t() const;
  bool all() const;
  bool any() const;
};

void threadgroup_barrier(mem_flags flags);
void simdgroup_barrier(mem_flags flags);
bool simd_all(bool value);
bool simd_any(bool value);
simd_vote simd_ballot(bool value);
bool simd_is_first();
simd_vote simd_active_threads_mask();

#define MPS_SHIM_SIMD1(NAME) \
  template <typename T>      \
  T NAME(T data);
#define MPS_SHIM_SIMD_LANE(NAME) \
  template <typename T>          \
  T NAME(T data, ushort lane);
#define MPS_SHIM_SIMD_FILL(NAME) \
  template <typename T>          \
  T NAME(T data, T filling, ushort delta);
MPS_SHIM_SIMD1(simd_sum)
MPS_SHIM_SIMD1(simd_product)
MPS_SHIM_SIMD1(simd_max)
MPS_SHIM_SIMD1(simd_min)
MPS_SHIM_SIMD1(simd_and)
MPS_SHIM_SIMD1(simd_or)
MPS_SHIM_SIMD1(simd_xor)
MPS_SHIM_SIMD1(simd_broadcast_first)
MPS_SHIM_SIMD1(simd_prefix_exclusive_sum)
MPS_SHIM_SIMD1(simd_prefix_inclusive_sum)
MPS_SHIM_SIMD1(simd_prefix_exclusive_product)
MPS_SHIM_SIMD1(simd_prefix_inclusive_product)
MPS_SHIM_SIMD_LANE(simd_broadcast)
MPS_SHIM_SIMD_LANE(simd_shuffle)
MPS_SHIM_SIMD_LANE(simd_shuffle_down)
MPS_SHIM_SIMD_LANE(simd_shuffle_up)
MPS_SHIM_SIMD_LANE(simd_shuffle_xor)
MPS_SHIM_SIMD_LANE(simd_shuffle_rotate_down)
MPS_SHIM_SIMD_LANE(simd_shuffle_rotate_up)
MPS_SHIM_SIMD_FILL(simd_shuffle_and_fill_down)
MPS_SHIM_SIMD_FILL(simd_shuffle_and_fill_up)
#undef MPS_SHIM_SIMD1
#undef MPS_SHIM_SIMD_LANE
#undef MPS_SHIM_SIMD_FILL

} // namespace mps_not_modelled

using namespace mps_not_modelled;

} // namespace metal
#endif
