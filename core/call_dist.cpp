#include "core/call_dist.h"

namespace collie {

namespace {

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
  c.must_be_pending = o.must_be_pending;
  c.poll_ns = o.poll_ns;
  return c;
}

DistCall p2p(OpKind kind, bool async, TensorView t, int peer, int tag, const Group& g, Nanos timeout_ns) {
  DistCall c = make(kind, async, g);
  c.tensor = t, c.peer = peer, c.tag = tag, c.timeout_ns = timeout_ns;
  return c;
}

std::vector<TensorView> list_of(std::span<const TensorView> l) { return {l.begin(), l.end()}; }

}  // namespace

Work CallDist::send(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns) {
  return call(p2p(OpKind::kSend, false, t, dst, tag, g, timeout_ns));
}
Work CallDist::isend(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns, Nanos poll_ns) {
  DistCall c = p2p(OpKind::kSend, true, t, dst, tag, g, timeout_ns);
  c.poll_ns = poll_ns;
  return call(std::move(c));
}
Work CallDist::recv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns) {
  return call(p2p(OpKind::kRecv, false, t, src, tag, g, timeout_ns));
}
Work CallDist::irecv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns, Nanos poll_ns) {
  DistCall c = p2p(OpKind::kRecv, true, t, src, tag, g, timeout_ns);
  c.poll_ns = poll_ns;
  return call(std::move(c));
}

Work CallDist::broadcast(TensorView t, int src, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kBroadcast, g, o);
  c.tensor = t, c.peer = src;
  return call(std::move(c));
}
Work CallDist::reduce(TensorView t, int dst, ReduceOp op, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kReduce, g, o);
  c.tensor = t, c.peer = dst, c.reduce_op = op;
  return call(std::move(c));
}
Work CallDist::all_reduce(TensorView t, ReduceOp op, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllReduce, g, o);
  c.tensor = t, c.reduce_op = op;
  return call(std::move(c));
}
Work CallDist::scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kScatter, g, o);
  c.tensor = out, c.peer = src, c.list = list_of(list);
  return call(std::move(c));
}
Work CallDist::gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kGather, g, o);
  c.tensor = in, c.peer = dst, c.list = list_of(list);
  return call(std::move(c));
}
Work CallDist::all_gather(std::span<const TensorView> list, TensorView in, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllGather, g, o);
  c.tensor = in, c.list = list_of(list);
  return call(std::move(c));
}
Work CallDist::all_gather_into_tensor(TensorView out, TensorView in, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllGatherIntoTensor, g, o);
  c.tensor = in, c.output = out;
  return call(std::move(c));
}
Work CallDist::reduce_scatter(TensorView out, std::span<const TensorView> list, ReduceOp op, const Group& g,
                              CollectiveOptions o) {
  DistCall c = collective(OpKind::kReduceScatter, g, o);
  c.output = out, c.list = list_of(list), c.reduce_op = op;
  return call(std::move(c));
}
Work CallDist::reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kReduceScatterTensor, g, o);
  c.output = out, c.tensor = in, c.reduce_op = op;
  return call(std::move(c));
}
Work CallDist::all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group& g,
                          CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllToAll, g, o);
  c.output_list = list_of(out), c.list = list_of(in);
  return call(std::move(c));
}
Work CallDist::all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> out_splits,
                                 std::span<const std::size_t> in_splits, const Group& g, CollectiveOptions o) {
  DistCall c = collective(OpKind::kAllToAllSingle, g, o);
  c.output = out, c.tensor = in;
  c.output_splits.assign(out_splits.begin(), out_splits.end());
  c.input_splits.assign(in_splits.begin(), in_splits.end());
  return call(std::move(c));
}
Work CallDist::barrier(const Group& g, CollectiveOptions o) { return call(collective(OpKind::kBarrier, g, o)); }
Work CallDist::monitored_barrier(const Group& g, Nanos timeout_ns, bool wait_all_ranks) {
  DistCall c = make(OpKind::kMonitoredBarrier, false, g);
  c.timeout_ns = timeout_ns, c.wait_all_ranks = wait_all_ranks;
  return call(std::move(c));
}
Work CallDist::batch_isend_irecv(std::span<const P2POp> ops, const Group& g) {
  DistCall c = make(OpKind::kBatchIsendIrecv, true, g);
  c.p2p.assign(ops.begin(), ops.end());
  return call(std::move(c));
}

}  // namespace collie
