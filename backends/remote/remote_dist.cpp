#include "backends/remote/remote_dist.h"

#include "backends/remote/call_codec.h"
#include "core/error.h"
#include "core/group.h"

namespace collie::remote {


RemoteDist::RemoteDist(RankChannel& job, int rank, int world)
    : job_(job), rank_(rank), world_(world), world_group_(world_group_state(world, rank)) {}

Group RemoteDist::new_group(std::vector<int> ranks, Nanos timeout_ns, std::string name) {
  auto g = new_group_state(++groups_, new_group_members(ranks, world_, rank_), rank_, timeout_ns, std::move(name));
  job_.announce_group(rank_, g->id, ranks, timeout_ns > 0 ? timeout_ns : job_.default_timeout_ns(), g->name);
  return Group(std::move(g));
}

void RemoteDist::destroy_group(const Group& g) {
  mark_group_destroyed(g, rank_);
  job_.announce_destroyed(rank_, g.state()->id);
}

Work RemoteDist::call(DistCall c) {
  const OpSpec& spec = c.spec();
  GroupState& gs = *(c.group.is_world_default() ? world_group_.state() : c.group.state());
  auto info = std::allocate_shared<OpInfo>(PoolAllocator<OpInfo>{});
  info->rank = rank_;
  info->op = std::string(c.name());
  info->group = gs.name;
  info->seq = static_cast<std::int64_t>(spec.family == OpFamily::kCollective ? ++gs.coll_seq : ++gs.p2p_seq);
  info->id = ++ops_;
  info->peer = c.peer;
  if (spec.family == OpFamily::kPointToPoint) {
    info->is_send = c.kind == OpKind::kSend;
    info->any_source = c.peer == kAnySource;
    info->tag = c.tag;
  }
  EncodedCall e = encode_call(c, rank_);
  if (!e.buffers.empty()) {
    info->dtype = e.buffers[0].dtype;
    info->count = e.buffers[0].count;
  }
  e.head["t"] = "op";
  e.head["id"] = info->id;
  e.head["group"] = gs.id;
  std::string what;
  if (spec.family == OpFamily::kPointToPoint) {
    what = info->describe();
  } else {
    // "rank 0: all_reduce(float32 x 4, SUM, root 1) #3 on world"
    std::string args;
    if (!e.buffers.empty())
      args = std::string(dtype_name(e.buffers[0].dtype)) + " x " + std::to_string(e.buffers[0].count);
    if (spec.reduce_op) args += ", " + std::string(reduce_op_name(c.reduce_op));
    if (spec.rooted) args += ", root " + std::to_string(c.peer);
    if (spec.family == OpFamily::kBatch) args = std::to_string(c.p2p.size()) + " ops";
    what = "rank " + std::to_string(rank_) + ": " + info->op + "(" + args + ") #" + std::to_string(info->seq) +
           " on " + gs.name;
  }
  const bool async = c.async;
  return job_.issue(rank_, info, std::move(e.head), std::move(e.buffers), async, std::move(what));
}

}  // namespace collie::remote
