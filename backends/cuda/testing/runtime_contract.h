// The device runtime contract (device_runtime.h) as tests any runtime must
// pass: included by host_runtime_test.cpp (HostRuntime, several seeds) and
// cuda_runtime_test.cpp (CudaRuntime, skipped with the driver's reason where
// no device is usable), each instantiating RuntimeContract with factories.
// Correct use only: these must pass on a runtime that runs work at once, in
// any order the contract allows, or late.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device_runtime.h"

namespace collie::cuda::contract {

struct RuntimeFactory {
  std::string label;  // the test name's suffix
  // A runtime, or the reason there is none here (the test then skips).
  std::function<std::unique_ptr<DeviceRuntime>(std::string* why_not)> make;
};
inline std::ostream& operator<<(std::ostream& os, const RuntimeFactory& f) { return os << f.label; }

class RuntimeContract : public testing::TestWithParam<RuntimeFactory> {
 protected:
  void SetUp() override {
    std::string why;
    rt_ = GetParam().make(&why);
    if (!rt_) GTEST_SKIP() << why;
  }
  DeviceRuntime& rt() { return *rt_; }

  template <typename T>
  std::vector<T> download(const void* p, std::size_t n, Stream s) {
    std::vector<T> out(n);
    rt().copy(out.data(), p, n * sizeof(T), s);
    return out;
  }

 private:
  std::unique_ptr<DeviceRuntime> rt_;
};

TEST_P(RuntimeContract, EveryDtypeAndOpThroughDeviceMemoryGivesTheHostReferencesBits) {
  const Stream s = rt().create_stream(0);
  std::mt19937_64 rng(21);
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dt = static_cast<DType>(d);
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (reduce_op_unsupported(op, dt)) continue;
      for (std::size_t count : {std::size_t{1}, std::size_t{17}, std::size_t{4099}}) {
        std::vector<std::byte> a(count * dtype_size(dt)), b(a.size());
        for (auto& x : a) x = static_cast<std::byte>(rng());
        for (auto& x : b) x = static_cast<std::byte>(rng());
        if (dt == DType::kBool)
          for (std::size_t i = 0; i < a.size(); ++i) a[i] &= std::byte{1}, b[i] &= std::byte{1};
        std::vector<std::byte> want = a;
        reduce_host(want.data(), b.data(), count, dt, op);
        if (op == ReduceOp::kAvg) finish_average_host(want.data(), count, dt, 5);
        void* da = rt().allocate(a.size(), s);
        void* db = rt().allocate(b.size(), s);
        rt().copy(da, a.data(), a.size(), s);
        rt().copy(db, b.data(), b.size(), s);
        rt().reduce(da, db, count, dt, op, s);
        if (op == ReduceOp::kAvg) rt().finish_average(da, count, dt, 5, s);
        const auto got = download<std::byte>(da, a.size(), s);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
            << dtype_name(dt) << " " << reduce_op_name(op) << " x " << count;
        rt().free(da, s);
        rt().free(db, s);
      }
    }
  }
}

// A pipeline over three streams ordered only by events: s0 writes, s1 waits
// and copies, s2 waits and reduces into its own buffer; s0 reuses its
// buffer only after s1's copy, s1 only after s2's reduction.
TEST_P(RuntimeContract, EventsOrderWorkAcrossStreams) {
  const Stream s0 = rt().create_stream(0), s1 = rt().create_stream(0), s2 = rt().create_stream(0);
  const Event written = rt().create_event(0), copied = rt().create_event(0), reduced = rt().create_event(0);
  constexpr std::size_t kN = 1000;
  void* a = rt().allocate(kN * 4, s0);
  void* b = rt().allocate(kN * 4, s1);
  void* c = rt().allocate(kN * 4, s2);
  const std::vector<std::int32_t> zero(kN, 0);
  rt().copy(c, zero.data(), kN * 4, s2);
  std::int64_t total = 0;
  for (int round = 1; round <= 30; ++round) {
    const std::vector<std::int32_t> v(kN, round);
    total += round;
    rt().copy(a, v.data(), kN * 4, s0);
    rt().record(written, s0);
    rt().wait(s1, written);
    rt().copy(b, a, kN * 4, s1);
    rt().record(copied, s1);
    rt().wait(s0, copied);  // before s0 writes a again
    rt().wait(s2, copied);
    rt().reduce(c, b, kN, DType::kInt32, ReduceOp::kSum, s2);
    rt().record(reduced, s2);
    rt().wait(s1, reduced);  // before s1 writes b again
  }
  rt().synchronize(reduced);
  EXPECT_TRUE(rt().query(reduced));
  EXPECT_EQ(download<std::int32_t>(c, kN, s2), std::vector<std::int32_t>(kN, static_cast<std::int32_t>(total)));
  rt().free(a, s0);
  rt().free(b, s1);
  rt().free(c, s2);
}

TEST_P(RuntimeContract, EventsNeverRecordedAreCompleteAndRecordedOnesCompleteOnce) {
  const Stream s = rt().create_stream(0);
  const Event e = rt().create_event(0);
  EXPECT_TRUE(rt().query(e));
  rt().synchronize(e);
  void* a = rt().allocate(4096, s);
  const std::vector<float> v(1024, 2.0f);
  rt().copy(a, v.data(), 4096, s);
  rt().record(e, s);
  rt().synchronize(e);
  EXPECT_TRUE(rt().query(e));
  EXPECT_EQ(download<float>(a, 1024, s), v);
  rt().free(a, s);
  rt().destroy_event(e);
}

TEST_P(RuntimeContract, StreamOrderedMemoryIsReusedSafely) {
  const Stream s = rt().create_stream(0);
  std::vector<std::int64_t> sums;
  void* acc = rt().allocate(8 * 64, s);
  const std::vector<std::int64_t> zero(64, 0);
  rt().copy(acc, zero.data(), 8 * 64, s);
  for (int i = 1; i <= 200; ++i) {
    void* tmp = rt().allocate(8 * 64, s);  // freed below, in stream order, while the reduction may not have run
    const std::vector<std::int64_t> v(64, i);
    rt().copy(tmp, v.data(), 8 * 64, s);
    rt().reduce(acc, tmp, 64, DType::kInt64, ReduceOp::kSum, s);
    rt().free(tmp, s);
  }
  EXPECT_EQ(download<std::int64_t>(acc, 64, s), std::vector<std::int64_t>(64, 200 * 201 / 2));
  rt().free(acc, s);
}

TEST_P(RuntimeContract, DeviceOfTellsDeviceFromHostMemory) {
  const Stream s = rt().create_stream(0);
  void* a = rt().allocate(64, s);
  EXPECT_EQ(rt().device_of(a), 0);
  int host = 0;
  EXPECT_EQ(rt().device_of(&host), -1);
  std::vector<char> heap(64);
  EXPECT_EQ(rt().device_of(heap.data()), -1);
  EXPECT_EQ(rt().stream_device(s), 0);
  rt().free(a, s);
}

TEST_P(RuntimeContract, KernelsReachAPeersMemoryOnceAccessIsEnabled) {
  if (rt().device_count() < 2) GTEST_SKIP() << "one device: no peer";
  if (!rt().can_access_peer(0, 1)) GTEST_SKIP() << "devices 0 and 1 cannot access each other";
  rt().enable_peer_access(0, 1);
  rt().enable_peer_access(0, 1);  // harmless twice
  const Stream s0 = rt().create_stream(0), s1 = rt().create_stream(1);
  const Event on1 = rt().create_event(1);
  void* a = rt().allocate(400, s0);
  void* b = rt().allocate(400, s1);
  EXPECT_EQ(rt().device_of(b), 1);
  const std::vector<float> ones(100, 1.0f), twos(100, 2.0f);
  rt().copy(a, ones.data(), 400, s0);
  rt().copy(b, twos.data(), 400, s1);
  rt().record(on1, s1);
  rt().wait(s0, on1);
  rt().reduce(a, b, 100, DType::kFloat32, ReduceOp::kSum, s0);
  EXPECT_EQ(download<float>(a, 100, s0), std::vector<float>(100, 3.0f));
  rt().free(a, s0);
  rt().free(b, s1);
}

}  // namespace collie::cuda::contract
