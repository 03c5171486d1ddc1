// The torch.distributed tutorial's first three programs (seed 000), written
// against collie and run on the simulator: blocking send/recv, isend/irecv
// with wait, and all_reduce over a group. Each prints what the tutorial
// prints, e.g. "Rank  1  has data  tensor(1.)".
//
//   seed_tutorial [--seed N]
//
// On the simulator a rank blocks with co_await; with one rank per process
// the same calls block with .wait().
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/communicator.h"
#include "sim/sim_world.h"

using collie::Communicator;
using collie::DType;
using collie::ReduceOp;
using collie::Task;
using collie::Tensor;

namespace {

std::string has_data(int rank, const Tensor& t) {
  // Python's print('Rank ', rank, ' has data ', tensor[0]) separates with spaces.
  return "Rank  " + std::to_string(rank) + "  has data  " + collie::format_element(t, 0);
}

// Blocking point-to-point communication.
Task<void> run_blocking(Communicator& dist) {
  Tensor tensor = Tensor::zeros(DType::kFloat32, {1});
  if (dist.rank() == 0) {
    tensor.set(0, tensor.get(0) + 1);
    co_await dist.send(tensor, /*dst=*/1);  // Send the tensor to process 1
  } else {
    co_await dist.recv(tensor, /*src=*/0);  // Receive tensor from process 0
  }
  std::cout << has_data(dist.rank(), tensor) << "\n";
}

// Non-blocking point-to-point communication.
Task<void> run_non_blocking(Communicator& dist) {
  Tensor tensor = Tensor::zeros(DType::kFloat32, {1});
  collie::Work req;
  if (dist.rank() == 0) {
    tensor.set(0, tensor.get(0) + 1);
    req = dist.isend(tensor, /*dst=*/1);
    std::cout << "Rank 0 started sending\n";
  } else {
    req = dist.irecv(tensor, /*src=*/0);
    std::cout << "Rank 1 started receiving\n";
    std::cout << "Rank 1 has data  " << collie::format_element(tensor, 0) << "\n";  // not yet received
  }
  co_await req;
  std::cout << has_data(dist.rank(), tensor) << "\n";
}

// All-reduce over a group.
Task<void> run_all_reduce(Communicator& dist) {
  collie::Group group = dist.new_group({0, 1});
  Tensor tensor = Tensor::zeros(DType::kFloat32, {1});
  tensor.set(0, 1);
  co_await dist.all_reduce(tensor, ReduceOp::kSum, group);
  std::cout << has_data(dist.rank(), tensor) << "\n";
}

int run(const char* title, const collie::sim::RankProgram& program, std::uint64_t seed) {
  collie::sim::SimOptions options;
  options.seed = seed;
  collie::sim::SimWorld world(2, options);
  std::cout << "== " << title << "\n";
  auto result = world.run(program);
  std::cout << "-- " << (result.ok() ? "ok" : "FAILED") << ", virtual time " << result.end_time << " ns, trace "
            << std::hex << result.trace_hash << std::dec << "\n";
  if (!result.ok()) std::cout << result.describe() << "\n";
  return result.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 0);
    } else {
      std::cerr << "usage: seed_tutorial [--seed N]\n";
      return 2;
    }
  }
  std::cout << "seed " << seed << " (replay: seed_tutorial --seed " << seed << ")\n";
  int rc = 0;
  rc |= run("blocking send/recv", run_blocking, seed);
  rc |= run("isend/irecv + wait", run_non_blocking, seed);
  rc |= run("all_reduce over group [0, 1]", run_all_reduce, seed);
  return rc;
}
