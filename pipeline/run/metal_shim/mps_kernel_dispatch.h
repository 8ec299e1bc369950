// Included at the end of a check-kernel translation unit: the scheduler that runs one
// dispatch of a kernel (see mps_kernel_runtime.h) and the C interface the driver
// (mps_kernel_driver.cpp) calls through.
#pragma once

#include <signal.h>
#include <sys/mman.h>

#include <cstdio>

#include "mps_kernel_runtime.h"

namespace mps_kernel {

enum class Schedule : uint32_t { forward, reverse, random };

struct Order {
  uint64_t state;
  Schedule schedule;
  uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1DULL;
  }
  // 0..n-1 in the schedule's order
  void fill(uint32_t* out, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      out[i] = schedule == Schedule::reverse ? n - 1 - i : i;
    }
    if (schedule == Schedule::random) {
      for (uint32_t i = n; i > 1; --i) {
        const uint32_t j = uint32_t(next() % i);
        const uint32_t t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
      }
    }
  }
};

inline sigjmp_buf& fault_jump() {
  static sigjmp_buf j;
  return j;
}
inline Outcome& outcome() {
  static Outcome o;
  return o;
}

inline void on_fault(int sig, siginfo_t* info, void*) {
  outcome().signal = sig;
  outcome().address = info->si_addr;
  siglongjmp(fault_jump(), 1);
}

inline void install_fault_handlers() {
  static bool done = false;
  if (done) {
    return;
  }
  done = true;
  // a fault on a fiber's stack (its overflow included) is handled on a stack of its own
  static char alt[256 * 1024];
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof(alt);
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    sigaction(sig, &sa, nullptr);
  }
}

inline bool allocate_stacks() {
  Runtime& r = rt();
  if (r.fibers[0].stack != nullptr) {
    return true;
  }
  for (Fiber& f : r.fibers) {
    void* p = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
      return false;
    }
    f.stack = static_cast<char*>(p);
  }
  return true;
}

inline void say(const char* message) {
  std::snprintf(outcome().message, sizeof(outcome().message), "%s", message);
}

// Resolve every SIMD-group function some lanes wait at; whether any was.
inline bool resolve_simd(uint32_t n) {
  Runtime& r = rt();
  bool any = false;
  Fiber* lanes[kSimdWidth];
  for (uint32_t base = 0; base < n; base += kSimdWidth) {
    const uint32_t end = base + kSimdWidth < n ? base + kSimdWidth : n;
    for (;;) {
      // the lanes at their same n-th meeting, doing the same function, meet: one call in
      // the source may be several in the object (the compiler duplicates code)
      const Fiber* first = nullptr;
      int count = 0;
      for (uint32_t i = base; i < end; ++i) {
        Fiber& f = r.fibers[i];
        if (f.state != State::simd) {
          continue;
        }
        if (first == nullptr || (f.meetings == first->meetings && f.resolve == first->resolve)) {
          first = first ? first : &f;
          lanes[count++] = &f;
        }
      }
      if (count == 0) {
        break;
      }
      lanes[0]->resolve(lanes, count);
      for (int i = 0; i < count; ++i) {
        lanes[i]->state = State::runnable;
      }
      any = true;
    }
  }
  return any;
}

// Run one threadgroup to its end; false (with the outcome's message) when it cannot end.
inline bool run_group(Order& order, uint32_t* perm) {
  Runtime& r = rt();
  const uint32_t n = r.threads;
  for (uint32_t i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    f.state = State::runnable;
    f.meetings = 0;
    f.linear = i;
    f.tpitg = {i % r.group_size.x, (i / r.group_size.x) % r.group_size.y,
               i / (r.group_size.x * r.group_size.y)};
  }
  for (;;) {
    order.fill(perm, n);
    if (run_round(perm, n)) {
      continue;
    }
    if (resolve_simd(n)) {
      continue;
    }
    uint32_t waiting = 0;
    for (uint32_t i = 0; i < n; ++i) {
      waiting += r.fibers[i].state == State::barrier ? 1 : 0;
    }
    if (waiting == 0) {
      return true;
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (r.fibers[i].state == State::barrier) {
        r.fibers[i].state = State::runnable;
      }
    }
  }
}

inline uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

// Run the dispatch; 0 when it ran to its end, else the outcome says why not.
inline int run(const KernelInfo& k, void* const* buffers, const Dispatch& d) {
  Runtime& r = rt();
  Outcome& o = outcome();
  std::memset(&o, 0, sizeof(o));
  const uint32_t total = d.tptg[0] * d.tptg[1] * d.tptg[2];
  if (total == 0 || total > k.max_threads) {
    std::snprintf(o.message, sizeof(o.message),
                  "threads per threadgroup %ux%ux%u: more than the kernel's maximum %u, or none",
                  d.tptg[0], d.tptg[1], d.tptg[2], k.max_threads);
    return 1;
  }
  if (!allocate_stacks()) {
    say("cannot allocate the fibers' stacks");
    return 1;
  }
  install_fault_handlers();
  r.entry = k.fn;
  r.buffers = buffers;
  r.tptg = {d.tptg[0], d.tptg[1], d.tptg[2]};
  if (d.mode == 0) {
    r.grid = {d.size[0], d.size[1], d.size[2]};
    r.groups = {ceil_div(d.size[0], d.tptg[0]), ceil_div(d.size[1], d.tptg[1]),
                ceil_div(d.size[2], d.tptg[2])};
  } else {
    r.groups = {d.size[0], d.size[1], d.size[2]};
    r.grid = {d.size[0] * d.tptg[0], d.size[1] * d.tptg[1], d.size[2] * d.tptg[2]};
  }
  const uint64_t count = uint64_t(r.groups.x) * r.groups.y * r.groups.z;
  if (count == 0) {
    return 0;
  }
  if (count > (uint64_t(1) << 31)) {
    say("more than 2^31 threadgroups");
    return 1;
  }
  Order order{d.seed * 2654435761ULL + 88172645463325252ULL, Schedule(d.schedule)};
  uint32_t* groups = new uint32_t[count];
  static uint32_t perm[kMaxThreads];
  order.fill(groups, uint32_t(count));
  int status = 0;
  if (sigsetjmp(fault_jump(), 1)) {
    // the faulting fiber and its group are abandoned: every fiber starts afresh next time
    const Fiber* f = r.current;
    if (f != nullptr) {
      const U3 p = attr_value(Attr::thread_position_in_grid);
      o.position[0] = p.x, o.position[1] = p.y, o.position[2] = p.z;
    }
    o.group[0] = r.tgid.x, o.group[1] = r.tgid.y, o.group[2] = r.tgid.z;
    for (Fiber& fiber : r.fibers) {
      fiber.started = false;
    }
    delete[] groups;
    return 2;
  }
  for (uint64_t g = 0; g < count && status == 0; ++g) {
    const uint32_t id = groups[g];
    r.tgid = {id % r.groups.x, (id / r.groups.x) % r.groups.y, id / (r.groups.x * r.groups.y)};
    const U3 start = {r.tgid.x * r.tptg.x, r.tgid.y * r.tptg.y, r.tgid.z * r.tptg.z};
    r.group_size = r.tptg;
    if (d.mode == 0) {
      // dispatchThreads: the threadgroups at the grid's edge are cut to it
      r.group_size = {r.grid.x - start.x < r.tptg.x ? r.grid.x - start.x : r.tptg.x,
                      r.grid.y - start.y < r.tptg.y ? r.grid.y - start.y : r.tptg.y,
                      r.grid.z - start.z < r.tptg.z ? r.grid.z - start.z : r.tptg.z};
    }
    r.threads = r.group_size.x * r.group_size.y * r.group_size.z;
    ++r.generation;
    if (!run_group(order, perm)) {
      status = 1;
      o.group[0] = r.tgid.x, o.group[1] = r.tgid.y, o.group[2] = r.tgid.z;
      for (Fiber& fiber : r.fibers) {
        fiber.started = false;
      }
    }
  }
  delete[] groups;
  return status;
}

} // namespace mps_kernel
