// Metal's SIMD-group and threadgroup functions, for check-kernel (see mps_kernel_runtime.h).
//
// Each function is a meeting: the calling lane waits (its call site, the return address of
// the function, which is never inlined, is kept for the report) until the scheduler
// resolves the lanes of its simdgroup at the same meeting (mps_kernel_runtime.h); those are
// the active lanes. Reductions, votes and
// prefix sums run over the active lanes in lane order. A shuffle from a lane that is not
// active reads poison (Metal leaves it undefined). Lanes are 32 wide.
#pragma once

#include "mps_kernel_runtime.h"

namespace metal {

#define MPS_KERNEL_SITE __builtin_return_address(0)
#define MPS_KERNEL_MEET __attribute__((noinline))

namespace mps_kernel_ops {
using ::mps_kernel::Fiber;
using ::mps_kernel::from_lane;
using ::mps_kernel::lane_of;
using ::mps_kernel::load;
using ::mps_kernel::store;

template <typename T, typename F>
inline void reduce(Fiber* const* lanes, int n, F op) {
  T acc = load<T>(lanes[0]->in);
  for (int i = 1; i < n; ++i) {
    acc = op(acc, load<T>(lanes[i]->in));
  }
  for (int i = 0; i < n; ++i) {
    store(lanes[i]->out, acc);
  }
}

#define MPS_KERNEL_REDUCER(NAME, EXPR)                 \
  template <typename T>                                \
  void NAME(Fiber* const* lanes, int n) {              \
    reduce<T>(lanes, n, [](T a, T b) { return EXPR; }); \
  }
MPS_KERNEL_REDUCER(sum, T(a + b))
MPS_KERNEL_REDUCER(product, T(a * b))
MPS_KERNEL_REDUCER(max, ::metal::max(a, b))
MPS_KERNEL_REDUCER(min, ::metal::min(a, b))
MPS_KERNEL_REDUCER(bit_and, T(a & b))
MPS_KERNEL_REDUCER(bit_or, T(a | b))
MPS_KERNEL_REDUCER(bit_xor, T(a ^ b))
#undef MPS_KERNEL_REDUCER

template <typename T, bool inclusive>
void prefix_sum(Fiber* const* lanes, int n) {
  T acc = T(0);
  for (int i = 0; i < n; ++i) {
    const T v = load<T>(lanes[i]->in);
    if (inclusive) {
      acc = T(acc + v);
      store(lanes[i]->out, acc);
    } else {
      store(lanes[i]->out, acc);
      acc = T(acc + v);
    }
  }
}

template <typename T, bool inclusive>
void prefix_product(Fiber* const* lanes, int n) {
  T acc = T(1);
  for (int i = 0; i < n; ++i) {
    const T v = load<T>(lanes[i]->in);
    if (inclusive) {
      acc = T(acc * v);
      store(lanes[i]->out, acc);
    } else {
      store(lanes[i]->out, acc);
      acc = T(acc * v);
    }
  }
}

// the lane each lane reads from: kind 0 broadcast/shuffle (arg = lane), 1 down, 2 up, 3 xor,
// 4 rotate down, 5 rotate up
template <typename T, int kind>
void shuffle(Fiber* const* lanes, int n) {
  constexpr uint32_t W = ::mps_kernel::kSimdWidth;
  for (int i = 0; i < n; ++i) {
    const uint32_t me = lane_of(lanes[i]);
    const uint32_t arg = lanes[i]->arg;
    uint32_t src = arg;
    bool own = false;
    switch (kind) {
      case 1:
        src = me + arg;
        own = src >= W;
        break;
      case 2:
        own = arg > me;
        src = me - arg;
        break;
      case 3:
        src = me ^ arg;
        break;
      case 4:
        src = (me + arg) % W;
        break;
      case 5:
        src = (me + W - arg % W) % W;
        break;
      default:
        break;
    }
    const T v = own ? load<T>(lanes[i]->in) : from_lane<T>(lanes, n, src % W);
    store(lanes[i]->out, v);
  }
}

// down (up = false): lane i reads lane i + delta, past the last lane the filling of lane
// i + delta - 32; up: lane i - delta, below the first the filling of lane 32 - delta + i
template <typename T, bool up>
void shuffle_fill(Fiber* const* lanes, int n) {
  constexpr uint32_t W = ::mps_kernel::kSimdWidth;
  for (int i = 0; i < n; ++i) {
    const uint32_t me = lane_of(lanes[i]);
    const uint32_t delta = lanes[i]->arg;
    T v;
    if (!up) {
      v = me + delta < W ? from_lane<T>(lanes, n, me + delta)
                         : from_lane<T>(lanes, n, me + delta - W, true);
    } else {
      v = me >= delta ? from_lane<T>(lanes, n, me - delta)
                      : from_lane<T>(lanes, n, W - delta + me, true);
    }
    store(lanes[i]->out, v);
  }
}

template <typename T>
void broadcast_first(Fiber* const* lanes, int n) {
  const T v = load<T>(lanes[0]->in);
  for (int i = 0; i < n; ++i) {
    store(lanes[i]->out, v);
  }
}

// votes: bit i of the mask is lane i's bool
inline ulong ballot_of(Fiber* const* lanes, int n) {
  ulong mask = 0;
  for (int i = 0; i < n; ++i) {
    if (load<bool>(lanes[i]->in)) {
      mask |= ulong(1) << lane_of(lanes[i]);
    }
  }
  return mask;
}
inline void ballot(Fiber* const* lanes, int n) {
  const ulong mask = ballot_of(lanes, n);
  for (int i = 0; i < n; ++i) {
    store(lanes[i]->out, mask);
  }
}
inline void active_mask(Fiber* const* lanes, int n) {
  ulong mask = 0;
  for (int i = 0; i < n; ++i) {
    mask |= ulong(1) << lane_of(lanes[i]);
  }
  for (int i = 0; i < n; ++i) {
    store(lanes[i]->out, mask);
  }
}
inline void is_first(Fiber* const* lanes, int n) {
  for (int i = 0; i < n; ++i) {
    store(lanes[i]->out, i == 0);
  }
}
inline void nothing(Fiber* const*, int) {}

} // namespace mps_kernel_ops

struct simd_vote {
  using vote_t = ulong;
  explicit simd_vote(vote_t v = 0) : bits(v) {}
  explicit operator vote_t() const {
    return bits;
  }
  bool all() const {
    return bits == ~vote_t(0);
  }
  bool any() const {
    return bits != 0;
  }
  vote_t bits;
};

MPS_KERNEL_MEET inline void threadgroup_barrier(mem_flags) {
  ::mps_kernel::block(::mps_kernel::State::barrier);
}
MPS_KERNEL_MEET inline void simdgroup_barrier(mem_flags) {
  ::mps_kernel::meet<bool>(MPS_KERNEL_SITE, mps_kernel_ops::nothing, false);
}
MPS_KERNEL_MEET inline bool simd_all(bool value) {
  const ulong mask = ::mps_kernel::meet<ulong>(MPS_KERNEL_SITE, mps_kernel_ops::ballot, value);
  const ulong active = ::mps_kernel::meet<ulong>(MPS_KERNEL_SITE, mps_kernel_ops::active_mask, 0);
  return mask == active;
}
MPS_KERNEL_MEET inline bool simd_any(bool value) {
  return ::mps_kernel::meet<ulong>(MPS_KERNEL_SITE, mps_kernel_ops::ballot, value) != 0;
}
MPS_KERNEL_MEET inline simd_vote simd_ballot(bool value) {
  return simd_vote(::mps_kernel::meet<ulong>(MPS_KERNEL_SITE, mps_kernel_ops::ballot, value));
}
MPS_KERNEL_MEET inline bool simd_is_first() {
  return ::mps_kernel::meet<bool>(MPS_KERNEL_SITE, mps_kernel_ops::is_first, false);
}
MPS_KERNEL_MEET inline simd_vote simd_active_threads_mask() {
  return simd_vote(::mps_kernel::meet<ulong>(MPS_KERNEL_SITE, mps_kernel_ops::active_mask, 0));
}

#define MPS_KERNEL_SIMD1(NAME, RESOLVER)                                           \
  template <typename T>                                                            \
  MPS_KERNEL_MEET T NAME(T data) {                                                 \
    return ::mps_kernel::meet<T>(MPS_KERNEL_SITE, mps_kernel_ops::RESOLVER<T>, data); \
  }
MPS_KERNEL_SIMD1(simd_sum, sum)
MPS_KERNEL_SIMD1(simd_product, product)
MPS_KERNEL_SIMD1(simd_max, max)
MPS_KERNEL_SIMD1(simd_min, min)
MPS_KERNEL_SIMD1(simd_and, bit_and)
MPS_KERNEL_SIMD1(simd_or, bit_or)
MPS_KERNEL_SIMD1(simd_xor, bit_xor)
MPS_KERNEL_SIMD1(simd_broadcast_first, broadcast_first)
#undef MPS_KERNEL_SIMD1

#define MPS_KERNEL_PREFIX(NAME, RESOLVER, INCLUSIVE)                                   \
  template <typename T>                                                                \
  MPS_KERNEL_MEET T NAME(T data) {                                                     \
    return ::mps_kernel::meet<T>(                                                      \
        MPS_KERNEL_SITE, mps_kernel_ops::RESOLVER<T, INCLUSIVE>, data);                \
  }
MPS_KERNEL_PREFIX(simd_prefix_inclusive_sum, prefix_sum, true)
MPS_KERNEL_PREFIX(simd_prefix_exclusive_sum, prefix_sum, false)
MPS_KERNEL_PREFIX(simd_prefix_inclusive_product, prefix_product, true)
MPS_KERNEL_PREFIX(simd_prefix_exclusive_product, prefix_product, false)
#undef MPS_KERNEL_PREFIX

#define MPS_KERNEL_SHUFFLE(NAME, KIND)                                                  \
  template <typename T>                                                                 \
  MPS_KERNEL_MEET T NAME(T data, ushort lane) {                                         \
    return ::mps_kernel::meet<T>(                                                       \
        MPS_KERNEL_SITE, mps_kernel_ops::shuffle<T, KIND>, data, lane);                 \
  }
MPS_KERNEL_SHUFFLE(simd_broadcast, 0)
MPS_KERNEL_SHUFFLE(simd_shuffle, 0)
MPS_KERNEL_SHUFFLE(simd_shuffle_down, 1)
MPS_KERNEL_SHUFFLE(simd_shuffle_up, 2)
MPS_KERNEL_SHUFFLE(simd_shuffle_xor, 3)
MPS_KERNEL_SHUFFLE(simd_shuffle_rotate_down, 4)
MPS_KERNEL_SHUFFLE(simd_shuffle_rotate_up, 5)
#undef MPS_KERNEL_SHUFFLE

#define MPS_KERNEL_FILL(NAME, UP)                                          \
  template <typename T>                                                    \
  MPS_KERNEL_MEET T NAME(T data, T filling, ushort delta) {                \
    ::mps_kernel::store(::mps_kernel::rt().current->fill, filling);        \
    return ::mps_kernel::meet<T>(                                          \
        MPS_KERNEL_SITE, mps_kernel_ops::shuffle_fill<T, UP>, data, delta); \
  }
MPS_KERNEL_FILL(simd_shuffle_and_fill_down, false)
MPS_KERNEL_FILL(simd_shuffle_and_fill_up, true)
#undef MPS_KERNEL_FILL

#undef MPS_KERNEL_SITE
#undef MPS_KERNEL_MEET

} // namespace metal
