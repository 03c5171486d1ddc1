#include "sim/sim_world.h"

#include "core/error.h"

namespace collie::sim {

CommunicatorOptions communicator_options(const SimOptions& options) {
  CommunicatorOptions co;
  co.eager_threshold_bytes = options.network.eager_threshold_bytes;
  co.force_algorithm = options.force_algorithm;
  co.selection = options.selection;
  return co;
}

SimWorld::SimWorld(int world_size, SimOptions options) : opts_(options) {
  if (world_size < 1) throw Error(ErrorKind::kInvalidArgument, OpContext{}, "world size must be at least 1");
  sim_ = std::make_unique<Simulator>(world_size, opts_.seed, opts_.network);
  std::vector<Transport*> ts;
  for (int r = 0; r < world_size; ++r) ts.push_back(&sim_->transport(r));
  world_ = std::make_unique<LocalWorld>(std::move(ts), communicator_options(opts_));
}

SimWorld::~SimWorld() { world_.reset(); }

SimResult SimWorld::run(const RankProgram& program) {
  SimResult res = world_->run(program, "seed " + std::to_string(opts_.seed));
  res.trace_hash = sim_->trace_hash();
  res.events = sim_->events_processed();
  res.frames = sim_->frames_delivered();
  return res;
}

}  // namespace collie::sim
