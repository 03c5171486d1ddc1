#include "sim/sim_world.h"

#include <map>
#include <sstream>

#include "core/error.h"

namespace collie::sim {

namespace {

struct Yield {
  Transport* t;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { t->schedule(h); }
  void await_resume() const noexcept {}
};

Spawned run_rank(const RankProgram& program, Communicator& comm, RankOutcome& out, std::size_t& finished) {
  co_await Yield{&comm.transport()};  // start inside the event loop, in seed order
  try {
    co_await program(comm);
  } catch (...) {
    out.error = std::current_exception();
  }
  out.finished = true;
  out.end_time = comm.transport().now();
  ++finished;
}

}  // namespace

bool SimResult::ok() const {
  if (deadlocked) return false;
  for (const RankOutcome& r : ranks)
    if (!r.finished || r.error) return false;
  return true;
}

std::string SimResult::describe() const {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].error) {
      try {
        std::rethrow_exception(ranks[i].error);
      } catch (const std::exception& e) {
        return e.what();
      } catch (...) {
        return "rank " + std::to_string(i) + " threw a non-standard exception";
      }
    }
  }
  if (deadlocked) return deadlock_report;
  return "ok";
}

SimWorld::SimWorld(int world_size, SimOptions options) : opts_(options) {
  if (world_size < 1) throw Error(ErrorKind::kInvalidArgument, OpContext{}, "world size must be at least 1");
  sim_ = std::make_unique<Simulator>(world_size, opts_.seed, opts_.network);
  CommunicatorOptions co;
  co.eager_threshold_bytes = opts_.network.eager_threshold_bytes;
  co.force_algorithm = opts_.force_algorithm;
  co.selection = opts_.selection;
  comms_.reserve(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) comms_.push_back(std::make_unique<Communicator>(sim_->transport(r), co));
  programs_ = std::make_unique<SpawnRegistry>();
}

SimWorld::~SimWorld() {
  // Suspended rank programs first: they hold Works of the communicators.
  programs_.reset();
  comms_.clear();
}

std::string SimWorld::diagnose_collective_mismatch() const {
  // Blocked collectives with the same (group context, sequence number) must
  // have the same fingerprint on every rank; any difference is the cause.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::map<std::string, std::vector<int>>> calls;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::string> group_of;
  for (std::size_t r = 0; r < comms_.size(); ++r) {
    for (const auto& rc : comms_[r]->engine().running_collectives()) {
      calls[{rc.context, rc.fp.seq}][describe_call(rc.fp)].push_back(static_cast<int>(r));
      group_of[{rc.context, rc.fp.seq}] = rc.group;
    }
  }
  std::ostringstream os;
  for (const auto& [key, variants] : calls) {
    if (variants.size() < 2) continue;
    os << "  collective_mismatch on " << group_of[key] << " #" << key.second << ":";
    const char* sep = " ";
    for (const auto& [call, ranks] : variants) {
      os << sep << "rank" << (ranks.size() > 1 ? "s " : " ");
      for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
      os << " called " << call;
      sep = "; ";
    }
    os << "\n";
  }
  return os.str();
}

SimResult SimWorld::run(const RankProgram& program) {
  const std::size_t n = comms_.size();
  SimResult res;
  res.ranks.resize(n);
  std::size_t finished = 0;
  for (std::size_t r = 0; r < n; ++r) programs_->spawn(run_rank(program, *comms_[r], res.ranks[r], finished));
  try {
    sim_->run_until([&] { return finished == n; }, std::nullopt);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kDeadlock) throw;
    res.deadlocked = true;
    std::ostringstream os;
    std::size_t blocked = 0;
    for (const RankOutcome& o : res.ranks) blocked += o.finished ? 0 : 1;
    os << "deadlock: at t=" << sim_->now() << "ns no event can run and " << blocked << " of " << n
       << " ranks are blocked (seed " << opts_.seed << ")\n";
    for (std::size_t r = 0; r < n; ++r) {
      if (res.ranks[r].finished) continue;
      auto pending = comms_[r]->describe_pending();
      os << "  rank " << r << ":";
      if (pending.empty()) os << " blocked outside any op\n";
      else os << "\n";
      for (const auto& p : pending) os << "    " << p << "\n";
    }
    for (std::size_t r = 0; r < n; ++r) {
      for (const auto& u : comms_[r]->describe_unexpected()) os << "  at rank " << r << ": " << u << "\n";
    }
    os << diagnose_collective_mismatch();
    res.deadlock_report = os.str();
  }
  for (const RankOutcome& o : res.ranks) res.end_time = std::max(res.end_time, o.end_time);
  res.trace_hash = sim_->trace_hash();
  res.events = sim_->events_processed();
  res.frames = sim_->frames_delivered();
  return res;
}

}  // namespace collie::sim
