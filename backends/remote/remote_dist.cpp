#include "backends/remote/remote_dist.h"

#include "backends/remote/call_codec.h"
#include "core/error.h"
#include "core/group.h"

namespace collie::remote {

namespace {

using json = nlohmann::json;

DistCall make(OpKind kind, bool async, const Group& g) {
  DistCall c;
  c.kind = kind;
  c.async = async;
  c.group = g;
  return c;
}

DistCall collective(OpKind kind, const Group& g, const CollectiveOptions& o) {
  DistCall c = make(kind, o.async_op, g);
  c.algorithm = o.algorithm;
  c.timeout_ns = o.timeout_ns;
  return c;
}

std::vector<TensorView> list_of(std::span<const TensorView> l) { return {l.begin(), l.end()}; }

}  // namespace

RemoteDist::RemoteDist(RankChannel& job, int rank, int world) : job_(job), rank_(rank), world_(world) {
  auto w = std::make_shared<GroupState>();
  w->id = 0;
  w->members = world_members(world, &w->digest);
  w->my_rank = rank;
  w->name = "world";
  world_group_ = Group(std::move(w));
}

Group RemoteDist::new_group(std::vector<int> ranks, Nanos timeout_ns, std::string name) {
  std::vector<int> sorted = new_group_members(ranks, world_, rank_);
  auto g = std::make_shared<GroupState>();
  g->id = ++groups_;
  g->digest = group_digest(sorted);
  const auto at = std::find(sorted.begin(), sorted.end(), rank_);
  g->my_rank = at == sorted.end() ? -1 : static_cast<int>(at - sorted.begin());
  g->name = name.empty() ? default_group_name(g->id, sorted) : std::move(name);
  g->members = std::make_shared<const std::vector<int>>(std::move(sorted));
  g->timeout_ns = timeout_ns;
  job_.announce_group(rank_, g->id, ranks, timeout_ns > 0 ? timeout_ns : job_.default_timeout_ns(), g->name);
  return Group(std::move(g));
}

Work RemoteDist::send(TensorView t, int dst, int tag, const Group& g) { return p2p(true, false, t, dst, tag, g); }
Work RemoteDist::isend(TensorView t, int dst, int tag, const Group& g) { return p2p(true, true, t, dst, tag, g); }
Work RemoteDist::recv(TensorView t, int src, int tag, const Group& g) { return p2p(false, false, t, src, tag, g); }
Work RemoteDist::irecv(TensorView t, int src, int tag, const Group& g) { return p2p(false, true, t, src, tag, g); }

Work RemoteDist::p2p(bool is_send, bool async, TensorView t, int peer, int tag, const Group& g) {
  DistCall c = make(is_send ? OpKind::kSend : OpKind::kRecv, async, g);
  c.tensor = t, c.peer = peer, c.tag = tag;
  return call(std::move(c));
}
Work RemoteDist::broadcast(TensorView t, int src, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kBroadcast, g, o);
  c.tensor = t, c.peer = src;
  return call(std::move(c));
}
Work RemoteDist::reduce(TensorView t, int dst, ReduceOp op, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kReduce, g, o);
  c.tensor = t, c.peer = dst, c.reduce_op = op;
  return call(std::move(c));
}
Work RemoteDist::all_reduce(TensorView t, ReduceOp op, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllReduce, g, o);
  c.tensor = t, c.reduce_op = op;
  return call(std::move(c));
}
Work RemoteDist::scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g,
                         CollectiveOptions o) {
  DistCall c = collective(OpKind::kScatter, g, o);
  c.tensor = out, c.peer = src, c.list = list_of(list);
  return call(std::move(c));
}
Work RemoteDist::gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g,
                        CollectiveOptions o) {
  DistCall c = collective(OpKind::kGather, g, o);
  c.tensor = in, c.peer = dst, c.list = list_of(list);
  return call(std::move(c));
}
Work RemoteDist::all_gather(std::span<const TensorView> list, TensorView in, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllGather, g, o);
  c.tensor = in, c.list = list_of(list);
  return call(std::move(c));
}
Work RemoteDist::all_gather_into_tensor(TensorView out, TensorView in, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllGatherIntoTensor, g, o);
  c.tensor = in, c.output = out;
  return call(std::move(c));
}
Work RemoteDist::reduce_scatter(TensorView out, std::span<const TensorView> list, ReduceOp op, const Group& g,
                                CollectiveOptions o) {
  DistCall c = collective(OpKind::kReduceScatter, g, o);
  c.output = out, c.list = list_of(list), c.reduce_op = op;
  return call(std::move(c));
}
Work RemoteDist::reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& g,
                                       CollectiveOptions o) {
  DistCall c = collective(OpKind::kReduceScatterTensor, g, o);
  c.output = out, c.tensor = in, c.reduce_op = op;
  return call(std::move(c));
}
Work RemoteDist::all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group& g,
                            CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllToAll, g, o);
  c.output_list = list_of(out), c.list = list_of(in);
  return call(std::move(c));
}
Work RemoteDist::all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> out_splits,
                                   std::span<const std::size_t> in_splits, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllToAllSingle, g, o);
  c.output = out, c.tensor = in;
  c.output_splits.assign(out_splits.begin(), out_splits.end());
  c.input_splits.assign(in_splits.begin(), in_splits.end());
  return call(std::move(c));
}
Work RemoteDist::barrier(const Group& g, CollectiveOptions o) { return call(collective(OpKind::kBarrier, g, o)); }
Work RemoteDist::monitored_barrier(const Group& g, Nanos timeout_ns, bool wait_all_ranks) {
  DistCall c = make(OpKind::kMonitoredBarrier, false, g);
  c.timeout_ns = timeout_ns, c.wait_all_ranks = wait_all_ranks;
  return call(std::move(c));
}
Work RemoteDist::batch_isend_irecv(std::span<const P2POp> ops, const Group& g) {
  DistCall c = make(OpKind::kBatchIsendIrecv, true, g);
  c.p2p.assign(ops.begin(), ops.end());
  return call(std::move(c));
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
