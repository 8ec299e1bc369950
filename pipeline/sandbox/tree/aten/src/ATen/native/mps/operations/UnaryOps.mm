#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/Resize.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/native/mps/OperationUtils.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/empty.h>
#include <ATen/ops/erfinv_native.h>
#include <ATen/ops/exp2_native.h>
#include <ATen/ops/logit_native.h>
#endif

namespace at::native {
namespace mps {

typedef MPSGraphTensor* (^UnaryOpBlock)(MPSGraph*, MPSGraphTensor*);

static void unary_op(const Tensor& self, const Tensor& output, const std::string& op_name, UnaryOpBlock unaryBlock) {
  at::native::resize_output(output, self.sizes());
  if (self.numel() == 0) {
    return;
  }
  @autoreleasepool {
    std::string key = op_name + getTensorsStringKey({self, output});
    auto cachedGraph = LookUpOrCreateCachedGraph<MPSUnaryCachedGraph>(key, [&](auto mpsGraph, auto newCachedGraph) {
      newCachedGraph->inputTensor_ = mpsGraphRankedPlaceHolder(mpsGraph, self);
      MPSGraphTensor* castTensor = newCachedGraph->inputTensor_;
      // Integer inputs of floating ops are computed in the output's precision
      if (isIntegralType(self.scalar_type(), true) && isFloatingType(output.scalar_type())) {
        castTensor = castMPSTensor(mpsGraph, castTensor, output.scalar_type());
      }
      newCachedGraph->outputTensor_ = unaryBlock(mpsGraph, castTensor);
    });
    auto selfPlaceholder = Placeholder(cachedGraph->inputTensor_, self);
    auto outputPlaceholder = Placeholder(cachedGraph->outputTensor_, output);
    runMPSGraph(getCurrentMPSStream(), cachedGraph->graph(), dictionaryFromPlaceholders(selfPlaceholder), outputPlaceholder);
  }
}

} // namespace mps

TORCH_IMPL_FUNC(exp2_out_mps)(const Tensor& self, const Tensor& output) {
  mps::unary_op(self, output, "exp2_out_mps", ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
    return [mpsGraph exponentBase2WithTensor:inputTensor name:nil];
  });
}

#define REGISTER_MPS_UNARY_STUB(func, mps_func)                                                               \
  static void mps_##func##_kernel(TensorIteratorBase& iter) {                                                 \
    mps::unary_op(iter.input(0), iter.output(0), __func__, ^MPSGraphTensor*(MPSGraph * mpsGraph,              \
                                                                            MPSGraphTensor * inputTensor) { \
      return [mpsGraph mps_func##WithTensor:inputTensor name:nil];                                            \
    });                                                                                                       \
  }                                                                                                           \
  REGISTER_DISPATCH(func##_stub, mps_##func##_kernel)

REGISTER_MPS_UNARY_STUB(ceil, ceil);
REGISTER_MPS_UNARY_STUB(trunc, truncate);

static void logit_mps_impl(const Tensor& self, std::optional<double> eps, Tensor& output, const std::string& op_name) {
  std::string key = op_name + ":[" + (eps.has_value() ? std::to_string(eps.value()) : "NULL") + "]";
  mps::unary_op(self, output, key, ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
    MPSGraphTensor* oneTensor = [mpsGraph constantWithScalar:1.0 shape:@[ @1 ] dataType:inputTensor.dataType];
    MPSGraphTensor* clampedTensor = inputTensor;
    if (eps.has_value()) {
      MPSGraphTensor* lowTensor = [mpsGraph constantWithScalar:eps.value() shape:@[ @1 ] dataType:inputTensor.dataType];
      MPSGraphTensor* highTensor = [mpsGraph subtractionWithPrimaryTensor:oneTensor secondaryTensor:lowTensor name:nil];
      clampedTensor = [mpsGraph clampWithTensor:inputTensor minValueTensor:lowTensor maxValueTensor:highTensor name:nil];
    }
    MPSGraphTensor* oneMinusTensor = [mpsGraph subtractionWithPrimaryTensor:oneTensor
                                                            secondaryTensor:clampedTensor
                                                                       name:nil];
    MPSGraphTensor* ratioTensor = [mpsGraph divisionWithPrimaryTensor:clampedTensor
                                                      secondaryTensor:oneMinusTensor
                                                                 name:nil];
    return [mpsGraph logarithmWithTensor:ratioTensor name:nil];
  });
}

Tensor& logit_out_mps(const Tensor& self, std::optional<double> eps, Tensor& result) {
  logit_mps_impl(self, eps, result, "logit_out_mps");
  return result;
}

Tensor logit_mps(const Tensor& self, std::optional<double> eps) {
  const auto out_dtype = isIntegralType(self.scalar_type(), /*includeBool=*/true) ? kFloat : self.scalar_type();
  Tensor result = at::empty(self.sizes(), out_dtype, std::nullopt, kMPS, std::nullopt, std::nullopt);
  logit_mps_impl(self, eps, result, "logit_mps");
  return result;
}

} // namespace at::native
