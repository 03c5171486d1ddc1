#include "script/script_protocol.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/op.h"

namespace collie::script {

namespace {

[[noreturn]] void malformed(const std::string& what) { throw std::runtime_error(what); }

// Reads little-endian fields in order, never past the end.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes, const char* what) : bytes_(bytes), what_(what) {}
  template <typename T>
  T get() {
    T v{};
    if (bytes_.size() - at_ < sizeof v)
      malformed(std::string(what_) + " shorter than its fields (" + std::to_string(bytes_.size()) + " bytes)");
    std::memcpy(&v, bytes_.data() + at_, sizeof v);  // little-endian hosts only (as the op protocol)
    at_ += sizeof v;
    return v;
  }
  void skip(std::size_t n) {
    if (bytes_.size() - at_ < n) malformed(std::string(what_) + " shorter than its fields");
    at_ += n;
  }
  std::size_t at() const { return at_; }

 private:
  std::span<const std::byte> bytes_;
  const char* what_;
  std::size_t at_ = 0;
};

}  // namespace

std::vector<std::byte> encode_binary_answer(const BinaryAnswer& a, const std::vector<std::size_t>& outputs,
                                            const std::vector<std::span<const std::byte>>& blobs) {
  constexpr std::size_t kFixed = 24, kPerOutput = 12;
  const std::size_t header = kFixed + kPerOutput * outputs.size();
  std::size_t total = 4 + header;
  for (const auto& b : blobs) total += b.size();
  std::vector<std::byte> out(total);
  std::byte* w = out.data();
  auto put = [&w](const auto& v) {  // little-endian hosts only (as the op protocol)
    std::memcpy(w, &v, sizeof v);
    w += sizeof v;
  };
  put(static_cast<std::uint32_t>(header) | kBinaryFlag);
  put(static_cast<std::uint8_t>(a.type));
  put(std::uint8_t{0});
  put(static_cast<std::uint16_t>(outputs.size()));
  put(a.source);
  put(a.id);
  put(a.op);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    put(static_cast<std::uint32_t>(outputs[i]));
    put(static_cast<std::uint64_t>(i < blobs.size() ? blobs[i].size() : 0));
  }
  for (const auto& b : blobs) {
    if (!b.empty()) std::memcpy(w, b.data(), b.size());
    w += b.size();
  }
  return out;
}

BinaryRequest read_binary_request(std::span<const std::byte> header, std::optional<std::uint64_t>* id) {
  Cursor in(header, "a binary request");
  BinaryRequest r;
  in.get<std::uint64_t>();  // the payload's size: the framing's
  r.id = in.get<std::uint64_t>();
  *id = r.id;
  const auto type = in.get<std::uint8_t>();
  if (type < 1 || type > 3) malformed("a binary request of unknown type " + std::to_string(type));
  r.type = static_cast<BinaryRequest::Type>(type);
  r.flags = in.get<std::uint8_t>();
  in.get<std::uint16_t>();
  r.site = in.get<std::uint32_t>();
  const auto site_bytes = in.get<std::uint32_t>();
  in.get<std::uint32_t>();
  if (site_bytes > header.size() - kRequestCommonBytes)
    malformed("a binary request whose call site (" + std::to_string(site_bytes) + " bytes) is longer than its header");
  if (site_bytes > 0) {
    if (r.site == 0) malformed("a binary request that defines call site 0");
    r.site_json = std::string_view(reinterpret_cast<const char*>(header.data()) + header.size() - site_bytes, site_bytes);
  }
  if (r.type != BinaryRequest::Type::kOp) {
    r.op = in.get<std::uint64_t>();
    r.timeout_ns = in.get<std::int64_t>();
    if (r.timeout_ns < 0) malformed("a wait with a negative timeout (" + std::to_string(r.timeout_ns) + " ns)");
    if (in.at() + site_bytes != header.size()) malformed("a wait or test request of " + std::to_string(header.size()) + " bytes");
  }
  return r;
}

remote::DecodedCall decode_binary_op(std::span<const std::byte> header, std::span<const std::byte> payload,
                                     std::uint32_t* group) {
  Cursor in(header, "an op request");
  in.skip(16);
  in.get<std::uint8_t>();
  const auto flags = in.get<std::uint8_t>();
  in.skip(6);
  const auto site_bytes = in.get<std::uint32_t>();
  in.skip(4);
  remote::DecodedCall d;
  DistCall& c = d.call;
  const auto kind = in.get<std::uint8_t>();
  if (kind >= kNumOpKinds) malformed("an op of unknown kind " + std::to_string(kind));
  c.kind = static_cast<OpKind>(kind);
  const OpSpec& spec = c.spec();
  c.async = (flags & BinaryRequest::kAsync) != 0;
  const auto reduce = in.get<std::uint8_t>();
  if (reduce >= kNumReduceOps) malformed("an unknown reduce op " + std::to_string(reduce));
  c.reduce_op = static_cast<ReduceOp>(reduce);
  std::array<std::uint32_t, kNumSlots> slots{};
  slots[0] = in.get<std::uint8_t>();
  in.get<std::uint8_t>();
  slots[1] = in.get<std::uint32_t>();
  slots[2] = in.get<std::uint32_t>();
  *group = in.get<std::uint32_t>();
  c.peer = in.get<std::int32_t>();
  if ((flags & BinaryRequest::kAnySource) != 0) c.peer = kAnySource;
  c.tag = in.get<std::int32_t>();
  c.timeout_ns = in.get<std::int64_t>();
  c.wait_all_ranks = (flags & BinaryRequest::kWaitAllRanks) != 0;
  const auto n_p2p = in.get<std::uint32_t>();
  const auto n_in = in.get<std::uint32_t>();
  const auto n_out = in.get<std::uint32_t>();
  in.get<std::uint32_t>();
  // Every count is bounded by the header's own size before anything is allocated.
  std::uint64_t n_buffers = n_p2p;
  for (std::uint32_t n : slots) n_buffers += n;
  const std::uint64_t rest = 12 * n_buffers + 12 * std::uint64_t{n_p2p} + 8 * (std::uint64_t{n_in} + n_out) + site_bytes;
  if (rest != header.size() - in.at())
    malformed("an op request of " + std::to_string(header.size()) + " bytes, not the " +
              std::to_string(in.at() + rest) + " its counts say");
  std::size_t at = 0;
  d.tensors.reserve(static_cast<std::size_t>(n_buffers));
  for (std::uint64_t k = 0; k < n_buffers; ++k) {
    const auto dt = in.get<std::uint32_t>();
    const auto count = in.get<std::uint64_t>();
    if (dt >= static_cast<std::uint32_t>(kNumDTypes)) malformed("a buffer of unknown dtype " + std::to_string(dt));
    const auto dtype = static_cast<DType>(dt);
    if (count > (payload.size() - at) / dtype_size(dtype)) malformed("buffers larger than the request's payload");
    Tensor t(dtype, {static_cast<std::int64_t>(count)});
    if (t.bytes()) std::memcpy(t.data(), payload.data() + at, t.bytes());
    at += t.bytes();
    d.tensors.push_back(std::move(t));
  }
  if (at != payload.size()) malformed("a payload of " + std::to_string(payload.size()) + " bytes for " + std::to_string(at) + " bytes of buffers");
  std::size_t next = 0;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& o = spec.operand(slot);
    if (slots[k] == 0) continue;
    if (!o.present() || (!o.is_list() && slots[k] != 1))
      malformed(std::to_string(slots[k]) + " buffers in the " + std::string(slot_name(slot)) + " slot of " +
                std::string(c.name()));
    std::vector<TensorView> v;
    v.reserve(slots[k]);
    for (std::uint32_t i = 0; i < slots[k]; ++i) v.push_back(d.tensors[next++].view());
    c.set_views(slot, std::move(v));
  }
  if (n_p2p > 0 && spec.family != OpFamily::kBatch) malformed("batch ops for " + std::string(c.name()));
  for (std::uint32_t k = 0; k < n_p2p; ++k) {
    const auto send = in.get<std::uint8_t>();
    in.skip(3);
    const auto peer = in.get<std::int32_t>();
    const auto tag = in.get<std::int32_t>();
    c.p2p.push_back(P2POp{send != 0, d.tensors[next++].view(), peer, tag});
  }
  if ((n_in || n_out) && !spec.splits) malformed("split sizes for " + std::string(c.name()));
  for (std::uint32_t k = 0; k < n_in; ++k) c.input_splits.push_back(in.get<std::uint64_t>());
  for (std::uint32_t k = 0; k < n_out; ++k) c.output_splits.push_back(in.get<std::uint64_t>());
  return d;
}

}  // namespace collie::script
