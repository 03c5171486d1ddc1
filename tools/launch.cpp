#include "tools/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <asio.hpp>

#include "backends/tcp/auth.h"
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
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

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return std::string("killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped";
}

}  // namespace

std::string self_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "collie";
  return std::string(buf, static_cast<std::size_t>(n));
}

int launch(const LaunchOptions& o) {
  const int n = o.nprocs;
  const int port = o.master_port ? o.master_port : free_port();
  const std::string token = tcp::random_token();
  struct Proc {
    pid_t pid = -1;
    int fd = -1;
    std::string partial;
    bool done = false;
    int status = 0;
  };
  std::vector<Proc> procs(static_cast<std::size_t>(n));
  // The CPUs to pin ranks to, in order; empty: no pinning.
  std::vector<int> cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (o.bind_to_core && ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= n)
    for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < n; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  std::cout.flush();
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      std::perror("collie launch: pipe");
      return 2;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("collie launch: fork");
      return 2;
    }
    if (pid == 0) {
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("COLLIE_JOB_TOKEN", token.c_str(), 1);
      if (!cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[static_cast<std::size_t>(r)], &one);
        ::sched_setaffinity(0, sizeof one, &one);  // best effort: a refusal leaves the rank unpinned
      }
      std::vector<char*> argv;
      for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "collie launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
      _exit(127);
    }
    close(fds[1]);
    procs[static_cast<std::size_t>(r)].pid = pid;
    procs[static_cast<std::size_t>(r)].fd = fds[0];
  }
  auto emit = [&](int r, const std::string& line) {
    if (o.prefix) std::cout << "[rank " << r << "] ";
    std::cout << line << "\n";
    std::cout.flush();
  };
  int first_failed = -1;
  std::string first_why;
  auto failed_at = std::chrono::steady_clock::time_point{};
  auto settle_until = std::chrono::steady_clock::time_point{};
  int alive = n;
  auto any_open = [&] {
    for (const auto& p : procs)
      if (p.fd >= 0) return true;
    return false;
  };
  // Every process reaped, its output may still sit in the pipe: drain it
  // (for at most 2 s, in case a grandchild holds the pipe open).
  auto drain_until = std::chrono::steady_clock::time_point::max();
  while (alive > 0 || (any_open() && std::chrono::steady_clock::now() < drain_until)) {
    if (alive == 0 && drain_until == std::chrono::steady_clock::time_point::max())
      drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (procs[static_cast<std::size_t>(r)].fd >= 0) {
        pfds.push_back(pollfd{procs[static_cast<std::size_t>(r)].fd, POLLIN, 0});
        who.push_back(r);
      }
    }
    if (!pfds.empty()) poll(pfds.data(), pfds.size(), 100);
    else usleep(20000);
    for (std::size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Proc& p = procs[static_cast<std::size_t>(who[i])];
      char buf[4096];
      const ssize_t k = read(p.fd, buf, sizeof buf);
      if (k <= 0) {
        if (!p.partial.empty()) emit(who[i], p.partial);
        p.partial.clear();
        close(p.fd);
        p.fd = -1;
        continue;
      }
      p.partial.append(buf, static_cast<std::size_t>(k));
      std::size_t nl;
      while ((nl = p.partial.find('\n')) != std::string::npos) {
        emit(who[i], p.partial.substr(0, nl));
        p.partial.erase(0, nl + 1);
      }
    }
    // Reap what exited since the last look. Among failures seen in the same
    // look, a rank killed by a signal comes first: the others most likely
    // failed because it died.
    int newly_failed = -1;
    for (int r = 0; r < n; ++r) {
      Proc& p = procs[static_cast<std::size_t>(r)];
      if (p.done) continue;
      int status = 0;
      if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
        p.done = true;
        p.status = status;
        --alive;
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        const bool signalled = WIFSIGNALED(status);
        if (failed && (newly_failed < 0 ||
                       (signalled && !WIFSIGNALED(procs[static_cast<std::size_t>(newly_failed)].status))))
          newly_failed = r;
      }
    }
    // A killed process closes its sockets before it can be reaped, so the
    // ranks that notice may be reaped first: decide who failed first only
    // after a short settling time, preferring a death by signal.
    if (newly_failed >= 0 && first_failed < 0 && settle_until == std::chrono::steady_clock::time_point{})
      settle_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    if (first_failed < 0 && settle_until != std::chrono::steady_clock::time_point{} &&
        (std::chrono::steady_clock::now() >= settle_until || alive == 0)) {
      for (int r = 0; r < n; ++r) {
        const Proc& p = procs[static_cast<std::size_t>(r)];
        if (!p.done || (WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0)) continue;
        if (first_failed < 0 || (WIFSIGNALED(p.status) && !WIFSIGNALED(procs[static_cast<std::size_t>(first_failed)].status)))
          first_failed = r;
      }
      if (first_failed >= 0) {
        first_why = describe_status(procs[static_cast<std::size_t>(first_failed)].status);
        failed_at = std::chrono::steady_clock::now();
      }
    }
    // After a failure the others get a grace period to notice, then stop.
    if (first_failed >= 0 && alive > 0 &&
        std::chrono::steady_clock::now() - failed_at > std::chrono::duration<double>(o.grace_s)) {
      for (auto& p : procs)
        if (!p.done) kill(p.pid, SIGTERM);
      failed_at = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
  }
  for (auto& p : procs)
    if (p.fd >= 0) close(p.fd);
  if (first_failed < 0) return 0;
  std::cerr << "collie launch: rank " << first_failed << " failed first: " << first_why << "\n";
  for (int r = 0; r < n; ++r) {
    const Proc& p = procs[static_cast<std::size_t>(r)];
    if (r != first_failed && !(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0))
      std::cerr << "collie launch: rank " << r << " " << describe_status(p.status) << "\n";
  }
  return 1;
}

}  // namespace collie::tools
