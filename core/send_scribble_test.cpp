// A completed send's buffer made provably unused (core/send_scribble.h).
// A transport that completed a send at once and read its payload on its
// next turn -- before the program could touch the buffer -- delivered the
// right values and passed; on checking runs the core now overwrites the
// buffer as the completion arrives, and the payload that arrives holding
// the pattern names the transport.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/message_engine.h"
#include "core/send_scribble.h"
#include "core/testing/recording_transport.h"

namespace collie {
namespace {

using testing::error_of;
using testing::RecordingTransport;

std::vector<std::byte> random_bytes(std::size_t n) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(*rc::gen::arbitrary<std::uint8_t>());
  return v;
}

RC_GTEST_PROP(SendScribble, AnyEightBytesInARowOfAScribbledRegionAreFoundAndRestoreGivesTheBytesBack, ()) {
  const auto size = *rc::gen::inRange<std::size_t>(8, 300);
  std::vector<std::byte> buf = random_bytes(size);
  const std::vector<std::byte> before = buf;
  const auto offset = *rc::gen::inRange<std::size_t>(0, size - 7);  // where a late read starts
  const auto length = *rc::gen::inRange<std::size_t>(8, size - offset + 1);
  RecordingTransport owner(0, 1);
  SendScribble s(&owner);
  s.scribble(buf, nullptr);
  // Copied elsewhere (another alignment), as a transport's late read is.
  const std::vector<std::byte> read(buf.begin() + static_cast<std::ptrdiff_t>(offset),
                                    buf.begin() + static_cast<std::ptrdiff_t>(offset + length));
  RC_ASSERT(holds_scribble(read));
  s.restore();
  RC_ASSERT(buf == before);
  RC_ASSERT(!s.pending());
}

RC_GTEST_PROP(SendScribble, ARegionAtAnyAlignmentIsScribbledWhollyAndNothingBesideIt, ()) {
  const auto size = *rc::gen::inRange<std::size_t>(8, 200);
  const auto lead = *rc::gen::inRange<std::size_t>(0, 16);
  const auto trail = *rc::gen::inRange<std::size_t>(0, 16);
  std::vector<std::byte> buf = random_bytes(lead + size + trail);
  const std::vector<std::byte> before = buf;
  RecordingTransport owner(0, 1);
  SendScribble s(&owner);
  s.scribble(std::span<std::byte>(buf).subspan(lead, size), nullptr);
  for (std::size_t k = 0; k < lead; ++k) RC_ASSERT(buf[k] == before[k]);
  for (std::size_t k = lead + size; k < buf.size(); ++k) RC_ASSERT(buf[k] == before[k]);
  for (std::size_t k = lead; k + 8 <= lead + size; ++k)
    RC_ASSERT(holds_scribble(std::span<const std::byte>(buf).subspan(k, 8)));
  s.restore();
  RC_ASSERT(buf == before);
}

// holds_scribble looks closely only around every fourth byte: it must say
// what a look at every pair says, on payloads dense with pattern bytes
// (runs of 6, 7, 8 and more, broken anywhere).
RC_GTEST_PROP(SendScribble, FindsARunExactlyWhereAPairByPairScanDoes, ()) {
  const auto size = *rc::gen::inRange<std::size_t>(0, 120);
  std::vector<std::byte> region(64);
  RecordingTransport owner(0, 1);
  SendScribble s(&owner);
  s.scribble(region, nullptr);  // region now holds the pattern, by address
  std::vector<std::byte> v(size);
  for (auto& b : v) {
    const auto pick = *rc::gen::inRange(0, 10);
    b = pick < 9 ? region[static_cast<std::size_t>(*rc::gen::inRange(0, 64))] : static_cast<std::byte>(0);
  }
  // Plant a run of 5 to 10 bytes of the pattern somewhere.
  if (size >= 10) {
    const auto len = *rc::gen::inRange<std::size_t>(5, 11);
    const auto at = *rc::gen::inRange<std::size_t>(0, size - len + 1);
    const auto from = *rc::gen::inRange<std::size_t>(0, 64 - len);
    std::copy_n(region.begin() + static_cast<std::ptrdiff_t>(from), len, v.begin() + static_cast<std::ptrdiff_t>(at));
  }
  std::vector<std::byte> next_of(256);  // the pattern's successor of each byte, from the region
  for (std::size_t k = 0; k + 1 < region.size(); ++k) next_of[static_cast<std::uint8_t>(region[k])] = region[k + 1];
  bool naive = false;
  int run = 0;
  for (std::size_t k = 0; k + 1 < v.size(); ++k) {
    const bool follows = next_of[static_cast<std::uint8_t>(v[k])] != std::byte{0} &&
                         next_of[static_cast<std::uint8_t>(v[k])] == v[k + 1];
    run = follows ? run + 1 : 0;
    naive = naive || run >= 7;
  }
  RC_ASSERT(holds_scribble(v) == naive);
  s.restore();
}

RC_GTEST_PROP(SendScribble, PayloadsOfProgramsDoNotHoldThePattern, ()) {
  // Random bytes, and the small integers and repeated values programs send.
  const auto n = *rc::gen::inRange<std::size_t>(0, 2048);
  std::vector<std::byte> v = random_bytes(n);
  RC_ASSERT(!holds_scribble(v));
  std::vector<std::uint64_t> ints(n / 8 + 1);
  std::iota(ints.begin(), ints.end(), *rc::gen::arbitrary<std::uint64_t>());
  RC_ASSERT(!holds_scribble({reinterpret_cast<const std::byte*>(ints.data()), ints.size() * 8}));
}

// Rank 0 sends `count` floats to rank 1, which receives them as
// `recv_dtype` (float32, or int32 to be refused). The frames go back and
// forth as posted, but every send with a payload (eager, data, NACK) is
// completed at once and its payload read afterwards. Returns both ops'
// errors, if any, and whether rank 0's buffer was left as it was once its
// rank runs again.
struct LateRead {
  std::string recv_error;
  std::string send_error;
  std::vector<float> received;
  bool buffer_intact_after_restore = false;
};
constexpr std::size_t kEagerBytes = 100;  // 16 floats go eager, 40 by rendezvous
LateRead send_then_read_late(bool scribble, std::size_t count = 16, DType recv_dtype = DType::kFloat32) {
  RecordingTransport t0(0, 2), t1(1, 2);
  MessageEngine sender(t0, kEagerBytes, scribble), receiver(t1, kEagerBytes, scribble);
  std::vector<float> data(count);
  std::iota(data.begin(), data.end(), 1.0f);
  const std::vector<float> original = data;
  std::vector<float> in(count);  // int32 is as wide
  RecvSpec r;
  r.src = 0;
  r.buf = TensorView{in.data(), recv_dtype, in.size(), MemorySpace::kHost};
  const auto recv = receiver.recv(r, nullptr);
  SendSpec s;
  s.dst = 1;
  s.buf = TensorView{data.data(), DType::kFloat32, data.size(), MemorySpace::kHost};
  const auto send = sender.send(s, nullptr);
  auto pass = [](RecordingTransport& from, std::size_t& done, MessageEngine& src, MessageEngine& dst) {
    for (; done < from.sent.size(); ++done) {
      const auto posted = from.sent[done];
      if (posted.cookie) src.on_send_complete(posted.cookie);  // complete at once ...
      const std::vector<std::byte> late(posted.payload.begin(), posted.payload.end());  // ... read afterwards
      dst.on_frame(posted.header, late);
    }
  };
  std::size_t done0 = 0, done1 = 0;
  while (done0 < t0.sent.size() || done1 < t1.sent.size()) {
    pass(t0, done0, sender, receiver);
    pass(t1, done1, receiver, sender);
  }
  LateRead out;
  out.recv_error = error_of(recv);
  out.send_error = error_of(send);
  out.received = in;
  restore_scribbles(&t0);  // as rank 0 resumes
  out.buffer_intact_after_restore = data == original;
  return out;
}

TEST(ScribbledSend, WithoutScribblingAReadAfterCompletionGoesUnseen) {
  // The bug the scribble exists for: nothing in the values shows it.
  const LateRead r = send_then_read_late(false);
  EXPECT_EQ(r.recv_error, "(no error)");
  EXPECT_EQ(r.received[15], 16.0f);
}

TEST(ScribbledSend, APayloadReadAfterCompletionFailsNamingTheTransport) {
  const LateRead r = send_then_read_late(true);
  EXPECT_NE(r.recv_error.find("the transport broke its contract"), std::string::npos) << r.recv_error;
  EXPECT_NE(r.recv_error.find("rank 0's transport read the send's buffer after on_send_complete()"),
            std::string::npos)
      << r.recv_error;
  EXPECT_TRUE(r.buffer_intact_after_restore);
}

// Rendezvous: a data frame's payload, and a NACK's reason (a send of the
// refusing rank's core), read after their sends completed.
TEST(ScribbledSend, ARendezvousPayloadReadAfterCompletionFailsNamingTheTransport) {
  EXPECT_EQ(send_then_read_late(false, 40).recv_error, "(no error)");
  const LateRead r = send_then_read_late(true, 40);
  EXPECT_NE(r.recv_error.find("rank 0's transport read the send's buffer after on_send_complete()"),
            std::string::npos)
      << r.recv_error;
  EXPECT_TRUE(r.buffer_intact_after_restore);
}

TEST(ScribbledSend, ARefusalReadAfterCompletionFailsNamingTheTransport) {
  EXPECT_EQ(send_then_read_late(false, 40, DType::kInt32).send_error.find("read the send's buffer"),
            std::string::npos);
  const LateRead r = send_then_read_late(true, 40, DType::kInt32);
  EXPECT_NE(r.send_error.find("rank 1's transport read the send's buffer after on_send_complete()"),
            std::string::npos)
      << r.send_error;
}

TEST(ScribbledSend, ABufferAnotherSendStillReadsIsLeftAloneUntilItCompletes) {
  RecordingTransport t(0, 3);
  MessageEngine e(t, 1024, true);
  std::vector<float> data(8, 2.5f);
  SendSpec s;
  s.buf = TensorView{data.data(), DType::kFloat32, data.size(), MemorySpace::kHost};
  s.dst = 1;
  e.send(s, nullptr);
  s.dst = 2;
  s.buf = s.buf.slice(4, 4);  // the second half again, to another rank
  e.send(s, nullptr);
  ASSERT_EQ(t.sent.size(), 2u);
  e.on_send_complete(t.sent[0].cookie);
  // The first half is its alone: overwritten; the second is still read.
  EXPECT_NE(data[0], 2.5f);
  EXPECT_EQ(data[4], 2.5f);
  EXPECT_EQ(data[7], 2.5f);
  e.on_send_complete(t.sent[1].cookie);
  EXPECT_NE(data[4], 2.5f);
  e.restore_scribbled();
  EXPECT_EQ(data, std::vector<float>(8, 2.5f));
}

TEST(ScribbledSend, AReceiveIntoTheBufferKeepsItsPartUntouched) {
  // A completed send's buffer that a posted receive will write is never
  // scribbled: the restore would overwrite what arrived.
  RecordingTransport t(0, 2);
  MessageEngine e(t, 1024, true);
  std::vector<float> data(8, 1.0f);
  RecvSpec r;
  r.src = 1;
  r.buf = TensorView{data.data() + 6, DType::kFloat32, 2, MemorySpace::kHost};
  e.recv(r, nullptr);
  SendSpec s;
  s.dst = 1;
  s.buf = TensorView{data.data(), DType::kFloat32, data.size(), MemorySpace::kHost};
  e.send(s, nullptr);
  e.on_send_complete(t.sent[0].cookie);
  EXPECT_NE(data[0], 1.0f);
  EXPECT_EQ(data[6], 1.0f);
  EXPECT_EQ(data[7], 1.0f);
  e.restore_scribbled();
}

TEST(ScribbledSend, ASendOfACallThatAlreadyFailedIsLeftAlone) {
  // A collective failed (a member lost) while its send to another member
  // was still on the wire: its program got the error and may have freed
  // the buffer, so the send's late completion must not write to it.
  RecordingTransport t(0, 3);
  MessageEngine e(t, 1024, true);
  auto members = std::make_shared<const std::vector<int>>(std::vector<int>{0, 1, 2});
  Fingerprint fp;
  fp.op = CollectiveKind::kBroadcast;
  fp.dtype = DType::kFloat32;
  fp.seq = 1;
  fp.count = 8;
  auto outer = std::make_shared<WorkState>();
  outer->executor = &t;
  e.begin_collective(1, 0, fp, outer, nullptr, members);
  std::vector<float> data(8, 2.5f);
  SendSpec s;
  s.context = 1;
  s.fp = fp;
  s.buf = TensorView{data.data(), DType::kFloat32, data.size(), MemorySpace::kHost};
  s.dst = 1;
  e.send(s, nullptr);
  s.dst = 2;
  e.send(s, nullptr);
  ASSERT_EQ(t.sent.size(), 2u);
  e.on_peer_lost(1, "gone", false);
  ASSERT_TRUE(outer->completed);
  e.on_send_complete(t.sent[1].cookie);  // the send to rank 2, late
  EXPECT_EQ(data, std::vector<float>(8, 2.5f));
}

}  // namespace
}  // namespace collie
