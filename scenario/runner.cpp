#include "scenario/runner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>

#include "core/memory_guard.h"
#include "core/text.h"
#include "scenario/run_report.h"
#include "scenario/verdict.h"
#include "sim/simulation_options.h"

namespace collie::scenario {

namespace {

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, OpContext{}, msg); }

// What a materialised run of `s` allocates on this machine: every rank's
// tensors and lists; when checking, the copies the interpreter records of
// every op's inputs and outputs for the oracle (check/op_records.h), and the
// largest reduction result the oracle computes at a time. Measured: one
// all_reduce of 4 x 100 MB float32 peaks at 1.28 GB RSS (this says 1.3).
struct MemoryEstimate {
  double tensors = 0;
  double records = 0;
  double oracle = 0;
  double total() const { return tensors + records + oracle; }
};

MemoryEstimate estimate_memory(const Scenario& s, bool recording) {
  MemoryEstimate m;
  const int W = s.world;
  auto vars = [W](int r) { return Vars{{"rank", r}, {"world", W}}; };
  auto one = [](const TensorSpec& t, int r) {
    return static_cast<double>(t.count_on(r)) * static_cast<double>(dtype_size(t.dtype));
  };
  auto entries = [&](const TensorSpec& t, int r) {
    return t.list ? static_cast<double>(t.list->eval(vars(r)).whole().value_or(0)) : 1.0;
  };
  for (const TensorSpec& t : s.tensors)
    for (int r = 0; r < W; ++r) m.tensors += one(t, r) * entries(t, r);
  if (!recording) return m;
  std::map<std::string, std::vector<int>> groups;
  for (const GroupSpec& g : s.groups) groups[g.name] = g.ranks;
  auto bytes = [&](const std::string& name, int r) {
    const TensorSpec* t = s.find_tensor(name);
    return t ? one(*t, r) * entries(*t, r) : 0.0;
  };
  auto walk = [&](const std::vector<Step>& prog, std::optional<int> only) {
    for (const Step& st : prog) {
      if (st.kind == StepKind::kNewGroup) {
        groups[st.name] = st.members;
        continue;
      }
      const std::vector<int>* members = st.group.empty() || st.group == "world" ? nullptr : &groups[st.group];
      double call = 0;  // the call's recorded input bytes over its members (a reduction's result is one of them)
      double scattered = 0;  // the call's output bytes over its members
      for (int r = 0; r < W; ++r) {
        if (only && r != *only) continue;
        if (st.ranks && std::find(st.ranks->begin(), st.ranks->end(), r) == st.ranks->end()) continue;
        if (st.when && !st.when->eval(vars(r)).truthy()) continue;
        if (members && std::find(members->begin(), members->end(), r) == members->end()) continue;
        if (st.kind != StepKind::kOp) continue;
        const OpSpec& spec = st.spec();
        const bool root = spec.rooted && st.peer && st.peer->eval(vars(r)).whole() == r;
        double in = 0, out = 0;
        // What the records copy: the operands this rank reads, when called,
        // and those it writes, when done (core/op.h's table).
        for (std::size_t k = 0; k < kNumSlots; ++k) {
          const auto slot = static_cast<Slot>(k);
          const Operand& o = spec.operand(slot);
          if (!o.passed_by(root)) continue;
          if (o.read_by(root)) in += bytes(st.slot(slot), r);
          if (o.written_by(root)) out += bytes(st.slot(slot), r);
        }
        for (const P2PStep& p : st.p2p) (p.is_send ? in : out) += bytes(p.tensor, r);
        m.records += in + out;
        call = std::max(call, in);
        scattered += out;
      }
      if (st.kind != StepKind::kOp) continue;
      const CollectiveKind k = st.spec().collective;
      if (k == CollectiveKind::kReduce || k == CollectiveKind::kAllReduce) m.oracle = std::max(m.oracle, call);
      // reduce_scatter's oracle holds every member's reduced block at once.
      if (k == CollectiveKind::kReduceScatter) m.oracle = std::max(m.oracle, scattered);
    }
  };
  walk(s.program, std::nullopt);
  for (const auto& [rank, prog] : s.programs) walk(prog, rank);
  return m;
}

}  // namespace

double memory_needed(const Scenario& s) { return estimate_memory(s, s.check).total(); }

namespace {

// Every word shell-quoted (core/text.h): pasted, it runs what it says.
std::string replay_command(const Scenario& s, const std::string& backend, const RunOptions& o) {
  std::ostringstream cmd;
  cmd << "collie run " << shell_quote(s.file) << " --backend " << shell_quote(backend) << " --seed " << s.seed;
  if (s.world_overridden) cmd << " --world " << s.world;
  for (const auto& f : o.fault_args) cmd << " --fault " << shell_quote(f);
  if (o.random_faults_seed) cmd << " --random-faults " << *o.random_faults_seed << (o.destructive_faults ? " --destructive" : "");
  if (o.timeout_ns) cmd << " --timeout-us " << *o.timeout_ns / 1000;
  if (!o.profile_path.empty()) cmd << " --profile " << shell_quote(o.profile_path);
  if (o.timing_only && !s.timing_only) cmd << " --timing-only";
  if (o.strict) cmd << " --strict";
  for (const auto& f : o.replay_flags) cmd << " " << f;
  return cmd.str();
}

// At most `max_lines` lines of `text`, then "... and N more lines".
std::string first_lines(const std::string& text, std::size_t max_lines) {
  std::size_t pos = 0;
  for (std::size_t n = 0; n < max_lines; ++n) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return text;
    ++pos;
  }
  if (pos >= text.size()) return text;
  const auto more = static_cast<std::size_t>(std::count(text.begin() + static_cast<long>(pos), text.end(), '\n')) +
                    (text.back() == '\n' ? 0 : 1);
  return text.substr(0, pos) + "... and " + std::to_string(more) + " more lines\n";
}

// What a result says is bounded, whatever the world: a million ranks that
// each fail the same expect (collie run --world 1048576) printed 120 MB.
void bound(std::vector<std::string>& lines, const char* what) {
  for (auto& l : lines) l = first_lines(l, kMaxLinesPerFailure);
  if (lines.size() <= kMaxFailures) return;
  const std::size_t more = lines.size() - kMaxFailures;
  lines.resize(kMaxFailures);
  lines.push_back("... and " + std::to_string(more) + " more " + what);
}

// Only crashes at a rank's op K: what every backend can inject.
bool portable_crashes(const sim::FaultPlan& plan) {
  if (plan.size() != plan.crashes.size()) return false;
  return std::all_of(plan.crashes.begin(), plan.crashes.end(),
                     [](const sim::Crash& c) { return c.at_op != 0 && !c.at_ns && c.at_step.empty(); });
}

bool sets_timeouts(const Scenario& s) {
  // monitored_barrier's timeout is its own argument, what it reports on,
  // not an operation timeout: a library without those may still run it.
  auto any = [](const std::vector<Step>& steps) {
    return std::any_of(steps.begin(), steps.end(), [](const Step& st) {
      return st.timeout_ns > 0 && !(st.kind == StepKind::kOp && st.op == OpKind::kMonitoredBarrier);
    });
  };
  if (s.timeout_ns > 0 || any(s.program)) return true;
  return std::any_of(s.programs.begin(), s.programs.end(), [&](const auto& p) { return any(p.second); });
}

}  // namespace

ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Scenario s = scenario;
  if (options.seed) s.seed = *options.seed;
  if (options.network) s.network = *options.network;
  if (options.eager_threshold_bytes) s.network.eager_threshold_bytes = *options.eager_threshold_bytes;
  const BackendRegistry& reg = options.registry ? *options.registry : BackendRegistry::builtin();
  const std::string backend_name = options.backend.empty() ? s.backend : options.backend;
  const BackendInfo& backend = reg.require(backend_name);
  const bool processes = options.processes || !backend.create;

  ScenarioResult res;
  res.file = s.file;
  res.name = s.name;
  res.feature = s.feature;
  res.backend = backend_name;
  res.seed = s.seed;
  res.world = s.world;
  res.simulated = backend.simulated;
  res.replay = replay_command(s, backend_name, options);

  res.timing_only = s.timing_only || options.timing_only;
  if (res.timing_only && !backend.timing_only)
    usage("timing-only runs need the simulator (payloads are not materialised); backend '" + backend_name +
          "' moves real bytes");
  if (!res.timing_only) {
    // A run that would need more memory than this guard is refused with
    // the way out, rather than exhausting the machine.
    const MemoryEstimate m = estimate_memory(s, s.check);
    if (auto over = over_memory_guard(m.total(), options.max_tensor_bytes))
      usage(s.file + ": a run of " + std::to_string(s.world) + " ranks " + *over + ": " + human_bytes(m.tensors) +
            " of tensors" +
            (s.check ? ", " + human_bytes(m.records) + " of copies of every op's inputs and outputs for the oracle, " +
                           human_bytes(m.oracle) + " for its largest reduction"
                     : std::string()) +
            "; run with --timing-only to simulate costs without payloads" +
            (s.check ? std::string(", or say check: false to keep no copies") : std::string()));
  }

  if (!options.trace_path.empty() && !backend.simulated)
    usage("--trace records the simulator's events; backend '" + backend_name + "' records none (run on --backend sim)");

  sim::SimulationOptions simulation;
  simulation.network = s.network;
  simulation.faults = s.faults;
  // A scenario's crash faults that name an op (`{fault: crash, rank: R,
  // op: K}`) are not the simulator's alone: other backends crash the rank
  // themselves as its op K starts (a process: SIGKILL; an in-process
  // backend: InProcessBackend::crash).
  std::vector<ProcessFault> process_faults = options.process_faults;
  bool scenario_crashes = false;
  if (!backend.simulated_faults && !s.faults.empty() && portable_crashes(s.faults)) {
    for (const sim::Crash& c : s.faults.crashes) {
      ProcessFault f;
      f.kind = ProcessFault::Kind::kCrash;
      f.rank = c.rank;
      f.before_op = c.at_op;
      f.text = "crash:rank=" + std::to_string(c.rank) + ",op=" + std::to_string(c.at_op);
      process_faults.push_back(f);
    }
    simulation.faults = {};
    scenario_crashes = true;
  }
  simulation.faults.append(options.extra_faults);
  if (options.random_faults_seed)
    simulation.faults.append(sim::random_fault_plan(*options.random_faults_seed, s.world, options.destructive_faults));
  simulation.explorer = options.explorer;
  for (const std::string& text : options.fault_args) {  // as the user wrote them
    sim::FaultPlan one;
    if (!sim::parse_fault(text, one))
      if (auto outside = sim::fault_outside_world(one, s.world))
        usage("--fault " + text + " names a rank outside a world of " + std::to_string(s.world));
  }
  if (auto outside = sim::fault_outside_world(simulation.faults, s.world)) usage("--fault " + *outside);
  if (!simulation.faults.empty() && !backend.simulated_faults)
    usage("backend '" + backend_name + "' cannot inject the simulator's faults (" + simulation.faults.describe().front() +
          (s.faults.empty() ? ")" : "; declared in " + s.file + ")") +
          "; run on --backend sim" + (backend.start ? ", or give a process fault: crash:rank=R,op=K or stall:rank=R,op=K,ms=T" : ""));
  for (const ProcessFault& f : options.process_faults)
    if (f.rank >= s.world)
      usage("--fault " + f.text + ": rank " + std::to_string(f.rank) + " is out of range for world " + std::to_string(s.world));

  // Timeouts the scenario sets are part of what it checks: an
  // implementation without timeouts cannot run it (a skip, not a hang).
  if (!backend.no_timeouts.empty() && sets_timeouts(s)) {
    res.outcome = "skipped";
    res.skipped = true;
    res.skip_reason = "the scenario sets timeouts, and backend '" + backend_name + "' has none: " + backend.no_timeouts;
    return res;
  }

  JobOptions jo;
  jo.world_size = s.world;
  jo.seed = s.seed;
  jo.timeout_ns = options.timeout_ns ? *options.timeout_ns : s.timeout_ns;
  jo.eager_threshold_bytes = s.network.eager_threshold_bytes;
  jo.trace = !options.trace_path.empty();
  jo.timing_only = res.timing_only;
  jo.process_faults = process_faults;
  jo.simulation = backend.simulated ? &simulation : nullptr;
  // A checked run holds the transport to its sends' buffers too.
  jo.scribble_completed_sends = s.check && !res.timing_only;
  if (jo.scribble_completed_sends) jo.first_send_id = kCheckingFirstSendId;

  RunLog log;
  log.records.enabled = jo.scribble_completed_sends;
  // Interpreters before the job: a job that ends holding suspended rank
  // programs (a deadlock) destroys them before the interpreters they use.
  std::vector<std::unique_ptr<Interpreter>> interpreters(static_cast<std::size_t>(s.world));
  std::unique_ptr<Job> owned;
  Job* job = nullptr;
  try {
    if (options.jobs) job = &options.jobs->get(backend, jo, processes);
    else job = (owned = start_job(backend, jo, processes)).get();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kUsage) throw;
    if (e.kind() == ErrorKind::kUnsupported) {  // e.g. a crash fault on a backend that cannot crash a rank
      res.outcome = "skipped";
      res.skipped = true;
      res.skip_reason = e.what();
      return res;
    }
    res.outcome = "error";
    res.detail = e.what();
    res.failures.push_back("backend '" + backend_name + "' could not start a world of " + std::to_string(s.world) +
                           ": " + e.what());
    return res;
  } catch (const std::exception& e) {
    res.outcome = "error";
    res.detail = e.what();
    res.failures.push_back("backend '" + backend_name + "' could not start a world of " + std::to_string(s.world) +
                           ": " + e.what());
    return res;
  }
  res.implementation = job->implementation();

  const bool timing_only = res.timing_only;
  // Not a coroutine: it hands back the interpreter's own Task (a frame
  // here, per rank, would live as long as the rank's program).
  auto program = [&](Dist& d) -> Task<void> {
    auto& it = interpreters[static_cast<std::size_t>(d.rank())];
    it = std::make_unique<Interpreter>(s, d, log, timing_only);
    return it->run();
  };
  RunContext ctx;
  ctx.label = "seed " + std::to_string(s.seed);
  ctx.replay = res.replay;
  RunResult rr;
  try {
    rr = job->run(program, ctx);
  } catch (const std::exception& e) {
    if (options.jobs) options.jobs->clear();
    res.outcome = "error";
    res.detail = std::string("the backend failed: ") + e.what();
    res.failures.push_back(res.detail);
    return res;
  }

  // A value an expression cannot produce (division by zero, a value the
  // dtype cannot hold) is a mistake in the scenario, not in the backend.
  for (const RankOutcome& o : rr.ranks) {
    if (!o.error) continue;
    try {
      std::rethrow_exception(o.error);
    } catch (const ScenarioError&) {
      throw;
    } catch (...) {
    }
  }

  Judge how;
  how.collie_core = backend.collie_core;
  how.diagnoses_deadlocks = !processes;
  how.strict = options.strict;
  how.records_checked = log.records.enabled;
  how.injected = job->injected_faults();
  // Faults given on the command line, and a scenario's crashes on a
  // library, are judged by what the survivors did about them (failed
  // loudly, or hung); collie's core is held to the scenario's outcome.
  how.process_faults = options.process_faults;
  if (scenario_crashes && !backend.collie_core) how.process_faults = process_faults;
  if (!how.process_faults.empty() && s.outcome.kind == Outcome::kOk && !sets_timeouts(s)) {
    how.stalls_must_be_survived = true;
    for (const ProcessFault& f : how.process_faults)
      if (f.kind != ProcessFault::Kind::kStall || (jo.timeout_ns > 0 && f.stall_ms * 2'000'000 > jo.timeout_ns))
        how.stalls_must_be_survived = false;
  }
  take_run_files(*job, rr, how.injected.size(), options.trace_path, options.dot_path, res);
  if (options.jobs) options.jobs->release();
  owned.reset();

  Verdict v = judge(s, rr, log, how);
  res.outcome = v.outcome;
  res.detail = v.detail;
  res.skipped = v.skipped;
  res.skip_reason = v.skip_reason;
  for (auto& f : v.failures) res.failures.push_back(std::move(f));
  res.notes = std::move(v.notes);
  // A fault the user asked for that hit nothing (rank 2 crashing at op 99
  // of a 3-op program) must not pass in silence. Random profiles are
  // drawn, not asked for: they are not judged.
  if (backend.simulated_faults) {
    sim::FaultPlan asked = s.faults;
    asked.append(options.extra_faults);
    std::vector<std::string> injected;
    for (const InjectedFault& f : how.injected) injected.push_back(f.text);
    for (const std::string& line : sim::unfired_faults(asked, injected))
      res.notes.push_back("fault " + line + "; the run did not test it");
  }
  res.fault_report = std::move(v.fault_report);
  bound(res.failures, "failures");
  bound(res.notes, "notes");
  bound(res.fault_report, "lines");
  res.detail = first_lines(res.detail, kMaxLinesPerFailure);
  res.checks = v.checks;
  res.output = std::move(log.output);
  res.skipped_steps = log.skipped_steps;
  res.passed = res.failures.empty() && !res.skipped;
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace collie::scenario
