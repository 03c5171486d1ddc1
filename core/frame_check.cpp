#include "core/frame_check.h"

#include <array>
#include <string_view>

namespace collie {

namespace {

enum class Shown { kUnsigned, kSigned, kFrameKind, kDType, kCollective, kReduceOp };

struct Field {
  const char* name;
  int bits;  // the value's width: a change outside it is not this field's
  Shown shown;
};

// In the order of values() below.
constexpr std::array<Field, kCheckedFields> kFields = {{
    {"kind", 8, Shown::kFrameKind},
    {"src", 32, Shown::kSigned},
    {"dst", 32, Shown::kSigned},
    {"context", 32, Shown::kUnsigned},
    {"group_digest", 64, Shown::kUnsigned},
    {"tag", 32, Shown::kSigned},
    {"channel_seq", 64, Shown::kUnsigned},
    {"rendezvous_id", 64, Shown::kUnsigned},
    {"dtype", 8, Shown::kDType},
    {"count", 64, Shown::kUnsigned},
    {"bytes", 64, Shown::kUnsigned},
    {"fingerprint.op", 8, Shown::kCollective},
    {"fingerprint.reduce_op", 8, Shown::kReduceOp},
    {"fingerprint.algorithm", 8, Shown::kUnsigned},
    {"fingerprint.dtype", 8, Shown::kDType},
    {"fingerprint.root", 32, Shown::kSigned},
    {"fingerprint.seq", 64, Shown::kUnsigned},
    {"fingerprint.count", 64, Shown::kUnsigned},
}};

static_assert(std::string_view(kFields[0].name) == "kind" && std::string_view(kFields[1].name) == "src" &&
              std::string_view(kFields[2].name) == "dst" && std::string_view(kFields[5].name) == "tag" &&
              std::string_view(kFields[10].name) == "bytes");

std::array<std::uint64_t, kCheckedFields> values(const FrameHeader& h) {
  auto u32 = [](std::int32_t v) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)); };
  return {static_cast<std::uint64_t>(h.kind), u32(h.src),          u32(h.dst),
          h.context,                          h.group_digest,       u32(h.tag),
          h.channel_seq,                      h.rendezvous_id,      static_cast<std::uint64_t>(h.dtype),
          h.count,                            h.bytes,              static_cast<std::uint64_t>(h.fp.op),
          static_cast<std::uint64_t>(h.fp.reduce_op), h.fp.algorithm, static_cast<std::uint64_t>(h.fp.dtype),
          u32(h.fp.root),                     h.fp.seq,             h.fp.count};
}

// Multiplication by x in GF(2^64) modulo x^64 + x^4 + x^3 + x + 1.
constexpr std::uint64_t times_x(std::uint64_t a) { return (a << 1) ^ ((a >> 63) * 0x1bu); }

// sum: the values' XOR. weighted: their polynomial sum over i of
// x^(17 - i) value_i (Horner's rule with times_x, value 0 first), computed
// as one carry-less 81-bit product per value and a single reduction: every
// frame is sealed and checked, so this is on the hot path.
FrameCheck check_of(const FrameHeader& h) {
  std::uint64_t sum = 0, lo = 0, hi = 0;
  auto add = [&](int place, std::uint64_t v) {
    sum ^= v;
    lo ^= v << place;
    if (place) hi ^= v >> (64 - place);
  };
  auto u32 = [](std::int32_t v) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)); };
  add(17, static_cast<std::uint64_t>(h.kind));
  add(16, u32(h.src));
  add(15, u32(h.dst));
  add(14, h.context);
  add(13, h.group_digest);
  add(12, u32(h.tag));
  add(11, h.channel_seq);
  add(10, h.rendezvous_id);
  add(9, static_cast<std::uint64_t>(h.dtype));
  add(8, h.count);
  add(7, h.bytes);
  add(6, static_cast<std::uint64_t>(h.fp.op));
  add(5, static_cast<std::uint64_t>(h.fp.reduce_op));
  add(4, h.fp.algorithm);
  add(3, static_cast<std::uint64_t>(h.fp.dtype));
  add(2, u32(h.fp.root));
  add(1, h.fp.seq);
  add(0, h.fp.count);
  // hi * x^64, with x^64 = x^4 + x^3 + x + 1 (hi < 2^17: no second round).
  return FrameCheck{sum, lo ^ hi ^ (hi << 1) ^ (hi << 3) ^ (hi << 4)};
}

std::string text(int field, std::uint64_t v) {
  switch (kFields[static_cast<std::size_t>(field)].shown) {
    case Shown::kUnsigned: return std::to_string(v);
    case Shown::kSigned: return std::to_string(static_cast<std::int32_t>(static_cast<std::uint32_t>(v)));
    case Shown::kFrameKind: {
      static const char* kinds[] = {"eager", "RTS", "CTS", "NACK", "data"};
      return std::to_string(v) + (v <= 4 ? std::string(" (") + kinds[v] + ")" : std::string());
    }
    case Shown::kDType:
      return std::to_string(v) +
             (v < static_cast<std::uint64_t>(kNumDTypes)
                  ? " (" + std::string(dtype_name(static_cast<DType>(v))) + ")"
                  : std::string());
    case Shown::kCollective:
      return std::to_string(v) + (v < static_cast<std::uint64_t>(kNumCollectiveKinds)
                                      ? " (" + collective_name(static_cast<CollectiveKind>(v)) + ")"
                                      : std::string());
    case Shown::kReduceOp:
      return std::to_string(v) +
             (v < static_cast<std::uint64_t>(kNumReduceOps)
                  ? " (" + std::string(reduce_op_name(static_cast<ReduceOp>(v))) + ")"
                  : std::string());
  }
  return std::to_string(v);
}

}  // namespace

void seal(FrameHeader& h) { h.check = check_of(h); }

std::optional<HeaderDamage> inspect(const FrameHeader& h) {
  const FrameCheck now = check_of(h);
  const std::uint64_t e = now.sum ^ h.check.sum;        // the change, if one value changed
  const std::uint64_t ew = now.weighted ^ h.check.weighted;  // x^place times it
  if (e == 0 && ew == 0) return std::nullopt;
  HeaderDamage d;
  if (e != 0) {
    std::uint64_t p = e;  // e * x^place, place = kCheckedFields - 1 - field
    for (int place = 0; place < kCheckedFields; ++place, p = times_x(p)) {
      if (p != ew) continue;
      const int field = kCheckedFields - 1 - place;
      const int bits = kFields[static_cast<std::size_t>(field)].bits;
      if (bits < 64 && (e >> bits) != 0) break;  // wider than the field: not it alone
      const std::uint64_t is = values(h)[static_cast<std::size_t>(field)];
      d.field = field;
      d.name = kFields[static_cast<std::size_t>(field)].name;
      d.is = text(field, is);
      d.was = text(field, is ^ e);
      return d;
    }
  }
  return d;  // more than one value, or the check words themselves
}

std::optional<std::string> out_of_range_field(const FrameHeader& h) {
  if (static_cast<int>(h.kind) > static_cast<int>(FrameKind::kData)) return "kind";
  if (static_cast<int>(h.dtype) >= kNumDTypes) return "dtype";
  if (static_cast<int>(h.fp.op) >= kNumCollectiveKinds) return "fingerprint.op";
  if (static_cast<int>(h.fp.reduce_op) >= kNumReduceOps) return "fingerprint.reduce_op";
  if (static_cast<int>(h.fp.dtype) >= kNumDTypes) return "fingerprint.dtype";
  return std::nullopt;
}

std::optional<std::string> fingerprint_difference(const Fingerprint& fp) {
  FrameHeader h, empty;
  h.fp = fp;
  const auto a = values(h);
  const auto e = values(empty);
  for (int f = 0; f < kCheckedFields; ++f) {
    const auto i = static_cast<std::size_t>(f);
    if (a[i] != e[i]) return std::string(kFields[i].name) + " is " + text(f, a[i]);
  }
  return std::nullopt;
}

std::optional<std::string> echo_mismatch(const FrameHeader& answer, const FrameHeader& rts) {
  // Not echoed: the kind, the direction, the payload's size (places in
  // kFields); a NACK's tag says why it refuses. Every CTS and data frame
  // comes through here: fields are compared by place, and text is made only
  // for a difference.
  constexpr std::uint32_t kNotEchoed = (1u << 0) | (1u << 1) | (1u << 2) | (1u << 10);
  constexpr std::uint32_t kTag = 1u << 5;
  const std::uint32_t skip = kNotEchoed | (answer.kind == FrameKind::kNack ? kTag : 0u);
  if (answer.context == rts.context && answer.group_digest == rts.group_digest &&
      (answer.tag == rts.tag || (skip & kTag)) && answer.channel_seq == rts.channel_seq &&
      answer.rendezvous_id == rts.rendezvous_id && answer.dtype == rts.dtype && answer.count == rts.count &&
      answer.fp == rts.fp)
    return std::nullopt;
  const auto a = values(answer);
  const auto r = values(rts);
  for (int f = 0; f < kCheckedFields; ++f) {
    const auto i = static_cast<std::size_t>(f);
    if ((skip >> f) & 1u || a[i] == r[i]) continue;
    return std::string(kFields[i].name) + " is " + text(f, a[i]) + " but the RTS's is " + text(f, r[i]);
  }
  return std::nullopt;
}

}  // namespace collie
