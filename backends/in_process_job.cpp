#include "backends/in_process_job.h"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/error.h"

namespace collie {

namespace {

// What an in-process job watches its ops for: crash faults (JobOptions::
// process_faults, kCrash only: the backend crashes the rank as its op
// #before_op starts) and, with JobOptions::track_in_flight, a record of
// each rank's ops in flight that another thread may read. Every event also
// goes to the backend's own observer.
class JobObserver final : public OpObserver {
 public:
  JobObserver(InProcessBackend& backend, OpObserver* inner, std::vector<ProcessFault> faults, int world, bool track)
      : backend_(backend), inner_(inner), faults_(std::move(faults)), track_(track),
        in_flight_(track ? static_cast<std::size_t>(world) : 0) {}

  void op_begin(int rank, std::uint64_t id, const OpInfo& info, Nanos now) override {
    if (inner_) inner_->op_begin(rank, id, info, now);
    if (track_) {
      std::string what = info.op;
      if (info.seq >= 0) what += " #" + std::to_string(info.seq);
      what += " on " + info.group;
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_[static_cast<std::size_t>(rank)][id] = InFlight{std::move(what), {}, now};
    }
    for (const ProcessFault& f : faults_) {
      if (f.rank != rank || f.before_op != id || backend_.crashed(rank)) continue;
      InjectedFault r;
      r.kind = InjectedFault::Kind::kCrash;
      r.time = now;
      r.src = rank;
      r.text = "t=" + std::to_string(now) + " ns: rank " + std::to_string(rank) + " crashed before its op #" +
               std::to_string(id) + " (" + info.op + ") by fault " + f.text;
      injected_.push_back(r);
      backend_.crash(rank, "crashed by fault " + f.text);
    }
  }
  void op_end(int rank, std::uint64_t id, const std::string& error, Nanos now) override {
    if (inner_) inner_->op_end(rank, id, error, now);
    if (track_) {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_[static_cast<std::size_t>(rank)].erase(id);
    }
  }
  void step_begin(int rank, std::uint64_t id, const std::string& step, Nanos now) override {
    if (inner_) inner_->step_begin(rank, id, step, now);
    if (track_) {
      std::lock_guard<std::mutex> lock(mu_);
      auto& ops = in_flight_[static_cast<std::size_t>(rank)];
      if (auto it = ops.find(id); it != ops.end()) it->second.step = step;
    }
  }
  bool wants_op_end() const override { return track_ || (inner_ && inner_->wants_op_end()); }
  bool wants_steps() const override { return track_ || (inner_ && inner_->wants_steps()); }
  const std::vector<InjectedFault>& injected() const { return injected_; }

  std::string report() const {
    if (!track_) return {};
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = "each rank's ops in flight (step, start time on the transport's clock):\n";
    for (std::size_t r = 0; r < in_flight_.size(); ++r) {
      out += "  rank " + std::to_string(r) + ": ";
      if (in_flight_[r].empty()) out += "no op in flight (finished, or between ops)";
      const char* sep = "";
      for (const auto& [id, op] : in_flight_[r]) {
        out += sep + op.what + (op.step.empty() ? "" : ", step '" + op.step + "'") + ", since t=" +
               std::to_string(op.started) + " ns";
        sep = "; ";
      }
      out += "\n";
    }
    return out;
  }

 private:
  struct InFlight {
    std::string what;  // "all_reduce #2 on world"
    std::string step;  // its algorithm step, if any yet
    Nanos started = 0;
  };
  InProcessBackend& backend_;
  OpObserver* inner_;
  std::vector<ProcessFault> faults_;
  std::vector<InjectedFault> injected_;
  const bool track_;
  mutable std::mutex mu_;  // in_flight_ is read by another thread (the watchdog)
  std::vector<std::map<std::uint64_t, InFlight>> in_flight_;
};

class InProcessJob final : public Job {
 public:
  InProcessJob(std::unique_ptr<InProcessBackend> backend, const JobOptions& o, std::string name)
      : backend_(std::move(backend)), name_(std::move(name)) {
    for (const ProcessFault& f : o.process_faults) {
      if (f.kind != ProcessFault::Kind::kCrash)
        throw Error(ErrorKind::kUnsupported, OpContext{},
                    "fault " + f.text + ": backend '" + name_ +
                        "' runs every rank in this process, so it cannot stop one (stall faults need a process backend)");
      if (!backend_->can_crash())
        throw Error(ErrorKind::kUnsupported, OpContext{},
                    "fault " + f.text + ": backend '" + name_ +
                        "' cannot crash a rank (InProcessBackend::can_crash() is false; docs/backends.md)");
    }
    std::vector<Transport*> ts;
    for (int r = 0; r < o.world_size; ++r) ts.push_back(&backend_->transport(r));
    CommunicatorOptions co;
    co.eager_threshold_bytes = o.eager_threshold_bytes;
    co.scribble_completed_sends = o.scribble_completed_sends;
    co.first_send_id = o.first_send_id;
    co.observer = backend_->observer();
    if (!o.process_faults.empty() || o.track_in_flight) {
      watch_ = std::make_unique<JobObserver>(*backend_, co.observer, o.process_faults, o.world_size, o.track_in_flight);
      co.observer = watch_.get();
    }
    co.default_timeout_ns = o.timeout_ns;
    world_ = std::make_unique<LocalWorld>(std::move(ts), co);
    for (int r = 0; r < o.world_size; ++r) host_dists_.push_back(backend_->host_tensor_dist(world_->comm(r)));
  }
  ~InProcessJob() override {
    host_dists_.clear();  // wrappers before the communicators they wrap
    world_.reset();       // communicators before the transports they use
    backend_.reset();
  }

  int world_size() const override { return world_->world_size(); }
  std::string implementation() const override { return "collie core over " + name_; }

  RunResult run(const DistProgram& program, const RunContext& context) override {
    RunContext ctx = context;
    ctx.faults = [this] { return injected_faults(); };
    InProcessBackend* b = backend_.get();
    ctx.crashed = [b](int r) { return b->crashed(r); };
    // backends/backend.h: crashed(R) is true only after crash(R), so every
    // rank of a new job is alive (a backend whose dead ranks outlive their
    // world passes them on to the next).
    std::string dead_at_start;
    for (int r = 0; r < world_->world_size() && dead_at_start.empty(); ++r)
      if (b->crashed(r))
        dead_at_start = "transport: the backend says rank " + std::to_string(r) +
                        " crashed before this run began, and nothing crashed it; backends/backend.h: crashed(rank) "
                        "is true only after crash(rank) (a new world's ranks are all alive)";
    RunResult res = world_->run(
        [&](Communicator& c) -> Task<void> {
          Dist* wrapped = host_dists_[static_cast<std::size_t>(c.rank())].get();
          return program(wrapped ? *wrapped : static_cast<Dist&>(c));
        },
        ctx);
    if (watch_ && res.deadlocked && res.transport_fault.empty()) {
      // backends/backend.h: after crash(R), every other rank's transport
      // reports R lost. A deadlock with a rank never told is the transport's.
      for (const InjectedFault& f : watch_->injected()) {
        for (int r = 0; r < world_->world_size() && res.transport_fault.empty(); ++r) {
          if (r == f.src || b->crashed(r) || world_->comm(r).engine().told_lost(f.src)) continue;
          res.transport_fault = "transport: rank " + std::to_string(f.src) + " crashed (" + f.text + "), and rank " +
                                std::to_string(r) + "'s transport never reported it lost; backends/backend.h: after "
                                "crash(" + std::to_string(f.src) + ") every other rank's transport calls "
                                "FrameSink::on_peer_lost(" + std::to_string(f.src) + ", why, clean=false)";
        }
      }
    }
    if (res.transport_fault.empty()) res.transport_fault = dead_at_start;
    if (res.transport_fault.empty()) res.transport_fault = crashes_misreported();
    return res;
  }

  std::uint64_t trace_hash() const override { return backend_->trace_hash(); }
  std::uint64_t events() const override { return backend_->events(); }
  std::vector<InjectedFault> injected_faults() const override {
    std::vector<InjectedFault> all = backend_->injected_faults();
    if (watch_) all.insert(all.end(), watch_->injected().begin(), watch_->injected().end());
    return all;
  }
  std::string in_flight_report() const override { return watch_ ? watch_->report() : std::string(); }
  bool write_trace(std::ostream& out, Nanos end) const override { return backend_->write_trace(out, end); }

 private:
  // After a run: a rank the backend says crashed that no fault crashed,
  // or a crash a survivor's transport reported as a goodbye (clean=true);
  // empty if neither.
  std::string crashes_misreported() const {
    std::set<int> by_fault;
    for (const InjectedFault& f : injected_faults()) {
      if (f.kind != InjectedFault::Kind::kCrash) continue;
      by_fault.insert(f.src);
      for (int r = 0; r < world_->world_size(); ++r)
        if (r != f.src && !backend_->crashed(r) && world_->comm(r).engine().told_lost_cleanly(f.src))
          return "transport: rank " + std::to_string(f.src) + " crashed (" + f.text + "), and rank " +
                 std::to_string(r) + "'s transport reported it gone cleanly, as a rank that said goodbye; "
                 "backends/backend.h: after crash(" + std::to_string(f.src) + ") every other rank's transport calls "
                 "FrameSink::on_peer_lost(" + std::to_string(f.src) + ", why, clean=false)";
    }
    for (int r = 0; r < world_->world_size(); ++r)
      if (backend_->crashed(r) && !by_fault.count(r))
        return "transport: the backend says rank " + std::to_string(r) +
               " crashed, but no fault of this run crashed it; backends/backend.h: crashed(rank) is true only after "
               "crash(rank)";
    return {};
  }

  std::unique_ptr<InProcessBackend> backend_;
  std::unique_ptr<JobObserver> watch_;
  std::unique_ptr<LocalWorld> world_;
  std::vector<std::unique_ptr<Dist>> host_dists_;  // by rank; null where ranks take host tensors
  std::string name_;
};

}  // namespace

std::unique_ptr<Job> in_process_job(std::unique_ptr<InProcessBackend> backend, const JobOptions& options,
                                    std::string name) {
  return std::make_unique<InProcessJob>(std::move(backend), options, std::move(name));
}

}  // namespace collie
