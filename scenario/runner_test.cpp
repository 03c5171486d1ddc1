// Running scenarios: what the tutorial scenarios print (the seeds' lines),
// the oracle check catching a wrong answer, outcomes, determinism.
#include "scenario/runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "scenario/loader.h"
#include "sim/simulator.h"

namespace collie::scenario {
namespace {

std::string scenario_path(const std::string& rel) { return std::string(COLLIE_SOURCE_DIR) + "/scenarios/" + rel; }

std::vector<std::string> lines_of(const ScenarioResult& r) {
  std::vector<std::string> out;
  for (const auto& l : r.output) out.push_back(l.text);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// What loading `text` as `file` says: its error, or "loaded".
std::string load_error(const std::string& text, const std::string& file) {
  try {
    (void)load_text(text, file);
    return "loaded";
  } catch (const ScenarioError& e) {
    return e.what();
  }
}

ScenarioResult run_file(const std::string& rel, RunOptions o = {}, std::optional<int> world = std::nullopt) {
  return run_scenario(load_file(scenario_path(rel), LoadOverrides{world}), o);
}

TEST(TutorialScenarios, PrintWhatTheSeedsPrint) {
  struct Case {
    const char* file;
    std::vector<std::string> lines;
  };
  const std::vector<Case> cases = {
      {"tutorial/send_recv_blocking.yaml", {"Rank  0  has data  tensor(1.)", "Rank  1  has data  tensor(1.)"}},
      {"tutorial/send_recv_nonblocking.yaml",
       {"Rank 0 started sending", "Rank 1 started receiving", "Rank 1 has data  tensor(0.)",
        "Rank  0  has data  tensor(1.)", "Rank  1  has data  tensor(1.)"}},
      {"tutorial/all_reduce_group.yaml", {"Rank  0  has data  tensor(2.)", "Rank  1  has data  tensor(2.)"}},
      {"tutorial/all_reduce.yaml", {"[3] data = 4.0", "[0] data = 4.0", "[1] data = 4.0", "[2] data = 4.0"}},
      // The seed's ranks 1..3 print Gloo's partial sums 3.0, 2.0, 1.0; collie leaves them unchanged.
      {"tutorial/reduce.yaml", {"[1] data = 1.0", "[2] data = 1.0", "[0] data = 4.0", "[3] data = 1.0"}},
      {"tutorial/gather.yaml", {"[0] data = [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]"}},
      {"tutorial/all_gather.yaml",
       {"[0] data = [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]",
        "[2] data = [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]",
        "[3] data = [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]",
        "[1] data = [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]"}},
      {"tutorial/broadcast.yaml",
       {"[2] data = tensor([0.])", "[1] data = tensor([0.])", "[3] data = tensor([0.])", "[0] data = tensor([0.])"}},
      {"tutorial/hello.yaml", {"[0] say hi!", "[2] say hi!", "[3] say hi!", "[1] say hi!"}},
  };
  for (const Case& c : cases) {
    const ScenarioResult r = run_file(c.file);
    EXPECT_TRUE(r.passed) << c.file << ": " << (r.failures.empty() ? "" : r.failures[0]);
    EXPECT_EQ(lines_of(r), sorted(c.lines)) << c.file;
  }
}

TEST(TutorialScenarios, EveryScenarioUnderScenariosPasses) {
  int n = 0;
  for (const auto& dir : {"tutorial", "p2p", "groups", "broadcast", "reduce", "all_reduce", "scatter", "gather",
                          "all_gather", "reduce_scatter", "all_to_all", "barrier", "dtypes", "edge", "errors", "deadlocks"}) {
    for (const auto& e : std::filesystem::directory_iterator(scenario_path(dir))) {
      if (e.path().extension() != ".yaml") continue;
      ++n;
      const ScenarioResult r = run_scenario(load_file(e.path().string()), {});
      EXPECT_TRUE(r.passed) << e.path() << ":\n" << (r.failures.empty() ? "" : r.failures[0]);
    }
  }
  EXPECT_GE(n, 68);  // 18 tutorial + at least 40 more + 10 deadlocks
}

// A backend whose transport flips a bit in every payload: results are wrong
// but nothing errors or hangs. The oracle check must notice without a single
// `expect` step in the scenario.
class CorruptingBackend final : public InProcessBackend {
 public:
  explicit CorruptingBackend(const BackendOptions& o) : sim_(o.world_size, o.seed, sim::NetworkModel{}) {
    for (int r = 0; r < o.world_size; ++r) wrapped_.push_back(std::make_unique<Corrupting>(sim_.transport(r)));
  }
  Transport& transport(int rank) override { return *wrapped_[static_cast<std::size_t>(rank)]; }

 private:
  class Corrupting final : public Transport {
   public:
    explicit Corrupting(Transport& t) : t_(t) {}
    int rank() const override { return t_.rank(); }
    int world_size() const override { return t_.world_size(); }
    void attach(FrameSink* s) override { t_.attach(s); }
    void post_send(const FrameHeader& h, std::span<const std::byte> p, void* cookie) override {
      if (p.empty()) return t_.post_send(h, p, cookie);
      auto copy = std::make_shared<std::vector<std::byte>>(p.begin(), p.end());
      (*copy)[0] ^= std::byte{0x40};
      buffers_.push_back(copy);
      t_.post_send(h, *copy, cookie);
    }
    void schedule(std::coroutine_handle<> h) override { t_.schedule(h); }
    void schedule_after_compute(std::uint64_t b, std::coroutine_handle<> h) override { t_.schedule_after_compute(b, h); }
    void schedule_at(Nanos when, std::coroutine_handle<> h) override { t_.schedule_at(when, h); }
    bool run_until(const std::function<bool()>& d, std::optional<Nanos> dl) override { return t_.run_until(d, dl); }
    Nanos now() const override { return t_.now(); }

   private:
    Transport& t_;
    std::vector<std::shared_ptr<std::vector<std::byte>>> buffers_;
  };
  sim::Simulator sim_;
  std::vector<std::unique_ptr<Corrupting>> wrapped_;
};

TEST(OracleCheck, CatchesAWrongAnswerWithoutAnyExpectStep) {
  BackendRegistry reg;
  BackendInfo info;
  info.name = "corrupting";
  info.create = [](const BackendOptions& o) { return std::make_unique<CorruptingBackend>(o); };
  reg.add(std::move(info));
  const Scenario s = load_text(R"(
version: 1
name: plain all_reduce
world: 4
tensors: {t: {dtype: int32, shape: [8], init: "rank + i"}}
program:
  - {op: all_reduce, tensor: t}
)", "plain.yaml");
  RunOptions o;
  o.backend = "corrupting";
  o.registry = &reg;
  const ScenarioResult r = run_scenario(s, o);
  EXPECT_FALSE(r.passed);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures[0].find("plain.yaml:7:5: all_reduce #1 on world: rank 0 element 0 is"), std::string::npos)
      << r.failures[0];
  EXPECT_NE(r.failures[0].find("the oracle says 6"), std::string::npos) << r.failures[0];
  // The same scenario on the simulator passes.
  EXPECT_TRUE(run_scenario(s, {}).passed);
}

TEST(Outcomes, AnUnexpectedDeadlockFailsWithTheReport) {
  const Scenario s = load_text(R"(
version: 1
name: waits forever
world: 2
tensors: {t: {dtype: float32}}
program:
  - {op: recv, tensor: t, src: "1 - rank"}
)", "w.yaml");
  const ScenarioResult r = run_scenario(s, {});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.outcome, "deadlock");
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures[0].find("expected the run to end ok, but: deadlock"), std::string::npos) << r.failures[0];
  EXPECT_NE(r.replay.find("collie run w.yaml --backend sim --seed 1"), std::string::npos);
}

TEST(Outcomes, AnExpectedErrorThatDoesNotHappenFails) {
  const Scenario s = load_text(R"(
version: 1
name: fine
world: 2
tensors: {t: {dtype: float32}}
program:
  - {op: all_reduce, tensor: t}
outcome: {error: size_mismatch}
)", "f.yaml");
  const ScenarioResult r = run_scenario(s, {});
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.failures.at(0).find("f.yaml:8:10: expected an error 'size_mismatch', but the run ended ok"),
            std::string::npos)
      << r.failures.at(0);
}

TEST(Outcomes, AFailedExpectNamesTheStepAndTheRank) {
  const Scenario s = load_text(R"(
version: 1
name: wrong expectation
world: 2
tensors: {t: {dtype: float32, init: 1}}
program:
  - {op: all_reduce, tensor: t}
  - {op: expect, tensor: t, equals: [3]}
)", "e.yaml");
  const ScenarioResult r = run_scenario(s, {});
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.failures.size(), 2u);  // one per rank, in the order they ran
  std::vector<std::string> f = r.failures;
  std::sort(f.begin(), f.end());
  EXPECT_EQ(f[0], "e.yaml:8:5: rank 0: expect t: element 0 is 2.0, expected 3.0");
  EXPECT_EQ(f[1], "e.yaml:8:5: rank 1: expect t: element 0 is 2.0, expected 3.0");
}

TEST(Determinism, SameSeedSameTraceAndOutputOtherSeedSameValues) {
  RunOptions a, b;
  a.seed = 11;
  b.seed = 12;
  const auto x = run_file("groups/overlapping_groups.yaml", a);
  const auto y = run_file("groups/overlapping_groups.yaml", a);
  const auto z = run_file("groups/overlapping_groups.yaml", b);
  EXPECT_EQ(x.trace_hash, y.trace_hash);
  EXPECT_EQ(x.virtual_time, y.virtual_time);
  EXPECT_TRUE(x.passed && y.passed && z.passed);
}

TEST(WorldOverride, RechecksTheScenario) {
  const auto r = run_file("all_reduce/ring_world6.yaml", {}, 7);
  EXPECT_EQ(r.world, 7);
  EXPECT_FALSE(r.passed);  // its expect steps assume 6 ranks
  EXPECT_NE(r.replay.find("--world 7"), std::string::npos) << r.replay;
  EXPECT_THROW(run_file("tutorial/int64_reduce_to_3.yaml", {}, 2), ScenarioError);  // root 3 of 2
}

// collie run --world 1 on a scenario with a program for rank 1 dropped that
// program and passed; the file saying world: 1 was rejected.
TEST(WorldOverride, AProgramForARankOutsideTheOverriddenWorldIsRejectedAsIfTheFileSaidIt) {
  const std::string text =
      "version: 1\nname: x\nworld: 2\ntensors: {t: {dtype: float32}}\nprograms:\n  0: [{op: barrier}]\n"
      "  1: [{op: barrier}]\n";
  EXPECT_NO_THROW(load_text(text, "w.yaml"));
  try {
    load_text(text, "w.yaml", LoadOverrides{1});
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("program for rank 1 is out of range for world 1"), std::string::npos) << e.what();
  }
}

// `key: value` in a scenario's network section is refused, with the line it
// is on (line 5 of the file).
void expect_network_value_refused(const std::string& key_value) {
  try {
    load_text("version: 1\nname: x\nworld: 2\nnetwork:\n  " + key_value + "\nprogram:\n  - {op: barrier}\n", "neg.yaml");
    FAIL() << "expected a ScenarioError for " << key_value;
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("neg.yaml:5"), std::string::npos) << e.what();
  }
}

// Messages larger than cache_bytes move at memory_bandwidth_GBps; smaller
// ones, and every message without cache_bytes, at the link's bandwidth.
TEST(NetworkProfile, MessagesThatDoNotFitTheCachesMoveAtTheMemoryRate) {
  auto time_of = [](const std::string& extra) {
    const std::string text =
        "version: 1\nname: x\nworld: 2\n"
        "network: {ranks_per_node: 0, cpu_bound: true, jitter: 0, intra: {alpha_us: 0, bandwidth_GBps: 4}" + extra + "}\n"
        "tensors:\n  t: {dtype: float32, shape: [1048576], init: \"rank\"}\n"
        "program:\n  - {op: broadcast, tensor: t, src: 0}\n";
    const ScenarioResult r = run_scenario(load_text(text, "cache.yaml"), {});
    EXPECT_TRUE(r.passed);
    return static_cast<double>(r.virtual_time);
  };
  const double base = time_of("");
  const double fits = time_of(", cache_bytes: 8388608, memory_bandwidth_GBps: 2");
  const double spills = time_of(", cache_bytes: 1048576, memory_bandwidth_GBps: 2");
  EXPECT_EQ(fits, base);
  // 4 MiB at 2 instead of 4 GB/s: about twice as long (the rendezvous
  // handshake is the same in both).
  EXPECT_GT(spills, 1.8 * base);
  EXPECT_LT(spills, 2.2 * base);
  expect_network_value_refused("memory_bandwidth_GBps: -1");
}

// Virtual time of a ring all_reduce of `count` floats by 3 ranks on one
// cpu_bound node of `cores` cores, with `extra` (more network keys).
double three_rank_all_reduce_time(int cores, const std::string& extra, int count) {
  const std::string text =
      "version: 1\nname: x\nworld: 3\n"
      "network: {ranks_per_node: 0, cpu_bound: true, jitter: 0, overhead_us: 1, cores_per_node: " +
      std::to_string(cores) + ", " + extra +
      "}\n"
      "tensors:\n  t: {dtype: float32, shape: [" +
      std::to_string(count) +
      "], init: \"rank\"}\n"
      "program:\n  - {op: all_reduce, tensor: t, algorithm: ring}\n";
  const ScenarioResult r = run_scenario(load_text(text, "oversub.yaml"), {});
  EXPECT_TRUE(r.passed);
  return static_cast<double>(r.virtual_time);
}

// oversubscribed_overhead_us is paid per message only where a node runs
// more ranks than cores: 3 ranks on 2 cores pay it, 3 ranks on 3 do not.
TEST(NetworkProfile, OversubscribedNodesPayTheirOverheadPerMessage) {
  auto time_of = [](int cores, double extra_us) {
    return three_rank_all_reduce_time(
        cores, "oversubscribed_overhead_us: " + std::to_string(extra_us) + ", intra: {alpha_us: 1, bandwidth_GBps: 4}",
        1024);
  };
  EXPECT_EQ(time_of(3, 50), time_of(3, 0));
  // A ring all_reduce of 3 ranks: 4 steps of one message each way per rank,
  // each paying 50 us at both ends on a shared CPU timeline.
  EXPECT_GT(time_of(2, 50), time_of(2, 0) + 4 * 50'000);
  expect_network_value_refused("oversubscribed_overhead_us: -2");
}

// oversubscribed_cpu_factor scales every CPU cost of an oversubscribed
// node's ranks: large messages there take about that much longer, and a
// node with a core per rank is untouched.
TEST(NetworkProfile, OversubscribedNodesRunTheirCpuWorkSlower) {
  auto time_of = [](int cores, double factor) {
    return three_rank_all_reduce_time(cores,
                                      "oversubscribed_cpu_factor: " + std::to_string(factor) +
                                          ", intra: {alpha_us: 0, bandwidth_GBps: 1}, reduce_GBps: 1",
                                      1 << 20);
  };
  EXPECT_EQ(time_of(3, 1.5), time_of(3, 1));
  const double base = time_of(2, 1);
  EXPECT_GT(time_of(2, 1.5), 1.4 * base);
  EXPECT_LT(time_of(2, 1.5), 1.6 * base);
  expect_network_value_refused("oversubscribed_cpu_factor: 0.5");
}

}  // namespace
}  // namespace collie::scenario

namespace collie::scenario {
namespace {

TEST(TimingOnly, SameVirtualTimeAndTraceAsAMaterialisedRun) {
  for (const char* file : {"all_reduce/ring_world6.yaml", "all_reduce/halving_doubling_world5.yaml",
                           "all_gather/into_tensor.yaml", "broadcast/large.yaml"}) {
    if (!std::filesystem::exists(scenario_path(file))) continue;
    SCOPED_TRACE(file);
    const ScenarioResult full = run_file(file);
    RunOptions o;
    o.timing_only = true;
    const ScenarioResult timing = run_file(file, o);
    ASSERT_TRUE(full.passed);
    EXPECT_TRUE(timing.passed) << (timing.failures.empty() ? "" : timing.failures[0]);
    EXPECT_TRUE(timing.timing_only);
    EXPECT_EQ(timing.checks, 0);
    EXPECT_EQ(timing.virtual_time, full.virtual_time);
    EXPECT_EQ(timing.trace_hash, full.trace_hash);
  }
}

TEST(TimingOnly, ARunTooLargeToMaterialiseIsRefusedWithTheWayOut) {
  Scenario s = load_file(scenario_path("scale/all_reduce.yaml"), LoadOverrides{4096});  // 4096 x 64 MiB
  s.timing_only = false;
  RunOptions o;
  try {
    run_scenario(s, o);
    FAIL() << "expected a usage error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--timing-only"), std::string::npos) << e.what();
  }
  o.backend = "tcp";
  o.timing_only = true;
  EXPECT_THROW(run_scenario(s, o), Error);  // real bytes cannot be skipped
}

// The 8 GiB limit counted the tensors only: 800 MB of tensors reached
// 3.5 GB RSS (the oracle's copies of every op's inputs and outputs).
TEST(Memory, TheCopiesRecordedForTheOracleCountAgainstTheLimit) {
  const std::string text =
      "version: 1\nname: m\nworld: 4\ntensors: {t: {dtype: float32, shape: [65536], init: 1}}\n"  // 1 MiB in all
      "program:\n  - {op: all_reduce, tensor: t}\n  - {op: all_reduce, tensor: t}\n";
  RunOptions o;
  o.max_tensor_bytes = 3 << 20;  // the tensors fit; with 2 MiB per all_reduce of records, the run does not
  try {
    run_scenario(load_text(text, "m.yaml"), o);
    FAIL() << "expected a usage error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("m.yaml: a run of 4 ranks needs about 5.25 MiB of memory (limit 3.00 MiB): 1.00 MiB of tensors, "
                     "4.00 MiB of copies"),
              std::string::npos)
        << w;
    EXPECT_NE(w.find("copies of every op's inputs and outputs for the oracle"), std::string::npos) << w;
    EXPECT_NE(w.find("check: false"), std::string::npos) << w;
  }
  // Without the oracle's copies it fits, and runs.
  EXPECT_TRUE(run_scenario(load_text("version: 1\nname: m\nworld: 4\ncheck: false\n" + text.substr(text.find("tensors")),
                                     "m.yaml"),
                           o)
                  .passed);
}

TEST(TimingOnly, ScaleScenariosRunAtThousandsOfRanksInLittleMemory) {
  // 4096 ranks x 64 MiB would be 256 GiB materialised.
  for (const char* file : {"scale/all_reduce.yaml", "scale/broadcast.yaml", "scale/all_gather.yaml"}) {
    const ScenarioResult r = run_file(file, {}, 4096);
    EXPECT_TRUE(r.passed) << file << ": " << (r.failures.empty() ? "" : r.failures[0]);
    EXPECT_GT(r.events, 4096u) << file;
  }
}

TEST(AllGatherIntoTensor, MatchesTheOracleForEveryWorldSize) {
  for (int w = 1; w <= 9; ++w) {
    const ScenarioResult r = run_file("all_gather/into_tensor.yaml", {}, w);
    EXPECT_TRUE(r.passed) << "world " << w << ": " << (r.failures.empty() ? "" : r.failures[0]);
    EXPECT_GE(r.checks, 1);
  }
}

TEST(ShapeExpressions, FollowTheWorldAndAreCheckedAgainstTheGroup) {
  Scenario s = load_file(scenario_path("all_gather/into_tensor.yaml"), LoadOverrides{7});
  const TensorSpec* out = s.find_tensor("out");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->count(), 21u);
  const std::string bad =
      "version: 1\nname: x\nworld: 4\ntensors:\n  a: {dtype: float32, shape: [2]}\n  b: {dtype: float32, shape: [\"world\"]}\n"
      "program:\n  - {op: all_gather_into_tensor, tensor: a, output: b}\n";
  try {
    load_text(bad, "bad.yaml");
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has 4 elements"), std::string::npos) << e.what();
  }
}

TEST(NetworkProfile, IsReadWithLocationsAndOverriddenByTheScenario) {
  const std::string dir = std::filesystem::temp_directory_path() / "collie-profile-test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream p(dir + "/p.yaml");
    p << "version: 1\nnetwork:\n  cpu_bound: true\n  overhead_us: 2\n  intra: {alpha_us: 3, bandwidth_GBps: 4}\n";
    std::ofstream s(dir + "/s.yaml");
    s << "version: 1\nname: x\nworld: 2\nnetwork: {profile: p.yaml, reduce_GBps: 9}\nprogram:\n  - {op: barrier}\n";
    std::ofstream bad(dir + "/bad.yaml");
    bad << "version: 1\nnetwork:\n  intra: {alpha_us: 3, bandwdth_GBps: 4}\n";
  }
  const Scenario s = load_file(dir + "/s.yaml");
  EXPECT_TRUE(s.network.cpu_bound);
  EXPECT_EQ(s.network.overhead_us, 2);
  EXPECT_EQ(s.network.intra.alpha_us, 3);
  EXPECT_EQ(s.network.reduce_GBps, 9);
  try {
    load_profile(dir + "/bad.yaml");
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:3"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Replay lines pasted a file name with a space as two words.
TEST(Replay, FileNamesAndFaultsAreShellQuoted) {
  const std::string text = "version: 1\nname: x\nworld: 2\ntensors:\n  t: {dtype: float32}\nprogram:\n"
                           "  - {op: expect, tensor: t, value: 1}\n";
  RunOptions o;
  o.fault_args = {"slow:rank=1,factor=2"};
  ASSERT_FALSE(sim::parse_fault(o.fault_args[0], o.extra_faults));
  const ScenarioResult r = run_scenario(load_text(text, "my job's.yaml"), o);
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.replay, "collie run 'my job'\\''s.yaml' --backend sim --seed 1 --fault slow:rank=1,factor=2");
}

// --world 1048576 of a scenario whose expect fails on every rank printed
// 120 MB: a result keeps kMaxFailures failures and says how many more.
TEST(FailureOutput, IsBoundedWhateverTheWorld) {
  const std::string text = "version: 1\nname: x\nworld: 300\ntensors:\n  t: {dtype: float32}\nprogram:\n"
                           "  - {op: expect, tensor: t, value: \"rank + 1\"}\n";
  const ScenarioResult r = run_scenario(load_text(text, "b.yaml"), {});
  ASSERT_EQ(r.failures.size(), kMaxFailures + 1);
  EXPECT_EQ(r.failures.back(), "... and 250 more failures");
}

// crash:rank=2,op=99 of a program of 3 ops passed without a word.
TEST(Faults, AFaultThatNeverFiresIsNamed) {
  RunOptions o;
  o.fault_args = {"crash:rank=2,op=99", "drop:src=0,dst=1,nth=5", "crash:rank=1,op=1"};
  for (const auto& f : o.fault_args) ASSERT_FALSE(sim::parse_fault(f, o.extra_faults));
  const ScenarioResult r = run_file("tutorial/all_reduce.yaml", o);
  std::string notes;
  for (const auto& n : r.notes) notes += n + "\n";
  EXPECT_NE(notes.find("fault crash:rank=2,op=99 did not fire: rank 2 never started its 99th op"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("fault drop:src=0,dst=1,nth=5 did not fire: there was no 5th message from rank 0 to rank 1"),
            std::string::npos)
      << notes;
  EXPECT_EQ(notes.find("crash:rank=1,op=1 did not fire"), std::string::npos) << notes;  // it did
  // What fired is not noted.
  RunOptions fired;
  fired.fault_args = {"crash:rank=1,op=1"};
  ASSERT_FALSE(sim::parse_fault(fired.fault_args[0], fired.extra_faults));
  EXPECT_TRUE(run_file("tutorial/all_reduce.yaml", fired).notes.empty());
}

// {m} of a 2-D tensor printed one flat row, and {m[1]} was an element.
TEST(Print, TensorsOfTwoDimensionsPrintAsTorchPrintsThem) {
  const std::string text = "version: 1\nname: x\nworld: 1\ntensors:\n  m: {dtype: int64, shape: [2, 3], init: i}\n"
                           "program:\n  - {op: print, text: \"{m}\"}\n  - {op: print, text: \"{m[1]}|{m[1]!r}\"}\n";
  const ScenarioResult r = run_scenario(load_text(text, "p.yaml"), {});
  ASSERT_EQ(r.output.size(), 2u);
  EXPECT_EQ(r.output[0].text, "tensor([[0, 1, 2],\n        [3, 4, 5]])");
  EXPECT_EQ(r.output[1].text, "tensor([3, 4, 5])|tensor([3, 4, 5])");
  EXPECT_EQ(load_error("version: 1\nname: x\nworld: 1\ntensors:\n  m: {dtype: int64, shape: [2, 3]}\n"
                       "program:\n  - {op: print, text: \"{m[2]}\"}\n",
                       "p.yaml"),
            "p.yaml:7:24: error: print: {m[2]}: tensor 'm' has 2 rows");
}

// all_to_all_single whose ranks receive different totals needed an output
// shape per rank: shapes may now depend on the rank.
TEST(ShapeExpressions, MayDependOnTheRank) {
  const std::string text =
      "version: 1\nname: x\nworld: 3\ntensors:\n"
      "  in: {dtype: int64, shape: [6], init: \"rank * 10 + i\"}\n"
      "  out: {dtype: int64, shape: [\"world * (rank + 1)\"]}\n"
      "program:\n"
      "  - {op: all_to_all_single, output: out, tensor: in, input_split_sizes: \"j + 1\", output_split_sizes: \"rank + 1\"}\n"
      "  - {op: print, text: \"{rank}: {out}\"}\n";
  const ScenarioResult r = run_scenario(load_text(text, "a.yaml"), {});
  EXPECT_TRUE(r.passed) << (r.failures.empty() ? "" : r.failures[0]);
  EXPECT_GE(r.checks, 1);
  std::vector<std::string> lines;
  for (const auto& l : r.output) lines.push_back(l.text);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"0: tensor([ 0, 10, 20])", "1: tensor([ 1,  2, 11, 12, 21, 22])",
                                             "2: tensor([ 3,  4,  5, 13, 14, 15, 23, 24, 25])"}));
  // Every rank's shape is checked when loaded: [1 - rank] is -1 on rank 2.
  EXPECT_EQ(load_error("version: 1\nname: x\nworld: 3\ntensors:\n  t: {dtype: float32, shape: [\"1 - rank\"]}\n"
                       "program:\n  - {op: barrier}\n",
                       "a.yaml"),
            "a.yaml:5:30: error: tensor 't': shape dimension 1 - rank is -1 on rank 2; "
            "dimensions are integers between 0 and 2^31");
}

}  // namespace
}  // namespace collie::scenario
