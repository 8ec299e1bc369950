// What a check-kernel shared object and its driver share: mps_kernel_export.h's C interface
// passes these.
#pragma once

#include <cstdint>

namespace mps_kernel {

using KernelFn = void (*)(void* const* buffers);

struct KernelInfo {
  const char* host_name;
  KernelFn fn;
  int line; // of the .metal file: its instantiation or definition
  unsigned max_threads; // [[max_total_threads_per_threadgroup]], else 1024
};

// What the driver asks for: `mode` 0 is dispatchThreads (`size` counts threads, the edge
// threadgroups are cut to the grid), 1 is dispatchThreadgroups (`size` counts threadgroups).
struct Dispatch {
  uint32_t mode;
  uint32_t size[3];
  uint32_t tptg[3];
  uint32_t schedule; // 0 forward, 1 reverse, 2 random (seeded)
  uint64_t seed;
};

// Where a dispatch stopped: a fault (signal, the address and the thread) or a message.
struct Outcome {
  int signal;
  const void* address;
  uint32_t position[3];
  uint32_t group[3];
  char message[256];
};

} // namespace mps_kernel
