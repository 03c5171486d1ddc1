// A rank program for failure tests: a seeded random sequence of world
// collectives and ring exchanges (all ranks draw the same sequence), during
// which one rank may kill itself (SIGKILL) at a chosen op and phase:
//   before  -- before issuing the op (its peers wait for a rank that is gone)
//   during  -- after issuing it, once the event loop has run for a random
//              few microseconds (frames of the op are partly out)
//   after   -- right after the op completed (its peers are in the next op)
// The sequence ends with an all_reduce, so every survivor has an op that
// needs the dead rank. Survivors must fail with an error naming it (directly,
// or through a peer that left after losing it); they print it as
// "rank R failed: ..." and exit 3. Without --kill-rank every rank prints
// "rank R done" and exits 0.
//
//   collie launch -n 4 -- chaos_rank --seed 7 --ops 40 --kill-rank 2 --kill-op 13 --kill-phase during
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/tcp/process_group.h"
#include "core/error.h"

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  int ops = 40, kill_rank = -1, kill_op = -1;
  std::string phase = "during";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--ops") ops = std::atoi(argv[i + 1]);
    else if (a == "--kill-rank") kill_rank = std::atoi(argv[i + 1]);
    else if (a == "--kill-op") kill_op = std::atoi(argv[i + 1]);
    else if (a == "--kill-phase") phase = argv[i + 1];
  }
  int rank = -1;
  try {
    auto pg = collie::tcp::ProcessGroup::init();
    rank = pg->rank();
    const int n = pg->world_size();
    std::mt19937_64 rng(seed);  // the same draws on every rank
    std::mt19937_64 local(seed * 1000003 + static_cast<std::uint64_t>(rank));
    for (int i = 0; i < ops; ++i) {
      const int kind = static_cast<int>(rng() % 6);
      const std::int64_t count = static_cast<std::int64_t>(1 + rng() % (rng() % 4 == 0 ? 300000 : 64));
      const int root = static_cast<int>(rng() % static_cast<std::uint64_t>(n));
      collie::Tensor t(collie::DType::kFloat32, {count});
      collie::Tensor in(collie::DType::kFloat32, {count});
      std::vector<collie::Tensor> list;
      std::vector<collie::TensorView> views;
      for (int r = 0; r < n; ++r) list.emplace_back(collie::DType::kFloat32, std::vector<std::int64_t>{count});
      for (auto& x : list) views.push_back(x);
      const bool dies_here = rank == kill_rank && i == kill_op;
      if (dies_here && phase == "before") ::raise(SIGKILL);
      collie::Communicator& c = pg->comm();
      collie::Work w;
      switch (kind) {
        case 0: w = c.all_reduce(t); break;
        case 1: w = c.broadcast(t, root); break;
        case 2: w = c.reduce(t, root); break;
        case 3: w = c.all_gather(views, in); break;
        case 4: w = c.gather(in, root, rank == root ? views : std::vector<collie::TensorView>{}); break;
        default: {
          std::vector<collie::Work> ws;
          ws.push_back(c.irecv(in, (rank + n - 1) % n, i));
          ws.push_back(c.isend(t, (rank + 1) % n, i));
          for (auto& x : ws) x.wait();
          w = c.barrier();
        }
      }
      if (dies_here && phase == "during") {
        const auto spin = static_cast<collie::Nanos>(local() % 300'000);  // up to 300 us of progress
        c.transport().run_until([] { return false; }, c.transport().now() + spin);
        ::raise(SIGKILL);
      }
      w.wait();
      if (dies_here) ::raise(SIGKILL);  // "after"
    }
    // Every rank needs every other for this last one: no survivor of a
    // killed rank can finish.
    collie::Tensor last(collie::DType::kFloat32, {1});
    pg->all_reduce(last);
    std::printf("rank %d done\n", rank);
    return 0;
  } catch (const std::exception& e) {
    std::printf("rank %d failed: %s\n", rank, e.what());
    std::fflush(stdout);
    return 3;
  }
}
