#include "backends/sim/sim_backend.h"

#include <memory>

#include "sim/sim_world.h"
#include "sim/simulation_options.h"
#include "sim/simulator.h"

namespace collie::sim {

namespace {

class SimBackend final : public InProcessBackend {
 public:
  explicit SimBackend(const BackendOptions& o)
      : sim_(o.world_size, o.seed, o.simulation ? o.simulation->network : sim::NetworkModel{},
             o.simulation ? o.simulation->faults : sim::FaultPlan{}) {
    if (o.trace) sim_.enable_trace();
    if (o.simulation && o.simulation->explorer) sim_.set_explorer(o.simulation->explorer);
    sim_.set_timing_only(o.timing_only);
  }
  Transport& transport(int rank) override { return sim_.transport(rank); }
  std::uint64_t trace_hash() const override { return sim_.trace_hash(); }
  std::uint64_t events() const override { return sim_.events_processed(); }
  OpObserver* observer() override { return &sim_; }
  std::vector<InjectedFault> injected_faults() const override { return sim::injected_faults(sim_); }
  bool crashed(int rank) const override { return sim_.crashed(rank); }
  bool write_trace(std::ostream& out, Nanos end) const override {
    if (!sim_.trace()) return false;
    sim_.trace()->write_chrome_json(out, end);
    return true;
  }

 private:
  sim::Simulator sim_;
};

}  // namespace

BackendInfo make_sim_backend() {
  BackendInfo sim;
  sim.name = "sim";
  sim.description = "deterministic simulated network: virtual time, alpha-beta-gamma costs, one seed";
  sim.selection = "--backend sim (the default); the scenario's network: section sets the cost model";
  sim.simulated = true;
  sim.timing_only = true;
  sim.simulated_faults = true;
  sim.create = [](const BackendOptions& o) { return std::make_unique<SimBackend>(o); };
  return sim;
}

}  // namespace collie::sim
