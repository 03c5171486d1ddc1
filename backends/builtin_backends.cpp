// The backends compiled into collie: the one place that knows them all. Each
// backend knows only itself (its folder, backends/backend_info.h and what it
// is built on) and describes itself in a BackendInfo; this list gives them to
// the registry, in the order `collie backends` shows them ("sim" first).
// Adding a backend is one line here (docs/architecture.md).
#include "backends/registry.h"

#include "backends/cuda/cuda_backend.h"
#include "backends/mpi/mpi_backend.h"
#include "backends/nccl/nccl_backend.h"
#include "backends/sim/sim_backend.h"
#include "backends/tcp/tcp_backend.h"
#include "backends/torch/torch_backend.h"

namespace collie {

BackendRegistry& BackendRegistry::builtin() {
  static BackendRegistry* r = [] {
    auto* reg = new BackendRegistry();
    reg->add(sim::make_sim_backend());
    reg->add(tcp::make_tcp_backend());
    reg->add(torch::make_torch_backends());
    reg->add(mpi::make_mpi_backend());
    reg->add(nccl::make_nccl_backend());
    for (BackendInfo& b : cuda::make_cuda_backends()) reg->add(std::move(b));
    return reg;
  }();
  return *r;
}

}  // namespace collie
