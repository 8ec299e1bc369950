// mps-pipeline sandbox: not PyTorch source; written for this repository in the same shape.
//
// The dispatch stubs of the unary kernels in UnaryOps.cpp, and the CPU kernels' prototypes.
#pragma once

#include <ATen/native/DispatchStub.h>
#include <c10/core/Scalar.h>

namespace at {
class Tensor;
struct TensorIteratorBase;
} // namespace at

namespace at::native {

using unary_fn = void (*)(TensorIteratorBase&);
// logit clamps its input to [eps, 1 - eps] first; a negative eps means no clamping.
using unary_fn_with_scalar = void (*)(TensorIteratorBase&, const Scalar& eps);

inline namespace CPU_CAPABILITY {
void exp2_kernel(TensorIteratorBase& iter);
void sinc_kernel(TensorIteratorBase& iter);
} // namespace CPU_CAPABILITY

DECLARE_DISPATCH(unary_fn, ceil_stub)
DECLARE_DISPATCH(unary_fn, erfinv_stub)
DECLARE_DISPATCH(unary_fn, exp2_stub)
DECLARE_DISPATCH(unary_fn_with_scalar, logit_stub)
DECLARE_DISPATCH(unary_fn, sinc_stub)
DECLARE_DISPATCH(unary_fn, trunc_stub)

} // namespace at::native
