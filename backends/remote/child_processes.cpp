#include "backends/remote/child_processes.h"

#include "backends/remote/fork_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <random>
#include <set>
#include <thread>

namespace collie::remote {

namespace {

constexpr std::size_t kTailBytes = 16 * 1024;
constexpr std::int64_t kForever = std::int64_t{1} << 62;

// The reaper of end_in_background(): one thread, started with the first
// set and running while any set is being ended.
class Reaper {
 public:
  ~Reaper() { wait(); }
  void add(std::unique_ptr<ChildProcesses> children, double grace_s) {
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back({std::move(children), grace_s});
    if (!running_) {
      if (thread_.joinable()) thread_.join();
      running_ = true;
      thread_ = std::thread([this] { loop(); });
    }
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return !running_; });
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Entry {
    std::unique_ptr<ChildProcesses> children;
    double grace_s;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!queue_.empty()) {
      Entry e = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      e.children->terminate(e.grace_s);
      e.children.reset();
      lock.lock();
    }
    running_ = false;
    idle_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable idle_;
  std::deque<Entry> queue_;
  std::thread thread_;
  bool running_ = false;
};

Reaper& reaper() {
  static Reaper r;
  return r;
}

}  // namespace

void end_in_background(std::unique_ptr<ChildProcesses> children, double grace_s) {
  if (children) reaper().add(std::move(children), grace_s);
}

void wait_for_ended_children() { reaper().wait(); }

bool process_ended(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // gone between the two looks
  // pid (comm) STATE ...: comm may hold spaces and parentheses, the last ')' ends it.
  const auto paren = line.rfind(')');
  return paren == std::string::npos || (paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X'));
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped";
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "collie";
  return std::string(buf, static_cast<std::size_t>(n));
}

int free_local_port() {
  // Ports handed out, oldest first, and the same as a set.
  static std::mutex mu;
  static std::deque<int> given;
  static std::set<int> taken;
  constexpr std::size_t kRemembered = 8192;  // of the 12,000 drawn from
  std::random_device rd;
  auto try_bind = [](int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int got = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      socklen_t len = sizeof a;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      got = ntohs(a.sin_port);
    }
    ::close(fd);
    return got;
  };
  std::lock_guard<std::mutex> lock(mu);
  auto give = [&](int port) {
    if (given.size() == kRemembered) {
      taken.erase(given.front());
      given.pop_front();
    }
    given.push_back(port);
    taken.insert(port);
    return port;
  };
  for (int attempt = 0; attempt < 256; ++attempt) {
    const int candidate = 20000 + static_cast<int>(rd() % 12000);
    if (taken.count(candidate)) continue;
    if (const int p = try_bind(candidate); p > 0) return give(p);
  }
  const int any = try_bind(0);
  return any > 0 ? give(any) : any;
}

ChildProcesses::ChildProcesses(const std::vector<ChildSpec>& children) {
  const pid_t parent = ::getpid();
  for (const ChildSpec& spec : children) {
    if (spec.argv.empty()) throw std::invalid_argument("a child process needs a program");
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      terminate(0);
      throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    // Everything the child needs is built before fork (no allocation after).
    std::vector<std::string> env_kv;
    for (const auto& [k, v] : spec.env) env_kv.push_back(k + "=" + v);
    std::vector<char*> argv;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t group = group_;
    if (spec.fork_server) {
      if (const auto pid = spec.fork_server->spawn(spec.env, fds[1], group > 0 ? group : 0)) {
        if (group_ < 0) group_ = *pid;
        ::close(fds[1]);
        ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
        children_.push_back(Child{*pid, fds[0], {}, std::nullopt, spec.fork_server});
        continue;
      }
    }
    const int cpu = spec.cpu;
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      terminate(0);
      throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::setpgid(0, group > 0 ? group : 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(137);  // the parent is already gone
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::signal(SIGPIPE, SIG_DFL);
      if (cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        ::sched_setaffinity(0, sizeof one, &one);  // best effort: a refusal leaves it unpinned
      }
      for (const auto& kv : env_kv) ::putenv(const_cast<char*>(kv.c_str()));
      ::execvp(argv[0], argv.data());
      const int err = errno;
      std::fprintf(stderr, "cannot run '%s': %s\n", argv[0], std::strerror(err));
      ::_exit(127);
    }
    ::setpgid(pid, group > 0 ? group : pid);  // also here: no race with the child
    if (group_ < 0) group_ = pid;
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    children_.push_back(Child{pid, fds[0], {}, std::nullopt, nullptr});
  }
}

ChildProcesses::~ChildProcesses() {
  terminate();
  for (Child& c : children_)
    if (c.out_fd >= 0) ::close(c.out_fd);
}

void ChildProcesses::reap(Child& c, std::int64_t timeout_ns) {
  if (c.status || c.pid <= 0) return;
  if (c.server) {
    c.status = c.server->exit_status(c.pid, timeout_ns);
    return;
  }
  int st = 0;
  if (::waitpid(c.pid, &st, timeout_ns > 0 ? 0 : WNOHANG) == c.pid) c.status = st;
}

void ChildProcesses::reap() {
  for (Child& c : children_) reap(c, 0);
}

void ChildProcesses::wait_all() {
  for (std::vector<int> fds = output_fds(); !fds.empty(); fds = output_fds()) {
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLIN, 0});
    ::poll(p.data(), p.size(), -1);
    for (const pollfd& x : p)
      if (x.revents) read_output(x.fd);
  }
  for (Child& c : children_) reap(c, kForever);
}

bool ChildProcesses::all_exited() const {
  for (const Child& c : children_)
    if (!c.status) return false;
  return true;
}

std::string ChildProcesses::fate(std::size_t i) const {
  return children_[i].status ? describe_wait_status(*children_[i].status) : std::string();
}

bool ChildProcesses::succeeded(std::size_t i) const {
  const auto& s = children_[i].status;
  return s && WIFEXITED(*s) && WEXITSTATUS(*s) == 0;
}

std::vector<int> ChildProcesses::output_fds() const {
  std::vector<int> fds;
  for (const Child& c : children_)
    if (c.out_fd >= 0) fds.push_back(c.out_fd);
  return fds;
}

void ChildProcesses::read_output(int fd) {
  for (std::size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.out_fd != fd) continue;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        if (on_output_) on_output_(i, std::string_view(buf, static_cast<std::size_t>(n)));
        c.output.append(buf, static_cast<std::size_t>(n));
        if (c.output.size() > 2 * kTailBytes) c.output.erase(0, c.output.size() - kTailBytes);
        continue;
      }
      if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fd);
        c.out_fd = -1;
      }
      if (n < 0 && errno == EINTR) continue;
      break;
    }
  }
}

std::string ChildProcesses::output_tail(std::size_t i, std::size_t max_bytes) const {
  const std::string& o = children_[i].output;
  return o.size() <= max_bytes ? o : o.substr(o.size() - max_bytes);
}

void ChildProcesses::signal(std::size_t i, int sig) {
  if (!children_[i].status && children_[i].pid > 0) ::kill(children_[i].pid, sig);
}

void ChildProcesses::signal_all(int sig) {
  reap();
  if (group_ > 0 && !all_exited()) ::kill(-group_, sig);
}

void ChildProcesses::terminate(double grace_s) {
  reap();
  if (all_exited()) return;
  if (group_ > 0) ::kill(-group_, SIGCONT);  // a stopped child cannot handle SIGTERM
  if (group_ > 0) ::kill(-group_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < until) {
    for (int fd : output_fds()) read_output(fd);
    reap();
    if (all_exited()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (group_ > 0) ::kill(-group_, SIGKILL);
  for (Child& c : children_) {
    if (c.status || c.pid <= 0) continue;
    ::kill(c.pid, SIGKILL);
    reap(c, kForever);
  }
}

}  // namespace collie::remote
