#include "tools/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <asio.hpp>

#include "backends/remote/child_processes.h"
#include <csignal>
#include "backends/tcp/auth.h"
#include "core/whole_number.h"
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <random>

namespace collie::tools {

namespace {

// A port for rank 0's rendezvous, below Linux's ephemeral range (32768+)
// so that no outgoing connection of this or another job can take it between
// this check and rank 0's bind.
int free_port() {
  asio::io_context io;
  std::random_device rd;
  for (int attempt = 0; attempt < 64; ++attempt) {
    const auto port = static_cast<std::uint16_t>(20000 + rd() % 12000);
    asio::ip::tcp::acceptor a(io);
    asio::error_code ec;
    a.open(asio::ip::tcp::v4(), ec);
    a.bind(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) return port;
  }
  asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}


// A launch started by another launcher (srun, mpirun: one collie launch
// per task, as torchrun is started once per node): which task this is and
// how many there are, from the launcher's variables, innermost first (as
// script/python/collie_script reads them); one task of one when there are
// none, or when torch's own (RANK) are set.
struct Task {
  int index = 0;
  int count = 1;
  std::string from;  // "SLURM_PROCID/SLURM_NTASKS", or empty
};

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  const auto x = whole_number(v, 0, 1 << 24);
  return x ? std::optional<int>(static_cast<int>(*x)) : std::nullopt;
}

std::optional<Task> outer_task(std::string* why) {
  if (std::getenv("RANK")) return Task{};
  for (const auto& [index, count] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                     std::pair{"PMI_RANK", "PMI_SIZE"},
                                     std::pair{"SLURM_PROCID", "SLURM_NTASKS"}}) {
    if (!std::getenv(index) || !std::getenv(count)) continue;
    const auto i = env_int(index), n = env_int(count);
    if (!i || !n || *n < 1 || *i >= *n) {
      *why = std::string(index) + "=" + std::getenv(index) + " and " + count + "=" + std::getenv(count) +
             " are not a task of a job";
      return std::nullopt;
    }
    return Task{*i, *n, std::string(index) + "/" + count};
  }
  return Task{};
}

}  // namespace

std::string self_executable() { return remote::self_executable(); }

namespace {

// Signals the launcher takes for its ranks (SIGINT, SIGTERM, SIGHUP): the
// handler only records them; the launcher's loop forwards them.
volatile std::sig_atomic_t g_signal = 0;
int g_wake = -1;  // the write end of a self-pipe that wakes poll()

extern "C" void on_signal(int sig) {
  g_signal = sig;
  if (g_wake >= 0) {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake, &c, 1);
  }
}

// Installs on_signal for the launcher's lifetime and restores what was there.
struct SignalForwarding {
  int pipe_fds[2] = {-1, -1};
  struct sigaction old_int{}, old_term{}, old_hup{};
  SignalForwarding() {
    if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) == 0) g_wake = pipe_fds[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int);
    ::sigaction(SIGTERM, &sa, &old_term);
    ::sigaction(SIGHUP, &sa, &old_hup);
  }
  ~SignalForwarding() {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::sigaction(SIGHUP, &old_hup, nullptr);
    g_wake = -1;
    for (int fd : pipe_fds)
      if (fd >= 0) ::close(fd);
  }
};

using Clock = std::chrono::steady_clock;

}  // namespace

int launch(const LaunchOptions& o) {
  const int n = o.nprocs;
  std::string why;
  const std::optional<Task> task = outer_task(&why);
  if (!task) {
    std::cerr << "collie launch: " << why << "\n";
    return 2;
  }
  // Under another launcher the tasks share the job: rank 0's address and
  // port, and the token, come from the environment (one chosen here would
  // differ between tasks); alone, a free port and a fresh token.
  const int base = task->index * n;  // this task's first rank
  const char* env_addr = std::getenv("MASTER_ADDR");
  const std::string addr = env_addr && *env_addr ? env_addr : "127.0.0.1";
  const std::optional<int> env_port = env_int("MASTER_PORT");
  const int port = o.master_port ? o.master_port
                   : env_port    ? *env_port
                   : task->count > 1 ? 29500  // torch's default
                                     : free_port();
  const char* env_token = std::getenv("COLLIE_JOB_TOKEN");
  const std::string token = env_token ? env_token : task->count > 1 ? std::string() : tcp::random_token();
  // The CPUs to pin ranks to, in order; empty: no pinning.
  std::vector<int> cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (o.bind_to_core && ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= n)
    for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < n; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  std::vector<remote::ChildSpec> specs;
  for (int r = 0; r < n; ++r) {
    remote::ChildSpec c{o.command, {{"MASTER_ADDR", addr},
                                    {"MASTER_PORT", std::to_string(port)},
                                    {"RANK", std::to_string(base + r)},
                                    {"LOCAL_RANK", std::to_string(r)},
                                    {"WORLD_SIZE", std::to_string(task->count * n)},
                                    {"LOCAL_WORLD_SIZE", std::to_string(n)},
                                    {"GROUP_RANK", std::to_string(task->index)},
                                    {"COLLIE_JOB_TOKEN", token}}};
    if (!cpus.empty()) c.cpu = cpus[static_cast<std::size_t>(r)];
    specs.push_back(std::move(c));
  }
  std::cout.flush();
  SignalForwarding forwarding;
  // Every rank in one process group, killed if this launcher dies (even by
  // SIGKILL); their output comes back line by line.
  remote::ChildProcesses procs(specs);
  std::vector<std::string> partial(static_cast<std::size_t>(n));
  auto emit = [&](std::size_t r, const std::string& line) {
    if (o.prefix) std::cout << "[rank " << base + static_cast<int>(r) << "] ";
    std::cout << line << "\n";
    std::cout.flush();
  };
  procs.set_output_handler([&](std::size_t r, std::string_view bytes) {
    std::string& p = partial[r];
    p.append(bytes);
    std::size_t nl;
    while ((nl = p.find('\n')) != std::string::npos) {
      emit(r, p.substr(0, nl));
      p.erase(0, nl + 1);
    }
  });

  int first_failed = -1;
  std::string first_why;
  const auto never = Clock::time_point::max();
  auto settle_until = never;   // a failure was seen: who failed first is decided then
  auto stop_at = never;        // the others get until then to notice, then SIGTERM (and SIGCONT)
  auto kill_at = never;        // then SIGKILL
  int forwarded = 0;           // a signal this launcher got and passed on
  const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace_s));
  while (!procs.all_exited() || !procs.output_fds().empty()) {
    std::vector<pollfd> fds;
    for (int fd : procs.output_fds()) fds.push_back({fd, POLLIN, 0});
    if (forwarding.pipe_fds[0] >= 0) fds.push_back({forwarding.pipe_fds[0], POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (const pollfd& p : fds) {
      if (!p.revents) continue;
      if (p.fd == forwarding.pipe_fds[0]) {
        char drain[64];
        while (::read(p.fd, drain, sizeof drain) > 0) {
        }
      } else {
        procs.read_output(p.fd);
      }
    }
    procs.reap();
    const auto now = Clock::now();
    if (g_signal && !forwarded) {
      // Interrupted or terminated: the ranks get the same signal (stopped
      // ones are continued so that they can take it), then SIGKILL.
      forwarded = g_signal;
      procs.signal_all(SIGCONT);
      procs.signal_all(forwarded);
      kill_at = std::min(kill_at, now + grace);
    }
    if (first_failed < 0 && settle_until == never)
      for (int r = 0; r < n; ++r)
        if (procs.exited(static_cast<std::size_t>(r)) && !procs.succeeded(static_cast<std::size_t>(r))) {
          // A killed process closes its sockets before it can be reaped, so
          // the ranks that notice may be reaped first: decide who failed
          // first after a short settling time, preferring a death by signal.
          settle_until = now + std::chrono::milliseconds(500);
          break;
        }
    if (first_failed < 0 && settle_until != never && (now >= settle_until || procs.all_exited())) {
      for (int r = 0; r < n; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (!procs.exited(i) || procs.succeeded(i)) continue;
        const bool signalled = procs.fate(i).rfind("killed", 0) == 0;
        if (first_failed < 0 || (signalled && procs.fate(static_cast<std::size_t>(first_failed)).rfind("killed", 0) != 0))
          first_failed = r;
      }
      first_why = procs.fate(static_cast<std::size_t>(first_failed));
      stop_at = now + grace;
    }
    if (now >= stop_at && !procs.all_exited()) {
      // The others had their grace period to notice the failure: stop them,
      // stopped (SIGSTOP) ones included.
      procs.signal_all(SIGCONT);
      procs.signal_all(SIGTERM);
      stop_at = never;
      kill_at = std::min(kill_at, now + grace);
    }
    if (now >= kill_at && !procs.all_exited()) {
      procs.signal_all(SIGKILL);
      kill_at = never;
    }
  }
  for (int r = 0; r < n; ++r)
    if (!partial[static_cast<std::size_t>(r)].empty()) emit(static_cast<std::size_t>(r), partial[static_cast<std::size_t>(r)]);
  if (forwarded) {
    std::cerr << "collie launch: got signal " << forwarded << " (" << strsignal(forwarded) << "); passed it to the ranks\n";
    for (int r = 0; r < n; ++r)
      std::cerr << "collie launch: rank " << base + r << " " << procs.fate(static_cast<std::size_t>(r)) << "\n";
    return 128 + forwarded;
  }
  if (first_failed < 0) return 0;
  std::cerr << "collie launch: rank " << base + first_failed << " failed first: " << first_why << "\n";
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r != first_failed && !procs.succeeded(i)) std::cerr << "collie launch: rank " << base + r << " " << procs.fate(i) << "\n";
  }
  return 1;
}

}  // namespace collie::tools
