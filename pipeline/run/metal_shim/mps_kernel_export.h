// Included after a check-kernel translation unit's generated kernel table
// (`mps_kernel_table`, see pipeline/run/kernel_build.py): the C interface of its shared
// object, which mps_kernel_driver.cpp loads.
#pragma once

#include "mps_kernel_dispatch.h"

extern "C" {
__attribute__((visibility("default"))) int mps_kernel_count() {
  return int(sizeof(mps_kernel_table) / sizeof(mps_kernel_table[0])) - 1;
}
__attribute__((visibility("default"))) const ::mps_kernel::KernelInfo* mps_kernel_info(int i) {
  return (i >= 0 && i < mps_kernel_count()) ? &mps_kernel_table[i] : nullptr;
}
__attribute__((visibility("default"))) int mps_kernel_run(
    int i,
    void* const* buffers,
    const ::mps_kernel::Dispatch* dispatch) {
  return ::mps_kernel::run(mps_kernel_table[i], buffers, *dispatch);
}
__attribute__((visibility("default"))) const ::mps_kernel::Outcome* mps_kernel_outcome() {
  return &::mps_kernel::outcome();
}
// The messages a kernel reported with TORCH_REPORT_ERROR into `buffer` (c10/metal/error.h's
// ErrorMessages), one line each: "message (file:line, func)"; the bytes of that buffer
// (0 when the checkout's headers have no error.h).
__attribute__((visibility("default"))) int mps_kernel_error_size() {
#ifdef TORCH_REPORT_ERROR
  return int(sizeof(::c10::metal::ErrorMessages));
#else
  return 0;
#endif
}
__attribute__((visibility("default"))) int mps_kernel_errors(
    const void* buffer,
    char* out,
    int cap) {
  int used = 0;
  out[0] = 0;
#ifdef TORCH_REPORT_ERROR
  const auto* msgs = static_cast<const ::c10::metal::ErrorMessages*>(buffer);
  unsigned count = msgs->count.value;
  if (count > ::c10::metal::error_message_count) {
    count = ::c10::metal::error_message_count;
  }
  for (unsigned i = 0; i < count && used < cap; ++i) {
    const auto& m = msgs->msg[i];
    used += std::snprintf(out + used, size_t(cap - used), "%.250s (%.128s:%u, %.128s)\n",
                          m.message, m.file, m.line, m.func);
  }
#else
  (void)buffer;
  (void)cap;
#endif
  return used;
}
}
