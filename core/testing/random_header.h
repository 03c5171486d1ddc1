// A frame header with every field drawn by rapidcheck (any value, valid
// codes), for the tests of what reads headers: the check words, the wire.
#pragma once

#include <rapidcheck.h>

#include "core/frame.h"

namespace collie::testing {

inline FrameHeader random_header() {
  FrameHeader h;
  h.kind = static_cast<FrameKind>(*rc::gen::inRange(0, 5));
  h.src = *rc::gen::arbitrary<std::int32_t>();
  h.dst = *rc::gen::arbitrary<std::int32_t>();
  h.context = *rc::gen::arbitrary<std::uint32_t>();
  h.group_digest = *rc::gen::arbitrary<std::uint64_t>();
  h.tag = *rc::gen::arbitrary<std::int32_t>();
  h.channel_seq = *rc::gen::arbitrary<std::uint64_t>();
  h.rendezvous_id = *rc::gen::arbitrary<std::uint64_t>();
  h.dtype = static_cast<DType>(*rc::gen::inRange(0, kNumDTypes));
  h.count = *rc::gen::arbitrary<std::uint64_t>();
  h.bytes = *rc::gen::arbitrary<std::uint64_t>();
  h.fp.op = static_cast<CollectiveKind>(*rc::gen::inRange(0, kNumCollectiveKinds));
  h.fp.reduce_op = static_cast<ReduceOp>(*rc::gen::inRange(0, kNumReduceOps));
  h.fp.algorithm = *rc::gen::arbitrary<std::uint8_t>();
  h.fp.dtype = static_cast<DType>(*rc::gen::inRange(0, kNumDTypes));
  h.fp.root = *rc::gen::arbitrary<std::int32_t>();
  h.fp.seq = *rc::gen::arbitrary<std::uint64_t>();
  h.fp.count = *rc::gen::arbitrary<std::uint64_t>();
  h.check.sum = *rc::gen::arbitrary<std::uint64_t>();
  h.check.weighted = *rc::gen::arbitrary<std::uint64_t>();
  return h;
}

}  // namespace collie::testing
