#include "backends/in_process_job.h"

#include <vector>

#include "core/communicator.h"

namespace collie {

namespace {

class InProcessJob final : public Job {
 public:
  InProcessJob(std::unique_ptr<InProcessBackend> backend, const JobOptions& o, std::string name)
      : backend_(std::move(backend)), name_(std::move(name)) {
    std::vector<Transport*> ts;
    for (int r = 0; r < o.world_size; ++r) ts.push_back(&backend_->transport(r));
    CommunicatorOptions co;
    co.eager_threshold_bytes = o.eager_threshold_bytes;
    co.observer = backend_->observer();
    co.default_timeout_ns = o.timeout_ns;
    world_ = std::make_unique<LocalWorld>(std::move(ts), co);
  }
  ~InProcessJob() override {
    world_.reset();  // communicators before the transports they use
    backend_.reset();
  }

  int world_size() const override { return world_->world_size(); }
  std::string implementation() const override { return "collie core over " + name_; }

  RunResult run(const DistProgram& program, const RunContext& context) override {
    RunContext ctx = context;
    InProcessBackend* b = backend_.get();
    ctx.faults = [b] { return b->injected_faults(); };
    ctx.crashed = [b](int r) { return b->crashed(r); };
    return world_->run([&program](Communicator& c) { return program(c); }, ctx);
  }

  std::uint64_t trace_hash() const override { return backend_->trace_hash(); }
  std::uint64_t events() const override { return backend_->events(); }
  std::vector<InjectedFault> injected_faults() const override { return backend_->injected_faults(); }
  bool write_trace(std::ostream& out, Nanos end) const override { return backend_->write_trace(out, end); }

 private:
  std::unique_ptr<InProcessBackend> backend_;
  std::unique_ptr<LocalWorld> world_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Job> in_process_job(std::unique_ptr<InProcessBackend> backend, const JobOptions& options,
                                    std::string name) {
  return std::make_unique<InProcessJob>(std::move(backend), options, std::move(name));
}

}  // namespace collie
