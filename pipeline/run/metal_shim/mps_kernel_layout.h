// Included last in a check-kernel translation unit, after its generated struct probes
// (`mps_kernel_structs`): the layout of each launch spec's parameter struct, as the compiler
// lays it out, which the driver lists for the spec's values to be packed into.
#pragma once

extern "C" {
// the i-th struct's rows: first its size ({type, "", 0, sizeof}), then one per field
__attribute__((visibility("default"))) int mps_kernel_struct_count() {
  return int(sizeof(mps_kernel_struct_fields) / sizeof(mps_kernel_struct_fields[0])) - 1;
}
__attribute__((visibility("default"))) const ::mps_kernel::Field* mps_kernel_struct(
    int i,
    int* rows) {
  *rows = int(mps_kernel_struct_fields[i]);
  return mps_kernel_structs[i];
}
}
