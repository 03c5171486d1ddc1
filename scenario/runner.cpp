#include "scenario/runner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <fstream>
#include <memory>
#include <sstream>

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
  auto vars = [W](int r) {
    return std::map<std::string, double>{{"rank", static_cast<double>(r)}, {"world", static_cast<double>(W)}};
  };
  auto one = [](const TensorSpec& t) { return static_cast<double>(t.count() * dtype_size(t.dtype)); };
  auto entries = [&](const TensorSpec& t, int r) { return t.list ? t.list->eval(vars(r)) : 1.0; };
  for (const TensorSpec& t : s.tensors)
    for (int r = 0; r < W; ++r) m.tensors += one(t) * entries(t, r);
  if (!recording) return m;
  std::map<std::string, std::vector<int>> groups;
  for (const GroupSpec& g : s.groups) groups[g.name] = g.ranks;
  auto bytes = [&](const std::string& name, int r) {
    const TensorSpec* t = s.find_tensor(name);
    return t ? one(*t) * entries(*t, r) : 0.0;
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
        if (st.when && st.when->eval(vars(r)) == 0) continue;
        if (members && std::find(members->begin(), members->end(), r) == members->end()) continue;
        if (st.kind != StepKind::kOp) continue;
        const OpSpec& spec = st.spec();
        const bool root = spec.rooted && st.peer && static_cast<int>(st.peer->eval(vars(r))) == r;
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

// "5.0 MiB", "7.45 GiB", "24 GiB": sizes as a person reads them.
std::string human_bytes(double bytes) {
  static const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  else std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s", bytes, kUnits[u]);
  return buf;
}

void append(sim::FaultPlan& to, const sim::FaultPlan& from) {
  to.messages.insert(to.messages.end(), from.messages.begin(), from.messages.end());
  to.partitions.insert(to.partitions.end(), from.partitions.begin(), from.partitions.end());
  to.degradations.insert(to.degradations.end(), from.degradations.begin(), from.degradations.end());
  to.crashes.insert(to.crashes.end(), from.crashes.begin(), from.crashes.end());
  to.slow.insert(to.slow.end(), from.slow.begin(), from.slow.end());
  to.skews.insert(to.skews.end(), from.skews.begin(), from.skews.end());
}

std::string replay_command(const Scenario& s, const std::string& backend, const RunOptions& o) {
  std::ostringstream cmd;
  cmd << "collie run " << s.file << " --backend " << backend << " --seed " << s.seed;
  if (s.world_overridden) cmd << " --world " << s.world;
  for (const auto& f : o.fault_args) cmd << " --fault " << f;
  if (o.random_faults_seed) cmd << " --random-faults " << *o.random_faults_seed << (o.destructive_faults ? " --destructive" : "");
  if (o.timeout_ns) cmd << " --timeout-us " << *o.timeout_ns / 1000;
  if (!o.profile_path.empty()) cmd << " --profile " << o.profile_path;
  if (o.timing_only && !s.timing_only) cmd << " --timing-only";
  if (o.strict) cmd << " --strict";
  for (const auto& f : o.replay_flags) cmd << " " << f;
  return cmd.str();
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
    if (m.total() > options.max_tensor_bytes)
      usage(s.file + ": a run of " + std::to_string(s.world) + " ranks needs about " + human_bytes(m.total()) +
            " of memory (limit " + human_bytes(options.max_tensor_bytes) + "): " + human_bytes(m.tensors) + " of tensors" +
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
  append(simulation.faults, options.extra_faults);
  if (options.random_faults_seed)
    append(simulation.faults, sim::random_fault_plan(*options.random_faults_seed, s.world, options.destructive_faults));
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
  auto program = [&](Dist& d) -> Task<void> {
    auto& it = interpreters[static_cast<std::size_t>(d.rank())];
    it = std::make_unique<Interpreter>(s, d, log, timing_only);
    co_await it->run();
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
  res.virtual_time = std::max(rr.end_time, rr.stopped_at);
  res.deadlock_dot = rr.deadlock_dot;
  res.causes = rr.causes;
  res.faults_injected = how.injected.size();
  if (!options.trace_path.empty()) {
    std::ofstream f(options.trace_path, std::ios::binary);
    if (!job->write_trace(f, std::max(rr.end_time, rr.stopped_at)))
      res.failures.push_back("backend '" + backend_name + "' records no trace; --trace needs the simulator");
  }
  if (!options.dot_path.empty() && !rr.deadlock_dot.empty()) {
    std::ofstream f(options.dot_path, std::ios::binary);
    f << rr.deadlock_dot;
  }
  res.trace_hash = job->trace_hash();
  res.events = job->events();
  res.frames = rr.frames;
  if (options.jobs) options.jobs->release();
  owned.reset();

  Verdict v = judge(s, rr, log, how);
  res.outcome = v.outcome;
  res.detail = v.detail;
  res.skipped = v.skipped;
  res.skip_reason = v.skip_reason;
  for (auto& f : v.failures) res.failures.push_back(std::move(f));
  res.notes = std::move(v.notes);
  res.fault_report = std::move(v.fault_report);
  res.checks = v.checks;
  res.output = std::move(log.output);
  res.skipped_steps = log.skipped_steps;
  res.passed = res.failures.empty() && !res.skipped;
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace collie::scenario
