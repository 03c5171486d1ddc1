// Tensors print as torch 1.13 prints them (its _Formatter, default print
// options); the expected strings are torch's own output.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace collie {
namespace {

Tensor of(DType dt, const std::vector<double>& v) { return Tensor::of(dt, v); }

TEST(TensorFormat, PrintsAsTorchDoes) {
  EXPECT_EQ(format_tensor(of(DType::kFloat32, {1, 10})), "tensor([ 1., 10.])");
  EXPECT_EQ(format_tensor(of(DType::kFloat32, {0.5, 2.25})), "tensor([0.5000, 2.2500])");
  EXPECT_EQ(format_tensor(of(DType::kFloat32, {1e-5, 1})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(format_tensor(of(DType::kInt64, {3, 300})), "tensor([  3, 300])");
  EXPECT_EQ(format_tensor(of(DType::kFloat32, {std::nan(""), 1.5})), "tensor([   nan, 1.5000])");
  EXPECT_EQ(format_tensor(of(DType::kFloat32, {0, 0})), "tensor([0., 0.])");
  EXPECT_EQ(format_tensor(of(DType::kFloat32, {123456789})), "tensor([1.2346e+08])");
  EXPECT_EQ(format_tensor(of(DType::kFloat16, {-2.5, 1e9})), "tensor([-2.5000,     inf], dtype=torch.float16)");
  EXPECT_EQ(format_tensor(of(DType::kInt8, {1, 2})), "tensor([1, 2], dtype=torch.int8)");
  EXPECT_EQ(format_tensor(of(DType::kBool, {1, 0})), "tensor([ True, False])");
  EXPECT_EQ(format_element(of(DType::kFloat32, {0.25}), 0), "tensor(0.2500)");
  EXPECT_EQ(format_element(of(DType::kInt64, {7}), 0), "tensor(7)");
  EXPECT_EQ(format_element(of(DType::kFloat32, {4}), 0), "tensor(4.)");
}

// A float above about 1e59 in a tensor that is not all whole numbers printed
// a wrong, truncated number (a fixed 64-byte buffer): torch switches to
// scientific notation there.
TEST(TensorFormat, HugeValuesPrintInScientificNotationNotTruncated) {
  EXPECT_EQ(format_tensor(of(DType::kFloat64, {0.5, 1e60})), "tensor([5.0000e-01, 1.0000e+60], dtype=torch.float64)");
  EXPECT_EQ(format_tensor(of(DType::kFloat64, {1e60, 3})), "tensor([1.0000e+60, 3.0000e+00], dtype=torch.float64)");
  EXPECT_EQ(format_element(of(DType::kFloat64, {1e60}), 0), "tensor(1.0000e+60, dtype=torch.float64)");
  EXPECT_EQ(format_element(of(DType::kFloat64, {1e300 * 3.3}), 0), "tensor(3.3000e+300, dtype=torch.float64)");
}

}  // namespace
}  // namespace collie
