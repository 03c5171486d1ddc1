// collie run -- python ...: unmodified torch.distributed programs
// (script/testdata/) run end to end under this machine's torch, judged,
// reported with their file:line, recorded and replayed. Skipped, with the
// reason, where there is no torch.
#include "script/script_run.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/torch/torch_backend.h"
#include "core/error.h"
#include "scenario/loader.h"
#include "scenario/runner.h"

namespace collie::script {
namespace {

const std::string kData = COLLIE_SCRIPT_TESTDATA;

// Why this machine cannot run the programs, or empty.
const std::string& no_torch() {
  static const std::string why = [] {
    const std::string p = torch::probe();
    return p.rfind("torch ", 0) == 0 ? std::string() : p;
  }();
  return why;
}

#define REQUIRE_TORCH() \
  if (!no_torch().empty()) GTEST_SKIP() << "no torch here: " << no_torch()

ScriptOptions program(const std::string& file, int nprocs = 0) {
  ScriptOptions o;
  o.command = {torch::python(), kData + "/" + file};
  o.nprocs = nprocs;
  o.join_timeout_ns = 600'000'000'000;  // torch's import, on a loaded machine
  return o;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

std::string printed(const ScriptResult& r) {
  std::string s;
  for (const auto& l : r.run.output) s += l.text + "\n";
  return s;
}

// Whether process `pid` has ended: gone, or a zombie (a process the
// program spawned is its parent's, or init's, to reap).
bool ended(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || (paren + 2 < line.size() && line[paren + 2] == 'Z');
}

// Every process the run saw has ended.
void expect_no_orphans(const ScriptResult& r) {
  EXPECT_FALSE(r.processes.empty());
  for (long pid : r.processes) EXPECT_TRUE(ended(pid)) << "process " << pid << " outlived the run";
}

TEST(ScriptRun, EveryOpOfTheTableRunsAndItsResultsComeBack) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("every_op.py", 4));
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program) << printed(r);
  EXPECT_GE(r.run.checks, 19);
  const std::string out = printed(r);
  for (const char* want : {"rank 3: all_to_all_single ok", "rank 2: batch_isend_irecv ok",
                           "rank 0: all_reduce(async_op=True) ok", "rank 0: any-source recv matched rank 2",
                           "rank 1: irecv with tag ok"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  expect_no_orphans(r);
}

// DDP calls the group from C++: Works C++ holds must stay waitable.
TEST(ScriptRun, DistributedDataParallelTrainsWithIdenticalReplicas) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("ddp.py", 2));
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program) << printed(r);
  EXPECT_GE(r.run.checks, 8);
  ASSERT_EQ(r.run.output.size(), 2u) << printed(r);
  EXPECT_EQ(r.run.output[0].text.rfind("weights [", 0), 0u) << printed(r);
  EXPECT_EQ(r.run.output[0].text, r.run.output[1].text);
  expect_no_orphans(r);
}

TEST(ScriptRun, ADeadlockNamesEveryRanksCallAndLine) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("skip_send.py"));
  EXPECT_FALSE(r.run.passed);
  EXPECT_EQ(r.run.outcome, "deadlock");
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[0].find("waits in recv(src=1, float32 x 1) on world"), std::string::npos) << r.program[0];
  EXPECT_NE(r.program[0].find("skip_send.py:20 (in run):  dist.recv(tensor=tensor, src=1)"), std::string::npos)
      << r.program[0];
  EXPECT_NE(r.program[1].find("exited with code 0"), std::string::npos) << r.program[1];
  EXPECT_NE(r.program[1].find("skip_send.py:22"), std::string::npos) << r.program[1];
  EXPECT_NE(r.run.replay.find("-- " + torch::python() + " " + kData + "/skip_send.py"), std::string::npos)
      << r.run.replay;
  expect_no_orphans(r);
}

TEST(ScriptRun, TheSameSeedGivesTheSameOutputTraceAndReport) {
  REQUIRE_TORCH();
  ScriptOptions o = program("every_op.py", 4);
  o.seed = 7;
  const ScriptResult a = run_script(o);
  const ScriptResult b = run_script(o);
  ASSERT_TRUE(a.run.passed) << joined(a.run.failures);
  EXPECT_EQ(a.run.trace_hash, b.run.trace_hash);
  EXPECT_EQ(a.run.virtual_time, b.run.virtual_time);
  ASSERT_EQ(a.run.output.size(), b.run.output.size());
  for (std::size_t i = 0; i < a.run.output.size(); ++i) {
    EXPECT_EQ(a.run.output[i].rank, b.run.output[i].rank) << i;
    EXPECT_EQ(a.run.output[i].time, b.run.output[i].time) << i;
    EXPECT_EQ(a.run.output[i].text, b.run.output[i].text) << i;
  }
}

TEST(ScriptRun, ACollectiveMismatchNamesBothCallsLines) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("mismatch.py", 2));
  EXPECT_FALSE(r.run.passed);
  EXPECT_NE(joined(r.run.failures).find("collective_mismatch"), std::string::npos) << joined(r.run.failures);
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[0].find("mismatch.py:8:  dist.all_reduce(t)"), std::string::npos) << r.program[0];
  EXPECT_NE(r.program[1].find("mismatch.py:10:  dist.broadcast(t, src=0)"), std::string::npos) << r.program[1];
}

TEST(ScriptRun, AnExceptionEndsTheRunWithTheRankAndItsTraceback) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("raises.py", 2));
  EXPECT_FALSE(r.run.passed);
  EXPECT_NE(joined(r.run.failures).find("rank 1 raised ZeroDivisionError: division by zero at raises.py:12 (in step)"),
            std::string::npos)
      << joined(r.run.failures);
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[0].find("raises.py:9 (in step):  dist.recv(t, src=1)"), std::string::npos) << r.program[0];
  EXPECT_NE(r.program[1].find("| ZeroDivisionError: division by zero"), std::string::npos) << r.program[1];
  expect_no_orphans(r);
}

TEST(ScriptRun, AProgramThatExitsWithARankWaitingFails) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("exits_early.py", 2));
  EXPECT_FALSE(r.run.passed);
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[0].find("exits_early.py:10:  dist.recv(t, src=1)"), std::string::npos) << r.program[0];
  EXPECT_NE(r.program[1].find("exited with code 0"), std::string::npos) << r.program[1];
  expect_no_orphans(r);
}

TEST(ScriptRun, RanksThatDisagreeOnTheWorldSizeFailTheRun) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("world_mismatch.py", 2));
  EXPECT_FALSE(r.run.passed);
  ASSERT_EQ(r.run.failures.size(), 1u) << joined(r.run.failures);
  EXPECT_NE(r.run.failures[0].find("the ranks call init_process_group with different world sizes"), std::string::npos)
      << r.run.failures[0];
  EXPECT_NE(r.run.failures[0].find("world_mismatch.py:6"), std::string::npos) << r.run.failures[0];
  expect_no_orphans(r);
}

// What cannot run at all is a usage error (exit 2), with what happened.
std::string usage_error(const ScriptOptions& o) {
  try {
    run_script(o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    return e.detail();
  }
  ADD_FAILURE() << "no usage error";
  return {};
}

TEST(ScriptRun, AMissingScriptIsAUsageError) {
  EXPECT_NE(usage_error(program("no_such_script.py")).find("no_such_script.py: no such file"), std::string::npos);
}

TEST(ScriptRun, AFileThatIsNotPythonIsAUsageError) {
  REQUIRE_TORCH();
  const std::string e = usage_error(program("not_python.py", 2));
  EXPECT_NE(e.find("not_python.py is not a Python program (SyntaxError: invalid syntax (not_python.py, line 1))"),
            std::string::npos)
      << e;
}

TEST(ScriptRun, AProgramThatNeverCallsInitProcessGroupIsAUsageError) {
  REQUIRE_TORCH();
  const std::string e = usage_error(program("no_init.py"));
  EXPECT_NE(e.find("the program ended without calling torch.distributed.init_process_group"), std::string::npos) << e;
  EXPECT_NE(e.find("computing alone: 2.0"), std::string::npos) << e;
}

TEST(ScriptRun, ACrashFaultKillsTheRankAndItsPeersFailNamingIt) {
  REQUIRE_TORCH();
  ScriptOptions o = program("bf16_sum.py", 2);
  o.faults = {"crash:rank=1,op=1"};
  const ScriptResult r = run_script(o);
  EXPECT_FALSE(r.run.passed);
  EXPECT_NE(joined(r.run.failures).find("lost rank 1"), std::string::npos) << joined(r.run.failures);
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[1].find("killed (SIGKILL)"), std::string::npos) << r.program[1];
  EXPECT_NE(r.program[1].find("bf16_sum.py:7:  dist.all_reduce(t)"), std::string::npos) << r.program[1];
  EXPECT_NE(r.run.replay.find("--fault crash:rank=1,op=1"), std::string::npos) << r.run.replay;
  expect_no_orphans(r);
}

TEST(ScriptRun, ARecordedHangReplaysAsTheSameHang) {
  REQUIRE_TORCH();
  const std::string path = ::testing::TempDir() + "/skip_send_record.yaml";
  ScriptOptions o = program("skip_send.py");
  o.record_path = path;
  const ScriptResult r = run_script(o);
  ASSERT_EQ(r.record_path, path);
  ASSERT_EQ(r.run.outcome, "deadlock");
  const scenario::Scenario s = scenario::load_file(path);
  const scenario::ScenarioResult replay = scenario::run_scenario(s, {});
  EXPECT_FALSE(replay.passed);
  EXPECT_EQ(replay.outcome, "deadlock");
  // The same diagnosis. (Not the same trace: the program's run has events
  // of its own -- each rank yields before it waits for its next request.)
  EXPECT_EQ(replay.causes, r.run.causes);
  EXPECT_FALSE(replay.causes.empty());
  std::filesystem::remove(path);
}

TEST(ScriptRun, RunsOnTcpProcessesToo) {
  REQUIRE_TORCH();
  ::setenv("COLLIE_PROGRAM", COLLIE_BINARY, 1);  // the tcp backend's rank processes are `collie worker`
  ScriptOptions o = program("bf16_sum.py", 2);
  o.backend = "tcp";
  const ScriptResult r = run_script(o);
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program);
  EXPECT_NE(printed(r).find("sum [2.03125, 2.03125, 2.03125, 2.03125]"), std::string::npos) << printed(r);
  expect_no_orphans(r);
}

}  // namespace
}  // namespace collie::script
