// ProcessGroup: one rank of a real job, one process -- the API the
// tutorials' programs are written against, with blocking calls.
//
//   auto pg = collie::tcp::ProcessGroup::init();   // env://, like torch's default
//   collie::Tensor t = collie::Tensor::zeros(collie::DType::kFloat32, {1});
//   if (pg->rank() == 0) { t.set(0, 1); pg->send(t, 1); } else { pg->recv(t, 0); }
//
// Run it under `collie launch -n 2 -- ./prog`, under srun or mpirun, or by
// hand in two terminals with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE
// set. Blocking calls run the rank's event loop until the op completes and
// rethrow its error; the i*-forms and comm() give the asynchronous Work API.
// Rendezvous waits COLLIE_INIT_TIMEOUT_S seconds (default 30) for every
// rank. Every op times out after COLLIE_TIMEOUT_S seconds (default 300) with an
// error naming what it still waits for; a peer process that dies fails every
// op waiting on it at once, naming the lost rank.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backends/tcp/rendezvous.h"
#include "backends/tcp/tcp_transport.h"
#include "core/communicator.h"
#include "core/task.h"

namespace collie::tcp {

class ProcessGroup {
 public:
  // Rendezvous (see rendezvous.h), connect to every peer, build the
  // communicator. Throws collie::Error naming what went wrong.
  // `comm`: the communicator's options; null: the defaults, with the op
  // timeout from COLLIE_TIMEOUT_S.
  static std::unique_ptr<ProcessGroup> init(const RendezvousOptions& options = {},
                                            const CommunicatorOptions* comm = nullptr);
  ~ProcessGroup();

  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->world_size(); }
  Communicator& comm() { return *comm_; }

  Group new_group(std::vector<int> ranks) { return comm_->new_group(std::move(ranks)); }

  void send(TensorView t, int dst, int tag = 0, const Group& g = {}) { comm_->send(t, dst, tag, g).wait(); }
  // Returns the sender's rank (useful with kAnySource).
  int recv(TensorView t, int src = kAnySource, int tag = 0, const Group& g = {}) {
    Work w = comm_->recv(t, src, tag, g);
    w.wait();
    return w.source_rank();
  }
  Work isend(TensorView t, int dst, int tag = 0, const Group& g = {}) { return comm_->isend(t, dst, tag, g); }
  Work irecv(TensorView t, int src = kAnySource, int tag = 0, const Group& g = {}) {
    return comm_->irecv(t, src, tag, g);
  }
  void broadcast(TensorView t, int src, const Group& g = {}) { comm_->broadcast(t, src, g).wait(); }
  void reduce(TensorView t, int dst, ReduceOp op = ReduceOp::kSum, const Group& g = {}) {
    comm_->reduce(t, dst, op, g).wait();
  }
  void all_reduce(TensorView t, ReduceOp op = ReduceOp::kSum, const Group& g = {}) {
    comm_->all_reduce(t, op, g).wait();
  }
  void scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g = {}) {
    comm_->scatter(out, src, list, g).wait();
  }
  void gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g = {}) {
    comm_->gather(in, dst, list, g).wait();
  }
  void all_gather(std::span<const TensorView> list, TensorView in, const Group& g = {}) {
    comm_->all_gather(list, in, g).wait();
  }
  void barrier(const Group& g = {}) { comm_->barrier(g).wait(); }

  // Runs a coroutine rank program -- the asynchronous API, overlapping ops
  // with co_await -- on this rank to completion; rethrows what it throws.
  // The same program runs on the simulator under LocalWorld::run.
  void run(const std::function<Task<void>(Communicator&)>& program);

 private:
  ProcessGroup() = default;
  std::unique_ptr<TcpEventLoop> loop_;
  std::unique_ptr<TcpTransport> transport_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace collie::tcp
