#include "backends/tcp/tcp_backend.h"

#include <cstdlib>

#include "backends/remote/process_job.h"
#include "backends/tcp/tcp_transport.h"
#include "core/error.h"

namespace collie::tcp {

namespace {

// With every rank in one process, silence for this long means nothing can
// move: a deadlock (COLLIE_TCP_IDLE_MS overrides).
int idle_ms() {
  if (const char* v = std::getenv("COLLIE_TCP_IDLE_MS")) return std::atoi(v);
  return 1500;
}

class TcpWorld final : public InProcessBackend {
 public:
  explicit TcpWorld(const BackendOptions& o) : loop_(idle_ms()) {
    const int n = o.world_size;
    std::vector<std::uint16_t> ports;
    for (int r = 0; r < n; ++r) {
      ranks_.push_back(std::make_unique<TcpTransport>(loop_, r, n));
      ports.push_back(ranks_.back()->listen("127.0.0.1"));
    }
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < r; ++p) ranks_[static_cast<std::size_t>(r)]->connect(p, "127.0.0.1", ports[static_cast<std::size_t>(p)]);
    auto all = [&] {
      for (const auto& t : ranks_)
        if (!t->connected()) return false;
      return true;
    };
    if (!loop_.run_until(all, loop_.now() + 10'000'000'000)) {
      throw Error(ErrorKind::kTransport, OpContext{},
                  "tcp: the " + std::to_string(n) + " ranks could not all connect on 127.0.0.1 within 10 s");
    }
  }
  ~TcpWorld() override {
    for (auto& t : ranks_) t->close();  // the whole world goes at once
  }
  Transport& transport(int rank) override { return *ranks_[static_cast<std::size_t>(rank)]; }
  bool can_crash() const override { return true; }
  void crash(int rank, const std::string&) override { ranks_[static_cast<std::size_t>(rank)]->crash(); }
  bool crashed(int rank) const override { return ranks_[static_cast<std::size_t>(rank)]->crashed(); }
  std::uint64_t events() const override { return loop_.events(); }

 private:
  TcpEventLoop loop_;  // outlives the transports
  std::vector<std::unique_ptr<TcpTransport>> ranks_;
};

std::string worker_program() {
  if (const char* p = std::getenv("COLLIE_PROGRAM"); p && *p) return p;
  return remote::self_executable();
}

// One `collie worker --backend tcp` process per rank: env:// rendezvous
// among them, collie's core over real sockets, ops at the controller's
// command.
std::unique_ptr<Job> start_tcp_processes(const JobOptions& o) {
  remote::ProcessJobSpec spec;
  spec.backend = "tcp";
  spec.serves_smaller_worlds = true;  // collie's groups are made by their members alone
  const std::string eager = std::to_string(o.eager_threshold_bytes);
  const bool scribble = o.scribble_completed_sends;
  const std::string first_send_id = std::to_string(o.first_send_id);
  spec.children = [eager, scribble, first_send_id](int world, const std::string& controller, const std::string& token) {
    const std::string port = std::to_string(remote::free_local_port());
    std::vector<remote::ChildSpec> children;
    for (int r = 0; r < world; ++r) {
      remote::ChildSpec c{{worker_program(), "worker", "--backend", "tcp"},
                          remote::local_rank_env(r, world, port, controller, token)};
      c.env.emplace_back("COLLIE_EAGER_THRESHOLD_BYTES", eager);
      if (scribble) c.env.emplace_back("COLLIE_SCRIBBLE_COMPLETED_SENDS", "1");
      c.env.emplace_back("COLLIE_FIRST_SEND_ID", first_send_id);
      children.push_back(std::move(c));
    }
    return children;
  };
  return remote::start_process_job(spec, o);
}

}  // namespace

BackendInfo make_tcp_backend() {
  BackendInfo info;
  info.name = "tcp";
  info.description =
      "collie's core over real TCP sockets on 127.0.0.1: one process per rank (collie run), or every rank in this "
      "process on one event loop (collie conformance)";
  info.selection = "--backend tcp (collie run: --in-process for one process; collie conformance: --processes for one per rank)";
  info.simulated = false;
  info.wall_clock = true;
  info.create = [](const BackendOptions& o) { return std::make_unique<TcpWorld>(o); };
  info.start = start_tcp_processes;
  return info;
}

}  // namespace collie::tcp
