// Process jobs: the op protocol's framing and its bounds, the child
// processes a job owns, and the controller driving real rank processes
// (collie's own TCP worker, and a fake worker that never answers).
#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "backends/data_path.h"
#include "backends/registry.h"
#include "backends/remote/child_processes.h"
#include "backends/remote/fork_server.h"
#include "backends/remote/op_protocol.h"
#include "backends/remote/process_job.h"
#include "backends/torch/torch_backend.h"
#include "core/error.h"

namespace collie::remote {
namespace {

std::vector<std::byte> bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A dead rank's report quotes what its process wrote last that says
// something: blank lines and backtrace frames are left out, and so are the
// lines a backend names as noise (a launcher's rules).
TEST(ProcessJobReports, LastLinesLeaveOutBacktraceFramesAndNoise) {
  const std::string output =
      "Assertion failed in file src/mpi/datatype/typerep/src/typerep_yaksa_pack.c at line 568: x\n"
      "/usr/lib/x86_64-linux-gnu/libmpich.so.12(+0x30c7c5) [0x7fe467d0c7c5]\n"
      "/usr/lib/x86_64-linux-gnu/libmpich.so.12(PMPI_Allreduce+0x2d5) [0x7fe467aa3b45]\n"
      "\n"
      "Abort(1) on node 1: Internal error\r\n"
      "=====================\n";
  const std::vector<std::string> all = last_lines(output, 6);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].substr(0, 16), "Assertion failed");
  EXPECT_EQ(all[1], "Abort(1) on node 1: Internal error");
  const auto rules = [](const std::string& l) { return l.find_first_not_of('=') == std::string::npos; };
  EXPECT_EQ(last_lines(output, 1, rules), std::vector<std::string>{"Abort(1) on node 1: Internal error"});
  EXPECT_FALSE(says_something("  \t"));
  EXPECT_TRUE(says_something("[vm:1:0:1] Caught signal 11 (Segmentation fault: address not mapped)"));
}

TEST(OpProtocol, MessagesRoundTripWithTheirBlobsWhateverTheChunking) {
  const auto a = bytes("abc"), empty = bytes(""), big = bytes(std::string(70000, 'x'));
  std::vector<std::byte> wire = encode(nlohmann::json{{"t", "op"}, {"id", 7}}, {a, empty, big});
  const auto second = encode(nlohmann::json{{"t", "end"}});
  wire.insert(wire.end(), second.begin(), second.end());
  for (std::size_t chunk : {std::size_t{1}, std::size_t{5}, wire.size()}) {
    MessageReader r;
    std::vector<Message> got;
    for (std::size_t at = 0; at < wire.size(); at += chunk) {
      r.feed(wire.data() + at, std::min(chunk, wire.size() - at));
      while (auto m = r.next()) got.push_back(std::move(*m));
    }
    ASSERT_EQ(got.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(got[0].head.value("id", 0), 7);
    ASSERT_EQ(got[0].blobs.size(), 3u);
    EXPECT_EQ(got[0].blobs[0], a);
    EXPECT_TRUE(got[0].blobs[1].empty());
    EXPECT_EQ(got[0].blobs[2].size(), 70000u);
    EXPECT_EQ(got[1].head.value("t", ""), "end");
  }
}

// A peer cannot make the reader allocate what a header claims: lengths are
// bounded before anything is allocated or waited for.
TEST(OpProtocol, LengthsAreBoundedBeforeAnythingIsAllocated) {
  MessageReader r(64 * 1024, 1024);
  const std::byte huge[4] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}, std::byte{0x7f}};
  r.feed(huge, 4);
  EXPECT_THROW(r.next(), std::runtime_error);  // a 2 GiB header
  MessageReader r2(64 * 1024, 1024);
  const auto wire = encode(nlohmann::json{{"t", "x"}, {"blobs", {std::uint64_t{1} << 40}}});
  r2.feed(wire.data(), wire.size());
  EXPECT_THROW(r2.next(), std::runtime_error);  // 1 TiB of blobs
  MessageReader r3;
  const std::string not_json = "not json";
  std::vector<std::byte> w3 = {std::byte{8}, std::byte{0}, std::byte{0}, std::byte{0}};
  const auto nj = bytes(not_json);
  w3.insert(w3.end(), nj.begin(), nj.end());
  r3.feed(w3.data(), w3.size());
  EXPECT_THROW(r3.next(), std::runtime_error);
}

// The Python driver computes the same proof with hmac/hashlib; these are
// Python's values.
TEST(OpProtocol, HelloMacIsHmacSha256OfTheNonceAndRankAsPythonComputesIt) {
  EXPECT_EQ(hello_mac("secret", "00ff", 3), "20a1df51a30b8f57a2844e966776dd3ff034ffae1e204eda174ae16235ff86d1");
  EXPECT_EQ(hello_mac("", "ab", 0), "ea2a01e793589c2f6f3c2304189836202751795eba780f3cfd2cf43c215b5c39");
}

TEST(ChildProcesses, NameHowEachEndedAndKeepTheirOutput) {
  ChildProcesses c({{{"sh", "-c", "echo hello; exit 3"}, {}},
                    {{"sh", "-c", "echo $COLLIE_T; kill -9 $$"}, {{"COLLIE_T", "from the env"}}},
                    {{"/nonexistent/program"}, {}}});
  c.wait_all();
  EXPECT_EQ(c.fate(0), "exited with code 3");
  EXPECT_EQ(c.output_tail(0), "hello\n");
  EXPECT_EQ(c.fate(1), "killed by signal 9 (Killed)");
  EXPECT_EQ(c.output_tail(1), "from the env\n");
  EXPECT_EQ(c.fate(2), "exited with code 127");
  EXPECT_NE(c.output_tail(2).find("cannot run '/nonexistent/program'"), std::string::npos) << c.output_tail(2);
}

// Regression: jobs started side by side drew the same free port (their rank
// 0 takes seconds to bind it), and the second job's rank 0 failed to listen.
TEST(FreeLocalPort, NeverHandsOutThePortItHandedOutBefore) {
  std::set<int> seen;
  for (int i = 0; i < 3000; ++i) {
    const int port = free_local_port();
    ASSERT_GT(port, 0);
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " handed out twice (call " << i << ")";
  }
}

TEST(ChildProcesses, TerminateEndsEvenAStoppedProcessThatIgnoresSigterm) {
  ChildProcesses c({{{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, {}}});
  while (c.output_tail(0).find("ready") == std::string::npos) {  // the trap is set
    pollfd p{c.output_fds().at(0), POLLIN, 0};
    ::poll(&p, 1, -1);
    c.read_output(p.fd);
  }
  c.signal(0, SIGSTOP);
  c.terminate(0.2);
  EXPECT_TRUE(c.exited(0));
  EXPECT_EQ(c.fate(0), "killed by signal 9 (Killed)");
}

// ---- children forked by a fork server ----------------------------------------

class ForkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    script_ = collie_data_path("backends/remote/collie_fork_server.py");
    if (script_.empty()) GTEST_SKIP() << "backends/remote/collie_fork_server.py is not found";
    program_ = ::testing::TempDir() + "/forked_program.py";
    std::ofstream f(program_);
    // Says whether the server's import reached it, then ends as told.
    f << "import os, signal, sys\n"
         "print('preloaded', 'decimal' in sys.modules, os.environ.get('COLLIE_T', ''))\n"
         "if os.environ.get('END') == 'kill': os.kill(os.getpid(), signal.SIGKILL)\n"
         "if os.environ.get('END') == 'hang':\n"
         "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         "    print('ready', flush=True)\n"
         "    signal.pause()\n"
         "sys.exit(int(os.environ.get('END', '0')))\n";
  }
  std::shared_ptr<ForkServer> server(const std::string& preload) const {
    return std::make_shared<ForkServer>(std::vector<std::string>{"python3", "-u", script_, program_, preload},
                                        ForkServer::Env{}, 60'000'000'000);
  }
  ChildSpec child(const std::shared_ptr<ForkServer>& s, ForkServer::Env env) const {
    ChildSpec c{{"python3", "-u", program_}, std::move(env)};
    c.fork_server = s;
    return c;
  }
  std::string script_, program_;
};

TEST_F(ForkServerTest, ChildrenRunTheProgramWithTheServersImportsAndEndAsTheirOwnWouldBeNamed) {
  auto s = server("decimal");
  ChildProcesses c({child(s, {{"END", "3"}, {"COLLIE_T", "from the env"}}), child(s, {{"END", "kill"}})});
  c.wait_all();
  EXPECT_EQ(c.fate(0), "exited with code 3");
  EXPECT_EQ(c.output_tail(0), "preloaded True from the env\n");
  EXPECT_EQ(c.fate(1), "killed by signal 9 (Killed)") << c.output_tail(1);
  // Another job's children come from the same server.
  ChildProcesses again({child(s, {})});
  again.wait_all();
  EXPECT_EQ(again.fate(0), "exited with code 0");
  EXPECT_EQ(again.output_tail(0), "preloaded True \n");
}

// Regression: a job's first process that had exited and been reaped took
// its process group with it, and the next child, told to join that group,
// failed to before running anything ("exited with code 1", no output; 1
// run in 6 of the test above).
TEST_F(ForkServerTest, AChildJoiningAGroupWhoseProcessesHaveAllEndedStillRuns) {
  auto s = server("decimal");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const auto first = s->spawn({{"END", "0"}}, out[1], 0);
  ASSERT_TRUE(first);
  const auto first_status = s->exit_status(*first, 30'000'000'000);  // reaped by the server
  ASSERT_TRUE(first_status);
  const auto second = s->spawn({{"END", "5"}}, out[1], *first);
  ::close(out[1]);
  ASSERT_TRUE(second);
  const auto status = s->exit_status(*second, 30'000'000'000);
  ::close(out[0]);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 5);
}

TEST_F(ForkServerTest, TerminateEndsAForkedChildThatIgnoresSigterm) {
  ChildProcesses c({child(server("decimal"), {{"END", "hang"}})});
  while (c.output_tail(0).find("ready") == std::string::npos) {
    pollfd p{c.output_fds().at(0), POLLIN, 0};
    ::poll(&p, 1, -1);
    c.read_output(p.fd);
  }
  c.terminate(0.2);
  EXPECT_TRUE(c.exited(0));
  EXPECT_EQ(c.fate(0), "killed by signal 9 (Killed)");
}

// A server whose imports fail serves nothing: the children are started
// from their own command, where the failure would show as usual.
TEST_F(ForkServerTest, ChildrenOfAServerThatCannotStartAreStartedFromTheirCommand) {
  ChildProcesses c({child(server("no_such_module_anywhere"), {{"END", "4"}})});
  c.wait_all();
  EXPECT_EQ(c.fate(0), "exited with code 4");
  EXPECT_EQ(c.output_tail(0), "preloaded False \n");
}

// ---- the torch driver's store ----------------------------------------------

// Regression: rank 0's TCPStore listened on MASTER_PORT, chosen seconds
// before it binds; another job could hold it by then (its rank 0 failed to
// listen, and the others could have joined the other job's store). With
// COLLIE_STORE_PORT_FILE rank 0 listens where the kernel says and the
// others read the port from the file.
class TorchStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = collie_data_path("backends/torch/collie_torch_worker.py");
    if (driver_.empty()) GTEST_SKIP() << "backends/torch/collie_torch_worker.py is not found";
    if (const std::string why = torch::missing(); !why.empty()) GTEST_SKIP() << why;
    program_ = ::testing::TempDir() + "/meet_on_store.py";
    std::ofstream f(program_);
    // Meets the other ranks as the driver does and exits 0, or 5 with why.
    f << "import datetime, importlib.util, os, sys\n"
         "spec = importlib.util.spec_from_file_location('driver', sys.argv[1])\n"
         "driver = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(driver)\n"
         "rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])\n"
         "try:\n"
         "    store = driver.meet(rank, world, datetime.timedelta(seconds=60))\n"
         "except Exception as e:\n"
         "    print('failed:', e)\n"
         "    sys.exit(5)\n"
         "print('met', store.add('collie/arrived', 0))\n";
    // Another job's store, listening where this job's MASTER_PORT points.
    held_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(held_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(held_, 16), 0);
    socklen_t len = sizeof a;
    ::getsockname(held_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = std::to_string(ntohs(a.sin_port));
  }
  void TearDown() override {
    if (held_ >= 0) ::close(held_);
  }
  std::vector<ChildSpec> ranks(int world, const std::string& port_file) const {
    std::vector<ChildSpec> out;
    for (int r = 0; r < world; ++r) {
      ChildSpec c{{torch::python(), "-u", program_, driver_}, local_rank_env(r, world, port_, "127.0.0.1:1", "t")};
      if (!port_file.empty()) c.env.emplace_back("COLLIE_STORE_PORT_FILE", port_file);
      out.push_back(std::move(c));
    }
    return out;
  }
  // Waits for every child to end, at most `seconds` (a rank that joined
  // another job's store waits on it for ever); then ends the rest.
  static bool ended_within(ChildProcesses& c, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      c.reap();
      if (c.all_exited()) return true;
      if (std::chrono::steady_clock::now() > until) {
        c.terminate(0.5);
        return false;
      }
      std::vector<pollfd> fds;
      for (int fd : c.output_fds()) fds.push_back({fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 100);
      for (const pollfd& p : fds)
        if (p.revents) c.read_output(p.fd);
    }
  }
  std::string driver_, program_, port_;
  int held_ = -1;
};

TEST_F(TorchStoreTest, RanksMeetThoughAnotherJobHoldsMasterPort) {
  const std::string file = ::testing::TempDir() + "/store_" + port_ + ".port";
  ChildProcesses c(ranks(3, file));
  ASSERT_TRUE(ended_within(c, 90)) << "the ranks did not meet within 90 s";
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(c.fate(static_cast<std::size_t>(r)), "exited with code 0") << "rank " << r << ": " << c.output_tail(static_cast<std::size_t>(r));
    EXPECT_NE(c.output_tail(static_cast<std::size_t>(r)).find("met 3"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(file)) << "rank 0 leaves the port file behind";
}

TEST_F(TorchStoreTest, WithoutThePortFileRankZeroCannotListenOnAHeldMasterPort) {
  ChildProcesses c(ranks(1, ""));
  ASSERT_TRUE(ended_within(c, 90));
  EXPECT_EQ(c.fate(0), "exited with code 5");
  EXPECT_NE(c.output_tail(0).find("failed:"), std::string::npos) << c.output_tail(0);
}

// ---- the controller, with collie's own TCP worker ---------------------------

class ProcessJobTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("COLLIE_PROGRAM", COLLIE_BINARY, 1); }
  static std::unique_ptr<Job> tcp_job(int world, Nanos timeout_ns = 20'000'000'000) {
    JobOptions o;
    o.world_size = world;
    o.timeout_ns = timeout_ns;
    return start_job(BackendRegistry::builtin().require("tcp"), o, true);
  }
};

Task<void> sum_of_ranks(Dist& d, std::vector<double>& out) {
  Tensor t(DType::kFloat64, {3});
  for (std::size_t i = 0; i < 3; ++i) t.set(i, d.rank() + 10.0 * static_cast<double>(i));
  co_await d.all_reduce(t);
  out[static_cast<std::size_t>(d.rank())] = t.get(2);
}

TEST_F(ProcessJobTest, RanksAreProcessesWhoseOutputsComeBackAndTheJobRunsAgain) {
  auto job = tcp_job(3);
  EXPECT_EQ(job->implementation(), "collie core over tcp, one process per rank");
  for (int run = 0; run < 2; ++run) {
    std::vector<double> got(3);
    const RunResult r = job->run([&](Dist& d) { return sum_of_ranks(d, got); }, {});
    ASSERT_TRUE(r.ok()) << r.describe();
    for (double v : got) EXPECT_EQ(v, 0 + 1 + 2 + 3 * 20.0);
    EXPECT_TRUE(job->reusable());
  }
}

// Sums of ranks over a group of every rank but the last, then over the world.
Task<void> group_then_world(Dist& d, std::vector<double>& out) {
  std::vector<int> all_but_last;
  for (int r = 0; r + 1 < d.world_size(); ++r) all_but_last.push_back(r);
  Group g = d.new_group(all_but_last);
  Tensor t(DType::kFloat64, {1});
  t.set(0, d.rank());
  if (d.rank() + 1 < d.world_size()) co_await d.all_reduce(t, ReduceOp::kSum, g);
  co_await d.all_reduce(t);
  out[static_cast<std::size_t>(d.rank())] = t.get(0);
}

// A job of 4 runs worlds of 2 and 3 on its first ranks while the others
// idle, then 4 again: the idle ranks numbered the groups alike.
TEST_F(ProcessJobTest, ALargerJobRunsSmallerWorldsAndItsOwnAgain) {
  auto job = tcp_job(4);
  EXPECT_FALSE(job->can_run_world(5));
  for (int world : {2, 3, 4, 2}) {
    ASSERT_TRUE(job->can_run_world(world));
    JobOptions o;
    o.world_size = world;
    o.timeout_ns = 20'000'000'000;
    job->set_run_options(o);
    std::vector<double> got(static_cast<std::size_t>(world));
    const RunResult r = job->run([&](Dist& d) { return group_then_world(d, got); }, {});
    ASSERT_TRUE(r.ok()) << "world " << world << ": " << r.describe();
    ASSERT_EQ(r.ranks.size(), static_cast<std::size_t>(world));
    // (0 + ... + w-2) summed w-1 times over the group, plus the last rank's w-1.
    const double group_sum = (world - 1) * (world - 2) / 2.0;
    const double want = (world - 1) * group_sum + (world - 1);
    for (double v : got) EXPECT_EQ(v, want) << "world " << world;
    EXPECT_TRUE(job->reusable());
  }
}

Task<void> any_source_then_async(Dist& d, std::vector<int>& sources) {
  Tensor t(DType::kInt32, {1});
  if (d.rank() == 0) {
    for (int k = 0; k < 2; ++k) {
      Work w = d.irecv(t, kAnySource, 5);
      co_await w;
      sources.push_back(w.source_rank());
    }
  } else {
    t.set(0, d.rank());
    Work w = d.isend(t, 0, 5);
    co_await w;
  }
}

TEST_F(ProcessJobTest, AsyncOpsCompleteWhenAwaitedAndAnySourceSaysWhoSent) {
  auto job = tcp_job(3);
  std::vector<int> sources;
  const RunResult r = job->run([&](Dist& d) { return any_source_then_async(d, sources); }, {});
  ASSERT_TRUE(r.ok()) << r.describe();
  std::sort(sources.begin(), sources.end());
  EXPECT_EQ(sources, (std::vector<int>{1, 2}));
}

Task<void> rank_one_dies(Dist& d) {
  Tensor t(DType::kFloat32, {1});
  co_await d.barrier();
  co_await d.all_reduce(t);
}

TEST_F(ProcessJobTest, AKilledRankIsNamedWithItsSignalAndTheJobIsNotReused) {
  auto job = tcp_job(3);
  JobOptions o;
  o.world_size = 3;
  o.timeout_ns = 20'000'000'000;
  ProcessFault f;
  ASSERT_FALSE(parse_process_fault("crash:rank=1,op=2", f));
  o.process_faults = {f};
  job->set_run_options(o);
  const RunResult r = job->run(rank_one_dies, {});
  EXPECT_TRUE(r.ranks[1].crashed);
  EXPECT_NE(r.ranks[1].fate.find("was killed (SIGKILL) by the injected fault crash:rank=1,op=2"), std::string::npos)
      << r.ranks[1].fate;
  // The survivors' collie core fails their all_reduce naming the lost rank.
  for (int s : {0, 2}) {
    ASSERT_TRUE(r.ranks[static_cast<std::size_t>(s)].error) << "rank " << s;
    try {
      std::rethrow_exception(r.ranks[static_cast<std::size_t>(s)].error);
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(job->reusable());
}

TEST(ProcessFaults, AreParsedStrictly) {
  ProcessFault f;
  EXPECT_FALSE(parse_process_fault("stall:rank=2,op=3,ms=250", f));
  EXPECT_EQ(f.kind, ProcessFault::Kind::kStall);
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.before_op, 3u);
  EXPECT_EQ(f.stall_ms, 250);
  EXPECT_TRUE(parse_process_fault("crash:rank=2x,op=1", f));
  EXPECT_TRUE(parse_process_fault("crash:rank=1,op=0", f));
  EXPECT_TRUE(parse_process_fault("crash:rank=-1,op=1", f));
  EXPECT_TRUE(parse_process_fault("stall:rank=1,op=1", f));
  EXPECT_TRUE(parse_process_fault("drop:src=0,dst=1", f));
  EXPECT_TRUE(parse_process_fault("crash:rank=1,op=1,ms=5", f));
}

// A worker that joins, then never answers: the controller must not hang,
// and must say where each rank was.
TEST(ProcessJobHang, ARunThatStopsMakingProgressIsReportedWithEachRanksLastOp) {
  const std::string script = ::testing::TempDir() + "/silent_worker.py";
  {
    std::ofstream f(script);
    f << "import hashlib, hmac, json, os, socket, struct, time\n"
         "host, port = os.environ['COLLIE_CONTROLLER'].rsplit(':', 1)\n"
         "s = socket.create_connection((host, int(port)))\n"
         "n = struct.unpack('<I', s.recv(4))[0]\n"
         "nonce = json.loads(s.recv(n))['nonce']\n"
         "rank = int(os.environ['RANK'])\n"
         "mac = hmac.new(os.environ['COLLIE_JOB_TOKEN'].encode(), ('collie op worker %s %d' % (nonce, rank)).encode(),"
         " hashlib.sha256).hexdigest()\n"
         "h = json.dumps({'t': 'hello', 'rank': rank, 'world': int(os.environ['WORLD_SIZE']), 'pid': os.getpid(),"
         " 'library': 'silent', 'mac': mac}).encode()\n"
         "s.sendall(struct.pack('<I', len(h)) + h)\n"
         "while s.recv(65536): pass\n";
  }
  ProcessJobSpec spec;
  spec.backend = "silent";
  spec.children = [&](int world, const std::string& controller, const std::string& token) {
    std::vector<ChildSpec> c;
    for (int r = 0; r < world; ++r) c.push_back({{"python3", script}, local_rank_env(r, world, "1", controller, token)});
    return c;
  };
  JobOptions o;
  o.world_size = 2;
  o.timeout_ns = 1;  // the stall timeout is this plus 5 s
  auto job = start_process_job(spec, o);
  EXPECT_EQ(job->implementation(), "silent");
  const RunResult r = job->run([](Dist& d) -> Task<void> { co_await d.barrier(); }, RunContext{"", "collie run x", {}, {}});
  EXPECT_TRUE(r.stalled);
  EXPECT_EQ(r.blocked_ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(r.deadlock_report.find("rank 1: barrier() #1 on world, started"), std::string::npos) << r.deadlock_report;
  EXPECT_NE(r.deadlock_report.find("replay: collie run x"), std::string::npos) << r.deadlock_report;
  EXPECT_FALSE(job->reusable());
}

}  // namespace
}  // namespace collie::remote
