#include "backends/remote/call_codec.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace collie::remote {

namespace {

using json = nlohmann::json;

[[noreturn]] void malformed(const std::string& what) { throw std::runtime_error("the controller sent " + what); }

}  // namespace

std::vector<std::size_t> written_buffers(const DistCall& c, int rank) {
  const OpSpec& spec = c.spec();
  std::vector<std::size_t> writes;
  if (!(c.group.is_world_default() || c.group.is_member())) return writes;
  const bool is_root = spec.rooted && c.peer == rank;
  std::size_t at = 0;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& o = spec.operand(slot);
    if (!o.present()) continue;
    const std::size_t n = c.views(slot).size();
    for (std::size_t i = 0; i < n; ++i, ++at)
      if (o.written_by(is_root)) writes.push_back(at);
  }
  if (spec.family == OpFamily::kBatch)
    for (const P2POp& op : c.p2p) {
      if (!op.is_send) writes.push_back(at);
      ++at;
    }
  return writes;
}

EncodedCall encode_call(const DistCall& c, int rank) {
  const OpSpec& spec = c.spec();
  EncodedCall e;
  json& h = e.head;
  h["op"] = std::string(c.name());
  h["async"] = c.async;
  if (!spec.peer_key.empty()) {
    if (spec.any_source && c.peer == kAnySource) h["any_source"] = true;
    else h["peer"] = c.peer;
  }
  if (spec.tag) h["tag"] = c.tag;
  if (spec.reduce_op) h["reduce_op"] = std::string(reduce_op_name(c.reduce_op));
  if (spec.algorithm && c.algorithm != Algorithm::kAuto) h["algorithm"] = std::string(algorithm_name(c.algorithm));
  if (spec.timeout && c.timeout_ns > 0) h["timeout_ns"] = c.timeout_ns;
  if (c.kind == OpKind::kMonitoredBarrier) h["wait_all_ranks"] = c.wait_all_ranks;
  if (c.must_be_pending) h["must_be_pending"] = true;
  if (c.async && c.poll_ns > 0) h["poll_ns"] = c.poll_ns;
  if (spec.splits) {
    if (!c.input_splits.empty()) h["input_split_sizes"] = c.input_splits;
    if (!c.output_splits.empty()) h["output_split_sizes"] = c.output_splits;
  }
  json layout = json::object();
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& o = spec.operand(slot);
    if (!o.present()) continue;
    const std::vector<TensorView> v = c.views(slot);
    if (o.is_list() && v.empty()) continue;
    layout[std::string(slot_name(slot))] = v.size();
    e.buffers.insert(e.buffers.end(), v.begin(), v.end());
  }
  if (spec.family == OpFamily::kBatch) {
    json ops = json::array();
    for (const P2POp& op : c.p2p) {
      ops.push_back(json{{"send", op.is_send}, {"peer", op.peer}, {"tag", op.tag}});
      e.buffers.push_back(op.tensor);
    }
    h["p2p"] = std::move(ops);
  }
  h["layout"] = std::move(layout);
  h["writes"] = written_buffers(c, rank);
  json ts = json::array();
  for (const TensorView& t : e.buffers) {
    json one{{"dtype", std::string(dtype_name(t.dtype))}, {"count", t.count}};
    if (t.shape && (t.dims >= 2 || t.dims == 0)) one["shape"] = std::vector<std::int64_t>(t.shape, t.shape + t.dims);
    ts.push_back(std::move(one));
  }
  h["tensors"] = std::move(ts);
  return e;
}

DecodedCall decode_call(const json& h, const std::vector<std::vector<std::byte>>& blobs, std::size_t skew_elements) {
  DecodedCall d;
  DistCall& c = d.call;
  const std::string name = h.at("op").get<std::string>();
  const std::optional<NamedOp> named = parse_op(name);
  if (!named) malformed("an unknown op '" + name + "'");
  c.kind = named->kind;
  c.async = named->async || h.value("async", false);
  const OpSpec& spec = c.spec();
  c.peer = h.value("any_source", false) ? kAnySource : h.value("peer", -1);
  c.tag = h.value("tag", 0);
  if (h.contains("reduce_op")) {
    const auto op = parse_reduce_op(h["reduce_op"].get<std::string>());
    if (!op) malformed("an unknown reduce op '" + h["reduce_op"].get<std::string>() + "'");
    c.reduce_op = *op;
  }
  if (h.contains("algorithm")) {
    const auto a = parse_algorithm(h["algorithm"].get<std::string>());
    if (!a) malformed("an unknown algorithm '" + h["algorithm"].get<std::string>() + "'");
    c.algorithm = *a;
  }
  c.timeout_ns = h.value("timeout_ns", Nanos{0});
  c.wait_all_ranks = h.value("wait_all_ranks", false);
  c.must_be_pending = h.value("must_be_pending", false);
  c.poll_ns = h.value("poll_ns", Nanos{0});
  c.input_splits = h.value("input_split_sizes", std::vector<std::size_t>{});
  c.output_splits = h.value("output_split_sizes", std::vector<std::size_t>{});

  const json& ts = h.at("tensors");
  if (!ts.is_array() || ts.size() != blobs.size()) malformed("an op whose tensors and buffers differ in number");
  for (std::size_t k = 0; k < ts.size(); ++k) {
    const auto dt = parse_dtype(ts[k].at("dtype").get<std::string>());
    if (!dt) malformed("an unknown dtype");
    const auto count = ts[k].at("count").get<std::int64_t>();
    if (count < 0) malformed("a tensor of negative count");
    Tensor t = Tensor::with_head(*dt, {count}, kBufferHeadBytes + skew_elements * dtype_size(*dt));
    if (t.bytes() != blobs[k].size()) malformed("a buffer whose size is not its tensor's");
    if (t.bytes()) std::memcpy(t.data(), blobs[k].data(), t.bytes());
    d.tensors.push_back(std::move(t));
  }
  // The slots' buffers, in slot order, then the batch's.
  std::size_t at = 0;
  auto take = [&](std::size_t n) {
    if (n > d.tensors.size() - at) malformed("a layout with more buffers than the op has");
    std::vector<TensorView> v;
    for (std::size_t k = 0; k < n; ++k) v.push_back(d.tensors[at++].view());
    return v;
  };
  const json layout = h.value("layout", json::object());
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& o = spec.operand(slot);
    const std::string key(slot_name(slot));
    if (!o.present() || !layout.contains(key)) continue;
    const auto n = layout[key].get<std::size_t>();
    if (!o.is_list() && n != 1) malformed("a " + key + " of " + std::to_string(n) + " buffers for " + name);
    c.set_views(slot, take(n));
  }
  if (spec.family == OpFamily::kBatch) {
    for (const json& op : h.value("p2p", json::array())) {
      const std::vector<TensorView> v = take(1);
      c.p2p.push_back(P2POp{op.at("send").get<bool>(), v[0], op.at("peer").get<int>(), op.value("tag", 0)});
    }
  }
  if (at != d.tensors.size()) malformed("an op with buffers its layout does not place");
  for (const json& k : h.value("writes", json::array())) {
    const auto i = k.get<std::size_t>();
    if (i >= d.tensors.size()) malformed("a written buffer that does not exist");
    d.writes.push_back(i);
  }
  return d;
}

}  // namespace collie::remote
