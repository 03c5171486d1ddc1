#include "core/op.h"

#include <stdexcept>

namespace collie {

namespace {

using Form = Operand::Form;

constexpr Operand kNoOperand{};
constexpr Operand tensor_in(Ranks who = Ranks::kEvery) { return Operand{Form::kTensor, who, Ranks::kNone, false}; }
constexpr Operand tensor_out() { return Operand{Form::kTensor, Ranks::kNone, Ranks::kEvery, false}; }
constexpr Operand tensor_inout(Ranks reads) { return Operand{Form::kTensor, reads, Ranks::kEvery, false}; }
constexpr Operand list_in(Ranks who) { return Operand{Form::kList, who, Ranks::kNone, false}; }
constexpr Operand list_out(Ranks who) { return Operand{Form::kList, Ranks::kNone, who, false}; }
constexpr Operand as_blocks(Operand o) {
  o.blocks = true;
  return o;
}

// Rows of the table, built by what kind of op they are.
constexpr OpSpec p2p(OpKind k, std::string_view name, std::string_view async_name, std::string_view peer_key,
                     bool any_source, Operand tensor, std::string_view summary) {
  return OpSpec{k,     name,  async_name, OpFamily::kPointToPoint, CollectiveKind::kNone, peer_key, false, any_source,
                true,  false, false,      false,                   true,                  true,     true,
                {tensor, kNoOperand, kNoOperand}, summary};
}
// A collective: `root_key` names its root ("src"/"dst"; empty: none).
constexpr OpSpec collective(OpKind k, std::string_view name, CollectiveKind ck, std::string_view root_key,
                            bool reduce_op, bool splits, Operand tensor, Operand list, Operand output,
                            std::string_view summary) {
  return OpSpec{k,     name,      "",     OpFamily::kCollective, ck,   root_key, !root_key.empty(), false,
                false, reduce_op, splits, true,                  true, true,     true,
                {tensor, list, output}, summary};
}
constexpr bool kReduces = true, kSplits = true;

constexpr Operand _ = kNoOperand;

constexpr std::array<OpSpec, kNumOpKinds> kTable = {
    p2p(OpKind::kSend, "send", "isend", "dst", false, tensor_in(), "sends the tensor to dst"),
    p2p(OpKind::kRecv, "recv", "irecv", "src", true, tensor_out(), "receives into the tensor from src (or any source)"),
    collective(OpKind::kBroadcast, "broadcast", CollectiveKind::kBroadcast, "src", false, false,
               tensor_inout(Ranks::kRoot), _, _, "src's tensor to every member"),
    collective(OpKind::kReduce, "reduce", CollectiveKind::kReduce, "dst", kReduces, false,
               tensor_inout(Ranks::kEvery), _, _, "the members' tensors reduced into dst's"),
    collective(OpKind::kAllReduce, "all_reduce", CollectiveKind::kAllReduce, "", kReduces, false,
               tensor_inout(Ranks::kEvery), _, _, "the members' tensors reduced into every member's"),
    collective(OpKind::kScatter, "scatter", CollectiveKind::kScatter, "src", false, false,
               tensor_out(), list_in(Ranks::kRoot), _, "src's list, entry i to group rank i"),
    collective(OpKind::kGather, "gather", CollectiveKind::kGather, "dst", false, false,
               tensor_in(), list_out(Ranks::kRoot), _, "every member's tensor into dst's list"),
    collective(OpKind::kAllGather, "all_gather", CollectiveKind::kAllGather, "", false, false,
               tensor_in(), list_out(Ranks::kEvery), _, "every member's tensor into every member's list"),
    collective(OpKind::kAllGatherIntoTensor, "all_gather_into_tensor", CollectiveKind::kAllGather, "", false, false,
               tensor_in(), _, as_blocks(tensor_out()), "every member's tensor into block i of every member's output"),
    collective(OpKind::kReduceScatter, "reduce_scatter", CollectiveKind::kReduceScatter, "", kReduces, false,
               _, list_in(Ranks::kEvery), tensor_out(), "entry i of every member's list reduced into group rank i's output"),
    collective(OpKind::kReduceScatterTensor, "reduce_scatter_tensor", CollectiveKind::kReduceScatter, "", kReduces,
               false, as_blocks(tensor_in()), _, tensor_out(),
               "block i of every member's tensor reduced into group rank i's output"),
    collective(OpKind::kAllToAll, "all_to_all", CollectiveKind::kAllToAll, "", false, false,
               _, list_in(Ranks::kEvery), list_out(Ranks::kEvery), "entry j of the list to group rank j's output entry i"),
    collective(OpKind::kAllToAllSingle, "all_to_all_single", CollectiveKind::kAllToAll, "", false, kSplits,
               as_blocks(tensor_in()), _, as_blocks(tensor_out()), "block j of the tensor to block i of group rank j's output"),
    collective(OpKind::kBarrier, "barrier", CollectiveKind::kBarrier, "", false, false, _, _, _,
               "no member leaves before every one entered"),
    //       kind                       name                 async  family                 fingerprint kind
    OpSpec{OpKind::kMonitoredBarrier, "monitored_barrier", "", OpFamily::kCollective, CollectiveKind::kMonitoredBarrier,
           // peer rooted any_src tag  reduce splits algorithm timeout blocking async
           "", false, false, false, false, false, false, true, true, false, {_, _, _},
           "a barrier whose first member names the members that did not arrive within the timeout"},
    OpSpec{OpKind::kBatchIsendIrecv, "batch_isend_irecv", "", OpFamily::kBatch, CollectiveKind::kNone,
           "", false, false, false, false, false, false, false, true, true, {_, _, _},
           "isend and irecv ops issued together, completing together"},
};

// Adding an OpKind without its row, or rows out of order, fails here.
constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<std::size_t>(kTable[i].kind) != i || kTable[i].name.empty()) return false;
  return true;
}
static_assert(rows_in_order(), "op_table(): one row per OpKind, in OpKind's order");

}  // namespace

std::string_view slot_name(Slot s) {
  switch (s) {
    case Slot::kTensor: return "tensor";
    case Slot::kList: return "list";
    case Slot::kOutput: return "output";
  }
  return "?";
}

std::span<const OpSpec, kNumOpKinds> op_table() { return kTable; }

const OpSpec& op_spec(OpKind k) {
  const auto i = static_cast<std::size_t>(k);
  if (i >= kTable.size()) throw std::out_of_range("op_spec: no op of code " + std::to_string(i));
  return kTable[i];
}

std::optional<NamedOp> parse_op(std::string_view name) {
  for (const OpSpec& s : kTable) {
    if (s.name == name) return NamedOp{s.kind, false};
    if (!s.async_name.empty() && s.async_name == name) return NamedOp{s.kind, true};
  }
  return std::nullopt;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpSpec& s : kTable) names.emplace_back(s.name);
  for (const OpSpec& s : kTable)
    if (!s.async_name.empty()) names.emplace_back(s.async_name);
  return names;
}

std::string_view op_name(OpKind k, bool async) {
  const OpSpec& s = op_spec(k);
  return async && !s.async_name.empty() ? s.async_name : s.name;
}

std::vector<TensorView> DistCall::views(Slot s) const {
  const Operand& o = spec().operand(s);
  if (!o.present()) return {};
  switch (s) {
    case Slot::kTensor: return {tensor};
    case Slot::kList: return list;
    case Slot::kOutput: return o.is_list() ? output_list : std::vector<TensorView>{output};
  }
  return {};
}

void DistCall::set_views(Slot s, std::vector<TensorView> v) {
  const Operand& o = spec().operand(s);
  if (!o.present()) return;
  if (!o.is_list() && v.size() != 1)
    throw std::invalid_argument(std::string(name()) + ": the " + std::string(slot_name(s)) +
                                " is one tensor, given " + std::to_string(v.size()));
  switch (s) {
    case Slot::kTensor: tensor = v[0]; break;
    case Slot::kList: list = std::move(v); break;
    case Slot::kOutput:
      if (o.is_list()) output_list = std::move(v);
      else output = v[0];
      break;
  }
}

Work dispatch(Dist& d, const DistCall& c) {
  const Group& g = c.group;
  check_group_alive(g, d.rank(), c.name());
  const CollectiveOptions o = c.options();
  switch (c.kind) {
    case OpKind::kSend:
      return c.async ? d.isend(c.tensor, c.peer, c.tag, g, c.timeout_ns, c.poll_ns)
                     : d.send(c.tensor, c.peer, c.tag, g, c.timeout_ns);
    case OpKind::kRecv:
      return c.async ? d.irecv(c.tensor, c.peer, c.tag, g, c.timeout_ns, c.poll_ns)
                     : d.recv(c.tensor, c.peer, c.tag, g, c.timeout_ns);
    case OpKind::kBroadcast: return d.broadcast(c.tensor, c.peer, g, o);
    case OpKind::kReduce: return d.reduce(c.tensor, c.peer, c.reduce_op, g, o);
    case OpKind::kAllReduce: return d.all_reduce(c.tensor, c.reduce_op, g, o);
    case OpKind::kScatter: return d.scatter(c.tensor, c.peer, c.list, g, o);
    case OpKind::kGather: return d.gather(c.tensor, c.peer, c.list, g, o);
    case OpKind::kAllGather: return d.all_gather(c.list, c.tensor, g, o);
    case OpKind::kAllGatherIntoTensor: return d.all_gather_into_tensor(c.output, c.tensor, g, o);
    case OpKind::kReduceScatter: return d.reduce_scatter(c.output, c.list, c.reduce_op, g, o);
    case OpKind::kReduceScatterTensor: return d.reduce_scatter_tensor(c.output, c.tensor, c.reduce_op, g, o);
    case OpKind::kAllToAll: return d.all_to_all(c.output_list, c.list, g, o);
    case OpKind::kAllToAllSingle:
      return d.all_to_all_single(c.output, c.tensor, c.output_splits, c.input_splits, g, o);
    case OpKind::kBarrier: return d.barrier(g, o);
    case OpKind::kMonitoredBarrier: return d.monitored_barrier(g, c.timeout_ns, c.wait_all_ranks);
    case OpKind::kBatchIsendIrecv: return d.batch_isend_irecv(c.p2p, g);
  }
  throw std::invalid_argument("dispatch: no op of code " + std::to_string(static_cast<int>(c.kind)));
}

std::vector<TensorView> oracle_blocks(const DistCall& c, Slot s, std::size_t group_size) {
  const Operand& o = c.spec().operand(s);
  std::vector<TensorView> v = c.views(s);
  if (!o.blocks || v.size() != 1) return v;
  // The tensor forms: equal blocks, or the call's splits (element counts).
  const bool is_input = o.reads != Ranks::kNone;
  const std::vector<std::size_t>& splits = is_input ? c.input_splits : c.output_splits;
  if (!c.spec().splits || splits.empty()) {
    const std::size_t each = group_size ? v[0].count / group_size : 0;
    return split_blocks(v[0].slice(0, each * group_size), std::vector<std::size_t>(group_size, each), group_size,
                        is_input ? "input" : "output", "the group");
  }
  return split_blocks(v[0], splits, group_size, is_input ? "input" : "output", "the group");
}

}  // namespace collie
