// What a functor's shared object records per registration; shared by mps_register.h (which
// fills it) and mps_math_driver.cpp (which reads it through mps_math_registration()).
#pragma once

namespace mps_math {

using RunFn = void (*)(void* out, const void* const* in, const void* alpha);

struct Registration {
  const char* name; // the kernel name, NAME of NAME_functor
  const char* input;
  const char* output; // as registered
  const char* result; // what the functor returns for `input` (Metal's static_assert)
  const char* alpha; // "?" unless an ALPHA op
  int arity; // tensor inputs: 1, 2 or 3
  int in_size;
  int out_size;
  int alpha_size; // 0 unless an ALPHA op
  int line;
  RunFn run;
};

} // namespace mps_math
