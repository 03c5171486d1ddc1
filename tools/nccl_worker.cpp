// collie-nccl-worker: one rank of a process job of the nccl backend, started
// by collie with torch's env:// variables (RANK, WORLD_SIZE, LOCAL_RANK) and
// the controller's (COLLIE_CONTROLLER, COLLIE_JOB_TOKEN): runs the
// controller's ops with NCCL (backends/nccl/nccl_dist.h) on CUDA device
// LOCAL_RANK % devices. `--probe` says whether NCCL and a device are usable
// here ("ok: ..." or why not) and exits.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "backends/nccl/nccl_dist.h"
#include "backends/remote/worker.h"
#include "tools/bench.h"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// The usable devices, or -1 with the driver's words in `why`.
int devices(std::string* why) {
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    *why = std::string("no CUDA device: ") + cudaGetErrorString(e);
    return -1;
  }
  if (n == 0) {
    *why = "no CUDA device: the driver sees none";
    return -1;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (argc > 1 && std::strcmp(argv[1], "--probe") == 0) {
    const int n = devices(&why);
    if (n < 0) {
      std::cout << why << "\n";
      return 1;
    }
    try {
      std::cout << "ok: " << collie::nccl::NcclLibrary::load().version() << ", " << n << " CUDA device(s)\n";
    } catch (const std::exception& e) {
      std::cout << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  const int rank = env_int("RANK", -1), world = env_int("WORLD_SIZE", -1), local = env_int("LOCAL_RANK", 0);
  if (rank < 0 || world <= 0) {
    std::cerr << "collie-nccl-worker: RANK and WORLD_SIZE are not set (a worker is started by collie, not by hand)\n";
    return 2;
  }
  const int n = devices(&why);
  if (n < 0) {
    std::cerr << "collie-nccl-worker (rank " << rank << "): " << why << "\n";
    return 1;
  }
  try {
    collie::nccl::NcclDist dist(rank, world, local % n);
    collie::remote::WorkerHooks hooks;
    hooks.bootstrap = [&dist] { return dist.make_unique_id(); };
    hooks.joined = [&dist](const std::string& id) { dist.init(id); };
    hooks.begin_run = [&dist] { dist.free_groups(); };
    hooks.poll = [&dist](const std::function<bool()>& done) { return dist.library_executor().poll(done); };
    hooks.bench = [](collie::Dist& d, const nlohmann::json& options) {
      return collie::tools::bench_in_this_rank(d, options);
    };
    hooks.no_strided_views =
        "collie's NCCL adapter hands NCCL contiguous device buffers only (NCCL takes a pointer and a count)";
    return collie::remote::serve_ops(dist, dist.library_version(), hooks);
  } catch (const std::exception& e) {
    std::cerr << "collie-nccl-worker (rank " << rank << "): " << e.what() << "\n";
    return 1;
  }
}
