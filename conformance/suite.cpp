#include "conformance/suite.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <tuple>

#include "conformance/collective_check.h"
#include "conformance/decided_cases.h"
#include "conformance/lanes.h"
#include "core/error.h"
#include "core/text.h"
#include "scenario/loader.h"
#include "scenario/runner.h"
#include "sim/prng.h"
#include "sim/simulation_options.h"

namespace collie::conformance {

namespace {

namespace fs = std::filesystem;


std::string first_lines(const std::string& s, int n) {
  std::string out;
  int lines = 0;
  for (char c : s) {
    if (c == '\n' && ++lines >= n) break;
    out += c;
  }
  return out;
}

// A case's own result: failure text (empty: passed), notes, or a skip.
struct Ran {
  std::string failure;
  std::vector<std::string> notes;
  std::string skipped;
  std::string implementation;
};

// Lanes of a process backend's suite when SuiteOptions::lanes is 0.
constexpr int kDefaultLanes = 4;
// An op timeout this long or longer that a scenario expects to expire runs
// on virtual clocks only (see the scenario loop).
constexpr Nanos kLongTimeoutNs = 2'000'000'000;

struct Pending {
  std::string feature, name, kind, replay;
  int world = 1;
  bool breaks = false;  // expected to leave a process job broken (lanes.h)
  std::function<Ran()> run;
};

}  // namespace

bool SuiteResult::passed() const {
  if (cases.empty()) return false;
  int passed = 0;
  for (const auto& c : cases) {
    if (!c.passed && !c.skipped) return false;
    passed += c.passed ? 1 : 0;
  }
  return passed > 0;
}

int SuiteResult::failed() const {
  int n = 0;
  for (const auto& c : cases) n += !c.passed && !c.skipped ? 1 : 0;
  return n;
}

int SuiteResult::skipped() const {
  int n = 0;
  for (const auto& c : cases) n += c.skipped ? 1 : 0;
  return n;
}

SuiteResult run_conformance(const SuiteOptions& o) {
  const BackendRegistry& reg = o.registry ? *o.registry : BackendRegistry::builtin();
  const BackendInfo& backend = reg.require(o.backend);
  if (backend.unavailable)
    if (auto why = backend.unavailable())
      throw Error(ErrorKind::kUsage, OpContext{}, "backend '" + o.backend + "' is not available here: " + *why);
  const bool processes = o.processes || !backend.create;
  const bool strict = backend.collie_core || o.strict;
  const bool library = !backend.collie_core;  // it picks its own algorithms: reports name none
  SuiteResult res;
  res.backend = o.backend;
  std::vector<Pending> pending;
  std::string flags;
  for (const auto& f : o.replay_flags) flags += " " + f;
  if (processes && backend.create) flags += " --processes";
  if (o.strict) flags += " --strict";
  // A conformance replay runs under the suite's op timeout, as the case did.
  const std::string conf_flags =
      flags + (processes && o.timeout_ns > 0 ? " --timeout-us " + std::to_string(o.timeout_ns / 1000) : std::string());
  // A scenario's own replay line (inside its failure) carries the same
  // flags as the suite's: the worker, the launcher, the plugin, --processes.
  std::vector<std::string> scenario_flags = o.replay_flags;
  if (processes && backend.create) scenario_flags.push_back("--processes");
  JobCache jobs;
  std::atomic<std::uint64_t> frames = 0;  // delivered to collie's core over all runs (process backends count none)
  std::atomic<std::uint64_t>* frames_total = &frames;

  // A scenario directory or file that does not load is a failed case of
  // its own (feature scenario_files): it counts, and the JUnit report has it.
  auto unloadable = [&](const std::string& name, const std::string& why, const std::string& replay) {
    Pending p;
    p.feature = "scenario_files";
    p.name = name;
    p.kind = "scenario";
    p.replay = replay;
    p.run = [why] { return Ran{why, {}, {}, {}}; };
    pending.push_back(std::move(p));
  };
  // Scenarios marked for conformance.
  std::vector<std::string> files;
  for (const auto& dir : o.scenario_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      unloadable(fs::path(dir).filename().string(), dir + ": not a directory of scenarios", "ls " + shell_quote(dir));
      continue;
    }
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::shared_ptr<scenario::Scenario> s;
    try {
      s = std::make_shared<scenario::Scenario>(scenario::load_file(f));
    } catch (const scenario::ScenarioError& e) {
      unloadable(fs::path(f).stem().string(), e.what(), "collie validate " + shell_quote(f));
      continue;
    }
    if (!s->conformance) continue;
    // A scenario that waits out an op timeout of seconds (timers past 2^32
    // ns) runs where the clock is virtual -- simulated, plugin transports;
    // on the host's clock (TCP, a library's processes) it would take that
    // long, so the suite leaves it out there.
    if (s->timeout_ns >= kLongTimeoutNs && s->outcome.kind != scenario::Outcome::kOk &&
        (processes || backend.wall_clock))
      continue;
    Pending p;
    p.feature = s->feature.empty() ? "scenarios" : s->feature;
    p.name = fs::path(f).stem().string();
    p.kind = "scenario";
    p.world = s->world;
    p.replay = "collie run " + shell_quote(f) + " --backend " + shell_quote(o.backend) + flags;
    // Process backends: the suite's op timeout, unless the scenario sets its
    // own; the hang window for one that expects a deadlock or an error, or
    // whose behaviour -- or only how it ends -- torch leaves unspecified (a
    // library may hang there: Gloo's blocking sends head to head waited out
    // the whole 20 s timeout once `unspecified_outcome` came in).
    const bool may_hang =
        s->outcome.kind != scenario::Outcome::kOk || !s->unspecified.empty() || !s->unspecified_outcome.empty();
    Nanos timeout_ns = 0;
    if (processes && o.timeout_ns && s->timeout_ns == 0) {
      timeout_ns = o.timeout_ns;
      if (may_hang && o.hang_window_ns > 0) timeout_ns = std::min(o.timeout_ns, o.hang_window_ns);
      p.replay += " --timeout-us " + std::to_string(timeout_ns / 1000);  // collie run's default is another
    }
    std::string skip;
    if (!s->transport_only.empty() && !backend.collie_core)
      skip = "a check of a transport under collie's core (" + s->transport_only + "); backend '" + o.backend +
             "' implements the ops itself";
    else if (!s->virtual_clock_only.empty() && (processes || backend.wall_clock))
      skip = "runs where clocks are virtual: the simulator, plugin transports (" + s->virtual_clock_only +
             "); backend '" + o.backend + "' runs on the host's clock";
    if (!skip.empty()) {
      p.run = [why = std::move(skip)] {
        Ran ran;
        ran.skipped = why;
        return ran;
      };
      pending.push_back(std::move(p));
      continue;
    }
    p.breaks = processes && may_hang;
    p.run = [s, &o, &reg, &jobs, &scenario_flags, processes, frames_total, timeout_ns] {
      scenario::RunOptions ro;
      ro.backend = o.backend;
      ro.replay_flags = scenario_flags;
      ro.registry = &reg;
      ro.processes = processes;
      ro.jobs = &jobs;
      ro.strict = o.strict;
      if (timeout_ns) ro.timeout_ns = timeout_ns;
      auto r = scenario::run_scenario(*s, ro);
      *frames_total += r.frames;
      Ran ran;
      ran.implementation = r.implementation;
      ran.notes = std::move(r.notes);
      if (r.skipped) ran.skipped = r.skip_reason;
      for (const auto& fl : r.failures) ran.failure += fl + "\n";
      return ran;
    };
    pending.push_back(std::move(p));
  }

  // Generated property cases, each on a job of its world.
  // `timeout_ns`: the run's op timeout on a process backend (0: the suite's).
  // `stall_after_failure_ns`: JobOptions' (0: none).
  auto on_job = [&o, &backend, &jobs, processes, frames_total](int world, std::uint64_t seed, ViewLayout views = ViewLayout::kContiguous,
                                                                Nanos timeout_ns = 0, Nanos stall_after_failure_ns = 0) {
    return [&o, &backend, &jobs, processes, world, seed, views, timeout_ns, stall_after_failure_ns,
            frames_total](const DistProgram& program) {
      JobOptions jo;
      jo.world_size = world;
      jo.seed = seed;
      jo.timeout_ns = processes ? (timeout_ns > 0 ? timeout_ns : o.timeout_ns) : 0;
      jo.stall_after_failure_ns = stall_after_failure_ns;
      jo.views = views;
      jo.scribble_completed_sends = true;
      jo.first_send_id = kCheckingFirstSendId;
      sim::SimulationOptions simulation;
      simulation.network.jitter_fraction = 0.5;
      if (backend.simulated) jo.simulation = &simulation;
      Job& job = jobs.get(backend, jo, processes);
      RunContext ctx;
      ctx.label = "backend " + backend.name + ", seed " + std::to_string(seed);
      RunResult r = job.run(program, ctx);
      jobs.release();
      *frames_total += r.frames;
      return r;
    };
  };
  auto property = [&](const CaseOutcome& c, const std::string& what) {
    Ran ran;
    if (!c.failure.empty()) ran.failure = c.failure + " (" + what + ")";
    for (const auto& n : c.notes) ran.notes.push_back(n);
    ran.skipped = c.skipped;
    return ran;
  };
  const std::vector<CollectiveKind> kinds = {CollectiveKind::kBroadcast, CollectiveKind::kReduce,
                                             CollectiveKind::kAllReduce, CollectiveKind::kScatter,
                                             CollectiveKind::kGather,    CollectiveKind::kAllGather,
                                             CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll,
                                             CollectiveKind::kBarrier};
  // Generated case i of a feature comes from its own PRNG (seed, feature,
  // i), so that a replay regenerates it alone. Cases past the first
  // kShallowCases go deeper: worlds up to 32, counts below the world size
  // and up to several MiB; their replay names --cases.
  constexpr int kShallowCases = 20;
  auto case_prng = [&o](int feature, int i) {
    std::uint64_t x = o.seed ^ (static_cast<std::uint64_t>(feature + 1) << 40) ^ (static_cast<std::uint64_t>(i) << 8);
    return sim::Prng(sim::Prng::splitmix64(x));
  };
  auto replay_of = [&o, &conf_flags](const std::string& feature, const std::string& name, int i) {
    return "collie conformance --backend " + o.backend + conf_flags + " --seed " + std::to_string(o.seed) +
           (i >= kShallowCases ? " --cases " + std::to_string(i + 1) : std::string()) + " --filter '^" + feature +
           "/" + name + "$'";
  };
  auto collective_case = [&](CollectiveKind k, int i) {
    sim::Prng prng = case_prng(static_cast<int>(k), i);
    const bool deep = i >= kShallowCases;
    const int world = deep ? 2 + static_cast<int>(prng.below(31)) : 1 + static_cast<int>(prng.below(9));
    CollectiveCase c = random_case(k, world, prng, deep);
    // Half the generated cases in the async form (torch's async_op=True, an
    // MPI's MPI_I* call): a library implements it apart from the blocking
    // one (Open MPI's libnbc), and only async_forms reached it, in float32
    // on 13 elements. Drawn from the data seed, so that every other draw of
    // the case stays as it was.
    c.async_op = ((c.data_seed >> 17) & 1) == 1;
    const std::uint64_t seed = prng.next() & 0xffffffffu;
    Pending p;
    p.feature = collective_name(k);
    p.name = "random_" + std::to_string(i);
    p.kind = "property";
    p.world = world;
    p.replay = replay_of(p.feature, p.name, i);
    p.run = [c, world, seed, strict, library, on_job, property] {
      return property(run_and_check(on_job(world, seed), world, {c}, strict, "", library), "world " + std::to_string(world));
    };
    return p;
  };
  // Random point-to-point traffic, op by op (p2p) or in one batch per rank
  // on a shuffled group (batch_isend_irecv). The salts keep each feature's
  // seeds as they were (p2p's was the number of collective kinds, 10).
  auto traffic_case = [&](const std::string& feature, int salt, int i) {
    sim::Prng prng = case_prng(salt, i);
    const bool deep = i >= kShallowCases;
    const int world = deep ? 2 + static_cast<int>(prng.below(31)) : 2 + static_cast<int>(prng.below(7));
    const std::uint64_t seed = prng.next();
    const bool batch = feature == "batch_isend_irecv";
    Pending p;
    p.feature = feature;
    p.name = "random_traffic_" + std::to_string(i);
    p.kind = "property";
    p.world = world;
    p.replay = replay_of(p.feature, p.name, i);
    p.run = [world, seed, batch, on_job, property] {
      sim::Prng traffic(seed);
      const std::string what = std::string(batch ? "batch " : "random ") + "traffic, world " +
                               std::to_string(world) + ", seed " + std::to_string(seed);
      return property(batch ? run_batch_traffic(on_job(world, seed), world, traffic, 6, "")
                            : run_p2p_traffic(on_job(world, seed), world, traffic, 12, ""),
                      what);
    };
    return p;
  };
  auto p2p_case = [&](int i) { return traffic_case("p2p", 10, i); };
  auto batch_case = [&](int i) { return traffic_case("batch_isend_irecv", 11, i); };
  // monitored_barrier: random groups, members away at random. A case with
  // someone away waits out its timeout (wall time on real backends), so
  // there are a few.
  auto monitored_case = [&](int i) {
    constexpr int kMonitoredSalt = 12;
    sim::Prng prng = case_prng(kMonitoredSalt, i);
    const int world = 2 + static_cast<int>(prng.below(6));
    const std::uint64_t seed = prng.next();
    Pending p;
    p.feature = "monitored_barrier";
    p.name = "random_" + std::to_string(i);
    p.kind = "property";
    p.world = world;
    p.replay = replay_of(p.feature, p.name, i);
    p.run = [world, seed, strict, on_job, property] {
      sim::Prng draw(seed);
      return property(run_monitored_barrier(on_job(world, seed), world, draw, 200'000'000, strict, ""),
                      "world " + std::to_string(world) + ", seed " + std::to_string(seed));
    };
    return p;
  };
  for (CollectiveKind k : kinds)
    for (int i = 0; i < o.cases_per_feature; ++i) pending.push_back(collective_case(k, i));
  for (int i = 0; i < o.cases_per_feature; ++i) pending.push_back(p2p_case(i));
  for (int i = 0; i < o.cases_per_feature; ++i) pending.push_back(batch_case(i));
  for (int i = 0; i < std::min(o.cases_per_feature, 4); ++i) pending.push_back(monitored_case(i));
  // A case fixed by the suite (not drawn from the seed): its replay needs
  // only its name.
  // `cases` run in sequence on one job; `what` heads their reports ("world W" when empty).
  auto fixed_case = [&](const std::string& feature, const std::string& name, std::vector<CollectiveCase> cases,
                        int world, std::string what = "") {
    Pending p;
    p.feature = feature;
    p.name = name;
    p.kind = "property";
    p.world = world;
    p.replay = "collie conformance --backend " + o.backend + conf_flags + " --filter '^" + feature + "/" + name + "$'";
    if (what.empty()) what = "world " + std::to_string(world);
    p.run = [cases = std::move(cases), world, what = std::move(what), strict, library, on_job, property] {
      return property(run_and_check(on_job(world, 1), world, cases, strict, "", library), what);
    };
    pending.push_back(std::move(p));
  };
  // Every (dtype, op) through every reduction, blocking then async (an
  // MPI's MPI_I* calls and torch's async_op=True take their own paths): only
  // all_reduce had the grid, blocking, and an MPI whose reduce_scatter did
  // BXOR for BOR, or whose nonblocking int8 MAX compared unsigned, passed.
  // One case per (collective, dtype, op): a form a library refuses skips
  // that case alone. all_reduce's keep their names.
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int op = 0; op < kNumReduceOps; ++op) {
      if (reduce_op_unsupported(static_cast<ReduceOp>(op), static_cast<DType>(d))) continue;
      for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduce, CollectiveKind::kReduceScatter}) {
        CollectiveCase c;
        c.op = k;
        c.dtype = static_cast<DType>(d);
        c.reduce_op = static_cast<ReduceOp>(op);
        c.count = k == CollectiveKind::kReduceScatter ? 7 : 33;  // per block: 35 in all
        c.root = (d + op) % 5;
        c.data_seed = static_cast<std::uint64_t>(d * 100 + op + 1 + 10000 * static_cast<int>(k != CollectiveKind::kAllReduce) +
                                                 20000 * static_cast<int>(k == CollectiveKind::kReduceScatter));
        CollectiveCase async = c;
        async.async_op = true;
        async.data_seed += 50000;
        const std::string name = std::string(dtype_name(c.dtype)) + "_" + std::string(reduce_op_name(c.reduce_op));
        fixed_case("dtypes_x_ops", k == CollectiveKind::kAllReduce ? name : collective_name(k) + "_" + name,
                   {c, async}, 5);
      }
    }
  }
  // Every collective in every dtype, on a group that is not 0..k-1 and is
  // named out of order ({4,1,5,2} in a world of 6), the root moving over its
  // members, an odd count, blocking and async; the reductions with SUM and
  // then MIN, MAX or PRODUCT. One case per (collective, dtype), so that a dtype or form an
  // implementation refuses skips that case alone (a library's state after a
  // refused call is its own: the case does not go on past one). Only
  // all_reduce had a dtype x op grid: a library wrong in one dtype of another
  // collective (an int32 all_gather, an int8 broadcast) passed every case
  // that reached it. The list forms of all_gather and reduce_scatter and
  // all_to_all_single (what Gloo provides; the other forms are drawn by the
  // generated cases).
  {
    const std::vector<int> group = {4, 1, 5, 2};
    constexpr int kWorld = 6;
    for (CollectiveKind k : kinds) {
      if (k == CollectiveKind::kBarrier) continue;
      const bool reducing =
          k == CollectiveKind::kReduce || k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter;
      for (int d = 0; d < kNumDTypes; ++d) {
        const auto dt = static_cast<DType>(d);
        std::vector<ReduceOp> ops;
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
          if (!reduce_op_unsupported(op, dt)) ops.push_back(op);
        if (ops.empty()) continue;
        // (op, async): the first op blocking and async (an MPI's MPI_I*
        // calls and torch's async_op=True take their own paths), then another.
        std::vector<std::pair<ReduceOp, bool>> forms = {{ops.front(), false}, {ops.front(), true}};
        if (reducing && ops.size() > 1) forms.emplace_back(ops[1 + static_cast<std::size_t>(d) % (ops.size() - 1)], false);
        std::vector<CollectiveCase> calls;
        for (const auto& [op, async] : forms) {
          CollectiveCase c;
          c.async_op = async;
          c.op = k;
          c.group = group;
          c.dtype = dt;
          c.reduce_op = op;
          c.count = 37;
          c.root = group[static_cast<std::size_t>(d + static_cast<int>(calls.size())) % group.size()];
          c.tensor_form = k == CollectiveKind::kAllToAll;
          // Where nothing is reduced, floating values use every bit of the
          // mantissa (a float64 scatter through float32 passed small
          // integers), checked exactly all the same.
          c.rounding = !reducing && is_floating(dt);
          c.data_seed = static_cast<std::uint64_t>(70000 + static_cast<int>(k) * 1000 + d * 10 + static_cast<int>(calls.size()));
          calls.push_back(c);
        }
        fixed_case("collective_dtypes", collective_name(k) + "_" + std::string(dtype_name(dt)), std::move(calls), kWorld,
                   "world 6, group {4,1,5,2}");
      }
    }
  }
  // AVG on a group that is not the world, through every reduction: it
  // divides by the group's size (an AVG dividing by the world's passed every
  // fixed case, all on the world).
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
    for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduce, CollectiveKind::kReduceScatter}) {
      CollectiveCase c;
      c.op = k;
      c.dtype = dt;
      c.reduce_op = ReduceOp::kAvg;
      c.group = {4, 1, 3};
      c.root = 3;
      c.count = k == CollectiveKind::kReduceScatter ? 11 : 33;
      c.data_seed = static_cast<std::uint64_t>(82000 + static_cast<int>(dt) * 10 + static_cast<int>(k));
      fixed_case("dtypes_x_ops", collective_name(k) + "_" + std::string(dtype_name(dt)) + "_AVG_on_three_of_five", {c},
                 5, "world 5, group {4,1,3}");
      if (k != CollectiveKind::kReduceScatter) continue;
      // The tensor form too (its AVG ran on the world alone, where an AVG
      // dividing by the world's size is right).
      c.tensor_form = true;
      c.data_seed += 5;
      fixed_case("dtypes_x_ops", "reduce_scatter_tensor_" + std::string(dtype_name(dt)) + "_AVG_on_three_of_five", {c},
                 5, "world 5, group {4,1,3}");
    }
  }
  // Signed zeros, NaNs of both signs, infinities and subnormals through
  // every floating reduction: collie's core must give the oracle's bits;
  // elsewhere only NaN and zero bits may differ (a note).
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
      CollectiveCase c;
      c.op = CollectiveKind::kAllReduce;
      c.dtype = dt;
      c.reduce_op = op;
      c.count = 64;
      c.data_seed = static_cast<std::uint64_t>(static_cast<int>(dt) * 100 + static_cast<int>(op) + 7);
      c.special_values = true;
      fixed_case("special_values", std::string(dtype_name(dt)) + "_" + std::string(reduce_op_name(op)), {c}, 5);
    }
  }
  // SUM through reduce and reduce_scatter too (a float16 SUM flushing
  // subnormal results to zero there alone passed: special values met
  // all_reduce only).
  for (DType dt : {DType::kFloat16, DType::kFloat32}) {
    for (CollectiveKind k : {CollectiveKind::kReduce, CollectiveKind::kReduceScatter}) {
      for (bool tensor_form : {false, true}) {
        if (tensor_form && k != CollectiveKind::kReduceScatter) continue;
        CollectiveCase c;
        c.op = k;
        c.dtype = dt;
        c.reduce_op = ReduceOp::kSum;
        c.count = 64;
        c.root = 2;
        c.tensor_form = tensor_form;
        c.special_values = true;
        c.data_seed = static_cast<std::uint64_t>(8900 + static_cast<int>(dt) * 10 + static_cast<int>(k) * 2 + tensor_form);
        fixed_case("special_values",
                   (tensor_form ? std::string("reduce_scatter_tensor") : collective_name(k)) + "_" +
                       std::string(dtype_name(dt)) + "_SUM",
                   {c}, 5);
      }
    }
  }
  // The same values moved, not reduced: every bit is the program's there (a
  // broadcast that turned -0.0 into 0.0 never met a signed zero).
  {
    // Each collective in float32 (what every library moves) and in one more
    // width (a bfloat16-only case was skipped wherever bfloat16 is refused,
    // and a scatter turning -0.0 into +0.0 passed there).
    const std::pair<CollectiveKind, DType> moved[] = {
        {CollectiveKind::kBroadcast, DType::kFloat32}, {CollectiveKind::kBroadcast, DType::kFloat16},
        {CollectiveKind::kScatter, DType::kFloat32},   {CollectiveKind::kScatter, DType::kBFloat16},
        {CollectiveKind::kGather, DType::kFloat32},    {CollectiveKind::kGather, DType::kFloat64},
        {CollectiveKind::kAllGather, DType::kFloat32}, {CollectiveKind::kAllGather, DType::kFloat64},
        {CollectiveKind::kAllToAll, DType::kFloat32},  {CollectiveKind::kAllToAll, DType::kFloat16}};
    for (const auto& [k, dt] : moved) {
      CollectiveCase c;
      c.op = k;
      c.dtype = dt;
      c.count = 64;
      c.group = {3, 0, 4, 1};
      c.root = 4;
      c.tensor_form = k == CollectiveKind::kAllToAll;
      c.special_values = true;
      c.data_seed = static_cast<std::uint64_t>(8800 + static_cast<int>(k) * 10 + static_cast<int>(dt));
      fixed_case("special_values", collective_name(k) + "_" + std::string(dtype_name(dt)) + "_moved", {c}, 5,
                 "world 5, group {3,0,4,1}");
    }
  }

  // Large messages (above 1 MiB, an odd count: rendezvous, segmented rings,
  // uneven tails) through every collective, and float32 AVG through every
  // reduction: classes that a random count rarely reaches.
  for (CollectiveKind k : kinds) {
    if (k == CollectiveKind::kBarrier) continue;
    const bool reducing =
        k == CollectiveKind::kReduce || k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      if (op == ReduceOp::kAvg && !reducing) continue;
      sim::Prng prng = case_prng(static_cast<int>(k), 1000000 + static_cast<int>(op));
      const int world = 3 + static_cast<int>(prng.below(4));
      CollectiveCase c = random_case(k, world, prng);
      // float64 where nothing is reduced (a large float64 broadcast had no
      // case: sizes is int32, these were float32 throughout).
      c.dtype = reducing ? DType::kFloat32 : DType::kFloat64;
      c.reduce_op = op;
      c.group.clear();  // every rank moves the large message
      c.root = static_cast<int>(prng.below(static_cast<std::uint64_t>(world)));
      c.count = k == CollectiveKind::kAllGather || k == CollectiveKind::kGather || k == CollectiveKind::kScatter ||
                        k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllToAll
                    ? 65537   // per block: world x 256 KiB
                    : 262147;  // 1 MiB
      Pending p;
      p.feature = "large_messages";
      p.name = collective_name(k) + (reducing ? "_" + std::string(reduce_op_name(op)) : std::string());
      p.kind = "property";
      p.world = world;
      p.replay = "collie conformance --backend " + o.backend + conf_flags + " --seed " + std::to_string(o.seed) +
                 " --filter '^large_messages/" + p.name + "$'";
      const std::uint64_t seed = prng.next() & 0xffffffffu;
      p.run = [c, world, seed, strict, library, on_job, property] {
        return property(run_and_check(on_job(world, seed), world, {c}, strict, "", library), "world " + std::to_string(world));
      };
      pending.push_back(std::move(p));
    }
  }
  // Large messages again, blocking then async, in another dtype per collective (8-byte
  // and 1-byte elements; float64 and int64 reduced): an MPI's nonblocking
  // paths, its float64 and int64 reductions and its byte broadcasts had no
  // case above a few hundred elements, and an all_gather no block above
  // 512 KiB. A group that is not 0..k-1, its root not its first member.
  {
    const std::pair<CollectiveKind, DType> picks[] = {
        {CollectiveKind::kBroadcast, DType::kInt8},      {CollectiveKind::kReduce, DType::kInt64},
        {CollectiveKind::kAllReduce, DType::kFloat64},   {CollectiveKind::kScatter, DType::kUInt8},
        {CollectiveKind::kGather, DType::kBool},         {CollectiveKind::kAllGather, DType::kInt64},
        {CollectiveKind::kReduceScatter, DType::kFloat64}, {CollectiveKind::kAllToAll, DType::kFloat16}};
    for (const auto& [k, dt] : picks) {
      const bool blocks = k == CollectiveKind::kAllGather || k == CollectiveKind::kGather ||
                          k == CollectiveKind::kScatter || k == CollectiveKind::kReduceScatter ||
                          k == CollectiveKind::kAllToAll;
      CollectiveCase c;
      c.op = k;
      c.dtype = dt;
      c.group = {3, 0, 4, 1};
      c.root = 4;
      c.tensor_form = k == CollectiveKind::kAllToAll;
      // Per block (and per rank): 1.2 MiB of 8-byte elements, odd.
      c.count = blocks ? 150001 : 262147;
      c.data_seed = static_cast<std::uint64_t>(80000 + static_cast<int>(k));
      CollectiveCase async = c;
      async.async_op = true;
      async.root = 1;
      async.data_seed += 100;
      fixed_case("large_messages", collective_name(k) + "_" + std::string(dtype_name(dt)), {c, async}, 5,
                 "world 5, group {3,0,4,1}");
    }
  }
  // A large reduction on {0,1,3,4} (named {3,0,4,1}) of five, blocking at
  // root 4, then async at root 1.
  auto large_reduction = [&](CollectiveKind k, ReduceOp op, DType dt, std::size_t count, int seed) {
    CollectiveCase c;
    c.op = k;
    c.dtype = dt;
    c.reduce_op = op;
    c.group = {3, 0, 4, 1};
    c.root = 4;
    c.count = count;
    c.data_seed = static_cast<std::uint64_t>(seed);
    fixed_case("large_messages",
               collective_name(k) + "_" + std::string(reduce_op_name(op)) + "_" + std::string(dtype_name(dt)),
               then_async(c, 1, 5), 5, "world 5, group {3,0,4,1}");
  };
  // Large reductions other than SUM and AVG, blocking then async: above
  // 64 KiB a transport lands payloads and a library switches algorithm, and
  // every reduction there was a SUM (a landed reduction that always added,
  // a large MIN computed as MAX, passed everything but three int32 cases).
  {
    const std::tuple<CollectiveKind, ReduceOp, DType> picks[] = {
        {CollectiveKind::kAllReduce, ReduceOp::kMax, DType::kFloat64},
        {CollectiveKind::kAllReduce, ReduceOp::kMin, DType::kInt32},
        {CollectiveKind::kAllReduce, ReduceOp::kProduct, DType::kFloat16},
        {CollectiveKind::kReduce, ReduceOp::kMin, DType::kFloat64},
        {CollectiveKind::kReduce, ReduceOp::kMax, DType::kInt64},
        {CollectiveKind::kReduce, ReduceOp::kProduct, DType::kFloat32},
        {CollectiveKind::kReduceScatter, ReduceOp::kMax, DType::kFloat32},
        {CollectiveKind::kReduceScatter, ReduceOp::kMin, DType::kFloat16},
        {CollectiveKind::kReduceScatter, ReduceOp::kProduct, DType::kInt64},
        // bfloat16 past 32 Ki elements, odd (a landed half-width reduction
        // that skipped the last element was caught in float16 alone).
        {CollectiveKind::kAllReduce, ReduceOp::kSum, DType::kBFloat16},
        {CollectiveKind::kReduceScatter, ReduceOp::kMax, DType::kBFloat16},
        // Bitwise ops past 1 Ki elements (an MPI_Allreduce that combined
        // elements from 1,024 on with SUM passed: bitwise cases stopped at
        // 131 elements).
        {CollectiveKind::kAllReduce, ReduceOp::kBxor, DType::kInt32},
        {CollectiveKind::kAllReduce, ReduceOp::kBand, DType::kInt64},
        {CollectiveKind::kReduce, ReduceOp::kBor, DType::kInt64},
        {CollectiveKind::kReduce, ReduceOp::kBxor, DType::kUInt8},
        {CollectiveKind::kReduceScatter, ReduceOp::kBor, DType::kInt32},
        {CollectiveKind::kReduceScatter, ReduceOp::kBand, DType::kInt8}};
    for (const auto& [k, op, dt] : picks)
      // Per rank (per block for reduce_scatter): 200 to 800 KiB, odd --
      // past 64 KiB, where payloads land and algorithms switch.
      large_reduction(k, op, dt, k == CollectiveKind::kReduceScatter ? 50001 : 100003,
                      83000 + static_cast<int>(k) * 100 + static_cast<int>(op) * 10 + static_cast<int>(dt));
  }
  // Past 4 MiB per rank, odd (a library reducing in 4 MiB chunks that
  // dropped the last partial one passed: the largest all_reduce was 4 MiB
  // exactly), blocking in float32, then async in int64.
  {
    CollectiveCase c;
    c.op = CollectiveKind::kAllReduce;
    c.dtype = DType::kFloat32;
    c.count = (std::size_t{1} << 20) + 3;
    c.data_seed = 85001;
    CollectiveCase async = c;
    async.async_op = true;
    async.dtype = DType::kInt64;
    async.count = (std::size_t{1} << 19) + 1;
    async.reduce_op = ReduceOp::kMax;
    async.data_seed = 85002;
    fixed_case("large_messages", "all_reduce_past_4MiB", {c, async}, 3);
  }
  // The other collectives past 4 MiB (per rank, or the whole tensor of a
  // one-tensor form), odd, blocking at a middle root then async at the
  // last: a broadcast losing its last partial 4 MiB chunk on the other
  // ranks, a transport's 4 MiB staging buffer, passed (the largest
  // broadcast was 2 MiB; only all_reduce went past 4 MiB).
  for (const auto& [k, tensor_form] : {std::pair{CollectiveKind::kBroadcast, false},
                                       std::pair{CollectiveKind::kReduce, false},
                                       std::pair{CollectiveKind::kAllGather, true},
                                       std::pair{CollectiveKind::kReduceScatter, true},
                                       std::pair{CollectiveKind::kAllToAll, true}}) {
    const bool blocks = k != CollectiveKind::kBroadcast && k != CollectiveKind::kReduce;
    CollectiveCase c;
    c.op = k;
    c.tensor_form = tensor_form;
    c.dtype = DType::kFloat32;
    c.root = 1;
    c.count = blocks ? 350003 : (std::size_t{1} << 20) + 5;  // 3 blocks of 1.3 MiB: 4.2 MiB in all
    c.data_seed = static_cast<std::uint64_t>(85100 + static_cast<int>(k));
    CollectiveCase async = c;
    async.async_op = true;
    async.root = 2;
    async.dtype = DType::kInt32;
    async.data_seed += 50;
    fixed_case("large_messages", std::string(op_spec(c.op_kind()).name) + "_past_4MiB", {c, async}, 3);
  }
  // Past 8-16 KiB on five members of seven (not a power of two), blocking
  // at one middle root, then async at another: an MPI_Ibcast or
  // MPI_Ireduce_scatter_block wrong there, a bool Ibcast past 64 elements,
  // an int64 all_reduce past 2 Ki elements, passed (no async collective on
  // five or more members moved more than 8 KiB).
  for (const auto& [k, dt] : {std::pair{CollectiveKind::kBroadcast, DType::kBool},
                              std::pair{CollectiveKind::kAllReduce, DType::kInt64},
                              std::pair{CollectiveKind::kReduce, DType::kFloat32},
                              std::pair{CollectiveKind::kReduceScatter, DType::kInt32},
                              std::pair{CollectiveKind::kGather, DType::kFloat64},
                              std::pair{CollectiveKind::kAllGather, DType::kInt32}}) {
    const bool blocks = k == CollectiveKind::kReduceScatter || k == CollectiveKind::kGather ||
                        k == CollectiveKind::kAllGather;
    CollectiveCase c;
    c.op = k;
    c.dtype = dt;
    c.group = {6, 2, 0, 5, 3};
    c.root = 5;
    c.count = blocks ? 4099 : 20003;
    c.data_seed = static_cast<std::uint64_t>(88000 + static_cast<int>(k) * 10 + static_cast<int>(dt));
    fixed_case("large_messages", collective_name(k) + "_" + std::string(dtype_name(dt)) + "_on_five_of_seven",
               then_async(c, 3, 5), 7, "world 7, group {0,2,3,5,6} (named {6,2,0,5,3})");
  }
  // Large 8-bit MIN/MAX (a uint8 MAX that compared bytes as signed from
  // 1,024 elements on was reached by one random case).
  for (const auto& [k, dt, op] : {std::tuple{CollectiveKind::kAllReduce, DType::kUInt8, ReduceOp::kMax},
                                  std::tuple{CollectiveKind::kReduce, DType::kInt8, ReduceOp::kMin},
                                  std::tuple{CollectiveKind::kReduceScatter, DType::kUInt8, ReduceOp::kMin}})
    large_reduction(k, op, dt, 4099, 84000 + static_cast<int>(k) * 10 + static_cast<int>(dt));
  // Two calls of one collective in flight on one group, with different
  // reduce ops or roots (a library that reused the first call's op or root
  // for the second was caught by collective_dtypes alone).
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduce, CollectiveKind::kBroadcast,
                           CollectiveKind::kReduceScatter}) {
    CollectiveCase first;
    first.op = k;
    first.dtype = DType::kInt32;
    first.reduce_op = ReduceOp::kMax;
    first.group = {4, 1, 3};
    first.root = 4;
    first.count = 13;
    first.async_op = true;
    first.data_seed = static_cast<std::uint64_t>(85000 + static_cast<int>(k) * 10);
    CollectiveCase second = first;
    second.reduce_op = ReduceOp::kSum;
    second.root = 1;
    second.data_seed += 1;
    fixed_case("async_forms", "two_" + collective_name(k) + "s_in_flight", {first, second}, 5,
               "world 5, group {4,1,3}");
  }
  // The same for the collectives that move blocks, the first one large so
  // that it is still in flight when the second is issued: roots differ
  // (gather, scatter), split sizes differ (all_to_all_single, as MoE's
  // dispatch and combine have them), or only the data (all_gather) -- a
  // gather sent to the earlier call's root, an all_to_all_single cut by the
  // earlier call's splits, passed: no two of these were ever in flight.
  for (CollectiveKind k : {CollectiveKind::kGather, CollectiveKind::kScatter, CollectiveKind::kAllGather,
                           CollectiveKind::kAllToAll}) {
    CollectiveCase first;
    first.op = k;
    first.dtype = DType::kInt32;
    first.group = {4, 1, 3};
    first.root = 4;
    first.count = k == CollectiveKind::kAllToAll ? (std::size_t{1} << 18) + 1 : (std::size_t{1} << 20) + 1;
    first.tensor_form = k == CollectiveKind::kAllToAll;
    first.uneven = k == CollectiveKind::kAllToAll;
    first.async_op = true;
    first.data_seed = static_cast<std::uint64_t>(85500 + static_cast<int>(k) * 10);
    CollectiveCase second = first;
    second.count = 13;
    second.root = 1;
    second.data_seed += 1;
    fixed_case("async_forms", "two_" + std::string(op_spec(first.op_kind()).name) + "s_in_flight_large_first",
               {first, second}, 5, "world 5, group {4,1,3}");
  }
  // Every collective on a group of one in a larger world: the outputs that
  // need a copy still get it (a library that returned at once there was
  // caught by random cases only).
  for (CollectiveKind k : kinds) {
    CollectiveCase c;
    c.op = k;
    c.group = {2};
    c.root = 2;
    c.count = 7;
    c.dtype = DType::kFloat32;
    c.tensor_form = k == CollectiveKind::kAllToAll;
    c.data_seed = static_cast<std::uint64_t>(86000 + static_cast<int>(k));
    fixed_case("edge_cases", collective_name(k) + "_on_a_group_of_one", {c}, 4, "world 4, group {2}");
  }
  // One group's op waited for while another group's later op has finished
  // (a wait() that returned once any later op of the rank had completed
  // passed: every case waited in an order its ops completed in).
  {
    CollectiveCase slow;
    slow.op = CollectiveKind::kAllReduce;
    slow.group = {0, 1};
    slow.count = 9;
    slow.dtype = DType::kInt64;
    slow.async_op = true;
    slow.late_rank = 1;
    slow.late_ns = 500'000'000;
    slow.data_seed = 87000;
    CollectiveCase quick = slow;
    quick.group = {0, 2};
    quick.late_rank = -1;
    quick.late_ns = 0;
    quick.data_seed = 87001;
    // A blocking barrier on {0,2} after them: by the time rank 0 waits for
    // the slow op, the quick one has surely completed.
    CollectiveCase after;
    after.op = CollectiveKind::kBarrier;
    after.group = {0, 2};
    fixed_case("groups", "wait_for_a_slow_group", {slow, quick, after}, 3, "world 3, groups {0,1} then {0,2}");
  }
  // Empty tensors in a group that is not 0..k-1, blocking and async, one
  // case per collective (edge/count_zero.yaml has them on the world only:
  // a gather of nothing that never completed on a subgroup passed).
  for (CollectiveKind k : kinds) {
    if (k == CollectiveKind::kBarrier) continue;
    std::vector<CollectiveCase> calls;
    for (bool async : {false, true}) {
      CollectiveCase c;
      c.op = k;
      c.count = 0;
      c.group = {2, 0};
      c.root = 2;
      c.async_op = async;
      c.tensor_form = k == CollectiveKind::kAllToAll;
      c.data_seed = static_cast<std::uint64_t>(81000 + static_cast<int>(k) * 2 + async);
      calls.push_back(c);
    }
    fixed_case("edge_cases", "empty_" + collective_name(k) + "_in_subgroup", std::move(calls), 3,
               "world 3, group {2,0}");
  }
  // Half precision whose sums and products need rounding: two contributors
  // (one rounding, checked exactly: round to nearest even, as torch does),
  // then four and a group of three (checked within the rounding any order
  // allows), through each all_reduce algorithm and reduce_scatter.
  {
    int i = 0;
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
        for (int world : {2, 4}) {
          CollectiveCase c;
          c.op = op == ReduceOp::kSum && world == 4 ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
          c.dtype = dt;
          c.reduce_op = op;
          c.count = 1000;
          c.rounding = true;
          c.data_seed = static_cast<std::uint64_t>(9000 + ++i);
          if (world == 4 && op == ReduceOp::kMax) c.group = {0, 2, 3};
          fixed_case("half_precision",
                     std::string(dtype_name(dt)) + "_" + std::string(reduce_op_name(op)) + "_world" + std::to_string(world),
                     {c}, world);
        }
      }
      // Four contributors in a forced butterfly order (a power-of-two
      // group): collie's core must give that order's bits exactly; a library
      // (which picks its own order) is held to the rounding orders allow.
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct}) {
        for (Algorithm alg : {Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
          CollectiveCase c;
          c.op = CollectiveKind::kAllReduce;
          c.dtype = dt;
          c.reduce_op = op;
          c.algorithm = alg;
          c.count = 1000;
          c.rounding = true;
          c.data_seed = static_cast<std::uint64_t>(9000 + ++i);
          const bool in_group = alg == Algorithm::kHalvingDoubling;  // group ranks 0..3 of {0,2,3,5}
          const int world = in_group ? 6 : 4;
          if (in_group) c.group = {0, 2, 3, 5};
          fixed_case("half_precision",
                     std::string(dtype_name(dt)) + "_" + std::string(reduce_op_name(op)) + "_" +
                         std::string(algorithm_name(alg)) + (in_group ? "_group4" : "_world4"),
                     {c}, world);
        }
      }
    }
  }

  // float32 and float64 sums whose inputs use every bit of the dtype's
  // mantissa through all_reduce, reduce and reduce_scatter: every other
  // float32/float64 case sums small integers, which a library summing
  // float64 in float32 gets right. Two contributors (one rounding: checked
  // exactly), then five (judged by the rounding their orders allow: a
  // float64 SUM carried out in float32 from three contributors on passed
  // the two-contributor cases).
  struct SumShape {
    int world, root, seed;
    const char* suffix;
  };
  for (const SumShape& shape : {SumShape{2, 1, 9500, ""}, SumShape{5, 3, 9700, "_on_five"}}) {
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduce, CollectiveKind::kReduceScatter}) {
        CollectiveCase c;
        c.op = k;
        c.dtype = dt;
        c.reduce_op = ReduceOp::kSum;
        c.count = 257;
        c.root = shape.root;
        c.rounding = true;
        c.data_seed = static_cast<std::uint64_t>(shape.seed + static_cast<int>(dt) * 10 + static_cast<int>(k));
        fixed_case("rounding", collective_name(k) + "_" + std::string(dtype_name(dt)) + "_SUM" + shape.suffix, {c},
                   shape.world);
      }
    }
  }
  // float16 SUMs of two through every reduction, the tensor form of
  // reduce_scatter too (a float16 SUM rounded through bfloat16 there alone
  // passed: full-mantissa sums were float32 and float64); float64 PRODUCTs
  // of five (a float64 PRODUCT carried out in float32 from three factors
  // on passed: products of more than two multiplied small integers).
  for (int form = 0; form < 4; ++form) {
    CollectiveCase c;
    c.op = form == 0 ? CollectiveKind::kAllReduce : form == 1 ? CollectiveKind::kReduce : CollectiveKind::kReduceScatter;
    c.tensor_form = form == 3;
    c.dtype = DType::kFloat16;
    c.reduce_op = ReduceOp::kSum;
    c.count = 257;
    c.root = 1;
    c.rounding = true;
    c.data_seed = static_cast<std::uint64_t>(9800 + form);
    fixed_case("rounding", (form == 3 ? std::string("reduce_scatter_tensor") : collective_name(c.op)) + "_float16_SUM",
               {c}, 2);
  }
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduce}) {
    CollectiveCase c;
    c.op = k;
    c.dtype = DType::kFloat64;
    c.reduce_op = ReduceOp::kProduct;
    c.count = 257;
    c.root = 3;
    c.rounding = true;
    c.data_seed = static_cast<std::uint64_t>(9850 + static_cast<int>(k));
    fixed_case("rounding", collective_name(k) + "_float64_PRODUCT_on_five", {c}, 5);
  }
  // MIN and MAX of the same full-mantissa values on three ranks, exact
  // whatever the order (a float64 MIN/MAX that went through float32 for
  // values in float32's range never met a value it changed: MIN/MAX inputs
  // were small integers).
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduce, CollectiveKind::kReduceScatter}) {
        CollectiveCase c;
        c.op = k;
        c.dtype = dt;
        c.reduce_op = op;
        c.count = 257;
        c.root = 2;
        c.rounding = true;
        c.data_seed =
            static_cast<std::uint64_t>(9600 + static_cast<int>(dt) * 100 + static_cast<int>(op) * 10 + static_cast<int>(k));
        fixed_case("rounding",
                   collective_name(k) + "_" + std::string(dtype_name(dt)) + "_" + std::string(reduce_op_name(op)), {c}, 3);
      }
    }
  }

  // The decided cases (decided_cases.h): classes of input covered by
  // construction, each replayed by its name alone.
  for (DecidedCase& d : decided_cases()) {
    Pending p;
    p.feature = d.feature;
    p.name = d.name;
    p.kind = "property";
    p.world = d.world;
    p.replay = "collie conformance --backend " + o.backend + conf_flags + " --filter '^" + p.feature + "/" + p.name + "$'";
    const Nanos timeout_ns = d.may_hang && o.hang_window_ns > 0 ? std::min(o.timeout_ns, o.hang_window_ns) : 0;
    // A case that expects every op to succeed has failed once one did not:
    // its other ranks need not wait out the op timeout (Gloo's ranks sending
    // to one whose any-source receive of an empty message raised waited 20 s).
    const Nanos stall_after_failure_ns = d.may_hang ? 0 : o.hang_window_ns;
    p.breaks = processes && (d.may_hang || d.ends_job);
    p.run = [d = std::move(d), strict, library, on_job, timeout_ns, stall_after_failure_ns, &backend] {
      Ran ran;
      if (d.needs_timeouts && !backend.no_timeouts.empty()) {
        ran.skipped = backend.no_timeouts;
        return ran;
      }
      CaseOutcome c = run_decided(d, on_job(d.world, 1, d.views, timeout_ns, stall_after_failure_ns), strict, library);
      ran.failure = std::move(c.failure);
      ran.notes = std::move(c.notes);
      ran.skipped = std::move(c.skipped);
      return ran;
    };
    pending.push_back(std::move(p));
  }

  // Long runs: many ops in one world, thousands of frames, counters past
  // 2^8 (channel sequence numbers, rendezvous ids, a group's collective
  // sequence numbers). Every other case stays under 1,000 frames in its
  // world: a transport wrong on its 1,000th frame fails only here.
  auto long_run = [&](const std::string& name, int world, std::function<CaseOutcome(const RunOnEveryRank&)> body,
                      std::string what) {
    Pending p;
    p.feature = "long_runs";
    p.name = name;
    p.kind = "property";
    p.world = world;
    p.replay = "collie conformance --backend " + o.backend + conf_flags + " --filter '^long_runs/" + name + "$'";
    p.run = [world, body = std::move(body), what = std::move(what), on_job, property] {
      return property(body(on_job(world, 1)), what);
    };
    pending.push_back(std::move(p));
  };
  {
    constexpr int kLongRunSalt = 13;
    // A long run is one case: a call the implementation refuses would skip
    // all of it (and a library's state after a refused call is its own), so
    // its calls are drawn from what every library collie checks provides --
    // float32, float64, int32 and int64; SUM, MIN and MAX; list all_gather,
    // all_to_all_single, no reduce_scatter (Gloo has none); 1-13 elements --
    // and the dtypes, forms, ops and empty tensors past these are the other
    // features' business.
    const std::vector<CollectiveKind> portable_kinds = {
        CollectiveKind::kBroadcast, CollectiveKind::kReduce,    CollectiveKind::kAllReduce, CollectiveKind::kScatter,
        CollectiveKind::kGather,    CollectiveKind::kAllGather, CollectiveKind::kAllToAll,  CollectiveKind::kBarrier};
    auto portable_case = [&portable_kinds](int world, sim::Prng& prng) {
      CollectiveCase c = random_case(portable_kinds[prng.below(portable_kinds.size())], world, prng);
      static constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
      static constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax};
      c.dtype = kDTypes[prng.below(std::size(kDTypes))];
      c.reduce_op = kOps[prng.below(std::size(kOps))];
      c.tensor_form = c.op == CollectiveKind::kAllToAll;
      c.count = std::clamp<std::size_t>(c.count, 1, 13);  // empty tensors: edge_cases (Gloo 1.13 crashes on them)
      return c;
    };
    sim::Prng prng = case_prng(kLongRunSalt, 0);
    std::vector<CollectiveCase> cases;
    // 1,100 on one group: its sequence numbers pass 2^8, 2^9 and 2^10 (an
    // MPI wrong from a communicator's 512th collective on passed 400).
    for (int i = 0; i < 1100; ++i) {
      CollectiveCase c = portable_case(3, prng);
      c.group.clear();
      cases.push_back(c);
    }
    long_run("collectives_1100_in_one_world", 3,
             [cases, strict, library](const RunOnEveryRank& run) { return run_and_check(run, 3, cases, strict, "", library); },
             "1,100 collectives of every kind on one world of 3");
    // 2,100 all_reduces on one world of 2, past 2^11 (an MPI_Allreduce
    // wrong from a communicator's 2,048th collective on passed the 1,100).
    {
      std::vector<CollectiveCase> all_reduces;
      for (int i = 0; i < 2100; ++i) {
        CollectiveCase c;
        c.op = CollectiveKind::kAllReduce;
        c.dtype = DType::kInt32;
        c.count = 2;
        c.data_seed = static_cast<std::uint64_t>(i) + 1;
        all_reduces.push_back(c);
      }
      long_run("all_reduces_2100_in_one_world", 2,
               [all_reduces, strict, library](const RunOnEveryRank& run) {
                 return run_and_check(run, 2, all_reduces, strict, "", library);
               },
               "2,100 all_reduces of int32 x 2 on one world of 2");
    }
    // The same on a subgroup that is not 0..k-1 and is named out of order,
    // beside ranks that idle: a group's own counters (its collective
    // sequence numbers, a library's per-communicator tags) pass 2^8 there.
    {
      sim::Prng sub = case_prng(kLongRunSalt, 1);
      const std::vector<int> group = {3, 0, 4};
      std::vector<CollectiveCase> on_group;
      for (int i = 0; i < 300; ++i) {
        CollectiveCase c = portable_case(5, sub);
        c.group = group;
        c.root = group[sub.below(group.size())];
        on_group.push_back(c);
      }
      long_run("collectives_300_on_a_subgroup", 5,
               [on_group, strict, library](const RunOnEveryRank& run) {
                 return run_and_check(run, 5, on_group, strict, "", library);
               },
               "300 collectives of every kind on {0,3,4} (named {3,0,4}) in a world of 5");
    }
    // 300 broadcasts on one subgroup, rooted at its last member: a count
    // kept per kind of collective passes 2^8 there (the mixed runs give no
    // kind more than ~140 on one group: a broadcast wrong from a group's
    // 257th on never fired).
    {
      sim::Prng sub = case_prng(kLongRunSalt, 2);
      const std::vector<int> group = {3, 0, 4};
      std::vector<CollectiveCase> broadcasts;
      for (int i = 0; i < 300; ++i) {
        CollectiveCase c = random_case(CollectiveKind::kBroadcast, 5, sub);
        c.group = group;
        c.root = 4;
        c.dtype = DType::kInt32;
        c.count = std::clamp<std::size_t>(c.count, 1, 13);
        broadcasts.push_back(c);
      }
      long_run("broadcasts_300_on_a_subgroup", 5,
               [broadcasts, strict, library](const RunOnEveryRank& run) {
                 return run_and_check(run, 5, broadcasts, strict, "", library);
               },
               "300 broadcasts from rank 4 on {0,3,4} (named {3,0,4}) in a world of 5");
    }
    // Past 2^10 on each channel by default, and past 2^16 where collie's
    // core runs in this process over the transport under test (134,000
    // frames, about a second: a transport wrong from a channel's 65,537th
    // frame passed every other case); through a library's processes every
    // message is an op of its own, so there only deeper runs (--cases above
    // 20) go that far.
    for (const int messages : {1500, 66000}) {
      if (messages > 1500 && (processes || library) && o.cases_per_feature <= kShallowCases) continue;
      long_run("stream_" + std::to_string(messages) + "_messages", 2,
               [messages](const RunOnEveryRank& run) { return run_long_stream(run, 2, messages, 64, ""); },
               std::to_string(messages) + " messages each way on one world of 2, 64 in flight");
    }
    // Past 2^12 messages on one peer's channel through libraries too, in
    // batches of 64 (one op of a rank's process each): a torch backend
    // whose receives took the payload of the message 2,048 earlier from
    // the 2,049th on passed (the 1,500 above was the longest through a
    // library).
    long_run("stream_4100_messages_in_batches", 2,
             [](const RunOnEveryRank& run) { return run_long_stream(run, 2, 4100, 64, "", true); },
             "4,100 messages each way on one world of 2, in batch_isend_irecv calls of 64 each way");
    // 5,000 messages in flight each way at once (the streams keep 64, the
    // 1,100 collectives about 1,000): a transport staging frames in a ring
    // of 1,024 slots, overwriting one still in flight, passed everything
    // else; with 4,096 of them, one whose completion queue holds 4,096
    // (a rank never had more than 4,054 sends pending). In-process only by
    // default, as the 66,000 above, and where the clock is virtual (the
    // simulator, plugin transports): collie's TCP transport has no
    // completion queue (4,096 in flight passed it), and its suite keeps to
    // 10 s.
    if (!(processes || library || backend.wall_clock) || o.cases_per_feature > kShallowCases)
      long_run("stream_5000_messages_all_in_flight", 2,
               [](const RunOnEveryRank& run) { return run_long_stream(run, 2, 5000, 5000, ""); },
               "5,000 messages each way on one world of 2, all in flight at once");
  }

  std::regex re;
  if (!o.filter.empty()) {
    try {
      re = std::regex(o.filter);
    } catch (const std::regex_error& e) {
      throw Error(ErrorKind::kUsage, OpContext{}, "--filter '" + o.filter + "' is not a valid regular expression: " + e.what());
    }
  }
  auto selected = [&](const Pending& p) { return o.filter.empty() || std::regex_search(p.feature + "/" + p.name, re); };
  std::erase_if(pending, [&](const Pending& p) { return !selected(p); });
  const auto suite_start = std::chrono::steady_clock::now();
  std::mutex lanes_mu;  // what cases running side by side share
  auto execute = [&](Pending& p, CaseResult& c) {
    const auto t0 = std::chrono::steady_clock::now();
    auto attempt = [&p]() -> Ran {
      Ran ran;
      try {
        ran = p.run();
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kUsage) throw;  // the backend cannot run at all
        ran.failure = std::string("the case threw: ") + e.what();
      } catch (const std::exception& e) {
        ran.failure = std::string("the case threw: ") + e.what();
      }
      return ran;
    };
    Ran ran;
    if (processes || o.case_timeout_seconds <= 0) {
      ran = attempt();
    } else {
      // The watchdog: the case runs on a thread of its own (the core stays
      // single-threaded: this thread only waits), and one that outlives the
      // limit is abandoned with the suite.
      std::packaged_task<Ran()> task(attempt);
      std::future<Ran> done = task.get_future();
      std::thread runner(std::move(task));
      if (done.wait_for(std::chrono::duration<double>(o.case_timeout_seconds)) == std::future_status::ready) {
        runner.join();
        ran = done.get();
      } else {
        runner.detach();
        res.abandoned = true;
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", o.case_timeout_seconds);
        ran.failure = std::string("the case ran past the watchdog (") + limit +
                      " s of wall time): the transport's run_until never returned (core/executor.h: it returns "
                      "when done or at its deadline, and throws Error(kDeadlock) when nothing can progress); the "
                      "suite stopped here";
        if (const std::string where = jobs.in_flight_report(); !where.empty()) ran.failure += "\n" + where;
      }
    }
    {
      std::lock_guard<std::mutex> lock(lanes_mu);
      if (res.implementation.empty()) res.implementation = ran.implementation;
    }
    c.feature = p.feature;
    c.name = p.name;
    c.kind = p.kind;
    c.skipped = !ran.skipped.empty() && ran.failure.empty();
    c.skip_reason = ran.skipped;
    c.passed = ran.failure.empty() && !c.skipped;
    c.message = res.abandoned ? ran.failure : first_lines(ran.failure, 12);  // every rank's line of an abandoned case
    c.notes = std::move(ran.notes);
    c.replay = p.replay;
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // A process job runs every case of its world and, where its workers allow,
  // of smaller ones: run the cases from the largest world down (stable
  // within a world), report them in the suite's order.
  std::vector<std::size_t> order(pending.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (processes)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return pending[a].world > pending[b].world; });
  res.cases.resize(pending.size());
  int index = 0;
  std::vector<LaneCase> lane_cases;
  for (std::size_t at : order) lane_cases.push_back({at, pending[at].breaks});
  run_in_lanes(
      lane_cases, processes ? (o.lanes > 0 ? o.lanes : kDefaultLanes) : 1,
      [&](std::size_t at) {
        Pending& p = pending[at];
        {
          std::lock_guard<std::mutex> lock(lanes_mu);
          if (o.progress) o.progress(index, static_cast<int>(pending.size()), p.feature + "/" + p.name);
          ++index;
        }
        execute(p, res.cases[at]);
        return !res.abandoned;
      },
      [&jobs] { jobs.end_thread(); });
  if (res.abandoned) {
    std::erase_if(res.cases, [](const CaseResult& c) { return c.feature.empty(); });  // never ran
    res.frames = frames;
    return res;
  }
  // --budget: deeper generated cases, round after round, until the time
  // given is spent (a round is one case per collective, p2p and batch).
  for (int i = o.cases_per_feature; o.budget_seconds > 0; ++i) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - suite_start).count();
    if (spent >= o.budget_seconds) break;
    std::vector<Pending> round;
    for (CollectiveKind k : kinds) round.push_back(collective_case(k, i));
    round.push_back(p2p_case(i));
    round.push_back(batch_case(i));
    for (Pending& p : round) {
      if (!selected(p)) continue;
      if (o.progress) o.progress(index, index + 1, p.feature + "/" + p.name);
      ++index;
      res.cases.emplace_back();
      execute(p, res.cases.back());
      if (res.abandoned) break;
    }
    if (res.abandoned || i > 100000) break;  // (i: the filter matches no generated case)
  }
  res.frames = frames;
  return res;
}

std::string format_matrix(const SuiteResult& r) {
  struct Row {
    int s_pass = 0, s_total = 0, p_pass = 0, p_total = 0, skipped = 0, notes = 0;
  };
  std::map<std::string, Row> rows;
  for (const auto& c : r.cases) {
    Row& row = rows[c.feature];
    int& total = c.kind == "scenario" ? row.s_total : row.p_total;
    int& pass = c.kind == "scenario" ? row.s_pass : row.p_pass;
    if (c.skipped) {
      ++row.skipped;
    } else {
      ++total;
      pass += c.passed ? 1 : 0;
    }
    row.notes += c.notes.empty() ? 0 : 1;
  }
  std::ostringstream os;
  os << "conformance of backend '" << r.backend << "'";
  if (!r.implementation.empty()) os << " (" << r.implementation << ")";
  os << "\n";
  int name_width = 16;  // the column fits the longest feature name
  for (const auto& [feature, row] : rows) name_width = std::max(name_width, static_cast<int>(feature.size()));
  char line[300];
  std::snprintf(line, sizeof line, "  %-*s %-11s %-11s %-8s %-6s %s\n", name_width, "feature", "scenarios", "properties", "skipped",
                "notes", "result");
  os << line;
  for (const auto& [feature, row] : rows) {
    auto frac = [](int a, int b) { return b ? std::to_string(a) + "/" + std::to_string(b) : std::string("-"); };
    const bool ok = row.s_pass == row.s_total && row.p_pass == row.p_total;
    const char* verdict = !ok ? "FAIL" : row.s_total + row.p_total == 0 ? "SKIP" : "PASS";
    std::snprintf(line, sizeof line, "  %-*s %-11s %-11s %-8s %-6s %s\n", name_width, feature.c_str(),
                  frac(row.s_pass, row.s_total).c_str(), frac(row.p_pass, row.p_total).c_str(),
                  row.skipped ? std::to_string(row.skipped).c_str() : "-", row.notes ? std::to_string(row.notes).c_str() : "-",
                  verdict);
    os << line;
  }
  int generated = 0;
  for (const auto& c : r.cases) generated += c.kind == "property" ? 1 : 0;
  os << "  " << r.cases.size() << " cases (" << generated << " generated), "
     << (r.frames ? std::to_string(r.frames) + " frames delivered"
                  : std::string("frames not counted (the ops ran in the implementation's own processes)"))
     << "\n";
  const int failed = r.failed();
  if (failed) {
    os << "\nfailures (" << failed << "):\n";
    int shown = 0;
    for (const auto& c : r.cases) {
      if (c.passed || c.skipped) continue;
      if (++shown > 10) {
        os << "  ... and " << failed - 10 << " more (see the JUnit report)\n";
        break;
      }
      os << "  " << c.feature << "/" << c.name << ":\n";
      std::istringstream lines(c.message);
      std::string l;
      int n = 0;
      while (std::getline(lines, l) && n++ < 8) os << "      " << l << "\n";
      os << "    replay: " << c.replay << "\n";
    }
  }
  // Skips and notes, each distinct reason once with how many cases it covers.
  auto grouped = [&](const char* title, auto texts_of) {
    std::map<std::string, std::vector<std::string>> by_text;
    for (const auto& c : r.cases)
      for (const std::string& t : texts_of(c)) by_text[t].push_back(c.feature + "/" + c.name);
    if (by_text.empty()) return;
    os << "\n" << title << " (" << by_text.size() << " distinct):\n";
    int shown = 0;
    for (const auto& [text, cases] : by_text) {
      if (++shown > 12) {
        os << "  ... and " << by_text.size() - 12 << " more (see the JUnit report)\n";
        break;
      }
      os << "  " << first_lines(text, 3) << "\n    in " << cases.front();
      if (cases.size() > 1) os << " and " << cases.size() - 1 << " more";
      os << "\n";
    }
  };
  grouped("skipped: the implementation does not provide", [](const CaseResult& c) {
    return c.skipped ? std::vector<std::string>{c.skip_reason} : std::vector<std::string>{};
  });
  grouped("notes: differences where torch leaves the behaviour unspecified (--strict makes them failures)",
          [](const CaseResult& c) { return c.notes; });
  int notes = 0;
  for (const auto& c : r.cases) notes += c.notes.empty() ? 0 : 1;
  std::snprintf(line, sizeof line, "\n%d passed, %d failed, %d skipped, %d with notes\n",
                static_cast<int>(r.cases.size()) - failed - r.skipped(), failed, r.skipped(), notes);
  os << line;
  return os.str();
}

namespace {
std::string xml_escape(const std::string& text) {
  const std::string s = valid_utf8(text);  // XML is UTF-8 here, whatever the bytes were
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') o += "?";
        else o += static_cast<char>(c);
    }
  }
  return o;
}
}  // namespace

// Seconds as JUnit readers expect them: a plain decimal ("0.000012" was
// "1.2e-05").
std::string junit_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

std::string junit_xml(const std::string& suite_name, const std::vector<CaseResult>& cases) {
  std::map<std::string, std::vector<const CaseResult*>> by_feature;
  for (const auto& c : cases) by_feature[c.feature].push_back(&c);
  int failures = 0, skipped = 0;
  double total = 0;
  for (const auto& c : cases) {
    failures += c.passed || c.skipped ? 0 : 1;
    skipped += c.skipped ? 1 : 0;
    total += c.seconds;
  }
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << "<testsuites name=\"" << xml_escape(suite_name) << "\" tests=\"" << cases.size() << "\" failures=\""
     << failures << "\" skipped=\"" << skipped << "\" time=\"" << junit_seconds(total) << "\">\n";
  for (const auto& [feature, cs] : by_feature) {
    int f = 0, sk = 0;
    double t = 0;
    for (const auto* c : cs) {
      f += c->passed || c->skipped ? 0 : 1;
      sk += c->skipped ? 1 : 0;
      t += c->seconds;
    }
    os << "  <testsuite name=\"" << xml_escape(feature) << "\" tests=\"" << cs.size() << "\" failures=\"" << f
       << "\" errors=\"0\" skipped=\"" << sk << "\" time=\"" << junit_seconds(t) << "\">\n";
    for (const auto* c : cs) {
      os << "    <testcase classname=\"" << xml_escape(suite_name + "." + feature) << "\" name=\""
         << xml_escape(c->name) << "\" time=\"" << junit_seconds(c->seconds) << "\"";
      if (c->skipped) {
        os << ">\n      <skipped message=\"" << xml_escape(c->skip_reason) << "\"/>\n    </testcase>\n";
      } else if (c->passed) {
        if (c->notes.empty()) {
          os << "/>\n";
        } else {
          os << ">\n      <system-out>";
          for (const auto& n : c->notes) os << xml_escape("note: " + n) << "\n";
          os << "</system-out>\n    </testcase>\n";
        }
      } else {
        const std::string first = c->message.substr(0, c->message.find('\n'));
        // The replay line once: a deadlock report already ends with it.
        const bool has_replay = c->message.find("replay: " + c->replay) != std::string::npos;
        os << ">\n      <failure message=\"" << xml_escape(first) << "\">" << xml_escape(c->message)
           << (has_replay ? std::string() : "\nreplay: " + xml_escape(c->replay)) << "</failure>\n    </testcase>\n";
      }
    }
    os << "  </testsuite>\n";
  }
  os << "</testsuites>\n";
  return os.str();
}

}  // namespace collie::conformance
