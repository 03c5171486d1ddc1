// What travels between ranks: a fixed header and an optional payload.
//
// The header carries everything a receiver needs to validate a message before
// touching its buffer: the group context, the tag, the position in the
// sender->receiver channel, dtype and count, and for collectives a fingerprint
// of the call. Transports move headers and payloads; they never interpret
// them beyond `dst` and `bytes`, and never change a field: the core checks
// every header it receives (core/frame_check.h).
//
// What the protocol implies of each kind, which the receiving core checks:
//   eager  channel_seq the next of its channel; rendezvous_id 0; bytes =
//          count x the dtype's size (the payload).
//   RTS    channel_seq as eager; a rendezvous_id not already in flight from
//          its sender; bytes 0 (no payload) and count >= 1.
//   CTS    answers an RTS of the receiving rank that awaits one, from that
//          RTS's dst; echoes its context, group_digest, tag, channel_seq,
//          rendezvous_id, dtype, count and fingerprint; bytes 0.
//   NACK   as CTS, but its tag is the ErrorKind of the refusal (a group,
//          dtype or size mismatch) and its payload (bytes >= 1) the reason.
//   data   answers a CTS the receiving rank sent; echoes the RTS as CTS
//          does; bytes = count x the dtype's size (the payload).
// Every kind: dst is the receiving rank, src another rank of the world; on
// a point-to-point context the fingerprint is empty, on a collective one it
// names a call (op and seq >= 1) whose dtype is the frame's; src belongs to
// the context's group.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace collie {

enum class FrameKind : std::uint8_t {
  kEager = 0,  // header + payload; matched on arrival
  kRts = 1,    // rendezvous request-to-send: header only, matched on arrival
  kCts = 2,    // clear-to-send: the receiver matched an RTS and wants the data
  kNack = 3,   // the receiver matched an RTS but refuses it (size/dtype mismatch)
  kData = 4,   // rendezvous payload, addressed by rendezvous_id
};

// The collectives and barrier; kNone marks point-to-point traffic. The
// codes travel on the wire: new kinds are appended.
enum class CollectiveKind : std::uint8_t {
  kNone = 0,
  kBroadcast,
  kReduce,
  kAllReduce,
  kScatter,
  kGather,
  kAllGather,
  kBarrier,
  kReduceScatter,  // reduce_scatter and reduce_scatter_tensor
  kAllToAll,       // all_to_all and all_to_all_single
  kMonitoredBarrier,
};

// Whether `k` is one of the values above. The switch names every value and
// has no default, so a value added above without being added here fails to
// compile (-Werror=switch); the codes are contiguous from 0.
constexpr bool is_collective_kind(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kNone:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kBarrier:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kMonitoredBarrier:
      return true;
  }
  return false;
}
// Codes 0 .. kNumCollectiveKinds - 1 are kinds; a decoder refuses the rest.
inline constexpr int kNumCollectiveKinds = [] {
  int n = 0;
  while (n < 256 && is_collective_kind(static_cast<CollectiveKind>(n))) ++n;
  return n;
}();

std::string collective_name(CollectiveKind k);  // "all_reduce", ...

// Identifies one collective call. Every rank of a correct program computes the
// same fingerprint for the same call; any difference is a mismatch that names
// both sides. Point-to-point frames carry a zero fingerprint.
struct Fingerprint {
  CollectiveKind op = CollectiveKind::kNone;
  ReduceOp reduce_op = ReduceOp::kSum;  // meaningful for reduce, all_reduce and reduce_scatter
  std::uint8_t algorithm = 0;           // the Algorithm the call chose
  DType dtype = DType::kFloat32;
  std::int32_t root = -1;   // global rank of src/dst, -1 when none
  std::uint64_t seq = 0;    // the call's sequence number in its group (1-based)
  // Elements per rank (per list entry for scatter/gather; the output block
  // for reduce_scatter); 0 for all_to_all, whose blocks may differ in size
  // (each message's own length is checked against its receive instead).
  std::uint64_t count = 0;

  bool operator==(const Fingerprint&) const = default;
};

// "all_reduce(float32 x 4, SUM, ring) #3" -- how errors show a call.
std::string describe_call(const Fingerprint& fp);

// A header's check words (core/frame_check.h): written by the sender's
// core, checked by the receiver's. Transports move them as every other
// field and never compute them.
struct FrameCheck {
  std::uint64_t sum = 0;
  std::uint64_t weighted = 0;
};

struct FrameHeader {
  FrameKind kind = FrameKind::kEager;
  std::int32_t src = -1;              // global rank of the sender
  std::int32_t dst = -1;              // global rank of the receiver
  std::uint32_t context = 0;          // group context; p2p and collectives differ
  std::uint64_t group_digest = 0;     // hash of the group's members, to catch disagreement
  std::int32_t tag = 0;               // user tag (p2p) or step tag (collectives)
  std::uint64_t channel_seq = 0;      // kEager/kRts: position in the src->dst channel
  std::uint64_t rendezvous_id = 0;    // kRts/kCts/kNack/kData: which rendezvous
  DType dtype = DType::kFloat32;      // of the payload (kRts: of the data to come)
  std::uint64_t count = 0;            // elements of the payload (kRts: to come)
  std::uint64_t bytes = 0;            // payload bytes on this frame
  Fingerprint fp;
  FrameCheck check;                   // over every field above
};

}  // namespace collie
