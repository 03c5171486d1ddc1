// Gloo's all_reduce (Debian libgloo-dev) timed the way `collie bench` times
// it: float32 sum, the same sizes, 5 warmup iterations, a barrier, then the
// same number of timed iterations; the slowest rank's mean. Usage:
//   gloo_allreduce ring|halving_doubling MIN_BYTES MAX_BYTES
// with RANK, WORLD_SIZE and MASTER_PORT set (collie launch sets them); the
// ranks meet through a FileStore under /tmp. Prints, on rank 0, one line per
// size: bytes time_us busbw_GBps.
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

int iters_for(unsigned long long bytes) {
  return static_cast<int>(std::clamp<unsigned long long>((1ull << 30) / std::max(bytes, 1ull), 5, 1000));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string algo = argc > 1 ? argv[1] : "ring";
  const unsigned long long min_b = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 8;
  const unsigned long long max_b = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (64ull << 20);
  const int rank = std::atoi(std::getenv("RANK"));
  const int n = std::atoi(std::getenv("WORLD_SIZE"));
  const std::string dir = std::string("/tmp/gloo-bench-") + std::getenv("MASTER_PORT");
  std::filesystem::create_directories(dir);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  gloo::rendezvous::PrefixStore prefix(algo, store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->connectFullMesh(prefix, dev);
  std::vector<float> buf(max_b / 4, 1.0f);
  std::vector<float*> ptrs = {buf.data()};
  gloo::BarrierAllToOne barrier(ctx);
  for (unsigned long long b = min_b; b <= max_b; b *= 2) {
    const int count = static_cast<int>(b / 4);
    std::unique_ptr<gloo::Algorithm> op;
    if (algo == "ring") op = std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, count);
    else op = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
    const int iters = iters_for(b);
    for (int i = 0; i < 5; ++i) op->run();
    barrier.run();
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) op->run();
    double mean = (now_s() - t0) / iters;
    // The slowest rank's mean: a max all_reduce of one double.
    std::vector<double*> tp = {&mean};
    gloo::AllreduceRing<double> mx(ctx, tp, 1, gloo::ReductionFunction<double>::max);
    mx.run();
    if (rank == 0) std::printf("%llu %.2f %.3f\n", b, mean * 1e6, static_cast<double>(b) / mean / 1e9 * 2.0 * (n - 1) / n);
  }
  barrier.run();
  if (rank == 0) std::filesystem::remove_all(dir);
  return 0;
}
