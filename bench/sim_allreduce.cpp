// The collie side of bench/sim_vs_smpi.sh: all_reduce of --bytes of float32
// on --ranks simulated ranks, --iters times, with real data, on a platform
// equivalent to the SMPI one (one rank per node, alpha 5 us, 12.5 GB/s).
// Prints wall time, virtual time, events per second, peak memory and the
// trace hash.
//
// --scale: instead, scenarios/scale/all_reduce.yaml's job -- timing only
// (no payloads), the default network with 8 ranks per node -- for
// profiling the simulator at 10^5 ranks without the scenario layers; its
// trace hash equals `collie run scenarios/scale/all_reduce.yaml --world N`'s.
//
// The ranks' buffers are views into one arena (the caching allocator of a
// training program plays this part), backed by huge pages where the kernel
// gives them on request: 1 GiB of data in 4 KiB pages took 262,144 page
// faults, about as much CPU as two all_reduce iterations at 1,024 ranks.
// Each buffer is filled once (no zeroing pass first).
//
// Memory is deferred (Simulator::defer_memory; --memory immediate for the
// engine that runs each copy and reduction as it is issued): the log's
// period is one buffer, so every rank's k-th block falls in one column.
// Columns are --column-bytes (default 1 KiB: 1,024 ranks' column is 1 MiB,
// one L2) and buffers lie --pad-bytes (default the same) further apart than
// their size: with buffers exactly 1 MiB apart the same offset of every
// buffer maps to the same cache sets, and a column's blocks evict each
// other (docs/PERFORMANCE.md).
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "sim/huge_pages.h"
#include "sim/sim_world.h"

namespace {

// `bytes` of zeroed memory, 2 MiB aligned, in huge pages where the kernel
// allows; the deleter unmaps it.
struct Unmap {
  std::size_t bytes;
  void operator()(std::byte* p) const { munmap(p, bytes); }
};
std::unique_ptr<std::byte, Unmap> arena(std::size_t bytes) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t mapped = bytes + kHuge;
  void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("sim_allreduce: mmap");
    std::exit(1);
  }
  auto* base = static_cast<std::byte*>(m);
  const std::size_t lead = (kHuge - reinterpret_cast<std::uintptr_t>(base) % kHuge) % kHuge;
  if (lead) munmap(base, lead);
  if (mapped - lead > bytes) munmap(base + lead + bytes, mapped - lead - bytes);
  collie::sim::HeapHugePages::advise(base + lead, bytes);  // a hint: without it, 4 KiB pages
  return {base + lead, Unmap{bytes}};
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 256, iters = 10;
  std::size_t bytes = 1 << 20;
  std::string algorithm = "auto";
  bool scale = false;
  bool deferred = true;
  std::size_t column_bytes = 1024;
  std::size_t pad_bytes = 1024;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool value = i + 1 < argc;
    if (a == "--scale") scale = true;
    else if (a == "--ranks" && value) ranks = std::atoi(argv[++i]);
    else if (a == "--bytes" && value) bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--iters" && value) iters = std::atoi(argv[++i]);
    else if (a == "--algorithm" && value) algorithm = argv[++i];
    else if (a == "--memory" && value && (std::string(argv[i + 1]) == "deferred" || std::string(argv[i + 1]) == "immediate"))
      deferred = std::string(argv[++i]) == "deferred";
    else if (a == "--column-bytes" && value) column_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--pad-bytes" && value) pad_bytes = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: sim_allreduce [--ranks N] [--bytes B] [--iters K] [--algorithm NAME] [--scale]\n"
                           "                     [--memory deferred|immediate] [--column-bytes B]\n");
      return 2;
    }
  }
  collie::sim::SimOptions o;
  o.seed = 1;
  if (!scale) {
    o.network.ranks_per_node = 1;
    o.network.inter = collie::sim::LinkModel{5.0, 12.5};
    o.network.jitter_fraction = 0.0;
  }
  if (auto a = collie::parse_algorithm(algorithm)) o.force_algorithm = *a;
  // Deferred memory, column-blocked: a period of one buffer, so that the
  // same place in every rank's buffer falls in one column.
  const std::size_t buffer_bytes = bytes / sizeof(float) * sizeof(float) + pad_bytes;
  deferred = deferred && !scale && column_bytes >= 64 && column_bytes % 64 == 0 && buffer_bytes >= column_bytes &&
             buffer_bytes % column_bytes == 0;
  if (deferred) o.deferred_memory = collie::sim::DeferredMemoryOptions{column_bytes, buffer_bytes / column_bytes};
  const auto t0 = std::chrono::steady_clock::now();
  collie::sim::SimWorld world(ranks, o);
  world.simulator().set_timing_only(scale);
  const std::size_t count = bytes / sizeof(float);
  const std::size_t stride = count * sizeof(float) + pad_bytes;
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(count)};
  std::vector<collie::TensorView> data;
  std::vector<collie::Tensor> phantoms;
  std::unique_ptr<std::byte, Unmap> memory{nullptr, Unmap{0}};
  data.reserve(static_cast<std::size_t>(ranks));
  if (scale) {
    phantoms.reserve(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) data.push_back(phantoms.emplace_back(collie::Tensor::phantom(collie::DType::kFloat32, shape)));
  } else {
    memory = arena(std::max<std::size_t>(1, stride * static_cast<std::size_t>(ranks)));
    for (int r = 0; r < ranks; ++r) {
      auto* p = reinterpret_cast<float*>(memory.get() + stride * static_cast<std::size_t>(r));
      data.push_back(collie::TensorView{p, collie::DType::kFloat32, count,
                                        deferred ? collie::MemorySpace::kDevice : collie::MemorySpace::kHost});
      // (r + i) & 7: a period of eight floats, written out in 32-byte rows
      // (stores only: copying rank r - 8's buffer read as much again).
      float row[8];
      for (std::size_t k = 0; k < 8; ++k) row[k] = static_cast<float>((static_cast<std::size_t>(r) + k) & 7);
      std::size_t i = 0;
      for (; i + 8 <= count; i += 8) std::memcpy(p + i, row, sizeof row);
      for (; i < count; ++i) p[i] = row[i % 8];
    }
  }
  const auto run_t0 = std::chrono::steady_clock::now();
  auto res = world.run([&](collie::Communicator& c) -> collie::Task<void> {
    // The Work is named: awaited as a temporary, the call's other
    // temporaries (its default Group and options, the TensorView) would
    // stay in every rank's frame while it waits.
    for (int it = 0; it < iters; ++it) {
      collie::Work w = c.all_reduce(data[static_cast<std::size_t>(c.rank())]);
      co_await w;
    }
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double run_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  if (!res.ok()) {
    std::fprintf(stderr, "%s\n", res.describe().c_str());
    return 1;
  }
  std::printf("collie: ranks %d bytes %zu iters %d simulated_s %.6f wall_s %.3f run_s %.3f events %llu events_per_s %.0f "
              "peak_rss_mb %.1f check %.1f trace %016llx\n",
              ranks, bytes, iters, static_cast<double>(res.end_time) * 1e-9, wall, run_wall,
              static_cast<unsigned long long>(res.events), static_cast<double>(res.events) / wall,
              static_cast<double>(ru.ru_maxrss) / 1024.0, scale ? 0.0 : static_cast<double>(static_cast<const float*>(data[0].data)[1]),
              static_cast<unsigned long long>(res.trace_hash));
  if (const auto* d = world.simulator().deferred_memory())
    std::printf("memory: deferred, %zu B columns; %llu operations logged, %llu run at once, %llu flushes, %llu pieces, %.3f s flushing\n",
                column_bytes, static_cast<unsigned long long>(d->counts().logged),
                static_cast<unsigned long long>(d->counts().immediate),
                static_cast<unsigned long long>(d->counts().flushes), static_cast<unsigned long long>(d->counts().pieces), d->counts().flush_s);
  return 0;
}
