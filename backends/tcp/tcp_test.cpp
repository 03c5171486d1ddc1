// The TCP backend over real loopback sockets: the wire format, a lost peer,
// a stranger's connection.
#include "backends/tcp/tcp_transport.h"

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "backends/tcp/auth.h"
#include "backends/tcp/rendezvous.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "core/error.h"
#include "core/local_world.h"
#include "core/small_pool.h"

namespace collie::tcp {
namespace {

// The in-process world runs a thread per rank, and a pooled object (a frame,
// a Work state) may be freed on another rank's thread than the one that made
// it: the block joins the freeing thread's lists (SmallPool's contract).
TEST(Tcp, PoolBlocksFreedOnAnotherThreadAreSafe) {
  std::vector<void*> made;
  for (int i = 0; i < 100; ++i) made.push_back(pool_allocate(200));
  std::thread t([&] {
    for (void* p : made) pool_deallocate(p, 200);
    for (int i = 0; i < 100; ++i) pool_deallocate(pool_allocate(200), 200);
  });
  t.join();
  void* again = pool_allocate(200);
  EXPECT_NE(again, nullptr);
  pool_deallocate(again, 200);
}

// Pooled blocks are cut from slabs and never go back to the heap: what a
// thread that exits holds free goes to the next thread that needs a block
// of its class (a process that starts and ends rank threads reused none).
TEST(Tcp, PoolBlocksOfAThreadThatExitedAreReused) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "pooling is off under AddressSanitizer (every block comes from the heap)";
#endif
  constexpr std::size_t kBytes = 1968;  // a class no other test here uses
  void* left = nullptr;
  std::thread t([&] {
    left = pool_allocate(kBytes);
    pool_deallocate(left, kBytes);
  });
  t.join();
  std::vector<void*> taken;
  bool found = false;
  // This thread's own free blocks of the class come first, then the
  // orphans; a new slab only after both.
  for (int i = 0; i < 100000 && !found; ++i) {
    taken.push_back(pool_allocate(kBytes));
    found = taken.back() == left;
  }
  for (void* p : taken) pool_deallocate(p, kBytes);
  EXPECT_TRUE(found) << "the exited thread's block was not reused";
}

TEST(Wire, HeadersRoundTripAndMalformedOnesAreRefused) {
  FrameHeader h;
  h.kind = FrameKind::kRts;
  h.src = 3;
  h.dst = 1;
  h.context = 7;
  h.tag = -2;
  h.group_digest = 0x1122334455667788ull;
  h.channel_seq = 99;
  h.rendezvous_id = 12;
  h.dtype = DType::kBFloat16;
  h.count = 1000;
  h.bytes = 0;
  h.fp = Fingerprint{CollectiveKind::kAllReduce, ReduceOp::kMax, 3, DType::kBFloat16, -1, 5, 1000};
  auto bytes = encode(h);
  std::string why;
  auto back = decode_header(bytes.data(), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->fp, h.fp);
  EXPECT_EQ(back->group_digest, h.group_digest);
  EXPECT_EQ(back->tag, -2);
  EXPECT_EQ(back->count, 1000u);

  auto bad = bytes;
  bad[0] ^= 1;
  EXPECT_FALSE(decode_header(bad.data(), &why));
  EXPECT_EQ(why, "bad frame magic");
  h.kind = FrameKind::kEager;
  h.bytes = 7;  // 1000 bf16 are 2000 bytes
  bad = encode(h);
  EXPECT_FALSE(decode_header(bad.data(), &why));
  EXPECT_EQ(why, "payload length 7 does not match 1000 elements");
  h.bytes = kMaxFrameBytes + 1;
  bad = encode(h);
  EXPECT_FALSE(decode_header(bad.data(), &why));
}

// bytes == count * element size was checked with a product that wraps: a
// frame could claim float32 x 4611686018427387904 (0 bytes).
TEST(Wire, AnElementCountWhoseSizeWrapsIsRefused) {
  FrameHeader h;
  h.kind = FrameKind::kEager;
  h.src = 1;
  h.dst = 0;
  h.dtype = DType::kFloat32;
  h.count = 4611686018427387904ull;  // x 4 bytes = 2^64 = 0 in 64 bits
  h.bytes = 0;
  const auto bytes = encode(h);
  std::string why;
  EXPECT_FALSE(decode_header(bytes.data(), &why));
  EXPECT_EQ(why, "payload length 0 does not match 4611686018427387904 elements");
}

// N ranks in this process over real sockets; `before_connect` runs once
// every rank listens and before any connects.
struct World {
  TcpEventLoop loop{3000};
  std::vector<std::unique_ptr<TcpTransport>> t;
  std::vector<std::uint16_t> ports;
  explicit World(int n, const std::string& token = {}, const std::function<void(World&)>& before_connect = {}) {
    for (int r = 0; r < n; ++r) {
      t.push_back(std::make_unique<TcpTransport>(loop, r, n, token));
      ports.push_back(t.back()->listen("127.0.0.1"));
    }
    if (before_connect) before_connect(*this);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < r; ++p) t[static_cast<std::size_t>(r)]->connect(p, "127.0.0.1", ports[static_cast<std::size_t>(p)]);
    EXPECT_TRUE(loop.run_until(
        [&] {
          for (auto& x : t)
            if (!x->connected()) return false;
          return true;
        },
        loop.now() + 5'000'000'000));
  }
  std::vector<Transport*> transports() {
    std::vector<Transport*> v;
    for (auto& x : t) v.push_back(x.get());
    return v;
  }
};

// All-reduces rank+1 over the world; returns what rank `reader` got (NaN if the run failed).
double sum_of_ranks_plus_one(World& w, int reader) {
  LocalWorld world(w.transports(), CommunicatorOptions{});
  double got = std::nan("");
  auto res = world.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat64, {1});
    t.set(0, c.rank() + 1);
    co_await c.all_reduce(t);
    if (c.rank() == reader) got = t.get(0);
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  return got;
}

// Rendezvous payloads are read straight into the receive buffer (copies)
// or combined into it as they arrive (reductions); odd-sized eager frames
// in between leave the staged bytes misaligned for the next payload.
TEST(Tcp, LandedPayloadsAreExactAfterOddSizedFrames) {
  World w(2);
  LocalWorld world(w.transports(), CommunicatorOptions{});
  int checked = 0;
  auto res = world.run([&](Communicator& c) -> Task<void> {
    for (int round = 0; round < 4; ++round) {
      Tensor small(DType::kInt8, {3 + 2 * round});
      if (c.rank() == 1) {
        for (std::size_t j = 0; j < small.count(); ++j) small.set(j, static_cast<double>(round + 1));
        co_await c.send(small.view(), 0, round);
      } else {
        co_await c.recv(small.view(), 1, round);
        EXPECT_EQ(small.get(small.count() - 1), round + 1);
      }
      Tensor sum(DType::kFloat64, {100003});
      for (std::size_t j = 0; j < sum.count(); ++j) sum.set(j, c.rank() + 1 + static_cast<double>(j % 7));
      co_await c.reduce(sum.view(), 0);
      Tensor bcast(DType::kFloat32, {70001});
      if (c.rank() == 1)
        for (std::size_t j = 0; j < bcast.count(); ++j) bcast.set(j, static_cast<double>((j + round) % 13));
      co_await c.broadcast(bcast.view(), 1);
      if (c.rank() != 0) continue;
      for (std::size_t j = 0; j < sum.count(); ++j) {
        if (sum.get(j) != 3 + 2 * static_cast<double>(j % 7)) {
          ADD_FAILURE() << "round " << round << ": reduce element " << j << " = " << sum.get(j);
          break;
        }
      }
      for (std::size_t j = 0; j < bcast.count(); ++j) {
        if (bcast.get(j) != static_cast<double>((j + round) % 13)) {
          ADD_FAILURE() << "round " << round << ": broadcast element " << j << " = " << bcast.get(j);
          break;
        }
      }
      ++checked;
    }
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(checked, 4);
}

TEST(Tcp, ALostPeerFailsEveryOpWaitingOnItNamingTheRank) {
  World w(3);
  LocalWorld world(w.transports(), CommunicatorOptions{});
  std::vector<std::string> errors(3);
  auto res = world.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {1000});
    if (c.rank() == 2) {
      w.t[2]->close();  // the process dies before taking part
      co_return;
    }
    try {
      co_await c.all_reduce(t, ReduceOp::kSum, {}, {Algorithm::kRing});
    } catch (const Error& e) {
      errors[static_cast<std::size_t>(c.rank())] = std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[static_cast<std::size_t>(r)];
    EXPECT_NE(e.find("transport"), std::string::npos) << "rank " << r << ": [" << e << "] " << res.describe();
    EXPECT_NE(e.find("lost rank 2"), std::string::npos) << e;
  }
}

TEST(Tcp, AStrangersConnectionIsRefusedAndTheJobCarriesOn) {
  World w(2);
  // Someone connects to rank 0 with garbage instead of a handshake.
  asio::ip::tcp::socket stranger(w.loop.io());
  stranger.connect({asio::ip::make_address("127.0.0.1"), w.ports[0]});
  std::array<std::uint8_t, kHandshakeBytes> junk{};
  junk.fill(0x41);
  asio::write(stranger, asio::buffer(junk));
  // A second one claims to be rank 1, which is already connected.
  asio::ip::tcp::socket impostor(w.loop.io());
  impostor.connect({asio::ip::make_address("127.0.0.1"), w.ports[0]});
  asio::write(impostor, asio::buffer(encode(Handshake{kWireVersion, 0, 1, 2, 0})));
  EXPECT_EQ(sum_of_ranks_plus_one(w, 0), 3.0);
}

// Records why a transport lost its peers.
struct LossLog final : FrameSink {
  std::vector<std::string> lost;
  void on_frame(const FrameHeader&, std::span<const std::byte>) override {}
  void on_send_complete(void*) override {}
  void on_peer_lost(int peer, const std::string& why, bool) override {
    lost.push_back("rank " + std::to_string(peer) + ": " + why);
  }
};

TEST(Tcp, AConnectionWithoutTheJobTokenIsRefusedAndTheRealRankStillJoins) {
  LossLog log;
  std::unique_ptr<TcpTransport> impostor;
  World w(3, "the-right-token", [&](World& self) {
    // Before the real rank 2 connects, a process with the wrong token
    // claims to be rank 2; then one with no token at all.
    for (const std::string token : {"a-wrong-token", ""}) {
      impostor = std::make_unique<TcpTransport>(self.loop, 2, 3, token);
      impostor->attach(&log);
      log.lost.clear();
      impostor->connect(0, "127.0.0.1", self.ports[0]);
      impostor->connect(1, "127.0.0.1", self.ports[1]);
      EXPECT_TRUE(self.loop.run_until([&] { return log.lost.size() == 2; }, self.loop.now() + 5'000'000'000));
      EXPECT_FALSE(impostor->connected());
      impostor.reset();  // a transport must not outlive its loop
    }
  });
  for (const auto& why : log.lost) EXPECT_NE(why.find("wrong or missing job token"), std::string::npos) << why;
  EXPECT_EQ(sum_of_ranks_plus_one(w, 2), 6.0);
}

TEST(Tcp, TheTokenNeverCrossesTheWire) {
  // A fake rank 0 answers rank 1's hello and records every byte it sends.
  const std::string token = "tok-3c9f2a7e-never-on-the-wire";
  TcpEventLoop loop(3000);
  asio::ip::tcp::acceptor acc(loop.io(), {asio::ip::make_address("127.0.0.1"), 0});
  TcpTransport rank1(loop, 1, 2, token);
  LossLog log;
  rank1.attach(&log);
  rank1.connect(0, "127.0.0.1", acc.local_endpoint().port());
  asio::ip::tcp::socket s(loop.io());
  bool accepted = false;
  acc.async_accept(s, [&](const asio::error_code&) { accepted = true; });
  ASSERT_TRUE(loop.run_until([&] { return accepted; }, loop.now() + 5'000'000'000));
  std::array<std::uint8_t, kHandshakeBytes> hello{};
  asio::read(s, asio::buffer(hello));
  asio::write(s, asio::buffer(encode(Handshake{kWireVersion, 0, 0, 2, fresh_nonce()})));
  Mac proof{};
  bool got = false;
  asio::async_read(s, asio::buffer(proof), [&](const asio::error_code& ec, std::size_t) { got = !ec; });
  ASSERT_TRUE(loop.run_until([&] { return got; }, loop.now() + 5'000'000'000));
  std::string seen(hello.begin(), hello.end());
  seen.append(proof.begin(), proof.end());
  EXPECT_EQ(seen.find(token.substr(0, 8)), std::string::npos);
  // A wrong proof back: rank 1 refuses this "rank 0".
  asio::write(s, asio::buffer(Mac{}));
  ASSERT_TRUE(loop.run_until([&] { return !log.lost.empty(); }, loop.now() + 5'000'000'000));
  EXPECT_NE(log.lost[0].find("did not prove the job token"), std::string::npos) << log.lost[0];
}

// Connects to `port` as rank `rank` of `world`, proving `token` as a real
// rank would; returns the authenticated socket.
asio::ip::tcp::socket join_by_hand(TcpEventLoop& loop, std::uint16_t port, int rank, int world, const std::string& token) {
  asio::ip::tcp::socket s(loop.io());
  s.connect({asio::ip::make_address("127.0.0.1"), port});
  const auto mine = encode(Handshake{kWireVersion, 0, rank, world, fresh_nonce()});
  asio::write(s, asio::buffer(mine));
  std::array<std::uint8_t, kHandshakeBytes> theirs{};
  asio::read(s, asio::buffer(theirs));
  std::array<std::uint8_t, 2 * kHandshakeBytes> t{};
  std::copy(mine.begin(), mine.end(), t.begin());
  std::copy(theirs.begin(), theirs.end(), t.begin() + kHandshakeBytes);
  asio::write(s, asio::buffer(prove(token, "collie v2 proof from the connecting rank", t)));
  Mac back{};
  asio::read(s, asio::buffer(back));
  return s;
}

// A header claiming 1 GiB made the receiver allocate 1 GiB before a
// byte of it arrived (16 GB: a bare std::bad_alloc).
TEST(Tcp, AReceiverAllocatesWhatArrivesNotWhatAHeaderClaims) {
  TcpEventLoop loop(3000);
  TcpTransport rank0(loop, 0, 2, "tok");
  LossLog log;
  rank0.attach(&log);
  const std::uint16_t port = rank0.listen("127.0.0.1");
  std::optional<asio::ip::tcp::socket> peer;
  std::thread joiner([&] { peer.emplace(join_by_hand(loop, port, 1, 2, "tok")); });
  ASSERT_TRUE(loop.run_until([&] { return rank0.connected(); }, loop.now() + 5'000'000'000));
  joiner.join();
  FrameHeader h;
  h.kind = FrameKind::kEager;
  h.src = 1;
  h.dst = 0;
  h.dtype = DType::kUInt8;
  h.count = h.bytes = 1ull << 30;
  const auto head = encode(h);  // one array: begin and end of two temporaries are not a range
  std::vector<std::uint8_t> wire(head.begin(), head.end());
  wire.resize(wire.size() + 100000, 7);  // the first 100 kB of the claimed 1 GiB
  asio::write(*peer, asio::buffer(wire));
  ASSERT_TRUE(loop.run_until([&] { return rank0.staged_payload_bytes() >= 100000; }, loop.now() + 5'000'000'000));
  EXPECT_LE(rank0.staged_payload_bytes(), 2u * 100000 + 65536);
  EXPECT_TRUE(log.lost.empty());
}

// After one accept() error the listener never accepted again, and idle
// connections that never authenticate were kept for ever.
TEST(Tcp, IdleUnauthenticatedConnectionsAreClosedAndTheListenerKeepsAccepting) {
  TcpEventLoop loop;  // no idle deadlock: nothing moves until the deadline closes them
  TcpTransport rank0(loop, 0, 2, "tok");
  rank0.set_handshake_timeout(std::chrono::milliseconds(200));
  LossLog log;
  rank0.attach(&log);
  const std::uint16_t port = rank0.listen("127.0.0.1");
  std::vector<asio::ip::tcp::socket> idle;
  for (int i = 0; i < 20; ++i) {
    idle.emplace_back(loop.io());
    idle.back().connect({asio::ip::make_address("127.0.0.1"), port});
  }
  // The silent strangers are closed once their handshake deadline passes:
  // each read ends (EOF or reset).
  int closed = 0;
  std::array<char, 1> byte{};
  for (auto& s : idle)
    s.async_read_some(asio::buffer(byte), [&](const asio::error_code& ec, std::size_t) { closed += ec ? 1 : 0; });
  ASSERT_TRUE(loop.run_until([&] { return closed == 20; }, loop.now() + 10'000'000'000));
  // And the real rank still joins.
  std::optional<asio::ip::tcp::socket> peer;
  std::thread joiner([&] { peer.emplace(join_by_hand(loop, port, 1, 2, "tok")); });
  EXPECT_TRUE(loop.run_until([&] { return rank0.connected(); }, loop.now() + 5'000'000'000));
  joiner.join();
}

TEST(Tcp, LargeMessagesAndManySmallOnesArriveIntact) {
  World w(2);
  LocalWorld world(w.transports(), CommunicatorOptions{});
  bool good = true;
  auto res = world.run([&](Communicator& c) -> Task<void> {
    Tensor big(DType::kInt64, {1 << 20});  // 8 MiB: rendezvous, many TCP segments
    std::vector<Tensor> small;
    for (int i = 0; i < 200; ++i) small.emplace_back(DType::kInt32, std::vector<std::int64_t>{3});
    if (c.rank() == 0) {
      for (std::size_t i = 0; i < big.count(); ++i) big.set_int(i, static_cast<std::int64_t>(i * 7));
      std::vector<Work> ws;
      for (int i = 0; i < 200; ++i) {
        small[static_cast<std::size_t>(i)].set_int(1, i);
        ws.push_back(c.isend(small[static_cast<std::size_t>(i)], 1, i % 5));
      }
      co_await c.send(big, 1, 9);
      co_await wait_all(ws);
    } else {
      co_await c.recv(big, 0, 9);
      for (int i = 0; i < 200; ++i) co_await c.recv(small[static_cast<std::size_t>(i)], 0, i % 5);
      for (std::size_t i = 0; i < big.count(); i += 4099) good = good && big.get_int(i) == static_cast<std::int64_t>(i * 7);
      for (int i = 0; i < 200; ++i) good = good && small[static_cast<std::size_t>(i)].get_int(1) == i;
    }
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  EXPECT_TRUE(good);
}

}  // namespace
}  // namespace collie::tcp

namespace collie::tcp {
namespace {

// Runs rank 0 and another registration side by side; returns both errors.
std::pair<std::string, std::string> rendezvous_pair(int world0, int rank1, int world1, const std::string& token1,
                                                   std::uint16_t port) {
  auto attempt = [&](int rank, int world, const std::string& token) {
    try {
      asio::io_context io;
      RendezvousOptions o;
      o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
      o.rank = rank;
      o.world = world;
      o.token = token;
      o.timeout_ns = 1'000'000'000;
      rendezvous(io, o, 1234);
      return std::string("joined");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  std::string a, b;
  std::thread t0([&] { a = attempt(0, world0, "job-a"); });
  b = attempt(rank1, world1, token1);  // retries connecting until rank 0 listens
  t0.join();
  return {a, b};
}

TEST(Rendezvous, AWrongWorldSizeIsRefusedAndTheMissingRankNamed) {
  auto [a, b] = rendezvous_pair(2, 1, 3, "job-a", 29901);
  EXPECT_NE(b.find("rank 1 says the world has 3 ranks, rank 0 says 2"), std::string::npos) << b;
  EXPECT_NE(a.find("1/2 ranks joined within 1 s; missing: 1"), std::string::npos) << a;
}

// A rank refused for a wrong job token was only "missing: 1" in rank 0's
// error: rank 0 now says why it refused it.
TEST(Rendezvous, ARankRefusedForAWrongJobTokenIsNamedSoByRankZero) {
  auto [a, b] = rendezvous_pair(2, 1, 2, "job-b", 29902);
  EXPECT_NE(b.find("rank 1 did not prove the job token"), std::string::npos) << b;
  EXPECT_NE(b.find("this port belongs to another job"), std::string::npos) << b;
  EXPECT_NE(a.find("1/2 ranks joined within 1 s; missing: 1; refused: rank 1 did not prove the job token: this port "
                   "belongs to another job, or COLLIE_JOB_TOKEN differs"),
            std::string::npos)
      << a;
}

// A rendezvous reply claiming a 4 GB length was allocated before its MAC
// was checked.
TEST(Rendezvous, AReplyLongerThanAnyAddressTableIsRefusedBeforeItIsRead) {
  asio::io_context io;
  asio::ip::tcp::acceptor fake_rank0(io, {asio::ip::make_address("127.0.0.1"), 0});
  const std::uint16_t port = fake_rank0.local_endpoint().port();
  std::thread liar([&] {
    asio::ip::tcp::socket s(io);
    fake_rank0.accept(s);
    std::array<std::uint8_t, 8 + kNonceBytes> challenge{0x43, 0x4c, 0x52, 0x43};  // "CLRC", version 0, nonce 0
    asio::write(s, asio::buffer(challenge));
    std::array<std::uint8_t, 20 + kNonceBytes + kMacBytes> registration{};
    asio::read(s, asio::buffer(registration));
    const std::array<std::uint8_t, 5> head{0, 0xff, 0xff, 0xff, 0xff};  // ok, 4 GiB - 1 of table
    asio::write(s, asio::buffer(head));
  });
  std::string error;
  try {
    asio::io_context mine;
    RendezvousOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = 1;
    o.world = 2;
    o.timeout_ns = 5'000'000'000;
    rendezvous(mine, o, 1234);
  } catch (const Error& e) {
    error = e.what();
  }
  liar.join();
  EXPECT_NE(error.find("sent a reply longer than any address table of 2 ranks"), std::string::npos) << error;
}

TEST(Rendezvous, ASecondJobOnTheSamePortIsAClearError) {
  asio::io_context io;
  asio::ip::tcp::acceptor first_job(io, {asio::ip::make_address("127.0.0.1"), 29904});
  RendezvousOptions o;
  o.init_method = "tcp://127.0.0.1:29904";
  o.rank = 0;
  o.world = 2;
  o.timeout_ns = 1'000'000'000;
  try {
    rendezvous(io, o, 1234);
    ADD_FAILURE() << "the second job's rank 0 took a port in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:29904"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("another job on the same port?"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, ARankThatJoinsTwiceIsRefused) {
  auto attempt = [](int rank) {
    try {
      asio::io_context io;
      RendezvousOptions o;
      o.init_method = "tcp://127.0.0.1:29905";
      o.rank = rank;
      o.world = 3;
      o.token = "job-a";
      o.timeout_ns = 1'000'000'000;
      rendezvous(io, o, 1234);
      return std::string("joined");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  std::string r0, first, second;
  std::thread t0([&] { r0 = attempt(0); });
  std::thread t1([&] { first = attempt(1); });
  second = attempt(1);
  t0.join();
  t1.join();
  // One of the two rank-1 processes is refused; rank 0 still misses rank 2.
  const std::string& refused = first.find("joined twice") != std::string::npos ? first : second;
  EXPECT_NE(refused.find("rank 1 joined twice"), std::string::npos) << first << " | " << second;
  EXPECT_NE(r0.find("2/3 ranks joined within 1 s; missing: 2"), std::string::npos) << r0;
}

TEST(Rendezvous, TwoRanksMeet) {
  auto [a, b] = rendezvous_pair(2, 1, 2, "job-a", 29903);
  EXPECT_EQ(a, "joined");
  EXPECT_EQ(b, "joined");
}

TEST(Rendezvous, IdentityComesFromSlurmOrOpenMpiVariables) {
  ::setenv("SLURM_PROCID", "3", 1);
  ::setenv("SLURM_NTASKS", "8", 1);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  int rank = -1, world = -1;
  resolve_identity(RendezvousOptions{}, &rank, &world);
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(world, 8);
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("SLURM_NTASKS");
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  resolve_identity(RendezvousOptions{}, &rank, &world);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(world, 2);
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
}

}  // namespace
}  // namespace collie::tcp
