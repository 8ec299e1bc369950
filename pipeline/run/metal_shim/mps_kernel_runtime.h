// check-kernel's runtime: whole Metal kernels run on the host, one threadgroup at a time.
//
// Each GPU thread of the threadgroup being run is a fiber with a stack of its own. The fibers
// of one dispatch live on one host thread, so nothing runs at the same time as anything else:
// a fiber runs until it reaches a threadgroup barrier or a SIMD-group function, or returns.
// When no fiber can run, the scheduler
// - resolves each SIMD-group function: the lanes of one simdgroup (32 consecutive linear
//   thread indices) waiting at their n-th SIMD-group function, the same one, are its active
//   lanes; each gets its result. (Not the same call site: the compiler may duplicate one call
//   of the source into several. Lanes diverging into two calls of the same function at the
//   same count therefore meet as one: a limit of the model.)
// - else releases the barrier, once every unfinished thread of the group waits at one.
// Which runnable fiber goes first, in every round and among threadgroups, is the schedule:
// forward, reverse, or a seeded random order. A kernel that is right gives the same bytes
// under all of them; one missing a barrier reads what another thread has or has not written
// yet, and gives different bytes under different orders.
//
// Fibers are portable without assembly: a fiber's stack is set up once with POSIX ucontext
// (getcontext/makecontext/setcontext: Linux and macOS, x86-64 and arm64 alike), and later
// switches go through _setjmp/_longjmp, which save and restore the same registers without
// swapcontext's signal-mask system call (18 times cheaper here). A fiber that stops hands
// over to the next runnable fiber of the round itself, one jump where going through the
// scheduler took two; only the round's end and a fiber yet to start go back to it. A fiber
// slot is never unwound: when its GPU thread returns it waits to be given the next one. The
// object is built without _FORTIFY_SOURCE, whose longjmp check refuses a jump between stacks.
//
// Threadgroup memory declared in a kernel body becomes a static variable (the translation
// unit's text is rewritten so, see pipeline/run/kernel_build.py): one per threadgroup, since
// threadgroups run one after the other. It is poisoned (every byte 0xFF: NaN for floats, -1
// for integers) when the first thread of each threadgroup reaches its declaration.
#pragma once

#include <setjmp.h>
#include <ucontext.h>

#include <cstdint>
#include <array>
#include <cstring>
#include <type_traits>

#include "mps_kernel_abi.h"
#include "mps_kernel_field.h"

namespace mps_kernel {

constexpr int kSimdWidth = 32;
constexpr unsigned char kPoison = 0xFF;
constexpr size_t kStack = 256 * 1024;
constexpr int kMaxThreads = 1024;
constexpr int kValueBytes = 32;

enum class State : uint8_t { runnable, barrier, simd, done };
enum class Attr : int {
  thread_position_in_grid,
  thread_position_in_threadgroup,
  threadgroup_position_in_grid,
  threads_per_threadgroup,
  threads_per_grid,
  threadgroups_per_grid,
  thread_index_in_threadgroup,
  thread_index_in_simdgroup,
  simdgroup_index_in_threadgroup,
  threads_per_simdgroup,
  simdgroups_per_threadgroup,
  dispatch_threads_per_threadgroup,
};

struct U3 {
  uint32_t x, y, z;
};

struct Fiber;
// resolves one SIMD-group function for its active lanes, given in lane order
using Resolver = void (*)(Fiber* const* lanes, int n);

struct Fiber {
  jmp_buf context;
  char* stack;
  bool started;
  State state;
  U3 tpitg;
  uint32_t linear;
  // the SIMD-group function being waited at, and how many this thread met before
  const void* site;
  uint32_t meetings;
  Resolver resolve;
  uint32_t arg;
  alignas(16) unsigned char in[kValueBytes];
  alignas(16) unsigned char fill[kValueBytes];
  alignas(16) unsigned char out[kValueBytes];
};

struct Runtime {
  jmp_buf scheduler;
  Fiber* current = nullptr;
  KernelFn entry = nullptr;
  void* const* buffers = nullptr;
  U3 grid{}; // threads_per_grid
  U3 groups{}; // threadgroups_per_grid
  U3 tptg{}; // threads_per_threadgroup as dispatched
  U3 group_size{}; // this threadgroup's (smaller at the edge of a dispatchThreads grid)
  U3 tgid{};
  uint32_t threads = 0; // in this threadgroup
  uint64_t generation = 0; // of threadgroups run: threadgroup memory is poisoned per one
  const char* fault = nullptr; // why the dispatch stopped, when it did
  // the round being run: the fibers in the schedule's order, and how far it has got
  const uint32_t* round = nullptr;
  uint32_t round_size = 0;
  uint32_t round_at = 0;
  Fiber* unstarted = nullptr; // handed back to the scheduler to start
  Fiber fibers[kMaxThreads];
};

inline Runtime& rt() {
  static Runtime r;
  return r;
}

// ---- fibers ----------------------------------------------------------------------------

// the next runnable fiber of the round, or nullptr at its end
inline Fiber* next_runnable() {
  Runtime& r = rt();
  while (r.round_at < r.round_size) {
    Fiber* f = &r.fibers[r.round[r.round_at++]];
    if (f->state == State::runnable) {
      return f;
    }
  }
  return nullptr;
}

// the running fiber, no longer runnable, hands over to the next runnable one of the round;
// returns when it is resumed
inline void switch_away() {
  Runtime& r = rt();
  if (_setjmp(r.current->context)) {
    return;
  }
  Fiber* next = next_runnable();
  if (next != nullptr && next->started) {
    r.current = next;
    _longjmp(next->context, 1);
  }
  r.unstarted = next;
  _longjmp(r.scheduler, 1);
}

inline void fiber_main() {
  Runtime& r = rt();
  for (;;) {
    r.entry(r.buffers);
    r.current->state = State::done;
    switch_away();
  }
}

// the running fiber waits (at a barrier, a SIMD-group function) until a later round
inline void block(State state) {
  rt().current->state = state;
  switch_away();
}

// run ``f`` and the fibers it hands over to; returns when one hands back to the scheduler
inline void run_from(Fiber& f) {
  Runtime& r = rt();
  r.current = &f;
  if (_setjmp(r.scheduler)) {
    return;
  }
  if (!f.started) {
    // only for the jump onto the new stack: one context serves every start
    static ucontext_t start;
    f.started = true;
    getcontext(&start);
    start.uc_stack.ss_sp = f.stack;
    start.uc_stack.ss_size = kStack;
    start.uc_link = nullptr;
    makecontext(&start, fiber_main, 0);
    setcontext(&start);
  }
  _longjmp(f.context, 1);
}

// one round: every runnable fiber, in ``order``, until it stops; whether any ran
inline bool run_round(const uint32_t* order, uint32_t n) {
  Runtime& r = rt();
  r.round = order;
  r.round_size = n;
  r.round_at = 0;
  Fiber* f = next_runnable();
  const bool ran = f != nullptr;
  while (f != nullptr) {
    r.unstarted = nullptr;
    run_from(*f);
    f = r.unstarted;
  }
  return ran;
}

// ---- the thread-position attributes ----------------------------------------------------

inline U3 attr_value(Attr a) {
  Runtime& r = rt();
  const Fiber& f = *r.current;
  switch (a) {
    case Attr::thread_position_in_grid:
      return {r.tgid.x * r.tptg.x + f.tpitg.x, r.tgid.y * r.tptg.y + f.tpitg.y,
              r.tgid.z * r.tptg.z + f.tpitg.z};
    case Attr::thread_position_in_threadgroup:
      return f.tpitg;
    case Attr::threadgroup_position_in_grid:
      return r.tgid;
    case Attr::threads_per_threadgroup:
      return r.group_size;
    case Attr::dispatch_threads_per_threadgroup:
      return r.tptg;
    case Attr::threads_per_grid:
      return r.grid;
    case Attr::threadgroups_per_grid:
      return r.groups;
    case Attr::thread_index_in_threadgroup:
      return {f.linear, 0, 0};
    case Attr::thread_index_in_simdgroup:
      return {f.linear % kSimdWidth, 0, 0};
    case Attr::simdgroup_index_in_threadgroup:
      return {f.linear / kSimdWidth, 0, 0};
    case Attr::threads_per_simdgroup:
      return {uint32_t(kSimdWidth), 0, 0};
    case Attr::simdgroups_per_threadgroup:
      return {(r.threads + kSimdWidth - 1) / kSimdWidth, 0, 0};
  }
  return {0, 0, 0};
}

// An attribute as the kernel's parameter type takes it: uint / ushort, or a 2- or
// 3-component vector of them.
template <typename P>
inline P attr(Attr a) {
  const U3 v = attr_value(a);
  using T = std::remove_cv_t<P>;
  if constexpr (std::is_arithmetic_v<T>) {
    return T(v.x);
  } else if constexpr (T::size == 2) {
    return T(v.x, v.y);
  } else {
    return T(v.x, v.y, v.z);
  }
}

// A buffer argument as the parameter's type takes it: a pointer, or a reference
// (``constant Params& p``).
template <typename P>
inline P buffer(void* const* buffers, int index) {
  if constexpr (std::is_pointer_v<P>) {
    return reinterpret_cast<P>(buffers[index]);
  } else {
    static_assert(std::is_reference_v<P>, "a buffer parameter is a pointer or a reference");
    return *reinterpret_cast<std::remove_reference_t<P>*>(buffers[index]);
  }
}

// ---- threadgroup memory ----------------------------------------------------------------

// Called where a kernel declares threadgroup memory (the rewritten ``threadgroup T x[N];``):
// the first thread of each threadgroup to get there poisons it.
template <typename T>
inline void threadgroup_local(T* object, uint64_t* generation) {
  Runtime& r = rt();
  if (*generation != r.generation) {
    *generation = r.generation;
    std::memset(static_cast<void*>(object), kPoison, sizeof(T));
  }
}

// ---- SIMD-group functions ---------------------------------------------------------------

template <typename T>
inline T load(const unsigned char* bytes) {
  T v;
  std::memcpy(static_cast<void*>(&v), bytes, sizeof(T));
  return v;
}
template <typename T>
inline void store(unsigned char* bytes, const T& v) {
  std::memcpy(bytes, static_cast<const void*>(&v), sizeof(T));
}

// wait with ``value`` at ``site`` until ``resolve`` has run over the lanes met there
template <typename R, typename T>
inline R meet(const void* site, Resolver resolve, const T& value, uint32_t arg = 0) {
  static_assert(sizeof(T) <= kValueBytes && sizeof(R) <= kValueBytes, "SIMD value too wide");
  Fiber& f = *rt().current;
  f.site = site;
  f.resolve = resolve;
  f.arg = arg;
  store(f.in, value);
  block(State::simd);
  ++f.meetings;
  return load<R>(f.out);
}

inline uint32_t lane_of(const Fiber* f) {
  return f->linear % kSimdWidth;
}

// the value lane ``lane`` holds, or poison when that lane is not active (Metal leaves it
// undefined: a kernel reading it is wrong, and poison makes it show)
template <typename T>
inline T from_lane(Fiber* const* lanes, int n, uint32_t lane, bool fill = false) {
  for (int i = 0; i < n; ++i) {
    if (lane_of(lanes[i]) == lane) {
      return load<T>(fill ? lanes[i]->fill : lanes[i]->in);
    }
  }
  unsigned char poison[sizeof(T)];
  std::memset(poison, kPoison, sizeof(T));
  return load<T>(poison);
}

// ---- parameter structs: their layout, as the compiler lays them out ---------------------

template <typename F>
struct element_of {
  using type = F;
};
template <typename T, size_t N>
struct element_of<std::array<T, N>> {
  using type = T;
};
template <typename T, size_t N>
struct element_of<::metal::array<T, N>> {
  using type = T;
};
template <typename T, size_t N>
struct element_of<T[N]> {
  using type = T;
};
template <typename F>
constexpr char kind_of() {
  using E = std::remove_cv_t<typename element_of<std::remove_cv_t<F>>::type>;
  if constexpr (std::is_same_v<E, bool>) {
    return 'b';
  } else if constexpr (std::is_floating_point_v<E> || !std::is_integral_v<E>) {
    return 'f';
  } else if constexpr (std::is_signed_v<E>) {
    return 'i';
  } else {
    return 'u';
  }
}
template <typename F>
constexpr unsigned element_size() {
  return unsigned(sizeof(typename element_of<std::remove_cv_t<F>>::type));
}

} // namespace mps_kernel
