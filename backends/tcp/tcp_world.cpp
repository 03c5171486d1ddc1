#include "backends/tcp/tcp_world.h"

#include <cstdlib>

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
  std::uint64_t events() const override { return loop_.events(); }

 private:
  TcpEventLoop loop_;  // outlives the transports
  std::vector<std::unique_ptr<TcpTransport>> ranks_;
};

}  // namespace

void register_tcp_backend(BackendRegistry& registry) {
  BackendInfo info;
  info.name = "tcp";
  info.description = "real TCP sockets on 127.0.0.1, every rank in this process on one event loop";
  info.selection = "--backend tcp";
  info.simulated = false;
  info.create = [](const BackendOptions& o) { return std::make_unique<TcpWorld>(o); };
  registry.add(std::move(info));
}

}  // namespace collie::tcp
