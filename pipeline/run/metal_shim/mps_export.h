// Included after the .metal file: the C interface the driver (mps_math_driver.cpp) reads the
// recorded registrations through.
#pragma once

extern "C" {
__attribute__((visibility("default"))) int mps_math_count() {
  return ::mps_math::count();
}
__attribute__((visibility("default"))) const ::mps_math::Registration* mps_math_registration(
    int i) {
  return (i >= 0 && i < ::mps_math::count()) ? &::mps_math::table()[i] : nullptr;
}
}
