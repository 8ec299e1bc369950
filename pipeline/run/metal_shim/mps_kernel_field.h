// One field of a parameter struct, as a check-kernel object reports it to its driver.
#pragma once

namespace mps_kernel {
struct Field {
  const char* type;
  const char* name;
  unsigned offset;
  unsigned size;
  unsigned element; // bytes of one element (an array field has several)
  char kind; // f floating, i signed, u unsigned, b bool
};
} // namespace mps_kernel
