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
  EXPECT_EQ(r.run.outcome, "ok");
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

}  // namespace
}  // namespace collie::script
