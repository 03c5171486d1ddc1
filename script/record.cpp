#include "script/record.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "backends/remote/call_codec.h"
#include "core/op.h"
#include "script/hub.h"

namespace collie::script {

namespace {

using json = nlohmann::json;

std::string number(double v, DType dtype) {
  if (dtype == DType::kBool) return v != 0 ? "1" : "0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// YAML's double-quoted string.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Element i of a host view, as Tensor::get() converts it.
double value_at(const TensorView& v, std::size_t i) {
  Tensor one(v.dtype, {1});
  std::memcpy(one.data(), v.byte_data() + i * dtype_size(v.dtype), dtype_size(v.dtype));
  return one.get(0);
}

bool finite_values(const std::vector<TensorView>& views) {
  for (const TensorView& v : views)
    for (std::size_t i = 0; i < v.count; ++i)
      if (!std::isfinite(value_at(v, i))) return false;
  return true;
}

constexpr const char* kPattern = "(i * 3 + j * 5 + rank * 7) % 11";

// One tensor (or list) declaration: `views` are what the op passed.
std::string declaration(const std::string& name, const std::vector<TensorView>& views, bool list, bool reads,
                        std::size_t list_entries, std::size_t entry_count, DType entry_dtype) {
  std::ostringstream os;
  const DType dtype = views.empty() ? entry_dtype : views[0].dtype;
  const std::size_t count = views.empty() ? entry_count : views[0].count;
  os << "  " << name << ": {dtype: " << dtype_name(dtype) << ", shape: [" << count << "]";
  if (list) os << ", list: " << (views.empty() ? list_entries : views.size());
  std::size_t total = 0;
  for (const TensorView& v : views) total += v.count;
  if (!reads || views.empty() || total == 0) {
    os << "}";  // zeros: the op only writes it, or the program passed none here
  } else if (!finite_values(views) || total > (list ? kMaxLiteralListValues : kMaxLiteralValues)) {
    os << ", init: \"" << kPattern << "\"}  # " << total << " values: a fixed pattern, not the program's";
  } else if (!list) {
    os << ", values: [";
    for (std::size_t i = 0; i < views[0].count; ++i) os << (i ? ", " : "") << number(value_at(views[0], i), dtype);
    os << "]}";
  } else {
    // The entries differ: element i of entry j, as one expression.
    std::string e = "0";
    for (std::size_t j = views.size(); j-- > 0;)
      for (std::size_t i = views[j].count; i-- > 0;)
        e = number(value_at(views[j], i), dtype) + " if j == " + std::to_string(j) + " and i == " + std::to_string(i) +
            " else " + e;
    os << ", init: \"" << e << "\"}";
  }
  return os.str();
}

struct RankWriter {
  int rank;
  std::vector<std::string> steps;
  std::vector<std::string> tensors;
  std::set<std::uint64_t> async_open;  // handles not waited for yet

  void group(const KeptCall& k) {
    std::ostringstream os;
    os << "{op: new_group, name: g" << k.group << ", members: [";
    for (std::size_t i = 0; i < k.ranks.size(); ++i) os << (i ? ", " : "") << k.ranks[i];
    os << "]}";
    steps.push_back(os.str());
  }

  void destroy_group(const KeptCall& k) { steps.push_back("{op: destroy_group, group: g" + std::to_string(k.group) + "}"); }

  void op(const KeptCall& k, const std::map<int, std::size_t>& group_sizes, int world) {
    remote::DecodedCall d = remote::decode_call(k.request.head, k.request.blobs);
    const DistCall& c = d.call;
    const OpSpec& spec = c.spec();
    const std::string base = "r" + std::to_string(rank) + "_op" + std::to_string(k.op);
    const bool is_root = spec.rooted && c.peer == rank;
    const auto gs = group_sizes.find(k.group);
    const std::size_t group_size = k.group == 0 ? static_cast<std::size_t>(world)
                                   : gs == group_sizes.end() ? 1
                                                             : gs->second;
    std::ostringstream os;
    os << "{op: " << op_name(c.kind, c.async && !spec.async_name.empty());
    // The tensor slot's count and dtype: what a root-only list takes its shape from.
    const std::vector<TensorView> tensor_views = c.views(Slot::kTensor);
    for (std::size_t s = 0; s < kNumSlots; ++s) {
      const auto slot = static_cast<Slot>(s);
      const Operand& o = spec.operand(slot);
      if (!o.present()) continue;
      const std::vector<TensorView> v = c.views(slot);
      const std::string name = base + (slot == Slot::kTensor ? "" : slot == Slot::kList ? "_list" : "_out");
      const bool list = o.is_list();
      const bool reads = o.read_by(is_root) && o.passed_by(is_root);
      if (v.empty() && !list) continue;
      const std::size_t count = tensor_views.empty() ? 0 : tensor_views[0].count;
      const DType dtype = tensor_views.empty() ? DType::kFloat32 : tensor_views[0].dtype;
      tensors.push_back(declaration(name, v, list, reads, group_size, count, dtype));
      os << ", " << slot_name(slot) << ": " << name;
    }
    if (!spec.peer_key.empty()) {
      os << ", " << spec.peer_key << ": ";
      if (spec.any_source && c.peer == kAnySource) os << "any";
      else os << c.peer;
    }
    if (spec.tag && c.tag != 0) os << ", tag: " << c.tag;
    if (spec.reduce_op) os << ", reduce_op: " << reduce_op_name(c.reduce_op);
    if (spec.timeout && c.timeout_ns > 0) os << ", timeout_us: " << number(static_cast<double>(c.timeout_ns) / 1000.0, DType::kFloat64);
    if (c.kind == OpKind::kMonitoredBarrier && c.wait_all_ranks) os << ", wait_all_ranks: true";
    if (spec.splits) {
      auto sizes = [&](const char* key, const std::vector<std::size_t>& s) {
        if (s.empty()) return;
        os << ", " << key << ": [";
        for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
        os << "]";
      };
      sizes("input_split_sizes", c.input_splits);
      sizes("output_split_sizes", c.output_splits);
    }
    if (spec.family == OpFamily::kBatch) {
      os << ", ops: [";
      for (std::size_t i = 0; i < c.p2p.size(); ++i) {
        const P2POp& p = c.p2p[i];
        const std::string name = base + "_p" + std::to_string(i);
        tensors.push_back(declaration(name, {p.tensor}, false, p.is_send, 0, 0, p.tensor.dtype));
        os << (i ? ", " : "") << "{op: " << (p.is_send ? "isend" : "irecv") << ", tensor: " << name << ", "
           << (p.is_send ? "dst" : "src") << ": " << p.peer << (p.tag ? ", tag: " + std::to_string(p.tag) : "") << "}";
      }
      os << "]";
    }
    if (k.group != 0) os << ", group: g" << k.group;
    if (k.async) {
      os << ", handle: h" << k.op;
      async_open.insert(k.op);
    }
    os << "}";
    // Where the program made the call, as a comment.
    const std::string where = where_text(k.request.head.value("where", json::array()));
    if (!where.empty()) os << "  # " << where;
    steps.push_back(os.str());
  }

  void wait(const KeptCall& k) {
    if (!async_open.erase(k.op)) return;  // a blocking op's, or waited for already
    steps.push_back("{op: wait, handle: h" + std::to_string(k.op) + "}");
  }
};

// "crash:rank=1,op=2,detect_us=0" as a scenario's {fault: crash, rank: 1, ...}.
std::string fault_mapping(const std::string& text) {
  const auto colon = text.find(':');
  std::string out = "{fault: " + text.substr(0, colon);
  if (colon != std::string::npos) {
    std::stringstream ss(text.substr(colon + 1));
    std::string kv;
    while (std::getline(ss, kv, ',')) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
      const bool plain = !value.empty() && value.find_first_not_of("0123456789.") == std::string::npos;
      out += ", " + key + ": " + (plain ? value : quoted(value));
    }
  }
  return out + "}";
}

}  // namespace

std::string record_scenario(const RecordInput& in) {
  std::ostringstream os;
  os << "# Recorded by `collie run --record` from: " << in.command << "\n";
  std::string flags;
  for (const auto& f : in.replay_flags) flags += " " + f;
  os << "# That run: " << in.verdict << " (backend " << in.backend << ", seed " << in.seed
     << "). `collie run` of this file" << (flags.empty() ? "" : " (with" + flags + ")")
     << " replays the ops it issued and ends the same way.\n";
  os << "version: 1\n";
  os << "name: " << quoted("recorded: " + in.command) << "\n";
  os << "description: " << quoted("the ops of `" + in.command + "`, recorded by collie run --record") << "\n";
  os << "world: " << in.world << "\n";
  if (in.backend != "sim") os << "backend: " << quoted(in.backend) << "\n";
  os << "seed: " << in.seed << "\n";
  if (in.timeout_ns > 0) os << "timeout_us: " << number(static_cast<double>(in.timeout_ns) / 1000.0, DType::kFloat64) << "\n";
  if (!in.faults.empty()) {
    os << "faults:\n";
    for (const auto& f : in.faults) os << "  - " << fault_mapping(f) << "\n";
  }
  std::vector<RankWriter> ranks;
  for (std::size_t r = 0; r < in.ranks.size(); ++r) {
    RankWriter w{static_cast<int>(r), {}, {}, {}};
    std::map<int, std::size_t> group_sizes;
    if (in.ranks[r]) {
      for (const KeptCall& k : *in.ranks[r]) {
        switch (k.kind) {
          case KeptCall::Kind::kGroup:
            group_sizes[k.group] = k.ranks.size();
            w.group(k);
            break;
          case KeptCall::Kind::kDestroyGroup:
            w.destroy_group(k);
            break;
          case KeptCall::Kind::kOp:
            w.op(k, group_sizes, in.world);
            break;
          case KeptCall::Kind::kWait:
            w.wait(k);
            break;
        }
      }
    }
    ranks.push_back(std::move(w));
  }
  bool any_tensor = false;
  for (const auto& w : ranks) any_tensor = any_tensor || !w.tensors.empty();
  if (any_tensor) {
    os << "tensors:\n";
    for (const auto& w : ranks)
      for (const auto& t : w.tensors) os << t << "\n";
  }
  os << "programs:\n";
  for (const auto& w : ranks) {
    os << "  " << w.rank << ":" << (w.steps.empty() ? " []" : "") << "\n";
    for (const auto& s : w.steps) os << "    - " << s << "\n";
  }
  return os.str();
}

}  // namespace collie::script
