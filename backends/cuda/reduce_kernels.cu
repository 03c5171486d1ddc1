#include "backends/cuda/kernel_launch.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/elementwise.h"

namespace collie::cuda {

namespace {

// One element's combination, by dtype (T is the storage type): integers
// here, the rest below.
template <typename T>
struct Combine {
  __device__ static T apply(T a, T b, Op op) { return int_combine<T, std::make_unsigned_t<T>>(a, b, op); }
};
template <>
struct Combine<float> {
  __device__ static float apply(float a, float b, Op op) { return float_combine(a, b, op); }
};
template <>
struct Combine<double> {
  __device__ static double apply(double a, double b, Op op) { return float_combine(a, b, op); }
};
struct HalfBits {
  std::uint16_t v;
};
struct BF16Bits {
  std::uint16_t v;
};
struct BoolBits {
  std::uint8_t v;
};
template <>
struct Combine<HalfBits> {
  __device__ static HalfBits apply(HalfBits a, HalfBits b, Op op) { return {half_combine(a.v, b.v, op)}; }
};
template <>
struct Combine<BF16Bits> {
  __device__ static BF16Bits apply(BF16Bits a, BF16Bits b, Op op) { return {bf16_combine(a.v, b.v, op)}; }
};
template <>
struct Combine<BoolBits> {
  __device__ static BoolBits apply(BoolBits a, BoolBits b, Op op) { return {bool_combine(a.v, b.v, op)}; }
};

constexpr int kThreads = 256;

// Elements [0, head) and [head + 16-byte vectors .., count) one by one; the
// vectors in between 16 bytes at a time. The op is a kernel argument (a
// uniform branch per element, free next to the memory traffic).
template <typename T>
__global__ void reduce_kernel(T* __restrict__ dst, const T* __restrict__ src, std::size_t count, std::size_t head,
                              std::size_t vectors, Op op) {
  constexpr int kPer = 16 / sizeof(T);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto* dv = reinterpret_cast<uint4*>(dst + head);
  const auto* sv = reinterpret_cast<const uint4*>(src + head);
  for (std::size_t v = first; v < vectors; v += stride) {
    uint4 a = dv[v];
    const uint4 b = sv[v];
    T* ae = reinterpret_cast<T*>(&a);
    const T* be = reinterpret_cast<const T*>(&b);
#pragma unroll
    for (int k = 0; k < kPer; ++k) ae[k] = Combine<T>::apply(ae[k], be[k], op);
    dv[v] = a;
  }
  const std::size_t tail = head + vectors * kPer;
  for (std::size_t i = first; i < head + (count - tail); i += stride) {
    const std::size_t at = i < head ? i : tail + (i - head);
    dst[at] = Combine<T>::apply(dst[at], src[at], op);
  }
}

template <typename T>
cudaError_t launch_typed(void* dst, const void* src, std::size_t count, Op op, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  auto* d = static_cast<T*>(dst);
  const auto* s = static_cast<const T*>(src);
  constexpr std::size_t kPer = 16 / sizeof(T);
  const auto da = reinterpret_cast<std::uintptr_t>(d), sa = reinterpret_cast<std::uintptr_t>(s);
  std::size_t head = count, vectors = 0;
  if (da % 16 == sa % 16 && da % sizeof(T) == 0) {
    head = std::min<std::size_t>(count, ((16 - da % 16) % 16) / sizeof(T));
    vectors = (count - head) / kPer;
  }
  const std::size_t work = vectors + (count - vectors * kPer);
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::size_t blocks_needed = (work + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>(blocks_needed, static_cast<std::size_t>(sms > 0 ? sms * 8 : 1024)));
  reduce_kernel<T><<<blocks, kThreads, 0, stream>>>(d, s, count, head, vectors, op);
  return cudaGetLastError();
}

template <typename T, typename F>
__global__ void map_kernel(T* dst, std::size_t count, F f) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = f(dst[i]);
}

struct DivideHalf {
  int n;
  __device__ std::uint16_t operator()(std::uint16_t v) const { return half_average(v, n); }
};
struct DivideBF16 {
  int n;
  __device__ std::uint16_t operator()(std::uint16_t v) const { return bf16_average(v, n); }
};
struct DivideFloat {
  int n;
  __device__ float operator()(float v) const { return v / static_cast<float>(n); }
};
struct DivideDouble {
  int n;
  __device__ double operator()(double v) const { return v / static_cast<double>(n); }
};

template <typename T, typename F>
cudaError_t launch_map(void* dst, std::size_t count, F f, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((count + kThreads - 1) / kThreads, 4096));
  map_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst), count, f);
  return cudaGetLastError();
}

}  // namespace

// Codes: collie::DType's values (float16, bfloat16, float32, float64, int8,
// uint8, int32, int64, bool).
cudaError_t launch_reduce_code(void* dst, const void* src, std::size_t count, int dtype, int op,
                               cudaStream_t stream) {
  const Op o = static_cast<Op>(op);
  switch (dtype) {
    case 0: return launch_typed<HalfBits>(dst, src, count, o, stream);
    case 1: return launch_typed<BF16Bits>(dst, src, count, o, stream);
    case 2: return launch_typed<float>(dst, src, count, o, stream);
    case 3: return launch_typed<double>(dst, src, count, o, stream);
    case 4: return launch_typed<std::int8_t>(dst, src, count, o, stream);
    case 5: return launch_typed<std::uint8_t>(dst, src, count, o, stream);
    case 6: return launch_typed<std::int32_t>(dst, src, count, o, stream);
    case 7: return launch_typed<std::int64_t>(dst, src, count, o, stream);
    case 8: return launch_typed<BoolBits>(dst, src, count, o, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_finish_average_code(void* dst, std::size_t count, int dtype, int divisor, cudaStream_t stream) {
  switch (dtype) {
    case 0: return launch_map<std::uint16_t>(dst, count, DivideHalf{divisor}, stream);
    case 1: return launch_map<std::uint16_t>(dst, count, DivideBF16{divisor}, stream);
    case 2: return launch_map<float>(dst, count, DivideFloat{divisor}, stream);
    case 3: return launch_map<double>(dst, count, DivideDouble{divisor}, stream);
    default: return cudaSuccess;
  }
}

}  // namespace collie::cuda
