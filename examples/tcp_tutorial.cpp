// The tutorial's programs (seed 000) as one real process per rank over TCP,
// with blocking calls -- the torch.distributed code, line for line:
//
//   collie launch -n 2 -- build/examples/tcp_tutorial
//   # or by hand, in two terminals:
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 build/examples/tcp_tutorial
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 build/examples/tcp_tutorial
//
// `--die R` makes rank R kill itself (SIGKILL) in the middle of an
// all_reduce, to show what the survivors see.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "backends/tcp/process_group.h"

using collie::DType;
using collie::Tensor;

int main(int argc, char** argv) {
  int die = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--die") die = std::atoi(argv[i + 1]);
  try {
    auto dist = collie::tcp::ProcessGroup::init();  // env://
    const int rank = dist->rank(), size = dist->world_size();

    // Blocking point-to-point communication.
    Tensor tensor = Tensor::zeros(DType::kFloat32, {1});
    if (rank == 0) {
      tensor.set(0, tensor.get(0) + 1);
      for (int dst = 1; dst < size; ++dst) dist->send(tensor, dst);
    } else {
      dist->recv(tensor, 0);
    }
    std::cout << "Rank  " << rank << "  has data  " << collie::format_element(tensor, 0) << std::endl;

    // All-reduce over the world (the tutorial uses new_group of everyone).
    collie::Group group = dist->new_group([&] {
      std::vector<int> all;
      for (int r = 0; r < size; ++r) all.push_back(r);
      return all;
    }());
    Tensor ones = Tensor::zeros(DType::kFloat32, {1 << 18});
    for (std::size_t i = 0; i < ones.count(); ++i) ones.set(i, 1);
    if (rank == die) {
      collie::Work w = dist->comm().all_reduce(ones, collie::ReduceOp::kSum, group);  // start it, then die
      kill(getpid(), SIGKILL);
    }
    dist->all_reduce(ones, collie::ReduceOp::kSum, group);
    std::cout << "Rank  " << rank << "  has data  " << collie::format_element(ones, 0) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank error: " << e.what() << std::endl;
    return 1;
  }
}
