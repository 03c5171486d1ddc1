// RemoteDist: one rank's Dist in the controller of a process job. Every op
// is encoded as one op message (call_codec.h) and sent to the rank's
// process through its job; the Work completes when the process answers,
// with the process's outputs copied into the caller's buffers. Groups are
// checked and named here by core/group.h's one rule, then announced to the
// process. Used from the job's executor thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/call_dist.h"
#include "core/op.h"
#include "core/op_info.h"

namespace collie::remote {

// What a RemoteDist needs of the job that owns its rank's process.
class RankChannel {
 public:
  virtual ~RankChannel() = default;
  virtual Executor& executor() = 0;
  // Tells rank `rank`'s process that group `id` of `ranks` exists (every
  // rank is told of every group, member or not).
  virtual void announce_group(int rank, int id, const std::vector<int>& ranks, Nanos timeout_ns,
                              const std::string& name) = 0;
  // Tells rank `rank`'s process that group `id` is destroyed (every rank is
  // told, member or not, as of its making).
  virtual void announce_destroyed(int rank, int id) = 0;
  // Sends rank `rank` the op `info` (its message `head`, whose buffers are
  // `buffers`); the Work completes when the process answers (an async op:
  // once it is waited for).
  virtual Work issue(int rank, const std::shared_ptr<OpInfo>& info, nlohmann::json head,
                     std::vector<TensorView> buffers, bool async, std::string description) = 0;
  // The rank's ops not yet answered, one line each.
  virtual std::vector<std::string> pending_of(int rank) const = 0;
  // Every op's timeout unless its group or call sets one (0: none).
  virtual Nanos default_timeout_ns() const = 0;
};

class RemoteDist final : public CallDist {
 public:
  RemoteDist(RankChannel& job, int rank, int world);

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  Executor& executor() override { return job_.executor(); }
  Group world() const override { return world_group_; }
  Group new_group(std::vector<int> ranks, Nanos timeout_ns, std::string name) override;
  void destroy_group(const Group& g) override;

  std::vector<std::string> describe_pending() const override { return job_.pending_of(rank_); }

 private:
  // Sends `c` to the rank's process.
  Work call(DistCall c) override;

  RankChannel& job_;
  int rank_;
  int world_;
  Group world_group_;
  int groups_ = 0;
  std::uint64_t ops_ = 0;
};

}  // namespace collie::remote
