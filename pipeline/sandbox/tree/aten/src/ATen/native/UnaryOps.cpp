#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/UnaryOps.h>
#include <ATen/native/TensorIterator.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#else
#include <ATen/ops/empty.h>
#endif

// Shared unary kernels: each forwards to the dispatch stub that every backend
// registers for itself.

namespace at::native {

DEFINE_DISPATCH(ceil_stub);
DEFINE_DISPATCH(erfinv_stub);
DEFINE_DISPATCH(exp2_stub);
DEFINE_DISPATCH(logit_stub);
DEFINE_DISPATCH(sinc_stub);
DEFINE_DISPATCH(trunc_stub);

TORCH_IMPL_FUNC(ceil_out) (const Tensor& self, const Tensor& result) {
  ceil_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(erfinv_out) (const Tensor& self, const Tensor& result) {
  erfinv_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(exp2_out) (const Tensor& self, const Tensor& result) {
  exp2_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(sinc_out) (const Tensor& self, const Tensor& result) {
  sinc_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(trunc_out) (const Tensor& self, const Tensor& result) {
  trunc_stub(device_type(), *this);
}

Tensor& logit_out(const Tensor& self, std::optional<double> eps, Tensor& result) {
  auto iter = TensorIterator::unary_float_op(result, self);
  logit_stub(iter.device_type(), iter, Scalar(eps ? eps.value() : -1.0));
  return result;
}

Tensor logit(const Tensor& self, std::optional<double> eps) {
  Tensor result;
  auto iter = TensorIterator::unary_float_op(result, self);
  logit_stub(iter.device_type(), iter, Scalar(eps ? eps.value() : -1.0));
  return iter.output();
}

Tensor& logit_(Tensor& self, std::optional<double> eps) {
  return at::logit_out(self, self, eps);
}

} // namespace at::native
