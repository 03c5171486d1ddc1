// The verdict on runs whose ranks were processes (no global view of a
// deadlock) and on runs with crashed ranks.
#include "scenario/verdict.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "scenario/loader.h"

namespace collie::scenario {
namespace {

Scenario deadlock_of_ranks_1_and_2() {
  return load_text(R"(version: 1
name: d
world: 3
tensors:
  t: {dtype: float32, shape: [1]}
program:
  - {op: all_reduce, tensor: t, if: "rank != 0"}
outcome: {deadlock: [1, 2], contains: "wait-for"}
)",
                   "d.yaml");
}

RunResult timeouts_on(std::vector<int> ranks) {
  RunResult r;
  r.ranks.resize(3);
  for (auto& o : r.ranks) o.finished = true;
  for (int rank : ranks)
    r.ranks[static_cast<std::size_t>(rank)].error = std::make_exception_ptr(
        Error(ErrorKind::kTimeout, OpContext{rank, "all_reduce", "world", 1, {}}, "did not complete within 2000 ms"));
  return r;
}

Judge processes() {
  Judge how;
  how.diagnoses_deadlocks = false;
  return how;
}

TEST(Verdict, WithRanksInProcessesADeadlockIsTimeoutsOnExactlyTheBlockedRanks) {
  const Scenario s = deadlock_of_ranks_1_and_2();
  RunLog log;
  EXPECT_TRUE(judge(s, timeouts_on({1, 2}), log, processes()).passed());
  // Another set of ranks, or an error other than a timeout, is not the deadlock.
  EXPECT_FALSE(judge(s, timeouts_on({1}), log, processes()).passed());
  EXPECT_FALSE(judge(s, timeouts_on({0, 1, 2}), log, processes()).passed());
  RunResult mismatch = timeouts_on({1});
  mismatch.ranks[2].error =
      std::make_exception_ptr(Error(ErrorKind::kCollectiveMismatch, OpContext{}, "rank 2 called broadcast"));
  EXPECT_FALSE(judge(s, mismatch, log, processes()).passed());
}

TEST(Verdict, InOneProcessADeadlockMustBeDiagnosedNotTimedOut) {
  const Scenario s = deadlock_of_ranks_1_and_2();
  RunLog log;
  EXPECT_FALSE(judge(s, timeouts_on({1, 2}), log, Judge{}).passed());
  RunResult diagnosed;
  diagnosed.ranks.resize(3);
  diagnosed.ranks[0].finished = true;
  diagnosed.deadlocked = true;
  diagnosed.blocked_ranks = {1, 2};
  diagnosed.deadlock_report = "wait-for cycle: 1 -> 2 -> 1";
  EXPECT_TRUE(judge(s, diagnosed, log, Judge{}).passed());
  diagnosed.deadlock_report = "no cause given";  // `contains` is compared where a diagnosis exists
  EXPECT_FALSE(judge(s, diagnosed, log, Judge{}).passed());
  EXPECT_TRUE(judge(s, diagnosed, log, processes()).passed());
}

TEST(Verdict, ATransportFaultNeverPasses) {
  const Scenario s = deadlock_of_ranks_1_and_2();
  RunLog log;
  RunResult r;
  r.ranks.resize(3);
  r.deadlocked = true;
  r.blocked_ranks = {1, 2};
  r.deadlock_report = "wait-for";
  r.transport_fault = "transport: run_until reported a deadlock while rank 1 had an op timeout armed";
  const Verdict v = judge(s, r, log, Judge{});
  EXPECT_FALSE(v.passed());
  EXPECT_NE(v.detail.find("op timeout armed"), std::string::npos) << v.detail;
}

TEST(Verdict, ALostRankIsNamedByTheLibrarysWordsNotByTheOpsPeer) {
  const Scenario s = deadlock_of_ranks_1_and_2();
  RunLog log;
  Judge how;
  how.collie_core = false;
  ProcessFault f;
  f.rank = 0;
  f.before_op = 2;
  f.text = "crash:rank=0,op=2";
  how.process_faults = {f};
  RunResult r;
  r.ranks.resize(3);
  r.ranks[0].crashed = true;
  r.ranks[2].finished = true;
  r.ranks[1].finished = true;
  auto fails_with = [&](const std::string& text) {
    r.ranks[1].error = std::make_exception_ptr(std::runtime_error(text));
    std::string report;
    for (const auto& line : judge(s, r, log, how).fault_report) report += line + "\n";
    return report;
  };
  EXPECT_NE(fails_with("rank 1: recv #1 on world from rank 0 (tag 0, float32 x 4): RuntimeError: Connection reset by peer")
                .find("[does not name the lost rank]"),
            std::string::npos);
  EXPECT_NE(fails_with("rank 1: recv #1 on world from rank 0 (tag 0, float32 x 4): RuntimeError: lost rank 0")
                .find("[names the lost rank]"),
            std::string::npos);
}

// A library with a 2 s deadline of its own passed a 3 s stall under a 20 s
// op timeout: a stall was judged as a crash is, where failing loudly is fine.
TEST(Verdict, ASurvivorThatFailsAStallWellInsideTheTimeoutFailsTheRun) {
  const Scenario s = load_text(R"(version: 1
name: s
world: 2
tensors:
  t: {dtype: float32, shape: [1]}
program:
  - {op: all_reduce, tensor: t}
)", "s.yaml");
  RunLog log;
  Judge how;
  how.collie_core = false;
  how.diagnoses_deadlocks = false;
  ProcessFault f;
  f.kind = ProcessFault::Kind::kStall;
  f.rank = 1;
  f.before_op = 1;
  f.stall_ms = 3000;
  f.text = "stall:rank=1,op=1,ms=3000";
  how.process_faults = {f};
  RunResult r;
  r.ranks.resize(2);
  r.ranks[1].finished = true;
  r.ranks[0].error = std::make_exception_ptr(std::runtime_error("rank 0: all_reduce #1 on world: no progress within 2000 ms"));
  EXPECT_TRUE(judge(s, r, log, how).failures.empty()) << "judged as a crash when the stall may outlast the timeout";
  how.stalls_must_be_survived = true;
  const Verdict v = judge(s, r, log, how);
  ASSERT_FALSE(v.failures.empty());
  EXPECT_NE(v.failures.front().find("rank 0 failed though every stalled rank came back after at most 3000 ms"),
            std::string::npos)
      << v.failures.front();
  r.ranks[0].error = nullptr;
  r.ranks[0].finished = true;
  EXPECT_TRUE(judge(s, r, log, how).failures.empty());
}

// A send to oneself that "completed" leaving zeros in the receive buffer got
// a note: the scenario was unspecified as a whole, its expect step too.
TEST(Verdict, AnUnspecifiedOutcomeStillHoldsWhatCompletedToTheOracle) {
  const std::string text = R"(version: 1
name: u
world: 2
UNSPECIFIED: "sending to oneself"
tensors:
  t: {dtype: float32, shape: [1]}
program:
  - {op: all_reduce, tensor: t}
)";
  auto with = [&](const std::string& key) {
    std::string t = text;
    t.replace(t.find("UNSPECIFIED"), 11, key);
    return load_text(t, "u.yaml");
  };
  Judge library;
  library.collie_core = false;
  RunResult ok;
  ok.ranks.resize(2);
  for (auto& o : ok.ranks) o.finished = true;
  RunResult error = ok;
  error.ranks[1].error = std::make_exception_ptr(std::runtime_error("Invalid destination rank"));
  RunLog wrong;
  wrong.failures.push_back("u.yaml:8:5: rank 0: expect in: element 0 is 0.0, expected 10.0");
  const RunLog right;
  for (const char* key : {"unspecified", "unspecified_outcome"}) {
    SCOPED_TRACE(key);
    const Scenario s = with(key);
    // Ending otherwise than expected: a note either way.
    const Verdict e = judge(s, error, right, library);
    EXPECT_TRUE(e.passed());
    EXPECT_FALSE(e.notes.empty());
    // A wrong value where the run completed: a failure unless everything is unspecified.
    EXPECT_EQ(judge(s, ok, wrong, library).passed(), std::string(key) == "unspecified");
    // collie's core is held to all of it.
    EXPECT_FALSE(judge(s, error, right, Judge{}).passed());
  }
}

}  // namespace
}  // namespace collie::scenario
