// mps-pipeline sandbox: not PyTorch source; written for this repository in the same shape.
//
// The dispatch stubs the shared structured kernels of BinaryOps.cpp call. A backend's
// REGISTER_DISPATCH must hand each stub a function of exactly the declared type.
#pragma once

#include <ATen/native/DispatchStub.h>
#include <c10/core/Scalar.h>

namespace at {
struct TensorIterator;
struct TensorIteratorBase;
} // namespace at

namespace at::native {

// Structured kernels pass the TensorIteratorBase they were configured on.
using structured_binary_fn = void (*)(TensorIteratorBase&);
// Stubs that predate structured kernels still take the concrete iterator.
using binary_fn = void (*)(TensorIterator&);

DECLARE_DISPATCH(structured_binary_fn, atan2_stub)
DECLARE_DISPATCH(structured_binary_fn, copysign_stub)
DECLARE_DISPATCH(structured_binary_fn, div_floor_stub)
DECLARE_DISPATCH(structured_binary_fn, div_true_stub)
DECLARE_DISPATCH(binary_fn, div_trunc_stub);
DECLARE_DISPATCH(binary_fn, fmod_stub);
DECLARE_DISPATCH(structured_binary_fn, hypot_stub)
DECLARE_DISPATCH(structured_binary_fn, lt_stub)
DECLARE_DISPATCH(structured_binary_fn, maximum_stub)
DECLARE_DISPATCH(structured_binary_fn, xlogy_stub)

} // namespace at::native
