// The op-level seam over NCCL: one rank per process and GPU, NCCL's own
// collectives and point-to-point. What collie checks with `--backend nccl`
// (the NCCL worker serves it to a controller). Host tensors come in (the op
// protocol carries host bytes); each call stages every tensor of its slots
// to the rank's GPU, runs there on one stream, and copies every tensor back
// once the call's event has completed -- read-only ones too, so a library
// that writes its inputs is seen.
//
// The mapping, op by op (as torch's ProcessGroupNCCL maps them):
//   send/recv, isend/irecv  ncclSend / ncclRecv (group ranks). NCCL has no
//                       tags and no any-source receive: both kUnsupported.
//   batch_isend_irecv   the ops' ncclSend / ncclRecv inside one
//                       ncclGroupStart/End.
//   new_group           ncclCommSplit of the world communicator (color 0 for
//                       members, NCCL_SPLIT_NOCOLOR for the rest, key = global
//                       rank: group rank = index in the sorted ranks, as
//                       torch's new_group); a group of every rank is the world
//                       communicator itself.
//   broadcast           ncclBroadcast (in place); reduce ncclReduce (in place;
//                       only the root's buffer is written); all_reduce
//                       ncclAllReduce (in place).
//   all_gather(_into_tensor)  ncclAllGather (a list is staged contiguously);
//   reduce_scatter(_tensor)   ncclReduceScatter (likewise).
//   scatter, gather, all_to_all(_single)  ncclSend / ncclRecv to and from
//                       every member inside one group, as torch does.
//   barrier             an all_reduce of one byte (torch's way).
//   monitored_barrier   none: kUnsupported (torch offers it on Gloo only).
//   dtypes              float32/64, float16, bfloat16, int8, uint8, int32,
//                       int64; bool as uint8.
//   reduce ops          SUM PROD MIN MAX AVG (ncclAvg); on bool SUM/MAX ->
//                       max, PRODUCT/MIN -> min (torch's mapping). BAND, BOR,
//                       BXOR: NCCL has none, kUnsupported.
// NCCL has no operation timeouts: a call that never completes is found by
// the controller's hang detection. An NCCL error fails the call with the
// library's words (a LibraryError).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/nccl/nccl_library.h"
#include "core/call_dist.h"
#include "core/library_executor.h"

namespace collie::nccl {

// Polls the events of calls in flight (never blocks the host in CUDA).
class NcclExecutor final : public LibraryExecutor {
 public:
  // `then()` runs once `event` has completed (or failed: `then` reads it).
  void watch(cudaEvent_t event, std::function<void()> then);

 private:
  bool progress() override;
  void test() override { progress(); }  // progress() never blocks
  std::string deadlock_text() const override { return "no NCCL call is in flight"; }

  std::vector<std::pair<cudaEvent_t, std::function<void()>>> watched_;
};

class NcclDist final : public CallDist {
 public:
  // Rank `rank` of `world` on CUDA device `device`; the communicator is made
  // by init(). Throws std::runtime_error when NCCL cannot be loaded.
  NcclDist(int rank, int world, int device);
  ~NcclDist() override;

  // Rank 0's unique id as text (the bootstrap every rank needs).
  std::string make_unique_id() const;
  // ncclCommInitRank with rank 0's id. A refusal (two ranks on one GPU:
  // "Duplicate GPU detected") is kept: every op then fails kUnsupported in
  // NCCL's words, so the suite skips the world instead of failing.
  void init(const std::string& unique_id);
  // Destroys every communicator new_group made (a new run of the worker).
  void free_groups();
  // "NCCL 2.28.9 on <GPU name>".
  std::string library_version() const;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  Executor& executor() override { return exec_; }
  LibraryExecutor& library_executor() { return exec_; }
  Group world() const override { return world_group_; }
  Group new_group(std::vector<int> ranks, Nanos timeout_ns = 0, std::string name = {}) override;
  // ncclCommDestroy of the communicator ncclCommSplit made for the group.
  void destroy_group(const Group& g) override;

 private:
  Work call(DistCall c) override;

  struct Comm {
    ncclComm_t comm = nullptr;
    bool owned = false;  // made by ncclCommSplit (the world's is the base)
  };
  ncclComm_t comm_of(const Group& g) const;  // null: not a member

  const NcclLibrary& lib_;
  int rank_, world_, device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t base_ = nullptr;
  std::optional<std::string> refused_;  // why NCCL refused this world
  Group world_group_;
  int groups_ = 0;
  std::map<int, Comm> comms_;  // by GroupState id; 0 is the world
  NcclExecutor exec_;
};

}  // namespace collie::nccl
