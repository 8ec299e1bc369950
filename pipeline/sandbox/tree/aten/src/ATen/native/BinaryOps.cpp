#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TensorIterator.h>

// The structured kernels shared by CPU, CUDA and (where native_functions.yaml lists it)
// MPS. Each one only forwards to a dispatch stub; every backend registers its own
// implementation of the stub with REGISTER_DISPATCH.

namespace at::native {

DEFINE_DISPATCH(atan2_stub);
DEFINE_DISPATCH(copysign_stub);
DEFINE_DISPATCH(div_floor_stub);
DEFINE_DISPATCH(div_true_stub);
DEFINE_DISPATCH(div_trunc_stub);
DEFINE_DISPATCH(fmod_stub);
DEFINE_DISPATCH(hypot_stub);
DEFINE_DISPATCH(lt_stub);
DEFINE_DISPATCH(maximum_stub);
DEFINE_DISPATCH(xlogy_stub);

TORCH_IMPL_FUNC(atan2_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  atan2_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(copysign_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  copysign_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(div_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  div_true_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(div_out_mode) (
  const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode, const Tensor& result
) {
  if (!rounding_mode.has_value()) {
    div_true_stub(device_type(), *this);
  } else if (*rounding_mode == "trunc") {
    div_trunc_stub(device_type(), *this);
  } else if (*rounding_mode == "floor") {
    div_floor_stub(device_type(), *this);
  }
}

TORCH_IMPL_FUNC(fmod_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  fmod_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(hypot_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  hypot_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(lt_Scalar_out) (const Tensor& self, const Scalar& other, const Tensor& result) {
  lt_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(lt_Tensor_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  lt_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(maximum_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  maximum_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(xlogy_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  xlogy_stub(device_type(), *this);
}

} // namespace at::native
