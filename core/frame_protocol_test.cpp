// What the rendezvous protocol implies of its answers (core/frame.h): a CTS
// or NACK echoes the RTS it answers, and so does the data frame that
// follows. A forged answer -- one field changed and the header sealed
// again, so that its check words hold -- is refused naming the field and
// both values, whichever field and whatever value. A CTS or data frame
// whose tag, count, dtype or bytes disagreed with the RTS used to pass.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/frame_check.h"
#include "core/group.h"
#include "core/message_engine.h"
#include "core/op_info.h"
#include "core/testing/recording_transport.h"

namespace collie {
namespace {

using testing::error_of;
using testing::RecordingTransport;

struct Forgery {
  std::string names;  // what the refusal must say
};

// Changes one field of `h` that an answer echoes (or its src) to another
// valid value, as a forging transport would, and says how the refusal
// names it.
Forgery forge(FrameHeader& h) {
  const int field = *rc::gen::inRange(0, 13);
  auto other = [](auto v) {
    using T = decltype(v);
    return *rc::gen::suchThat(rc::gen::arbitrary<T>(), [v](T x) { return x != v; });
  };
  auto other_code = [](int v, int n) { return (v + *rc::gen::inRange(1, n)) % n; };
  switch (field) {
    case 0: h.context = other(h.context); return {"context is"};
    case 1: h.group_digest = other(h.group_digest); return {"group_digest is"};
    case 2: h.channel_seq = other(h.channel_seq); return {"channel_seq is"};
    case 3: h.rendezvous_id = other(h.rendezvous_id); return {"rendezvous_id is"};
    case 4: h.dtype = static_cast<DType>(other_code(static_cast<int>(h.dtype), kNumDTypes)); return {"dtype is"};
    case 5: h.count = other(h.count); return {"count is"};
    case 6: h.fp.op = static_cast<CollectiveKind>(other_code(static_cast<int>(h.fp.op), kNumCollectiveKinds));
      return {"fingerprint.op is"};
    case 7: h.fp.reduce_op = static_cast<ReduceOp>(other_code(static_cast<int>(h.fp.reduce_op), kNumReduceOps));
      return {"fingerprint.reduce_op is"};
    case 8: h.fp.algorithm = other(h.fp.algorithm); return {"fingerprint.algorithm is"};
    case 9: h.fp.root = other(h.fp.root); return {"fingerprint.root is"};
    case 10: h.fp.seq = other(h.fp.seq); return {"fingerprint.seq is"};
    case 11: h.fp.count = other(h.fp.count); return {"fingerprint.count is"};
    default: h.src = 2; return {"src is rank 2"};  // a rank of the world other than the RTS's peer
  }
}

constexpr std::size_t kEager = 16;  // bytes; larger sends take the rendezvous
std::vector<float> buffer(40);

RC_GTEST_PROP(FrameProtocol, AForgedClearToSendIsRefusedNamingTheField, ()) {
  RecordingTransport t(0, 3);
  MessageEngine sender(t, kEager);
  SendSpec s;
  s.dst = 1;
  s.tag = *rc::gen::inRange(0, 100);
  s.buf = TensorView{buffer.data(), DType::kFloat32, buffer.size(), MemorySpace::kHost};
  const auto w = sender.send(s, nullptr);
  RC_ASSERT(t.sent.size() == 1u);
  const FrameHeader rts = t.sent.front().header;
  RC_ASSERT(rts.kind == FrameKind::kRts);
  FrameHeader cts = rts;
  cts.kind = FrameKind::kCts;
  cts.src = 1;
  cts.dst = 0;
  const Forgery f = forge(cts);
  seal(cts);
  sender.on_frame(cts, {});
  const std::string e = error_of(w);
  RC_ASSERT(e.find("the transport broke its contract") != std::string::npos);
  RC_ASSERT(e.find(f.names) != std::string::npos);
  RC_ASSERT(t.sent.size() == 1u);  // no data left for a forged answer
}

RC_GTEST_PROP(FrameProtocol, AForgedDataFrameIsRefusedNamingTheField, ()) {
  RecordingTransport t(1, 3);
  MessageEngine receiver(t, kEager);
  RecvSpec r;
  r.src = 0;
  r.tag = 3;
  r.buf = TensorView{buffer.data(), DType::kFloat32, buffer.size(), MemorySpace::kHost};
  const auto w = receiver.recv(r, nullptr);
  FrameHeader rts;
  rts.kind = FrameKind::kRts;
  rts.src = 0;
  rts.dst = 1;
  rts.tag = 3;
  rts.rendezvous_id = *rc::gen::inRange<std::uint64_t>(1, 1000);
  rts.dtype = DType::kFloat32;
  rts.count = buffer.size();
  seal(rts);
  receiver.on_frame(rts, {});
  RC_ASSERT(t.sent.size() == 1u);
  RC_ASSERT(t.sent.front().header.kind == FrameKind::kCts);
  RC_ASSERT(!echo_mismatch(t.sent.front().header, rts));  // the CTS echoes the RTS
  FrameHeader data = rts;
  data.kind = FrameKind::kData;
  data.bytes = buffer.size() * sizeof(float);
  const Forgery f = forge(data);
  seal(data);
  std::vector<std::byte> payload(data.bytes);
  RC_ASSERT(receiver.landing_zone(data).dst.empty());  // never lands
  receiver.on_frame(data, payload);
  const std::string e = error_of(w);
  RC_ASSERT(e.find("the transport broke its contract") != std::string::npos);
  RC_ASSERT(e.find(f.names) != std::string::npos);
}

TEST(FrameProtocol, ASecondClearToSendForOneRendezvousIsRefused) {
  RecordingTransport t(0, 3);
  MessageEngine sender(t, kEager);
  SendSpec s;
  s.dst = 1;
  s.buf = TensorView{buffer.data(), DType::kFloat32, buffer.size(), MemorySpace::kHost};
  const auto w = sender.send(s, nullptr);
  FrameHeader cts = t.sent.front().header;
  cts.kind = FrameKind::kCts;
  cts.src = 1;
  cts.dst = 0;
  seal(cts);
  sender.on_frame(cts, {});
  ASSERT_EQ(t.sent.size(), 2u);  // the data
  sender.on_frame(cts, {});     // once more: it used to be ignored
  EXPECT_NE(error_of(w).find("which no send of this rank to rank 1 awaits"), std::string::npos) << error_of(w);
}

// A loss report names a peer: one for the reporting rank itself, or for a
// rank outside the world, breaks the contract (core/transport.h) and fails
// what is pending, saying so; both used to be taken as a peer's loss.
TEST(FrameProtocol, ALossReportForTheRankItselfOrOutsideTheWorldIsRefused) {
  for (int peer : {0, 3, -1}) {
    RecordingTransport t(0, 3);
    MessageEngine engine(t, kEager);
    std::vector<float> into(4, -1.0f);
    RecvSpec r;
    r.src = 1;
    r.buf = TensorView{into.data(), DType::kFloat32, into.size(), MemorySpace::kHost};
    const auto w = engine.recv(r, nullptr);
    engine.on_peer_lost(peer, "the link went down", false);
    const std::string e = error_of(w);
    EXPECT_NE(e.find("the transport broke its contract"), std::string::npos) << e;
    EXPECT_NE(e.find("on_peer_lost for rank " + std::to_string(peer)), std::string::npos) << e;
    EXPECT_NE(e.find(peer == 0 ? "the reporting rank itself" : "outside the world of 3"), std::string::npos) << e;
  }
}

// A forged answer's error is typed and names the op the frame is part of
// (rank, op, group, sequence), its peer and the field: it named the rank
// alone.
TEST(FrameProtocol, AForgedAnswerNamesTheOpItIsPartOf) {
  RecordingTransport t0(0, 2), t1(1, 2);
  MessageEngine sender(t0, kEager), receiver(t1, kEager);
  auto sending = std::make_shared<OpInfo>();
  sending->rank = 0;
  sending->op = "send";
  sending->group = "group#2[0,1]";
  sending->seq = 7;
  auto receiving = std::make_shared<OpInfo>(*sending);
  receiving->rank = 1;
  receiving->op = "recv";
  SendSpec s;
  s.dst = 1;
  s.tag = 5;
  s.buf = TensorView{buffer.data(), DType::kFloat32, buffer.size(), MemorySpace::kHost};
  const auto send = sender.send(s, sending);
  std::vector<float> in(buffer.size());
  RecvSpec r;
  r.src = 0;
  r.tag = 5;
  r.buf = TensorView{in.data(), DType::kFloat32, in.size(), MemorySpace::kHost};
  const auto recv = receiver.recv(r, receiving);
  ASSERT_EQ(t0.sent.size(), 1u);
  receiver.on_frame(t0.sent[0].header, {});  // the RTS
  ASSERT_EQ(t1.sent.size(), 1u);
  FrameHeader cts = t1.sent[0].header;
  sender.on_frame(cts, {});  // the CTS, as written
  ASSERT_EQ(t0.sent.size(), 2u);
  FrameHeader data = t0.sent[1].header;
  ASSERT_EQ(data.kind, FrameKind::kData);
  data.tag = 6;  // forged: sealed again
  seal(data);
  receiver.on_frame(data, t0.sent[1].payload);
  const std::string e = error_of(recv);
  EXPECT_NE(e.find("transport: rank 1, recv #7 on group#2[0,1] (peer 0): the transport broke its contract"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("a data frame whose tag is 6 but the RTS's is 5"), std::string::npos) << e;
  // The same of a CTS, on the sending side.
  RecordingTransport t2(0, 2);
  MessageEngine sender2(t2, kEager);
  const auto send2 = sender2.send(s, sending);
  cts.tag = 6;
  seal(cts);
  sender2.on_frame(cts, {});
  const std::string e2 = error_of(send2);
  EXPECT_NE(e2.find("transport: rank 0, send #7 on group#2[0,1] (peer 1): the transport broke its contract"),
            std::string::npos)
      << e2;
  EXPECT_NE(e2.find("a CTS whose tag is 6 but the RTS's is 5"), std::string::npos) << e2;
}

// Every rank's engine of a world shares one GroupIdentity for the world's
// contexts (world_identity(): the name and members were a copy per rank).
// A frame at odds with a shared context is still refused by the rank it
// reached, naming that rank and the group.
TEST(FrameProtocol, EnginesSharingTheWorldsIdentityEachNameTheirOwnRank) {
  const auto world = world_identity(3);
  EXPECT_EQ(world.get(), world_identity(3).get());  // one per world size
  EXPECT_NE(world.get(), world_identity(4).get());
  EXPECT_EQ(world->name, "world");
  std::uint64_t digest = 0;
  EXPECT_EQ(world->members, world_members(3, &digest));
  EXPECT_EQ(world->digest, digest);
  for (int rank : {0, 1}) {
    RecordingTransport t(rank, 3);
    MessageEngine e(t, kEager);
    e.register_context(0, world, false);
    e.register_context(1, world, true);
    RecvSpec r;
    r.src = 2;
    r.context = 1;
    r.group_digest = world->digest;
    r.tag = 4;
    r.seq = 1;
    r.buf = TensorView{buffer.data(), DType::kFloat32, 1, MemorySpace::kHost};
    const auto w = e.recv(r, nullptr);
    FrameHeader h;  // rank 2's frame, on the world's collective context with another digest
    h.kind = FrameKind::kEager;
    h.src = 2;
    h.dst = rank;
    h.context = 1;
    h.group_digest = world->digest + 1;
    h.tag = 4;
    h.channel_seq = 0;
    h.dtype = DType::kFloat32;
    h.count = 1;
    h.bytes = sizeof(float);
    h.fp = Fingerprint{CollectiveKind::kAllReduce, ReduceOp::kSum, 0, DType::kFloat32, -1, 1, 1};
    seal(h);
    e.on_frame(h, std::as_bytes(std::span<const float>(buffer.data(), 1)));
    const std::string err = error_of(w);
    EXPECT_NE(err.find("on context 1, which rank " + std::to_string(rank) + " assigned to world, but rank 2's group"),
              std::string::npos)
        << err;
  }
}

}  // namespace
}  // namespace collie
