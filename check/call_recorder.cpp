#include "check/call_recorder.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "check/compare.h"

namespace collie::check {

namespace {

Tensor copy_of(const TensorView& v) {
  Tensor t(v.dtype, {static_cast<std::int64_t>(v.count)});
  if (v.bytes()) std::memcpy(t.data(), v.data, v.bytes());
  return t;
}

void append_copies(std::vector<Tensor>& to, const std::vector<TensorView>& views) {
  for (const TensorView& v : views) to.push_back(copy_of(v));
}

// Empty when `now` still holds `before`'s bytes; else the first difference.
std::string changed(const Tensor& before, const TensorView& now) {
  if (now.bytes() == before.bytes() && (!now.bytes() || std::memcmp(now.data, before.data(), now.bytes()) == 0))
    return {};
  return compare_tensors(copy_of(now), before, CompareRule{.bitwise = true, .want_is = "it was"});
}

std::vector<int> members_of(const DistCall& c, int world) {
  if (!c.group.is_world_default()) return c.group.ranks();
  std::vector<int> all(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) all[static_cast<std::size_t>(r)] = r;
  return all;
}

bool is_member(const DistCall& c) { return c.group.is_world_default() || c.group.is_member(); }

std::string entry(const std::vector<TensorView>& views, std::size_t k) {
  return views.size() > 1 ? "[" + std::to_string(k) + "]" : "";
}

}  // namespace

CallRecorder::CallRecorder(OpRecords& records, int rank, int world_size)
    : records_(records), rank_(rank), world_(world_size) {}

std::uint64_t CallRecorder::next_seq(const std::string& group) const {
  auto it = seq_.find(group);
  return (it == seq_.end() ? 0 : it->second) + 1;
}

void CallRecorder::issued(const Work& w) {
  const std::uint64_t id = w.state() && w.state()->info ? w.state()->info->id : 0;
  for (const auto& [key, index] : unstamped_sends_) records_.sends[key][index].op = id;
  if (unstamped_collective_) records_.collectives[*unstamped_collective_].op_ids[rank_] = id;
  unstamped_sends_.clear();
  unstamped_collective_.reset();
}

std::function<void(const Work&)> CallRecorder::before(const DistCall& c, const std::string& group,
                                                      const std::string& where) {
  unstamped_sends_.clear();
  unstamped_collective_.reset();
  if (!records_.enabled) return {};
  if (!is_member(c)) return untouched(c, group, where);
  switch (c.spec().family) {
    case OpFamily::kCollective: return collective(c, group, where);
    case OpFamily::kPointToPoint:
    case OpFamily::kBatch: return point_to_point(c, group, where);
  }
  return {};
}

std::function<void(const Work&)> CallRecorder::collective(const DistCall& c, const std::string& group,
                                                          const std::string& where) {
  const OpSpec& s = c.spec();
  const std::vector<int> members = members_of(c, world_);
  const std::size_t n = members.size();
  const bool is_root = s.rooted && c.peer == rank_;
  const std::uint64_t seq = ++seq_[group];
  CollectiveRecord& r = records_.collectives[{group, seq}];
  r.kind = s.collective;
  r.where = where;
  r.root = s.rooted ? c.peer : -1;
  r.op = s.reduce_op ? c.reduce_op : ReduceOp::kSum;
  if (r.members.empty()) r.members = members;
  r.issued.insert(rank_);
  unstamped_collective_.emplace(group, seq);

  // What this rank reads, as the oracle sees it; the operands it only
  // reads are checked for changes when the call completes.
  std::vector<Tensor> inputs;
  std::vector<std::pair<std::size_t, Slot>> read_only;  // first block's index in `inputs`, slot
  try {
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      const Operand& o = s.operand(slot);
      if (!o.passed_by(is_root) || !o.read_by(is_root)) continue;
      if (!o.written_by(is_root)) read_only.emplace_back(inputs.size(), slot);
      append_copies(inputs, oracle_blocks(c, slot, n));
    }
  } catch (const std::invalid_argument&) {
    return {};  // blocks the call cannot be cut into: the call itself fails
  }
  r.inputs[rank_] = std::move(inputs);

  OpRecords* rec = &records_;
  const int me = rank_;
  return [rec, c, group, seq, me, n, is_root, read_only, where](const Work&) {
    CollectiveRecord& done = rec->collectives[{group, seq}];
    const OpSpec& spec = c.spec();
    std::vector<Tensor> outputs;
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      const Operand& o = spec.operand(slot);
      if (o.passed_by(is_root) && o.written_by(is_root)) append_copies(outputs, oracle_blocks(c, slot, n));
    }
    done.outputs[me] = std::move(outputs);
    const std::vector<Tensor>& in = done.inputs[me];
    for (const auto& [first, slot] : read_only) {
      const std::vector<TensorView> now = oracle_blocks(c, slot, n);
      for (std::size_t b = 0; b < now.size() && first + b < in.size(); ++b)
        if (std::string d = changed(in[first + b], now[b]); !d.empty()) {
          rec->buffer_findings.push_back(where + ": " + std::string(c.name()) + " #" + std::to_string(seq) + " on " +
                                         group + ": rank " + std::to_string(me) + "'s " +
                                         std::string(slot_name(slot)) + entry(now, b) +
                                         ", which the op only reads, changed: " + d);
          break;
        }
    }
  };
}

std::function<void(const Work&)> CallRecorder::point_to_point(const DistCall& c, const std::string& group,
                                                              const std::string& where) {
  // A batch is its ops; a send or a receive is a batch of one.
  std::vector<P2POp> ops = c.p2p;
  if (c.spec().family == OpFamily::kPointToPoint)
    ops = {P2POp{c.kind == OpKind::kSend, c.tensor, c.peer, c.tag}};
  struct Sent {
    std::tuple<int, int, std::string, int> key;
    std::size_t index;
    TensorView buf;
  };
  struct Received {
    P2POp op;
    std::uint64_t order;
  };
  std::vector<Sent> sent;
  std::vector<Received> received;
  for (const P2POp& op : ops) {
    if (op.is_send) {
      auto key = std::make_tuple(rank_, op.peer, group, op.tag);
      auto& list = records_.sends[key];
      list.push_back(SentMessage{copy_of(op.tensor)});
      unstamped_sends_.emplace_back(key, list.size() - 1);
      sent.push_back(Sent{std::move(key), list.size() - 1, op.tensor});
    } else {
      received.push_back(Received{op, ++recv_order_});
    }
  }
  OpRecords* rec = &records_;
  const int me = rank_;
  const bool single = c.spec().family == OpFamily::kPointToPoint;
  const std::string name(c.name());
  return [rec, me, group, where, sent = std::move(sent), received = std::move(received), single,
          name](const Work& w) {
    for (const Received& r : received) {
      // A receive from a named rank that reports another as its sender (a
      // library's status naming the wrong rank): said as such; the data is
      // checked against the named rank's message.
      const bool named = r.op.peer != kAnySource;
      if (single && named && w.source_rank() >= 0 && w.source_rank() != r.op.peer)
        rec->buffer_findings.push_back(where + ": rank " + std::to_string(me) + ": " + name + " from rank " +
                                       std::to_string(r.op.peer) + " (tag " + std::to_string(r.op.tag) + " on " +
                                       group + ") completed naming rank " + std::to_string(w.source_rank()) +
                                       " as its sender (the Work's source, MPI's status.MPI_SOURCE)");
      rec->recvs.push_back(RecvRecord{me, group, r.op.tag, single && !named ? w.source_rank() : r.op.peer, r.order,
                                      copy_of(r.op.tensor), where});
    }
    for (const Sent& s : sent)
      if (std::string d = changed(rec->sends[s.key][s.index].data, s.buf); !d.empty())
        rec->buffer_findings.push_back(where + ": rank " + std::to_string(me) + ": " + name + " to rank " +
                                       std::to_string(std::get<1>(s.key)) + " (tag " +
                                       std::to_string(std::get<3>(s.key)) + " on " + group +
                                       "): the send's buffer changed before it completed: " + d);
  };
}

std::function<void(const Work&)> CallRecorder::untouched(const DistCall& c, const std::string& group,
                                                         const std::string& where) {
  std::vector<std::pair<std::string, TensorView>> views;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const std::vector<TensorView> v = c.views(static_cast<Slot>(k));
    for (std::size_t b = 0; b < v.size(); ++b) views.emplace_back(std::string(slot_name(static_cast<Slot>(k))) + entry(v, b), v[b]);
  }
  for (std::size_t k = 0; k < c.p2p.size(); ++k) views.emplace_back("op " + std::to_string(k) + "'s tensor", c.p2p[k].tensor);
  std::vector<Tensor> before;
  for (const auto& [label, v] : views) before.push_back(copy_of(v));
  OpRecords* rec = &records_;
  const int me = rank_;
  const std::string name(c.name());
  return [rec, me, group, where, name, views = std::move(views), before = std::move(before)](const Work&) {
    for (std::size_t k = 0; k < views.size(); ++k)
      if (std::string d = changed(before[k], views[k].second); !d.empty()) {
        rec->buffer_findings.push_back(where + ": rank " + std::to_string(me) + " is not a member of " + group +
                                       ", yet its " + views[k].first + " changed in " + name + ": " + d);
        return;
      }
  };
}

}  // namespace collie::check
