#include "script/script_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include "backends/data_path.h"
#include "backends/job.h"
#include "backends/remote/child_processes.h"
#include "core/error.h"
#include "scenario/run_report.h"
#include "scenario/scenario.h"
#include "scenario/verdict.h"
#include "script/hub.h"
#include "script/output_merge.h"
#include "script/record.h"
#include "script/script_protocol.h"
#include "script/script_rank.h"
#include "sim/faults.h"
#include "sim/simulation_options.h"

namespace collie::script {

namespace {

using json = nlohmann::json;

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, OpContext{}, msg); }

constexpr Nanos kExitGraceNs = 10'000'000'000;  // a finished program's processes end within this

std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_text(const std::vector<std::string>& command) {
  std::string s;
  for (const auto& w : command) s += (s.empty() ? "" : " ") + shell_word(w);
  return s;
}

// The script a Python command runs ("python3 -u train.py --lr 1" ->
// "train.py"); empty for -c, -m, or a command that is not Python.
std::string python_script(const std::vector<std::string>& command) {
  const std::string prog = std::filesystem::path(command[0]).filename().string();
  if (prog.rfind("python", 0) != 0) return {};
  for (std::size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "-c" || a == "-m" || a == "-") return {};
    if (a == "-W" || a == "-X" || a == "--check-hash-based-pycs") {
      ++i;  // takes a value
      continue;
    }
    if (a.rfind("-", 0) == 0) continue;
    return a;
  }
  return {};
}

class SourceLines {
 public:
  std::string line(const std::string& file, long n) {
    auto it = files_.find(file);
    if (it == files_.end()) {
      std::vector<std::string> lines;
      std::ifstream f(file);
      std::string l;
      while (f && std::getline(f, l) && lines.size() < 1'000'000) lines.push_back(l);
      it = files_.emplace(file, std::move(lines)).first;
    }
    if (n < 1 || static_cast<std::size_t>(n) > it->second.size()) return {};
    std::string s = it->second[static_cast<std::size_t>(n - 1)];
    const auto first = s.find_first_not_of(" \t");
    return first == std::string::npos ? std::string() : s.substr(first);
  }

 private:
  std::map<std::string, std::vector<std::string>> files_;
};

// "at x.py:14 (in run): dist.recv(tensor, src=1)" and "called from ..." lines.
std::vector<std::string> stack_lines(const json& where, SourceLines& src) {
  std::vector<std::string> out;
  if (!where.is_array()) return out;
  for (std::size_t k = 0; k < where.size() && k < 4; ++k) {
    const json one = json::array({where[k]});
    std::string s = (k == 0 ? "at " : "called from ") + where_text(one);
    if (k == 0 && where[k].is_array() && where[k].size() >= 2 && where[k][0].is_string() && where[k][1].is_number()) {
      const std::string code = src.line(where[k][0].get<std::string>(), where[k][1].get<long>());
      if (!code.empty()) s += ":  " + code;
    }
    out.push_back(s);
  }
  return out;
}
std::vector<std::string> stack_lines(const Where& where, SourceLines& src) {
  return where ? stack_lines(where->where, src) : std::vector<std::string>{};
}

// One rank's part of a failed run's report: the same bytes on every run of
// the same program and seed (no process ids).
std::string rank_report(int rank, const RankView& v, const RankOutcome* outcome, SourceLines& src) {
  // An op's error the program did not catch (the hook raises it as
  // CollieError): the failure above already says it; the traceback adds
  // nothing but torch's frames.
  const bool op_error = v.exception_type == "CollieError";
  std::ostringstream os;
  os << "rank " << rank;
  os << ": ";
  auto indent = [&](const std::vector<std::string>& lines) {
    for (const auto& l : lines) os << "\n    " << l;
  };
  switch (v.state) {
    case RankView::State::kNotJoined:
      os << (v.ended.empty() ? "never called init_process_group" : v.ended);
      break;
    case RankView::State::kInCollie:
      if (v.killed_by_fault || (outcome && outcome->crashed)) os << "crashed in ";
      else os << "waits in ";
      os << v.in_call;
      indent(stack_lines(v.in_call_where, src));
      if (v.killed_by_fault) os << "\n    " << v.ended;
      break;
    case RankView::State::kComputing:
      os << "computing outside collie";
      if (!v.last_call.empty()) {
        os << "; its last call: " << v.last_call;
        indent(stack_lines(v.last_call_where, src));
      }
      break;
    case RankView::State::kEnded:
      if (op_error) {
        os << "its last call failed, and its program ended with that error";
      } else if (!v.traceback.empty()) {
        os << "its program raised " << v.exception_type;
      } else {
        os << (v.ended.empty() ? "finished" : v.ended);
      }
      if (!v.last_call.empty()) {
        os << "\n    its last call: " << v.last_call;
        indent(stack_lines(v.last_call_where, src));
      }
      break;
  }
  for (const auto& [call, where] : v.unfinished) {
    os << "\n    started " << call << " and never waited for it";
    indent(stack_lines(where, src));
  }
  if (!v.traceback.empty() && !op_error) {
    std::istringstream lines(v.traceback);
    std::string l;
    while (std::getline(lines, l)) os << "\n    | " << l;
  }
  return os.str();
}


struct Faults {
  sim::FaultPlan plan;               // simulated backends
  std::vector<ProcessFault> processes;  // process backends
  std::vector<std::string> texts;    // as they take effect (crashes get detect_us), for replays and records
};

Faults parse_faults(const ScriptOptions& o, const BackendInfo& backend, bool processes) {
  Faults f;
  for (const std::string& text : o.faults) {
    if (backend.simulated_faults) {
      // The simulator's clock does not run while a rank's process is
      // stopped: a stall there would change nothing the run can see.
      if (text.rfind("stall", 0) == 0)
        usage("--fault " + text + ": a stall stops a rank's process, which the simulator's virtual time cannot "
              "see; use --backend tcp, or slow a rank on the simulator (slow:rank=R,factor=F)");
      sim::FaultPlan one;
      if (auto err = sim::parse_fault(text, one)) usage("--fault: " + *err);
      // A process that dies closes its sockets: its peers learn of it at once.
      for (sim::Crash& c : one.crashes)
        if (!c.detect_ns) c.detect_ns = 0;
      for (const std::string& t : sim::fault_args(one)) f.texts.push_back(t);
      f.plan.append(one);
    } else if (processes) {
      ProcessFault pf;
      if (auto err = parse_process_fault(text, pf)) usage("--fault: " + *err);
      f.processes.push_back(pf);
      f.texts.push_back(text);
    } else {
      usage("--fault: backend '" + o.backend + "' cannot inject faults (the simulator's need --backend sim; "
            "crash/stall need ranks that are processes)");
    }
  }
  return f;
}

std::vector<std::string> replay_words(const ScriptOptions& o, const std::vector<std::string>& faults) {
  std::vector<std::string> w{"collie", "run"};
  if (o.nprocs > 0) w.insert(w.end(), {"-n", std::to_string(o.nprocs)});
  w.insert(w.end(), {"--backend", o.backend, "--seed", std::to_string(o.seed)});
  if (o.in_process) w.push_back("--in-process");
  for (const auto& f : faults) w.insert(w.end(), {"--fault", f});
  if (o.timeout_ns) w.insert(w.end(), {"--timeout-us", std::to_string(*o.timeout_ns / 1000)});
  if (o.strict) w.push_back("--strict");
  for (const auto& f : o.replay_flags) w.push_back(f);
  w.push_back("--");
  w.insert(w.end(), o.command.begin(), o.command.end());
  return w;
}

// Messages sent that no rank received, in a run whose ranks all ended
// normally: the program lost them (a send may complete before it is
// received -- eagerly, as torch's backends do for small messages -- so
// nothing else says so). One failure per message.
std::vector<std::string> unreceived(const std::vector<std::unique_ptr<ScriptRank>>& ranks,
                                    const check::OpRecords& records, SourceLines& src) {
  using Channel = std::tuple<int, int, std::string, int>;  // src, dst, group, tag
  std::map<Channel, std::size_t> received;
  for (const check::RecvRecord& r : records.recvs) ++received[{r.source, r.rank, r.group, r.tag}];
  std::vector<std::string> out;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::map<Channel, std::size_t> sent;
    for (const SentMessage& m : ranks[r]->sent()) {
      const Channel ch{static_cast<int>(r), m.dst, m.group, m.tag};
      if (sent[ch]++ < received[ch]) continue;
      std::string f = "rank " + std::to_string(r) + "'s " + m.call + " was never received: rank " +
                      std::to_string(m.dst) + "'s program ended without a matching receive";
      for (const std::string& l : stack_lines(m.where, src)) f += "\n  " + l;
      out.push_back(std::move(f));
    }
  }
  return out;
}

// The processes' failures, each told once: "process 12 (not a rank) raised
// X" blocks that differ only in the process id are one block, "(N processes)".
std::vector<std::string> distinct_failures(const std::vector<std::string>& failures) {
  std::vector<std::string> out;
  std::vector<std::string> keys;
  std::vector<int> counts;
  for (const std::string& f : failures) {
    std::string key = f;
    if (key.rfind("process ", 0) == 0) key = key.substr(key.find(' ', 8) + 1);
    const auto it = std::find(keys.begin(), keys.end(), key);
    if (it != keys.end()) {
      ++counts[static_cast<std::size_t>(it - keys.begin())];
      continue;
    }
    keys.push_back(key);
    counts.push_back(1);
    out.push_back(f);
  }
  for (std::size_t k = 0; k < out.size(); ++k)
    if (counts[k] > 1) {
      const auto nl = out[k].find('\n');
      out[k].insert(nl == std::string::npos ? out[k].size() : nl,
                    " (and " + std::to_string(counts[k] - 1) + " more processes the same way)");
    }
  return out;
}

}  // namespace

std::string replay_command(const ScriptOptions& o) {
  std::vector<std::string> faults = o.faults;
  return command_text(replay_words(o, faults));
}

ScriptResult run_script(const ScriptOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.command.empty()) usage("give the program to run after --, e.g. collie run -n 2 -- python train.py");
  const std::string script = python_script(o.command);
  if (!script.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(script, ec))
      usage(script + ": no such file (the program " + command_text(o.command) + " would run it)");
    if (!std::filesystem::is_regular_file(script, ec)) usage(script + ": not a regular file");
  }
  const BackendRegistry& reg = o.registry ? *o.registry : BackendRegistry::builtin();
  const BackendInfo& backend = reg.require(o.backend);
  if (o.in_process && !backend.create) usage("--in-process: backend '" + o.backend + "' runs only as processes");
  const bool processes = backend.start && (!backend.create || !o.in_process);
  if (!o.trace_path.empty() && !backend.simulated)
    usage("--trace records the simulator's events; backend '" + o.backend + "' records none (run on --backend sim)");
  Faults faults = parse_faults(o, backend, processes);
  const std::string shim = collie_data_path("script/python");
  if (shim.empty())
    usage("cannot find collie's Python hook script/python/ (looked in $COLLIE_DATA_DIR, PREFIX/share/collie beside "
          "this binary and its source tree)");

  ScriptOptions effective = o;
  effective.faults = faults.texts;
  ScriptResult result;
  scenario::ScenarioResult& res = result.run;
  res.file = command_text(o.command);
  res.name = "script";
  res.backend = o.backend;
  res.seed = o.seed;
  res.simulated = backend.simulated;
  res.replay = command_text(replay_words(effective, faults.texts));

  OutputMerge output(OutputOptions{o.out, o.stamps});
  HubOptions ho;
  ho.listen_host = o.listen_host;
  ho.compute_timeout_ns = o.compute_timeout_ns;
  ho.join_timeout_ns = o.join_timeout_ns;
  Hub hub(ho, output);

  // The command's processes.
  std::vector<remote::ChildSpec> specs;
  std::string pythonpath = shim;
  if (const char* p = std::getenv("PYTHONPATH"); p && *p) pythonpath += ":" + std::string(p);
  const std::vector<std::pair<std::string, std::string>> common{{"PYTHONPATH", pythonpath},
                                                                {kControllerEnv, hub.address()},
                                                                {kTokenEnv, hub.token()},
                                                                {kStreamEnv, ""},
                                                                {kUnixEnv, hub.unix_path()}};
  const int copies = o.nprocs > 0 ? o.nprocs : 1;
  for (int r = 0; r < copies; ++r) {
    remote::ChildSpec c;
    c.argv = o.command;
    c.env = common;
    if (o.nprocs > 0) {
      const std::string n = std::to_string(o.nprocs), rank = std::to_string(r);
      c.env.insert(c.env.end(), {{"RANK", rank},
                                 {"WORLD_SIZE", n},
                                 {"LOCAL_RANK", rank},
                                 {"LOCAL_WORLD_SIZE", n},
                                 {"GROUP_RANK", "0"},
                                 {"ROLE_RANK", rank},
                                 {"ROLE_WORLD_SIZE", n},
                                 {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", "29500"}});
      // torchrun's default: one thread each, as several ranks share the cores.
      if (!std::getenv("OMP_NUM_THREADS")) c.env.emplace_back("OMP_NUM_THREADS", "1");
    }
    specs.push_back(std::move(c));
  }
  std::unique_ptr<remote::ChildProcesses> children;
  try {
    children = std::make_unique<remote::ChildProcesses>(specs);
  } catch (const std::exception& e) {
    usage(std::string("cannot start the program: ") + e.what());
  }
  hub.watch(children.get());

  std::string why;
  const std::optional<int> world = hub.await_world(&why);
  if (!world) {
    hub.finish(true, 0);
    output.flush_all();
    const std::vector<std::string> failures = distinct_failures(hub.other_failures());
    std::string msg = command_text(o.command) + ": ";
    const auto syntax = failures.empty() ? std::string::npos : failures[0].find(" raised SyntaxError");
    if (!script.empty() && syntax != std::string::npos) {
      std::string first = failures[0].substr(syntax + 8, failures[0].find('\n') - syntax - 8);
      first = first.substr(0, first.find(" (and "));
      msg += script + " is not a Python program (" + first + ")";
    } else {
      msg += why;
    }
    for (const auto& f : failures) msg += "\n" + f;
    const std::string tail = hub.recent_other_output();
    if (failures.empty() && !tail.empty()) msg += "\nits last output:\n" + tail;
    if (msg.find("No module named 'torch'") != std::string::npos)
      msg += "\n(the program's Python has no torch: give the interpreter that has it, e.g. /usr/bin/python3)";
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    usage(msg);
  }
  res.world = *world;
  if (auto outside = sim::fault_outside_world(faults.plan, *world)) {
    hub.finish(true, 0);
    usage("--fault " + *outside);
  }
  for (const ProcessFault& f : faults.processes)
    if (f.rank >= *world) {
      hub.finish(true, 0);
      usage("--fault " + f.text + ": rank " + std::to_string(f.rank) + " is outside the program's world of " +
            std::to_string(*world));
    }

  sim::SimulationOptions simulation;
  simulation.faults = faults.plan;
  JobOptions jo;
  jo.world_size = *world;
  jo.seed = o.seed;
  jo.timeout_ns = o.timeout_ns.value_or(0);
  jo.eager_threshold_bytes = simulation.network.eager_threshold_bytes;
  jo.trace = !o.trace_path.empty();
  jo.process_faults = faults.processes;
  jo.simulation = backend.simulated ? &simulation : nullptr;

  scenario::RunLog log;
  log.records.enabled = true;
  RankContext rc;
  rc.hub = &hub;
  rc.output = &output;
  rc.records = &log.records;
  rc.keep_calls = !o.record_path.empty();
  rc.polls_see_completion = !processes;
  rc.process_crashes = faults.processes;
  rc.watch_crashes = !faults.plan.crashes.empty();
  // Rank programs before the job: a job that ends holding suspended
  // programs (a deadlock) destroys them before the ranks they use.
  std::vector<std::unique_ptr<ScriptRank>> ranks;
  std::unique_ptr<Job> job;
  try {
    job = start_job(backend, jo, processes);
  } catch (const Error& e) {
    hub.finish(true, 0);
    if (e.kind() == ErrorKind::kUsage || e.kind() == ErrorKind::kUnsupported) usage(e.detail());
    throw;
  }
  rc.job = job.get();
  for (int r = 0; r < *world; ++r) ranks.push_back(std::make_unique<ScriptRank>(r, *world, rc));
  res.implementation = job->implementation();

  RunContext ctx;
  ctx.label = "seed " + std::to_string(o.seed);
  ctx.replay = res.replay;
  RunResult rr;
  try {
    rr = job->run([&](Dist& d) -> Task<void> { return ranks[static_cast<std::size_t>(d.rank())]->serve(d); }, ctx);
  } catch (const std::exception& e) {
    output.set_clock(nullptr);  // the ranks' Dists (and the clock they read) are gone
    hub.finish(true, 0);
    result.processes = hub.pids();
    output.flush_all();
    res.outcome = "error";
    res.detail = std::string("the backend failed: ") + e.what();
    res.failures.push_back(res.detail);
    res.output = output.lines();
    return result;
  }
  // The ranks' Dists (and the clock they read) are gone: lines still to
  // come are the ranks' last, at the run's end.
  const Nanos end = std::max(rr.end_time, rr.stopped_at);
  output.set_clock([end] { return end; });
  bool all_finished = !rr.deadlocked;
  for (const RankOutcome& r : rr.ranks) all_finished = all_finished && r.finished;
  hub.finish(!all_finished || !hub.fatal().empty(), kExitGraceNs);
  result.processes = hub.pids();
  output.flush_all();

  scenario::Scenario s;
  s.file = res.file;
  s.name = res.name;
  s.world = *world;
  s.seed = o.seed;
  s.backend = o.backend;
  scenario::Judge how;
  how.collie_core = backend.collie_core;
  how.diagnoses_deadlocks = !processes;
  how.strict = o.strict;
  how.records_checked = true;
  how.injected = job->injected_faults();
  how.process_faults = faults.processes;
  scenario::take_run_files(*job, rr, how.injected.size(), o.trace_path, o.dot_path, res);

  scenario::Verdict v = scenario::judge(s, rr, log, how);
  res.outcome = v.outcome;
  res.detail = v.detail;
  res.checks = v.checks;
  res.output = output.lines();
  if (!hub.fatal().empty()) {
    // The program cannot run as one world (ranks that disagree on it): that
    // is the whole story; what the ranks did after it is its consequence.
    res.outcome = "error";
    res.detail = hub.fatal();
    res.failures.push_back(hub.fatal());
  } else {
    static const std::string kExpectedOk = "expected the run to end ok, but: ";
    for (auto& f : v.failures) {
      if (f.rfind(kExpectedOk, 0) == 0) f = f.substr(kExpectedOk.size());
      res.failures.push_back(std::move(f));
    }
    // What only a program can do wrong -- a process that is not a rank
    // raised, a send no rank received -- is an error of a run whose ranks
    // ended ok. (A wrong value stays "ok" and fails, as in a scenario.)
    std::vector<std::string> errors = hub.other_failures();
    if (res.outcome == "ok") {
      SourceLines src;
      for (auto& f : unreceived(ranks, log.records, src)) errors.push_back(std::move(f));
      if (!errors.empty()) {
        res.outcome = "error";
        res.detail = errors.front();
      }
    }
    for (auto& f : errors) res.failures.push_back(std::move(f));
    res.notes = std::move(v.notes);
    for (const auto& r : ranks)
      for (const std::string& n : r->notes()) res.notes.push_back(n);
    res.fault_report = std::move(v.fault_report);
  }
  res.passed = res.failures.empty() && !v.skipped;
  res.skipped = v.skipped;
  res.skip_reason = v.skip_reason;

  if (!res.passed && hub.fatal().empty()) {
    SourceLines src;
    for (int r = 0; r < *world; ++r) {
      const auto k = static_cast<std::size_t>(r);
      result.program.push_back(rank_report(r, ranks[k]->view(), k < rr.ranks.size() ? &rr.ranks[k] : nullptr, src));
    }
  }

  if (!o.record_path.empty()) {
    RecordInput in;
    in.command = res.file;
    in.verdict = (res.passed ? "PASS" : "FAIL") + std::string(" (") + res.outcome + ")";
    in.world = *world;
    in.seed = o.seed;
    in.backend = o.backend;
    if (backend.simulated_faults) in.faults = faults.texts;
    in.replay_flags = o.replay_flags;
    // Judged as faults given on the command line (by what the survivors
    // did), so given to the replay the same way.
    for (const ProcessFault& f : faults.processes) in.replay_flags.insert(in.replay_flags.end(), {"--fault", f.text});
    in.timeout_ns = o.timeout_ns.value_or(0);
    for (const auto& r : ranks) in.ranks.push_back(&r->kept());
    std::ofstream f(o.record_path, std::ios::binary);
    f << record_scenario(in);
    if (!f) res.failures.push_back("cannot write " + o.record_path);
    else result.record_path = o.record_path;
  }
  job.reset();
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace collie::script
