// Tensors print as torch 1.13 prints them (its _Formatter, default print
// options); the expected strings are torch's own output.
#include "core/tensor.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

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

// {t} of a tensor with two or more dimensions printed its elements as one
// flat row; torch prints nested rows, one per line.
TEST(TensorFormat, TensorsOfSeveralDimensionsPrintAsNestedRows) {
  Tensor m(DType::kInt64, {2, 3});
  for (std::size_t i = 0; i < 6; ++i) m.set_int(i, static_cast<std::int64_t>(i));
  EXPECT_EQ(format_tensor(m), "tensor([[0, 1, 2],\n        [3, 4, 5]])");
  EXPECT_EQ(format_tensor(m.row(1)), "tensor([3, 4, 5])");
  Tensor c(DType::kFloat32, {2, 2, 2});
  for (std::size_t i = 0; i < 8; ++i) c.set(i, static_cast<double>(i));
  EXPECT_EQ(format_tensor(c),
            "tensor([[[0., 1.],\n"
            "         [2., 3.]],\n"
            "\n"
            "        [[4., 5.],\n"
            "         [6., 7.]]])");
  EXPECT_EQ(format_tensor(Tensor(DType::kInt32, {2, 1})), "tensor([[0],\n        [0]], dtype=torch.int32)");
  EXPECT_EQ(format_tensor(Tensor(DType::kFloat32, {0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(format_tensor(Tensor(DType::kInt64, {0})), "tensor([], dtype=torch.int64)");
  EXPECT_EQ(format_tensor(Tensor(DType::kFloat32, {})), "tensor(0.)");
}

// Long tensors: torch wraps lines at 80 characters and summarizes more
// than 1000 elements with "...".
TEST(TensorFormat, LongTensorsWrapAndLargeOnesAreSummarized) {
  Tensor a(DType::kFloat32, {30});
  for (std::size_t i = 0; i < 30; ++i) a.set(i, static_cast<double>(i));
  EXPECT_EQ(format_tensor(a),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
  Tensor big(DType::kInt64, {2000});
  for (std::size_t i = 0; i < 2000; ++i) big.set_int(i, static_cast<std::int64_t>(i));
  EXPECT_EQ(format_tensor(big), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  Tensor grid(DType::kInt64, {100, 100});
  for (std::size_t i = 0; i < 10000; ++i) grid.set_int(i, static_cast<std::int64_t>(i));
  EXPECT_EQ(format_tensor(grid),
            "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
            "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
            "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
            "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])");
}

// [3, 2^31, 2^31] float32 wrapped to a 0-byte allocation and was written
// out of bounds.
TEST(Tensor, AShapeWhoseBytesOverflowIsRefused) {
  EXPECT_THROW(Tensor(DType::kFloat32, {3, std::int64_t{1} << 31, std::int64_t{1} << 31}), std::length_error);
  EXPECT_THROW(Tensor(DType::kInt8, {65536, 65536, 65536, 65536}), std::length_error);
  EXPECT_EQ(Tensor::phantom(DType::kFloat32, {1 << 20, 1 << 20}).bytes(), std::size_t{1} << 42);
}

// A buffer handed to a library at an address aligned only as its elements
// are: element 0 sits head bytes past a 64-byte boundary, the head and the
// slack are the allocation's other bytes, and copies share all three.
RC_GTEST_PROP(Tensor, AHeadPlacesElementZeroAndLeavesSlackPastTheEnd, ()) {
  const auto dt = *rc::gen::element(DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64);
  const auto count = *rc::gen::inRange<std::int64_t>(0, 300);
  const auto head = *rc::gen::inRange<std::size_t>(0, 200);
  Tensor t = Tensor::with_head(dt, {count}, head);
  const auto at = reinterpret_cast<std::uintptr_t>(t.data());
  RC_ASSERT(at % 64 == head % 64);
  RC_ASSERT(t.head().size() == head);
  RC_ASSERT(reinterpret_cast<std::uintptr_t>(t.head().data()) + head == at);
  RC_ASSERT(reinterpret_cast<std::uintptr_t>(t.slack().data()) == at + t.bytes());
  RC_ASSERT(t.slack().size() >= 64u);
  RC_ASSERT((head + t.bytes() + t.slack().size()) % 64 == 0u);
  for (std::byte b : t.head()) RC_ASSERT(b == std::byte{0});
  for (std::size_t i = 0; i < t.count(); ++i) RC_ASSERT(t.get(i) == 0.0);
  if (count > 0) {
    t.set(static_cast<std::size_t>(count - 1), 5);
    const Tensor copy = t;
    RC_ASSERT(static_cast<const std::byte*>(copy.data()) == static_cast<const std::byte*>(t.data()));
    RC_ASSERT(copy.get(static_cast<std::size_t>(count - 1)) == 5.0);
    RC_ASSERT(t.view().byte_data() == static_cast<std::byte*>(t.data()));
  }
}

TEST(Tensor, AHeadOverFourKibIsRefused) {
  EXPECT_THROW(Tensor::with_head(DType::kFloat32, {4}, 4097), std::length_error);
  EXPECT_TRUE(Tensor(DType::kFloat32, {4}).head().empty());
  EXPECT_TRUE(Tensor::phantom(DType::kFloat32, {4}).head().empty());
}

// An int64 through a double lost its low bits: 2^60 + 2^36 + 1 into
// float32 rounded twice.
TEST(Tensor, IntegersConvertToFloatsRoundedOnce) {
  const std::int64_t v = (std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1;
  Tensor f(DType::kFloat32, {1});
  f.set_int(0, v);
  EXPECT_EQ(f.as<float>()[0], static_cast<float>(v));
  Tensor b(DType::kBool, {1});
  b.set_int(0, 256);
  EXPECT_EQ(b.get(0), 1.0);
}

// [65536, 65536, 65536, 65536] wrapped to 0 elements and [3, 2^31, 2^31]
// to a count that wrote out of bounds: the product of the dimensions was
// not checked, only each. Any shape: a tensor has exactly the product of
// its dimensions as elements, or is refused (length_error) when its bytes
// pass what memory can address -- never a wrapped count.
RC_GTEST_PROP(TensorShapes, CountIsTheExactProductOrTheShapeIsRefused, ()) {
  const auto dims = *rc::gen::container<std::vector<std::int64_t>>(
      *rc::gen::inRange<std::size_t>(0, 7),
      rc::gen::oneOf(rc::gen::element<std::int64_t>(0, 1, 2, 3, 65536, std::int64_t{1} << 31, std::int64_t{1} << 32,
                                                    (std::int64_t{1} << 31) + 1, std::int64_t{1} << 62, INT64_MAX),
                     rc::gen::inRange<std::int64_t>(0, 100000)));
  const DType dtype = *rc::gen::element(DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kInt64);
  // The exact product, or `beyond` once it passes 2^64 (a zero anywhere
  // makes the tensor empty, whatever the rest).
  __extension__ typedef unsigned __int128 U128;
  U128 exact = 1;
  bool beyond = false;
  for (std::int64_t d : dims) {
    exact *= static_cast<std::uint64_t>(d);
    if (exact >> 64) {
      beyond = true;
      exact = 1;
    }
  }
  for (std::int64_t d : dims) {
    if (d == 0) {
      beyond = false;
      exact = 0;
    }
  }
  const auto bytes = exact * dtype_size(dtype);
  const bool fits = !beyond && bytes <= (SIZE_MAX >> 2);
  try {
    const Tensor t = Tensor::phantom(dtype, dims);
    RC_ASSERT(fits);
    RC_ASSERT(static_cast<U128>(t.count()) == exact);
  } catch (const std::length_error& e) {
    RC_ASSERT(!fits);
    RC_ASSERT(std::string(e.what()).find("has more bytes than memory can address") != std::string::npos);
  }
}

}  // namespace
}  // namespace collie
