// Fuzzing the core's FrameSink (built with AddressSanitizer and
// UndefinedBehaviorSanitizer, see cmake/FuzzTests.cmake): whatever frames a
// transport hands the core -- random headers, payloads shorter or longer
// than their headers, duplicates, completions for cookies it never gave,
// frames for other ranks, payloads landed in a receive's own buffer, lost
// peers that do not exist -- the core must not read or write out of bounds,
// crash or hang: it fails the rank's ops with a typed error, or waits and
// is diagnosed.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <vector>

#include "core/communicator.h"
#include "core/frame_check.h"
#include "sim/sim_world.h"

namespace collie {
namespace {

struct Injected {
  FrameHeader header;
  std::vector<std::byte> payload;
};

// A header near what the core expects from rank 0 (so that it gets past the
// first checks often), with random fields, usually sealed, and a payload
// whose size may disagree with it.
Injected gen_frame(int world) {
  Injected f;
  FrameHeader& h = f.header;
  h.kind = static_cast<FrameKind>(*rc::gen::inRange(0, 5));
  h.src = *rc::gen::weightedElement<std::int32_t>({{8, 0}, {2, 2}, {1, world}, {1, -1}});
  h.dst = *rc::gen::weightedElement<std::int32_t>({{10, 1}, {1, 2}, {1, 7}});
  h.context = *rc::gen::inRange<std::uint32_t>(0, 4);
  h.tag = *rc::gen::inRange(0, 3);
  h.channel_seq = *rc::gen::inRange<std::uint64_t>(0, 6);
  h.rendezvous_id = *rc::gen::inRange<std::uint64_t>(0, 6);
  h.dtype = static_cast<DType>(*rc::gen::inRange(0, kNumDTypes));
  h.count = *rc::gen::inRange<std::uint64_t>(0, 40);
  h.bytes = h.count * dtype_size(h.dtype);
  if (*rc::gen::inRange(0, 4) == 0) h.bytes = *rc::gen::inRange<std::uint64_t>(0, 300);
  h.fp.op = static_cast<CollectiveKind>(*rc::gen::inRange(0, kNumCollectiveKinds));
  h.fp.reduce_op = static_cast<ReduceOp>(*rc::gen::inRange(0, kNumReduceOps));
  h.fp.dtype = h.dtype;
  h.fp.seq = *rc::gen::inRange<std::uint64_t>(0, 3);
  h.fp.count = h.count;
  // Mostly sealed, as a core sends them: the protocol's checks then see
  // them; the rest fail the check words, as a header changed on the way.
  if (*rc::gen::inRange(0, 8) != 0) seal(h);
  std::size_t size = h.bytes;
  switch (*rc::gen::inRange(0, 6)) {
    case 0: size = size ? size - 1 : 0; break;  // one byte short
    case 1: size += *rc::gen::inRange<std::size_t>(1, 9); break;
    default: break;
  }
  f.payload.resize(size);
  for (auto& b : f.payload) b = static_cast<std::byte>(*rc::gen::arbitrary<std::uint8_t>());
  return f;
}

RC_GTEST_PROP(FrameSinkFuzz, WhateverATransportDeliversTheCoreNeitherCrashesNorHangs, ()) {
  const int world = 3;
  const auto frames = *rc::gen::container<std::vector<Injected>>(*rc::gen::inRange(1, 12),
                                                                  rc::gen::exec([] { return gen_frame(3); }));
  const auto cookies = *rc::gen::container<std::vector<std::uintptr_t>>(*rc::gen::inRange(0, 3),
                                                                         rc::gen::inRange<std::uintptr_t>(0, 8));
  // Which frames go through landing_zone() first (as a zero-copy transport
  // lands them), and the peers reported lost afterwards -- out of range,
  // this rank itself, twice -- cleanly or not.
  const auto landed = *rc::gen::container<std::vector<bool>>(frames.size(), rc::gen::arbitrary<bool>());
  const auto lost = *rc::gen::container<std::vector<std::pair<int, bool>>>(
      *rc::gen::inRange(0, 3), rc::gen::pair(rc::gen::inRange(-1, 5), rc::gen::arbitrary<bool>()));
  sim::SimWorld w(world);
  std::vector<Communicator*> comms(world);
  for (int r = 0; r < world; ++r) comms[static_cast<std::size_t>(r)] = &w.comm(r);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    if (c.rank() == 0) {
      // Plays rank 1's transport: everything arrives from inside the executor.
      MessageEngine& e = comms[1]->engine();
      for (std::size_t i = 0; i < frames.size(); ++i) {
        const Injected& f = frames[i];
        const FrameSink::Landing z = landed[i] ? e.landing_zone(f.header) : FrameSink::Landing{};
        if (!z.dst.empty() && !z.reduce && z.dst.size() == f.payload.size()) {
          // A landing transport writes the payload into the receive's own
          // buffer, then hands that buffer over.
          std::copy(f.payload.begin(), f.payload.end(), z.dst.begin());
          e.on_frame(f.header, z.dst);
        } else {
          e.on_frame(f.header, f.payload);
        }
      }
      for (std::uintptr_t k : cookies) e.on_send_complete(reinterpret_cast<void*>(k));
      for (const auto& [peer, clean] : lost) e.on_peer_lost(peer, "lost by the fuzzer", clean);
      co_return;
    }
    if (c.rank() == 1) {
      Tensor a(DType::kFloat32, {8}), b(DType::kInt64, {3}), t(DType::kFloat32, {4});
      std::vector<Work> ws;
      ws.push_back(c.irecv(a, kAnySource, 0));
      ws.push_back(c.irecv(b, 0, 1));
      ws.push_back(c.isend(t, 2, 0));
      for (Work& x : ws) {
        try {
          co_await x;
        } catch (const Error&) {
        }
      }
      co_return;
    }
    Tensor t(DType::kFloat32, {4});
    try {
      co_await c.recv(t, 1, 0);
    } catch (const Error&) {
    }
  });
  // Whatever happened is said in words: an error, a diagnosed wait, or ok.
  RC_ASSERT(!res.describe().empty());
}

}  // namespace
}  // namespace collie
