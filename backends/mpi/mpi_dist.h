// The op-level seam over an MPI library's C API: one rank per process, the
// library's own point-to-point, communicators and collectives. What collie
// checks with `--backend mpi` (the MPI worker serves it to a controller).
//
// The mapping, op by op:
//   send/recv           MPI_Send / MPI_Recv; isend/irecv MPI_Isend / MPI_Irecv;
//                       any source is MPI_ANY_SOURCE and the matched source
//                       (status.MPI_SOURCE) is translated back to a global rank.
//   new_group           MPI_Group_incl of the sorted ranks + MPI_Comm_create_group
//                       (members only; group rank = index in the sorted ranks,
//                       as torch's new_group).
//   collectives         MPI_Bcast, MPI_Reduce (the root in place; other ranks'
//                       buffers are send buffers, left as they are), MPI_Allreduce
//                       (in place), MPI_Scatter / MPI_Gather / MPI_Allgather through
//                       one contiguous staging buffer of the list, MPI_Barrier;
//                       reduce_scatter(_tensor) MPI_Reduce_scatter_block (the
//                       list staged contiguously), all_to_all(_single)
//                       MPI_Alltoallv (lists staged, splits as counts and
//                       displacements); with async_op their MPI-3 nonblocking
//                       forms (MPI_Ibcast, ...).
//   monitored_barrier   MPI has none: the group's first member MPI_Irecv's an
//                       empty message from every other one on a duplicate of
//                       the group's communicator and polls until the timeout,
//                       then releases each with MPI_Isend (torch's Gloo way).
//   batch_isend_irecv   MPI_Isend / MPI_Irecv each, completing together.
//   dtypes              float32 MPI_FLOAT, float64 MPI_DOUBLE, int8/uint8/int32/int64
//                       MPI_(U)INT*_T, bool MPI_C_BOOL; float16 MPIX_C_FLOAT16 where
//                       the library has it; bfloat16 none.
//   reduce ops          SUM PROD MIN MAX BAND BOR BXOR; on bool (C's logical type
//                       takes only logical ops) SUM/MAX/BOR -> MPI_LOR, PRODUCT/MIN/
//                       BAND -> MPI_LAND, BXOR -> MPI_LXOR. AVG has no MPI op.
// What MPI lacks (AVG, half precision without MPIX_C_FLOAT16) fails with
// ErrorKind::kUnsupported naming it, so checks skip it. Errors are returned,
// not fatal (MPI_ERRORS_RETURN): an MPI error fails the op with the
// library's error string (a LibraryError).
#pragma once

#include <mpi.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dist.h"
#include "core/library_executor.h"

namespace collie::mpi {

// Blocks in MPI_Waitany for the requests of async ops.
class MpiExecutor final : public LibraryExecutor {
 public:
  // Watches `request`; when it completes, `then(status)` runs (it finishes a Work).
  void watch(MPI_Request request, std::function<void(const MPI_Status&)> then);

 private:
  bool progress() override;
  // MPI_Test on each request in turn (as a program polling its handles
  // does), not MPI_Testany: a library whose MPI_Test never completes what
  // MPI_Wait does is found out by a polled op (CollectiveOptions::poll_ns).
  void test() override;
  std::string deadlock_text() const override { return "no MPI request is outstanding"; }
  // Request `index` completed (MPI's return code `rc`, its status): drops it
  // and runs its continuation.
  void finish(std::size_t index, int rc, MPI_Status& status);

  std::vector<MPI_Request> requests_;
  std::vector<std::function<void(const MPI_Status&)>> thens_;
};

class MpiDist final : public Dist {
 public:
  // Over `world` (MPI_COMM_WORLD), which MPI_Init made.
  explicit MpiDist(MPI_Comm world);
  ~MpiDist() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Executor& executor() override { return exec_; }
  LibraryExecutor& library_executor() { return exec_; }
  Group world() const override { return world_group_; }
  Group new_group(std::vector<int> ranks, Nanos timeout_ns = 0, std::string name = {}) override;
  // MPI_Comm_free of the group's communicator and its monitor's duplicate.
  void destroy_group(const Group& g) override;
  // Frees every communicator new_group made (a new run of the worker).
  void free_groups();

  // MPI has no operation timeouts (MpiBackend's BackendInfo::no_timeouts):
  // a call's timeout_ns is refused as invalid_argument, never ignored.
  Work send(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns) override;
  Work isend(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns, Nanos poll_ns) override;
  Work recv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns) override;
  Work irecv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns, Nanos poll_ns) override;
  Work broadcast(TensorView t, int src, const Group& g, CollectiveOptions o) override;
  Work reduce(TensorView t, int dst, ReduceOp op, const Group& g, CollectiveOptions o) override;
  Work all_reduce(TensorView t, ReduceOp op, const Group& g, CollectiveOptions o) override;
  Work scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g, CollectiveOptions o) override;
  Work gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g, CollectiveOptions o) override;
  Work all_gather(std::span<const TensorView> list, TensorView in, const Group& g, CollectiveOptions o) override;
  Work all_gather_into_tensor(TensorView out, TensorView in, const Group& g, CollectiveOptions o) override;
  Work reduce_scatter(TensorView out, std::span<const TensorView> input_list, ReduceOp op, const Group& g,
                      CollectiveOptions o) override;
  Work reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& g, CollectiveOptions o) override;
  Work all_to_all(std::span<const TensorView> output_list, std::span<const TensorView> input_list, const Group& g,
                  CollectiveOptions o) override;
  Work all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> output_split_sizes,
                         std::span<const std::size_t> input_split_sizes, const Group& g, CollectiveOptions o) override;
  Work barrier(const Group& g, CollectiveOptions o) override;
  Work monitored_barrier(const Group& g, Nanos timeout_ns, bool wait_all_ranks) override;

  // "Open MPI v4.1.4", "MPICH 4.0.2" (MPI_Get_library_version, read by
  // mpi_version.h's library_banner()).
  static std::string library_version();

 private:
  struct Comm {
    MPI_Comm comm = MPI_COMM_NULL;
    std::shared_ptr<const std::vector<int>> members;  // sorted global ranks
    MPI_Comm monitor = MPI_COMM_NULL;  // a duplicate of comm for monitored_barrier
    std::uint64_t monitored = 0;       // monitored_barrier calls so far
  };
  const Comm* comm_of(const Group& g) const;  // null: not a member
  Work p2p(const char* op, bool async, TensorView t, int peer, int tag, const Group& g, Nanos timeout_ns);
  // Runs an MPI call, `start(request)`: blocking (request null), its result
  // is the Work's; async, the Work completes when the request does. Then
  // `after` runs (a gather's list is filled from its staging buffer).
  // `source_group_rank`: where a blocking receive left its source.
  template <typename Start>
  Work run(const char* op, const Comm& c, bool async, const Start& start, std::function<void()> after = {},
           const int* source_group_rank = nullptr);

  MPI_Comm world_comm_;
  int rank_ = 0;
  int world_size_ = 0;
  Group world_group_;
  int groups_ = 0;
  std::map<int, Comm> comms_;  // by GroupState id; 0 is the world
  MpiExecutor exec_;
};

}  // namespace collie::mpi
