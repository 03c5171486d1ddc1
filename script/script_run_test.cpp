// collie run -- python ...: unmodified torch.distributed programs
// (script/testdata/) run end to end under this machine's torch, judged,
// reported with their file:line, recorded and replayed. Skipped, with the
// reason, where there is no torch.
#include "script/script_run.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "backends/remote/child_processes.h"
#include "backends/torch/torch_backend.h"
#include "core/error.h"
#include "scenario/loader.h"
#include "scenario/runner.h"
#include "script/script_protocol.h"

namespace collie::script {
namespace {

const std::string kData = COLLIE_SCRIPT_TESTDATA;

#define REQUIRE_TORCH() \
  if (const std::string why = torch::missing(); !why.empty()) GTEST_SKIP() << "no torch here: " << why

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

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// `r`'s record (--record `path`), replayed as the scenario it is: it ends as
// the program's run did -- passed or not (collie run's exit code), with the
// same outcome and the same first line of what went wrong. (Not the same
// trace: the program's run has events of its own -- each rank yields
// before it waits for its next request.) With `kind_only`, of the detail
// only the error's kind (on processes the OS's words vary).
scenario::ScenarioResult expect_replays_as_it_ran(const ScriptResult& r, const std::string& path,
                                                  const scenario::RunOptions& ro = {}, bool kind_only = false) {
  EXPECT_EQ(r.record_path, path);
  const scenario::ScenarioResult replay = scenario::run_scenario(scenario::load_file(path), ro);
  EXPECT_EQ(replay.passed, r.run.passed) << joined(replay.failures);
  EXPECT_EQ(replay.outcome, r.run.outcome) << replay.detail;
  auto said = [&](const std::string& detail) {
    return kind_only ? detail.substr(0, detail.find(':')) : first_line(detail);
  };
  EXPECT_EQ(said(replay.detail), said(r.run.detail)) << replay.detail;
  std::filesystem::remove(path);
  return replay;
}

// Runs `o`, which fails as a scenario's run with an error of `kind` does:
// outcome "error" (exit 1), "KIND: " leading the detail.
ScriptResult run_failing_with(const ScriptOptions& o, const std::string& kind) {
  ScriptResult r = run_script(o);
  EXPECT_FALSE(r.run.passed);
  EXPECT_EQ(r.run.outcome, "error");
  EXPECT_EQ(r.run.detail.rfind(kind + ": ", 0), 0u) << r.run.detail;
  return r;
}

ScriptOptions recorded(ScriptOptions o, const std::string& name) {
  o.record_path = ::testing::TempDir() + "/" + name + "_record.yaml";
  return o;
}

// Every process the run saw has ended (gone, or a zombie: a process the
// program spawned is its parent's, or init's, to reap).
void expect_no_orphans(const ScriptResult& r) {
  EXPECT_FALSE(r.processes.empty());
  for (long pid : r.processes) EXPECT_TRUE(remote::process_ended(pid)) << "process " << pid << " outlived the run";
}

TEST(ScriptRun, EveryOpOfTheTableRunsAndItsResultsComeBack) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("every_op.py", 4));
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program) << printed(r);
  EXPECT_EQ(r.run.outcome, "ok");
  EXPECT_GE(r.run.checks, 19);
  const std::string out = printed(r);
  for (const char* want : {"rank 3: all_to_all_single ok", "rank 2: batch_isend_irecv ok",
                           "rank 0: all_reduce(async_op=True) ok", "rank 0: any-source recv matched rank 2",
                           "rank 1: irecv with tag ok"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  expect_no_orphans(r);
}

// torch's Work.wait(timeout): the wait raises, the op keeps running and a
// later wait completes it.
TEST(ScriptRun, AWaitWithATimeoutRaisesAndTheOpKeepsRunning) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("wait_timeout.py", 2));
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program) << printed(r);
  const std::string out = printed(r);
  for (const char* want : {"rank 0: wait(200 ms) timed out: True", "rank 0: completed after the timeout: False",
                           "rank 0: then received [1.0, 2.0, 3.0]"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  expect_no_orphans(r);
}

// DDP calls the group from C++: Works C++ holds must stay waitable.
TEST(ScriptRun, DistributedDataParallelTrainsWithIdenticalReplicas) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("ddp.py", 2));
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program) << printed(r);
  EXPECT_EQ(r.run.outcome, "ok");
  EXPECT_GE(r.run.checks, 8);
  ASSERT_EQ(r.run.output.size(), 2u) << printed(r);
  EXPECT_EQ(r.run.output[0].text.rfind("weights [", 0), 0u) << printed(r);
  EXPECT_EQ(r.run.output[0].text, r.run.output[1].text);
  expect_no_orphans(r);
}

TEST(ScriptRun, ADeadlockNamesEveryRanksCallAndLine) {
  REQUIRE_TORCH();
  ScriptOptions o = program("skip_send.py");
  o.trace_path = ::testing::TempDir() + "/skip_send_trace.json";
  o.dot_path = ::testing::TempDir() + "/skip_send.dot";
  const ScriptResult r = run_script(o);
  EXPECT_FALSE(r.run.passed);
  EXPECT_EQ(r.run.outcome, "deadlock");
  // --trace and --report-dot, as for a scenario.
  std::ifstream trace(o.trace_path), dot(o.dot_path);
  const std::string trace_text{std::istreambuf_iterator<char>(trace), {}};
  const std::string dot_text{std::istreambuf_iterator<char>(dot), {}};
  EXPECT_NE(trace_text.find("\"traceEvents\""), std::string::npos) << trace_text.substr(0, 200);
  EXPECT_NE(dot_text.find("digraph"), std::string::npos) << dot_text;
  EXPECT_NE(dot_text.find("r0"), std::string::npos) << dot_text;
  std::filesystem::remove(o.trace_path);
  std::filesystem::remove(o.dot_path);
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

// Ranks compute for random wall times (jitter.py): a computing rank holds
// the virtual clock, so two runs with one seed are the same run -- the same
// verdict, trace, stamps and merged output, in virtual-time order.
TEST(ScriptRun, TheSameSeedGivesTheSameOutputTraceAndVerdictWhateverTheWallTimes) {
  REQUIRE_TORCH();
  ScriptOptions o = program("jitter.py", 3);
  o.seed = 7;
  o.stamps = true;
  std::ostringstream out_a, out_b;
  o.out = &out_a;
  o.record_path = ::testing::TempDir() + "/jitter_record.yaml";  // recording changes nothing else
  const ScriptResult a = run_script(o);
  o.out = &out_b;
  o.record_path.clear();
  const ScriptResult b = run_script(o);
  ASSERT_TRUE(a.run.passed) << joined(a.run.failures) << joined(a.program) << printed(a);
  EXPECT_EQ(a.run.outcome, b.run.outcome);
  EXPECT_EQ(a.run.passed, b.run.passed);
  EXPECT_EQ(a.run.checks, b.run.checks);
  EXPECT_EQ(a.run.trace_hash, b.run.trace_hash);
  EXPECT_EQ(a.run.virtual_time, b.run.virtual_time);
  EXPECT_EQ(out_a.str(), out_b.str());
  ASSERT_EQ(a.run.output.size(), 21u) << out_a.str();  // 3 ranks x (3 steps x 2 + done)
  ASSERT_EQ(a.run.output.size(), b.run.output.size());
  for (std::size_t i = 0; i < a.run.output.size(); ++i) {
    EXPECT_EQ(a.run.output[i].rank, b.run.output[i].rank) << i;
    EXPECT_EQ(a.run.output[i].time, b.run.output[i].time) << i;
    EXPECT_EQ(a.run.output[i].text, b.run.output[i].text) << i;
    if (i > 0) {
      EXPECT_LE(a.run.output[i - 1].time, a.run.output[i].time) << "not in virtual-time order at " << i;
    }
  }
  // -v: every line stamped with its rank and virtual time; stderr too.
  const std::string& first = a.run.output.front().text;
  EXPECT_NE(out_a.str().find("[rank " + std::to_string(a.run.output.front().rank) + " @ " +
                             std::to_string(a.run.output.front().time) + " ns] " + first),
            std::string::npos)
      << out_a.str();
  EXPECT_NE(out_a.str().find("] rank 1 step 2 from left 2"), std::string::npos) << out_a.str();
  EXPECT_NE(out_a.str().find("] rank 0 step 0 sum 3"), std::string::npos) << out_a.str();
  // --record: the ops it issued replay as a scenario with the same verdict.
  const scenario::ScenarioResult replay = scenario::run_scenario(scenario::load_file(a.record_path), {});
  EXPECT_TRUE(replay.passed) << joined(replay.failures);
  EXPECT_EQ(replay.outcome, a.run.outcome);
  EXPECT_GE(replay.checks, a.run.checks);
  std::filesystem::remove(a.record_path);
}

// destroy_process_group(group): the group is destroyed at the controller,
// the record says so, and the replay (a new group of the same ranks after
// it) passes.
TEST(ScriptRun, ADestroyedGroupIsRecordedAndItsSuccessorRuns) {
  REQUIRE_TORCH();
  ScriptOptions o = program("destroy_group.py", 2);
  o.record_path = ::testing::TempDir() + "/destroy_group_record.yaml";
  const ScriptResult r = run_script(o);
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << r.run.detail;
  EXPECT_NE(printed(r).find("rank 0 sum [3.0, 3.0] broadcast [2.0, 2.0]"), std::string::npos) << printed(r);
  std::ifstream in(r.record_path);
  const std::string record((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(record.find("{op: destroy_group, group: g1}"), std::string::npos) << record;
  expect_replays_as_it_ran(r, o.record_path);
}

// An error in the run is outcome "error" (exit 1), as in a scenario's run;
// its kind leads the detail ("collective_mismatch: ...").
TEST(ScriptRun, ACollectiveMismatchNamesBothCallsLines) {
  REQUIRE_TORCH();
  const ScriptResult r = run_failing_with(program("mismatch.py", 2), "collective_mismatch");
  EXPECT_NE(joined(r.run.failures).find("collective_mismatch"), std::string::npos) << joined(r.run.failures);
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[0].find("mismatch.py:8:  dist.all_reduce(t)"), std::string::npos) << r.program[0];
  EXPECT_NE(r.program[1].find("mismatch.py:10:  dist.broadcast(t, src=0)"), std::string::npos) << r.program[1];
}

// bf16_sum.py's run failed, `report` says `why`, both ranks were in its
// all_reduce, `failed` got torch's error there; the replay repeats `replay_has`.
void expect_failed_in_bf16_sum(const ScriptResult& r, const std::string& report, const std::string& why,
                               std::size_t failed, const std::string& replay_has) {
  EXPECT_FALSE(r.run.passed);
  EXPECT_NE(report.find(why), std::string::npos) << report;
  ASSERT_EQ(r.program.size(), 2u);
  for (const std::string& p : r.program) EXPECT_NE(p.find("bf16_sum.py:7:  dist.all_reduce(t)"), std::string::npos) << p;
  EXPECT_NE(r.program[failed].find("its last call failed"), std::string::npos) << r.program[failed];
  EXPECT_NE(r.run.replay.find(replay_has), std::string::npos) << r.run.replay;
  expect_no_orphans(r);
}

// A message the network holds longer than the op's timeout: the rank
// that waits for it fails with torch's error, the report names its line.
TEST(ScriptRun, ATimeoutNamesTheRanksCallsAndLines) {
  REQUIRE_TORCH();
  ScriptOptions o = program("bf16_sum.py", 2);
  o.timeout_ns = 1'000'000;
  o.faults = {"delay:src=0,dst=1,nth=1,us=5000"};
  const ScriptResult r = run_failing_with(o, "timeout");  // as a scenario's timeout
  expect_failed_in_bf16_sum(r, joined(r.run.failures),
                            "timeout: rank 1, all_reduce #1 on world (peer 0): did not complete within 1 ms", 1,
                            "--timeout-us 1000 -- ");
}

TEST(ScriptRun, AnExceptionEndsTheRunWithTheRankAndItsTraceback) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("raises.py", 2));
  EXPECT_FALSE(r.run.passed);
  EXPECT_EQ(r.run.outcome, "error");
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
  EXPECT_EQ(r.run.outcome, "deadlock");
  ASSERT_EQ(r.program.size(), 2u);
  EXPECT_NE(r.program[0].find("exits_early.py:10:  dist.recv(t, src=1)"), std::string::npos) << r.program[0];
  EXPECT_NE(r.program[1].find("exited with code 0"), std::string::npos) << r.program[1];
  expect_no_orphans(r);
}

TEST(ScriptRun, RanksThatDisagreeOnTheWorldSizeFailTheRun) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("world_mismatch.py", 2));
  EXPECT_FALSE(r.run.passed);
  EXPECT_EQ(r.run.outcome, "error");
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
  const ScriptResult r = run_failing_with(o, "transport");
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

// A recorded failure replays as the same failure (`collie run out.yaml`
// fails as the program's run did): a timeout (the delay fault and the
// timeout are recorded with the ops) ...
TEST(ScriptRun, ARecordedTimeoutReplaysAsTheSameTimeout) {
  REQUIRE_TORCH();
  ScriptOptions o = recorded(program("bf16_sum.py", 2), "timeout");
  o.timeout_ns = 1'000'000;
  o.faults = {"delay:src=0,dst=1,nth=1,us=5000"};
  expect_replays_as_it_ran(run_failing_with(o, "timeout"), o.record_path);
}

// ... a collective mismatch ...
TEST(ScriptRun, ARecordedCollectiveMismatchReplaysAsTheSameMismatch) {
  REQUIRE_TORCH();
  const ScriptOptions o = recorded(program("mismatch.py", 2), "mismatch");
  expect_replays_as_it_ran(run_failing_with(o, "collective_mismatch"), o.record_path);
}

// ... a rank that passes a different count (each rank's count is recorded;
// the core compares every collective's signature, count included) ...
TEST(ScriptRun, ARankThatPassesADifferentCountFailsAndReplaysAsTheSameMismatch) {
  REQUIRE_TORCH();
  const ScriptOptions o = recorded(program("count_mismatch.py", 2), "count_mismatch");
  const ScriptResult r = run_failing_with(o, "collective_mismatch");
  ASSERT_EQ(r.program.size(), 2u);
  for (const std::string& p : r.program)
    EXPECT_NE(p.find("count_mismatch.py:7:  dist.all_reduce(t)"), std::string::npos) << p;
  expect_replays_as_it_ran(r, o.record_path);
}

// ... and a lost rank (the crash is recorded as the scenario's crash at an op).
TEST(ScriptRun, ARecordedCrashReplaysAsTheSameLostRank) {
  REQUIRE_TORCH();
  ScriptOptions o = recorded(program("bf16_sum.py", 2), "crash");
  o.faults = {"crash:rank=1,op=1"};
  const scenario::ScenarioResult replay = expect_replays_as_it_ran(run_failing_with(o, "transport"), o.record_path);
  EXPECT_NE(joined(replay.failures).find("lost rank 1"), std::string::npos) << joined(replay.failures);
}

// A wrong value (a plugin whose bfloat16 SUM truncates) is recorded with
// the backend that computed it, and replays there as the same wrong value.
TEST(ScriptRun, ARecordedWrongValueReplaysAsTheSameWrongValueOnItsBackend) {
  REQUIRE_TORCH();
  BackendRegistry& reg = BackendRegistry::builtin();
  if (!reg.find("bf16_truncating_loopback"))
    reg.load_plugin(std::string(COLLIE_PLUGIN_DIR) + "/bf16_truncating_loopback.so");
  ScriptOptions o = recorded(program("bf16_sum.py", 2), "wrong_value");
  o.backend = "bf16_truncating_loopback";
  const ScriptResult r = run_script(o);
  EXPECT_FALSE(r.run.passed);
  EXPECT_EQ(r.run.outcome, "ok");  // every rank finished; the values are wrong
  const std::string wrong = "rank 1 element 0 is 2.015625, the oracle says 2.03125";
  EXPECT_NE(joined(r.run.failures).find(wrong), std::string::npos) << joined(r.run.failures);
  const scenario::ScenarioResult replay = expect_replays_as_it_ran(r, o.record_path);
  EXPECT_EQ(replay.backend, "bf16_truncating_loopback");
  EXPECT_NE(joined(replay.failures).find(wrong), std::string::npos) << joined(replay.failures);
}

TEST(ScriptRun, RunsOnTcpProcessesToo) {
  REQUIRE_TORCH();
  ::setenv("COLLIE_PROGRAM", COLLIE_BINARY, 1);  // the tcp backend's rank processes are `collie worker`
  ScriptOptions o = program("bf16_sum.py", 2);
  o.backend = "tcp";
  const ScriptResult r = run_script(o);
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.program);
  EXPECT_EQ(r.run.outcome, "ok");
  EXPECT_NE(printed(r).find("sum [2.03125, 2.03125, 2.03125, 2.03125]"), std::string::npos) << printed(r);
  expect_no_orphans(r);
}

// On a process backend a crash is the process's (SIGKILL), judged by what
// the survivors did (rank 0 failed loudly: the run passes); the record
// names the fault for the replay's command line, where it is judged so too.
// (Declared in the scenario, it was held to the scenario's outcome: FAIL.)
TEST(ScriptRun, ARecordedCrashOnTcpProcessesReplaysWithItsFaultAsTheProgramRan) {
  REQUIRE_TORCH();
  ::setenv("COLLIE_PROGRAM", COLLIE_BINARY, 1);
  ScriptOptions o = recorded(program("bf16_sum.py", 2), "tcp_crash");
  o.backend = "tcp";
  o.faults = {"crash:rank=1,op=1"};
  const ScriptResult r = run_script(o);
  EXPECT_TRUE(r.run.passed) << joined(r.run.failures) << joined(r.run.fault_report);
  std::ifstream f(o.record_path);
  const std::string text{std::istreambuf_iterator<char>(f), {}};
  EXPECT_NE(text.find("`collie run` of this file (with --fault crash:rank=1,op=1) replays"), std::string::npos) << text;
  EXPECT_EQ(text.find("faults:"), std::string::npos) << text;
  scenario::RunOptions ro;  // as collie run FILE --fault crash:rank=1,op=1 sets them
  ro.processes = true;
  ProcessFault crash;
  ASSERT_FALSE(parse_process_fault("crash:rank=1,op=1", crash));
  ro.process_faults = {crash};
  expect_replays_as_it_ran(r, o.record_path, ro, true);
}

// --fault stall on a process backend: rank 1's process stops before its
// first op; rank 0 gets torch's error at its timeout; the report names the
// fault and both ranks' lines.
TEST(ScriptRun, AStallFaultOnTcpNamesTheFaultAndEachRanksLine) {
  REQUIRE_TORCH();
  ::setenv("COLLIE_PROGRAM", COLLIE_BINARY, 1);
  ScriptOptions o = program("bf16_sum.py", 2);
  o.backend = "tcp";
  o.faults = {"stall:rank=1,op=1,ms=3000"};
  o.timeout_ns = 500'000'000;
  const ScriptResult r = run_script(o);
  EXPECT_EQ(r.run.outcome, "hang");  // as a scenario's run on processes that stop answering
  expect_failed_in_bf16_sum(r, joined(r.run.fault_report),
                            "fault stall:rank=1,op=1,ms=3000: rank 1's process was stopped (SIGSTOP) before its op #1", 0,
                            "--fault stall:rank=1,op=1,ms=3000");
}

// The layout script_protocol.h promises the Python side (_link.py reads it
// with struct "<BBHiQQ" and "<IQ").
TEST(ScriptRun, ABinaryAnswerIsTheFlaggedLengthThenTheDocumentedLayoutThenTheBlobs) {
  const std::string a = "abcdefgh", b = "xyz";
  const std::vector<std::span<const std::byte>> blobs{std::as_bytes(std::span(a)), std::as_bytes(std::span(b))};
  const std::vector<std::byte> m =
      encode_binary_answer(BinaryAnswer{BinaryAnswer::Type::kDone, 1, 7, 3}, {0, 2}, blobs);
  auto at = [&m](std::size_t off, auto v) {
    std::memcpy(&v, m.data() + off, sizeof v);
    return v;
  };
  const std::uint32_t header = 24 + 2 * 12;
  ASSERT_EQ(m.size(), 4 + header + a.size() + b.size());
  EXPECT_EQ(at(0, std::uint32_t{}), header | kBinaryFlag);
  EXPECT_EQ(at(4, std::uint8_t{}), 1);  // done
  EXPECT_EQ(at(6, std::uint16_t{}), 2);
  EXPECT_EQ(at(8, std::int32_t{}), 1);
  EXPECT_EQ(at(12, std::uint64_t{}), 7u);
  EXPECT_EQ(at(20, std::uint64_t{}), 3u);
  EXPECT_EQ(at(28, std::uint32_t{}), 0u);
  EXPECT_EQ(at(32, std::uint64_t{}), a.size());
  EXPECT_EQ(at(40, std::uint32_t{}), 2u);
  EXPECT_EQ(at(44, std::uint64_t{}), b.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()) + 4 + header, a.size() + b.size()), a + b);
  const std::vector<std::byte> pending = encode_binary_answer(BinaryAnswer{BinaryAnswer::Type::kPending, -1, 9, 4}, {}, {});
  ASSERT_EQ(pending.size(), 4u + 24u);
  EXPECT_EQ(static_cast<std::uint8_t>(pending[4]), 3);
}

// A binary request built field by field as script_protocol.h lays it out.
struct RequestBytes {
  std::vector<std::byte> header, payload;
  template <typename T>
  RequestBytes& put(T v) {
    const auto* b = reinterpret_cast<const std::byte*>(&v);
    header.insert(header.end(), b, b + sizeof v);
    return *this;
  }
  RequestBytes& text(const std::string& s) {
    const auto* b = reinterpret_cast<const std::byte*>(s.data());
    header.insert(header.end(), b, b + s.size());
    return *this;
  }
  template <typename T>
  RequestBytes& blob(std::vector<T> values) {
    const auto* b = reinterpret_cast<const std::byte*>(values.data());
    payload.insert(payload.end(), b, b + values.size() * sizeof(T));
    return *this;
  }
  // The common part: P from the payload (so blobs go first), then the rest.
  RequestBytes& common(std::uint8_t type, std::uint8_t flags, std::uint64_t id, std::uint32_t site,
                       std::uint32_t site_bytes) {
    return put(std::uint64_t{payload.size()}).put(id).put(type).put(flags).put(std::uint16_t{0}).put(site)
        .put(site_bytes).put(std::uint32_t{0});
  }
  // An op's fixed part after the common one.
  RequestBytes& op(OpKind kind, ReduceOp reduce, std::uint8_t tensor, std::uint32_t list, std::uint32_t output,
                   std::uint32_t group, std::int32_t peer, std::int32_t tag, std::uint32_t p2p = 0,
                   std::uint32_t in_splits = 0, std::uint32_t out_splits = 0) {
    return put(static_cast<std::uint8_t>(kind)).put(static_cast<std::uint8_t>(reduce)).put(tensor)
        .put(std::uint8_t{0}).put(list).put(output).put(group).put(peer).put(tag).put(std::int64_t{0}).put(p2p)
        .put(in_splits).put(out_splits).put(std::uint32_t{0});
  }
  RequestBytes& buffer(DType d, std::uint64_t count) { return put(static_cast<std::uint32_t>(d)).put(count); }
};

// The same call both ways: the fields and buffers the controller runs.
void expect_same_call(const remote::DecodedCall& b, const remote::DecodedCall& j) {
  EXPECT_EQ(b.call.kind, j.call.kind);
  EXPECT_EQ(b.call.async, j.call.async);
  EXPECT_EQ(b.call.peer, j.call.peer);
  EXPECT_EQ(b.call.tag, j.call.tag);
  EXPECT_EQ(b.call.reduce_op, j.call.reduce_op);
  EXPECT_EQ(b.call.input_splits, j.call.input_splits);
  EXPECT_EQ(b.call.output_splits, j.call.output_splits);
  ASSERT_EQ(b.call.p2p.size(), j.call.p2p.size());
  for (std::size_t k = 0; k < b.call.p2p.size(); ++k) {
    EXPECT_EQ(b.call.p2p[k].is_send, j.call.p2p[k].is_send);
    EXPECT_EQ(b.call.p2p[k].peer, j.call.p2p[k].peer);
    EXPECT_EQ(b.call.p2p[k].tag, j.call.p2p[k].tag);
  }
  for (std::size_t s = 0; s < kNumSlots; ++s) {
    const std::vector<TensorView> bv = b.call.views(static_cast<Slot>(s)), jv = j.call.views(static_cast<Slot>(s));
    ASSERT_EQ(bv.size(), jv.size()) << slot_name(static_cast<Slot>(s));
    for (std::size_t k = 0; k < bv.size(); ++k) {
      EXPECT_EQ(bv[k].dtype, jv[k].dtype);
      ASSERT_EQ(bv[k].count, jv[k].count);
      EXPECT_EQ(std::memcmp(bv[k].data, jv[k].data, bv[k].bytes()), 0);
    }
  }
  ASSERT_EQ(b.tensors.size(), j.tensors.size());
}

remote::DecodedCall json_call(const nlohmann::json& head, const RequestBytes& r,
                              const std::vector<std::size_t>& blob_bytes) {
  std::vector<std::vector<std::byte>> blobs;
  std::size_t at = 0;
  for (std::size_t n : blob_bytes) {
    blobs.emplace_back(r.payload.begin() + static_cast<std::ptrdiff_t>(at),
                       r.payload.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return remote::decode_call(head, blobs);
}

TEST(ScriptRun, ABinaryOpRequestIsTheDocumentedLayoutAndMeansTheJsonCall) {
  const std::string site = R"([["train.py",12,"step"]])";
  RequestBytes g;  // rank 1's async gather to root 1: its tensor, then its list of 2
  g.blob(std::vector<float>{1, 2}).blob(std::vector<float>{3, 4}).blob(std::vector<float>{5, 6});
  g.common(1, BinaryRequest::kAsync, 7, 1, static_cast<std::uint32_t>(site.size()))
      .op(OpKind::kGather, ReduceOp::kSum, 1, 2, 0, 3, 1, 0)
      .buffer(DType::kFloat32, 2).buffer(DType::kFloat32, 2).buffer(DType::kFloat32, 2)
      .text(site);
  ASSERT_EQ(g.header.size(), kOpRequestFixedBytes + 3 * 12 + site.size());
  std::optional<std::uint64_t> id;
  const BinaryRequest r = read_binary_request(g.header, &id);
  EXPECT_EQ(id, std::optional<std::uint64_t>(7));
  EXPECT_EQ(r.type, BinaryRequest::Type::kOp);
  EXPECT_EQ(r.site, 1u);
  EXPECT_EQ(r.site_json, site);
  std::uint32_t group = 0;
  const remote::DecodedCall b = decode_binary_op(g.header, g.payload, &group);
  EXPECT_EQ(group, 3u);
  const nlohmann::json gj = {{"op", "gather"}, {"async", true}, {"peer", 1}, {"layout", {{"tensor", 1}, {"list", 2}}},
                             {"tensors", nlohmann::json::array({{{"dtype", "float32"}, {"count", 2}},
                                                                {{"dtype", "float32"}, {"count", 2}},
                                                                {{"dtype", "float32"}, {"count", 2}}})}};
  expect_same_call(b, json_call(gj, g, {8, 8, 8}));

  RequestBytes p;  // batch_isend_irecv: a send to 1 (tag 5), a receive from 0 (tag 6)
  p.blob(std::vector<std::int64_t>{9}).blob(std::vector<std::int64_t>{0, 0});
  p.common(1, 0, 8, 0, 0).op(OpKind::kBatchIsendIrecv, ReduceOp::kSum, 0, 0, 0, 0, -1, 0, 2)
      .buffer(DType::kInt64, 1).buffer(DType::kInt64, 2);
  p.put(std::uint8_t{1}).put(std::uint8_t{0}).put(std::uint8_t{0}).put(std::uint8_t{0}).put(std::int32_t{1}).put(std::int32_t{5});
  p.put(std::uint8_t{0}).put(std::uint8_t{0}).put(std::uint8_t{0}).put(std::uint8_t{0}).put(std::int32_t{0}).put(std::int32_t{6});
  const nlohmann::json pj = {{"op", "batch_isend_irecv"}, {"layout", nlohmann::json::object()},
                             {"p2p", {{{"send", true}, {"peer", 1}, {"tag", 5}}, {{"send", false}, {"peer", 0}, {"tag", 6}}}},
                             {"tensors", {{{"dtype", "int64"}, {"count", 1}}, {{"dtype", "int64"}, {"count", 2}}}}};
  expect_same_call(decode_binary_op(p.header, p.payload, &group), json_call(pj, p, {8, 16}));

  RequestBytes a;  // all_to_all_single with split sizes
  a.blob(std::vector<std::int32_t>{1, 2, 3}).blob(std::vector<std::int32_t>{0, 0, 0});
  a.common(1, 0, 9, 0, 0).op(OpKind::kAllToAllSingle, ReduceOp::kSum, 1, 0, 1, 0, -1, 0, 0, 2, 2)
      .buffer(DType::kInt32, 3).buffer(DType::kInt32, 3)
      .put(std::uint64_t{1}).put(std::uint64_t{2}).put(std::uint64_t{2}).put(std::uint64_t{1});
  const nlohmann::json aj = {{"op", "all_to_all_single"}, {"layout", {{"tensor", 1}, {"output", 1}}},
                             {"input_split_sizes", {1, 2}}, {"output_split_sizes", {2, 1}},
                             {"tensors", {{{"dtype", "int32"}, {"count", 3}}, {{"dtype", "int32"}, {"count", 3}}}}};
  expect_same_call(decode_binary_op(a.header, a.payload, &group), json_call(aj, a, {12, 12}));

  RequestBytes w;  // a wait on op 4, naming site 2, with a timeout of 5 ms
  w.common(2, 0, 10, 2, 0).put(std::uint64_t{4}).put(std::int64_t{5'000'000});
  ASSERT_EQ(w.header.size(), kWaitRequestBytes);
  const BinaryRequest wr = read_binary_request(w.header, &id);
  EXPECT_EQ(wr.type, BinaryRequest::Type::kWait);
  EXPECT_EQ(wr.op, 4u);
  EXPECT_EQ(wr.timeout_ns, 5'000'000);
  EXPECT_EQ(wr.site, 2u);
  EXPECT_TRUE(wr.site_json.empty());
}

// What a malformed request is refused with (empty: it was read).
std::string refusal(const RequestBytes& r) {
  try {
    std::optional<std::uint64_t> id;
    const BinaryRequest q = read_binary_request(r.header, &id);
    std::uint32_t group = 0;
    if (q.type == BinaryRequest::Type::kOp) decode_binary_op(r.header, r.payload, &group);
    return {};
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

TEST(ScriptRun, AMalformedBinaryRequestIsRefusedNamingTheRankAndOneWithoutAnIdEndsTheRun) {
  REQUIRE_TORCH();
  const ScriptResult r = run_script(program("malformed_request.py", 1));
  EXPECT_NE(printed(r).find("refused: collie: rank 0 sent a request collie cannot read: an op of unknown kind 250"),
            std::string::npos)
      << printed(r);
  EXPECT_NE(printed(r).find("then: tensor([2.])"), std::string::npos) << printed(r);
  EXPECT_FALSE(r.run.passed);
  EXPECT_NE(joined(r.run.failures).find("rank 0 sent a request collie cannot read: a binary request shorter than its fields"),
            std::string::npos)
      << joined(r.run.failures) << r.run.detail;
  expect_no_orphans(r);
}

TEST(ScriptRun, AMalformedBinaryRequestIsRefusedSayingWhatIsWrong) {
  auto all_reduce = [](OpKind kind, std::uint32_t dtype, std::uint64_t count, std::size_t payload) {
    RequestBytes r;
    r.payload.resize(payload);
    r.common(1, 0, 1, 0, 0).op(kind, ReduceOp::kSum, 1, 0, 0, 0, -1, 0).put(dtype).put(count);
    return r;
  };
  EXPECT_EQ(refusal(all_reduce(OpKind::kAllReduce, 2, 2, 8)), "");
  RequestBytes short_one;
  short_one.put(std::uint64_t{0}).put(std::uint64_t{1}).put(std::uint8_t{1});
  EXPECT_NE(refusal(short_one).find("shorter than its fields"), std::string::npos) << refusal(short_one);
  EXPECT_NE(refusal(all_reduce(static_cast<OpKind>(200), 2, 2, 8)).find("unknown kind 200"), std::string::npos);
  EXPECT_NE(refusal(all_reduce(OpKind::kAllReduce, 99, 2, 8)).find("unknown dtype 99"), std::string::npos);
  EXPECT_NE(refusal(all_reduce(OpKind::kAllReduce, 2, 3, 8)).find("larger than the request's payload"), std::string::npos);
  EXPECT_NE(refusal(all_reduce(OpKind::kAllReduce, 2, 1, 8)).find("a payload of 8 bytes for 4"), std::string::npos);
  EXPECT_NE(refusal(all_reduce(OpKind::kAllReduce, 2, std::uint64_t{1} << 62, 8)).find("larger than"), std::string::npos);
  EXPECT_NE(refusal(all_reduce(OpKind::kBarrier, 2, 2, 8)).find("1 buffers in the tensor slot of barrier"),
            std::string::npos);
  RequestBytes counts = all_reduce(OpKind::kAllReduce, 2, 2, 8);
  counts.header[kRequestCommonBytes + 4] = std::byte{200};  // a list slot of 200 buffers the header does not hold
  EXPECT_NE(refusal(counts).find("not the"), std::string::npos) << refusal(counts);
  RequestBytes site = all_reduce(OpKind::kAllReduce, 2, 2, 8);
  site.header[24] = std::byte{255};  // a definition longer than the header
  EXPECT_NE(refusal(site).find("longer than its header"), std::string::npos) << refusal(site);
  RequestBytes type;
  type.common(9, 0, 1, 0, 0).put(std::uint64_t{0});
  EXPECT_NE(refusal(type).find("unknown type 9"), std::string::npos);
}

}  // namespace
}  // namespace collie::script
