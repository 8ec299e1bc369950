#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/mps/OperationUtils.h>
#include <fmt/format.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/atan2_native.h>
#include <ATen/ops/fmod_native.h>
#include <ATen/ops/lt_native.h>
#include <ATen/ops/result_type.h>
#endif

namespace at::native {
namespace mps {

struct BinaryOpCachedGraph : public MPSCachedGraph {
  BinaryOpCachedGraph(MPSGraph* graph) : MPSCachedGraph(graph) {}
  MPSGraphTensor *primaryTensor = nil, *secondaryTensor = nil;
  MPSGraphTensor* outputTensor = nil;
};

typedef MPSGraphTensor* (^BinaryOpBlock)(BinaryOpCachedGraph*, MPSGraphTensor*, MPSGraphTensor*);
#define BinaryOpFn(graph, primary, secondary) \
  MPSGraphTensor*(mps::BinaryOpCachedGraph * graph, MPSGraphTensor * primary, MPSGraphTensor * secondary)

static void binaryOpTensor(const Tensor& self,
                           const Tensor& other,
                           const Tensor& output_,
                           const std::string& op_name,
                           BinaryOpBlock binaryBlock) {
  auto new_size = at::infer_size(self.sizes(), other.sizes());
  if (!output_.sizes().equals(new_size)) {
    output_.resize_(new_size);
  }
  // Nothing to compute, and MPSGraph rejects zero-sized placeholders
  if (self.numel() == 0 || other.numel() == 0) {
    return;
  }

  const auto common_dtype = at::result_type(self, other);
  @autoreleasepool {
    const auto key = fmt::format("{}:{}", op_name, getTensorsStringKey({self, other, output_}));
    auto cachedGraph = LookUpOrCreateCachedGraph<BinaryOpCachedGraph>(key, [&](auto mpsGraph, auto newCachedGraph) {
      newCachedGraph->primaryTensor = mpsGraphRankedPlaceHolder(mpsGraph, self);
      newCachedGraph->secondaryTensor = mpsGraphRankedPlaceHolder(mpsGraph, other);
      auto primaryCastTensor = castMPSTensor(mpsGraph, newCachedGraph->primaryTensor, common_dtype);
      auto secondaryCastTensor = castMPSTensor(mpsGraph, newCachedGraph->secondaryTensor, common_dtype);
      auto outputTensor = binaryBlock(newCachedGraph, primaryCastTensor, secondaryCastTensor);
      newCachedGraph->outputTensor = castMPSTensor(mpsGraph, outputTensor, output_.scalar_type());
    });

    auto selfPlaceholder = Placeholder(cachedGraph->primaryTensor, self);
    auto otherPlaceholder = Placeholder(cachedGraph->secondaryTensor, other);
    auto outputPlaceholder = Placeholder(cachedGraph->outputTensor, output_);
    auto feeds = dictionaryFromPlaceholders(selfPlaceholder, otherPlaceholder);
    runMPSGraph(getCurrentMPSStream(), cachedGraph->graph(), feeds, outputPlaceholder);
  }
}

static void binaryOpScalar(const Tensor& self,
                           const Scalar& other,
                           const Tensor& output,
                           const std::string& op_name,
                           BinaryOpBlock binaryBlock) {
  binaryOpTensor(self, wrapped_scalar_tensor(other), output, op_name, binaryBlock);
}

} // namespace mps

// Comparison results are cast to bool by binaryOpTensor
#define CREATE_MPS_STRUCTURED_BOOLEAN_OP_FUNC(func_out, func_stub, other_type)                   \
  TORCH_IMPL_FUNC(func_out)(const Tensor& self, const other_type& other, const Tensor& output) { \
    mps::binaryOp##other_type(self,                                                              \
                              other,                                                             \
                              output,                                                            \
                              #func_stub,                                                        \
                              ^BinaryOpFn(cachedGraph, primaryCastTensor, secondaryCastTensor) { \
                                MPSGraph* mpsGraph = cachedGraph->graph();                       \
                                return [mpsGraph func_stub##WithPrimaryTensor:primaryCastTensor  \
                                                              secondaryTensor:secondaryCastTensor \
                                                                         name:nil];              \
                              });                                                                \
  }

CREATE_MPS_STRUCTURED_BOOLEAN_OP_FUNC(lt_scalar_out_mps, lessThan, Scalar);
CREATE_MPS_STRUCTURED_BOOLEAN_OP_FUNC(lt_tensor_out_mps, lessThan, Tensor);

TORCH_IMPL_FUNC(atan2_out_mps)(const Tensor& self, const Tensor& other, const Tensor& output) {
  // MPSGraph has no integer atan2: integral inputs would silently truncate the angle
  TORCH_CHECK(!isIntegralType(self.scalar_type(), /*includeBool=*/true),
              "MPS does not support atan2 op with integer input");
  mps::binaryOpTensor(
      self, other, output, "atan2", ^BinaryOpFn(cachedGraph, primaryCastTensor, secondaryCastTensor) {
        MPSGraph* mpsGraph = cachedGraph->graph();
        return [mpsGraph atan2WithPrimaryTensor:primaryCastTensor secondaryTensor:secondaryCastTensor name:nil];
      });
}

TORCH_IMPL_FUNC(fmod_mps_out)
(const Tensor& self, const Tensor& other, const Tensor& output) {
  mps::binaryOpTensor(
      self, other, output, "fmod_mps_out", ^BinaryOpFn(cachedGraph, primaryCastTensor, secondaryCastTensor) {
        MPSGraph* mpsGraph = cachedGraph->graph();
        // fmod(a, b) = a - trunc(a / b) * b, all in the input precision
        auto quotient = [mpsGraph divisionWithPrimaryTensor:primaryCastTensor
                                            secondaryTensor:secondaryCastTensor
                                                       name:nil];
        auto truncated = [mpsGraph truncateWithTensor:quotient name:nil];
        auto product = [mpsGraph multiplicationWithPrimaryTensor:truncated
                                                 secondaryTensor:secondaryCastTensor
                                                            name:nil];
        return [mpsGraph subtractionWithPrimaryTensor:primaryCastTensor secondaryTensor:product name:nil];
      });
}

} // namespace at::native
