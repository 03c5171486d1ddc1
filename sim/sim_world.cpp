#include "sim/sim_world.h"

#include "core/error.h"

namespace collie::sim {

CommunicatorOptions communicator_options(const SimOptions& options) {
  CommunicatorOptions co;
  co.eager_threshold_bytes = options.network.eager_threshold_bytes;
  co.force_algorithm = options.force_algorithm;
  co.selection = options.selection;
  co.default_timeout_ns = options.default_timeout_ns;
  return co;
}

std::vector<InjectedFault> injected_faults(const Simulator& sim) {
  std::vector<InjectedFault> out;
  for (const FaultRecord& r : sim.fault_log()) {
    InjectedFault f;
    switch (r.kind) {
      case FaultRecord::Kind::kDrop:
      case FaultRecord::Kind::kPartition:
      case FaultRecord::Kind::kDeadDestination:
        f.kind = InjectedFault::Kind::kLostFrame;
        break;
      case FaultRecord::Kind::kCrash:
        f.kind = InjectedFault::Kind::kCrash;
        break;
      default:
        continue;  // delays, duplicates and reorders explain nothing
    }
    f.time = r.time;
    f.src = r.rank;
    f.dst = r.dst;
    f.header = r.header;
    f.text = r.describe();
    out.push_back(std::move(f));
  }
  return out;
}

SimWorld::SimWorld(int world_size, SimOptions options) : opts_(options) {
  if (world_size < 1) throw Error(ErrorKind::kInvalidArgument, OpContext{}, "world size must be at least 1");
  sim_ = std::make_unique<Simulator>(world_size, opts_.seed, opts_.network, opts_.faults);
  if (opts_.trace) sim_->enable_trace();
  if (opts_.deferred_memory) sim_->defer_memory(*opts_.deferred_memory);
  std::vector<Transport*> ts;
  for (int r = 0; r < world_size; ++r) ts.push_back(&sim_->transport(r));
  CommunicatorOptions co = communicator_options(opts_);
  co.observer = sim_.get();
  world_ = std::make_unique<LocalWorld>(std::move(ts), co);
}

SimWorld::~SimWorld() { world_.reset(); }

SimResult SimWorld::run(const RankProgram& program) {
  RunContext ctx;
  ctx.label = "seed " + std::to_string(opts_.seed);
  ctx.replay = opts_.replay;
  Simulator* sim = sim_.get();
  ctx.faults = [sim] { return injected_faults(*sim); };
  ctx.crashed = [sim](int r) { return sim->crashed(r); };
  SimResult res = world_->run(program, ctx);
  sim_->synchronize_memory();
  res.trace_hash = sim_->trace_hash();
  res.events = sim_->events_processed();
  res.frames = sim_->frames_delivered();
  return res;
}

}  // namespace collie::sim
