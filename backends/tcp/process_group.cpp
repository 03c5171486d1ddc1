#include "backends/tcp/process_group.h"

#include <optional>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <exception>

#include "core/error.h"

namespace collie::tcp {

namespace {

int cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// Ranks of the job on this rank's host: by the addresses rendezvous
// exchanged, or LOCAL_WORLD_SIZE (collie launch, torchrun) if larger.
int ranks_on_this_host(const Membership& m) {
  int local = 0;
  for (const auto& p : m.peers) local += p.host == m.peers[static_cast<std::size_t>(m.rank)].host ? 1 : 0;
  if (const char* l = std::getenv("LOCAL_WORLD_SIZE")) local = std::max(local, std::atoi(l));
  return local;
}

// A setting of seconds or microseconds from the environment: a number >= 0,
// written as a number and nothing else ("5", "0.5"); else a usage error
// naming the variable (std::atof took "abc" for 0).
std::optional<double> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(x >= 0) || x > 1e12)
    throw Error(ErrorKind::kUsage, OpContext{}, std::string(name) + "='" + v + "' is not a number >= 0");
  return x;
}

}  // namespace

std::unique_ptr<ProcessGroup> ProcessGroup::init(const RendezvousOptions& given, const CommunicatorOptions* comm) {
  RendezvousOptions options = given;
  if (const auto t = env_number("COLLIE_INIT_TIMEOUT_S")) options.timeout_ns = static_cast<Nanos>(*t * 1e9);
  std::unique_ptr<ProcessGroup> pg(new ProcessGroup());
  int rank = 0, world = 0;
  resolve_identity(options, &rank, &world);
  // A rank process polls for 50 us before sleeping (COLLIE_SPIN_US), unless
  // its host runs more ranks than it has CPUs (decided after rendezvous).
  const auto spin = env_number("COLLIE_SPIN_US");
  pg->loop_ = std::make_unique<TcpEventLoop>(0, static_cast<Nanos>(spin.value_or(50.0) * 1e3));
  pg->transport_ = std::make_unique<TcpTransport>(*pg->loop_, rank, world, job_token(options));
  // Listen where peers can reach us: loopback jobs stay on loopback.
  const char* master = std::getenv("MASTER_ADDR");
  const bool loopback = !master || std::string(master).rfind("127.", 0) == 0 || std::string(master) == "localhost" ||
                        options.init_method.rfind("file://", 0) == 0;
  const std::uint16_t port = pg->transport_->listen(loopback ? "127.0.0.1" : "0.0.0.0");
  const Membership m = rendezvous(pg->loop_->io(), options, port);
  // Oversubscribed: a spinning rank would hold a CPU that a rank with work
  // waits for (3 ranks on 2 CPUs: 8-byte all_reduce 114 us spinning, 35 us
  // not). Sleep in the kernel at once instead.
  if (!spin && ranks_on_this_host(m) > cpus_available()) pg->loop_->set_spin_ns(0);
  for (int p = 0; p < rank; ++p)
    pg->transport_->connect(p, m.peers[static_cast<std::size_t>(p)].host, m.peers[static_cast<std::size_t>(p)].port);
  if (!pg->loop_->run_until([&] { return pg->transport_->connected(); },
                            pg->loop_->now() + options.timeout_ns)) {
    throw Error(ErrorKind::kTransport, OpContext{rank, "init_process_group", "world", -1, {}},
                "could not connect to every peer within the timeout; not connected: " + pg->transport_->unconnected());
  }
  CommunicatorOptions co;
  if (comm) {
    co = *comm;
  } else {
    co.default_timeout_ns = static_cast<Nanos>(env_number("COLLIE_TIMEOUT_S").value_or(300.0) * 1e9);
  }
  pg->comm_ = std::make_unique<Communicator>(*pg->transport_, co);
  return pg;
}

namespace {

Spawned drive(const std::function<Task<void>(Communicator&)>& program, Communicator& c, bool& done,
              std::exception_ptr& error) {
  try {
    co_await program(c);
  } catch (...) {
    error = std::current_exception();
  }
  done = true;
}

}  // namespace

void ProcessGroup::run(const std::function<Task<void>(Communicator&)>& program) {
  SpawnRegistry registry;  // destroys the program's frame if the loop throws
  bool done = false;
  std::exception_ptr error;
  registry.spawn(drive(program, *comm_, done, error));
  loop_->run_until([&] { return done; }, std::nullopt);
  if (error) std::rethrow_exception(error);
}

ProcessGroup::~ProcessGroup() {
  // Goodbye first, while the communicator can still take what arrives; the
  // loop never runs again after this, so the coroutines it may still hold
  // (op timers) can go with the communicator.
  // Ops the program abandoned (an exception thrown past them) are failed
  // first, so nothing reads or writes their buffers from here on.
  const std::size_t abandoned = comm_ ? comm_->abort_pending("the process group was destroyed with this op in flight") : 0;
  if (transport_ && (std::uncaught_exceptions() > 0 || abandoned > 0))
    transport_->note_failure(std::uncaught_exceptions() > 0 ? "with an error" : "with ops in flight");
  if (transport_) transport_->shutdown(2'000'000'000, abandoned > 0);
  comm_.reset();
}

}  // namespace collie::tcp
