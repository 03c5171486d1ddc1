#include "backends/remote/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

namespace collie::remote {

namespace {

using json = nlohmann::json;

Nanos mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ForkServer::ForkServer(std::vector<std::string> argv, Env env, Nanos ready_timeout_ns)
    : argv_(std::move(argv)), env_(std::move(env)), ready_timeout_ns_(ready_timeout_ns) {}

ForkServer::~ForkServer() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);  // the server sees its socket close and exits, its children with it
  fd_ = -1;
  if (pid_ > 0) {
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      ::poll(nullptr, 0, 5);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool ForkServer::start_locked() {
  tried_ = true;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  std::vector<std::string> env_kv;
  for (const auto& [k, v] : env_) env_kv.push_back(k + "=" + v);
  env_kv.push_back("COLLIE_FORK_SERVER_FD=" + std::to_string(sv[1]));
  std::vector<char*> argv;
  for (const auto& a : argv_) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return false;
  }
  if (pid == 0) {
    // Its own process group: no job's group signal reaches it. No
    // PR_SET_PDEATHSIG: it ends when its socket closes, whichever thread
    // started it.
    ::setpgid(0, 0);
    ::fcntl(sv[1], F_SETFD, 0);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    ::signal(SIGPIPE, SIG_DFL);
    for (const auto& kv : env_kv) ::putenv(const_cast<char*>(kv.c_str()));
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  pid_ = pid;
  fd_ = sv[0];
  alive_ = true;
  // Its imports take seconds: wait for "ready".
  const Nanos until = mono_ns() + ready_timeout_ns_;
  while (alive_) {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      const json m = json::parse(std::string(buf, static_cast<std::size_t>(n)), nullptr, false);
      if (m.is_object() && m.value("t", "") == "ready") return true;
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    const Nanos left = until - mono_ns();
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<Nanos>(left / 1'000'000 + 1, 100)));
  }
  lost_locked();
  return false;
}

void ForkServer::lost_locked() {
  alive_ = false;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Its children died with it (PR_SET_PDEATHSIG, SIGKILL).
  for (pid_t c : children_) exited_.emplace(c, SIGKILL);
  children_.clear();
}

bool ForkServer::pump_locked(int timeout_ms) {
  for (int wait_ms = timeout_ms; alive_; wait_ms = 0) {
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::poll(&p, 1, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return true;
    char buf[64 * 1024];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) {
      lost_locked();
      return false;
    }
    const json m = json::parse(std::string(buf, static_cast<std::size_t>(n)), nullptr, false);
    if (!m.is_object()) continue;
    const std::string t = m.value("t", "");
    if (t == "exited") {
      const pid_t pid = m.value("pid", -1);
      exited_[pid] = m.value("status", 0);
      std::erase(children_, pid);
    } else if (t == "spawned" || t == "spawn_failed") {
      replies_.push_back(m.dump());
    }
  }
  return false;
}

std::optional<pid_t> ForkServer::spawn(const Env& env, int out_fd, pid_t pgid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tried_) start_locked();
  if (!alive_) return std::nullopt;
  json req{{"t", "spawn"}, {"pgid", pgid}, {"env", json::object()}};
  for (const auto& [k, v] : env) req["env"][k] = v;
  const std::string text = req.dump();
  iovec iov{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &out_fd, sizeof(int));
  ssize_t sent;
  do sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    lost_locked();
    return std::nullopt;
  }
  // A fork takes milliseconds; a server silent for a minute is gone.
  for (int waited_s = 0; replies_.empty(); ++waited_s) {
    if (waited_s == 60) lost_locked();
    if (!pump_locked(1000)) return std::nullopt;
  }
  const json r = json::parse(replies_.front());
  replies_.erase(replies_.begin());
  if (r.value("t", "") != "spawned") return std::nullopt;
  const pid_t pid = r.value("pid", -1);
  if (pid <= 0) return std::nullopt;
  if (!exited_.count(pid)) children_.push_back(pid);
  return pid;
}

std::optional<int> ForkServer::take_locked(pid_t pid) {
  const auto it = exited_.find(pid);
  if (it == exited_.end()) return std::nullopt;
  const int status = it->second;
  exited_.erase(it);
  return status;
}

std::optional<int> ForkServer::exit_status(pid_t pid, Nanos timeout_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  const Nanos until = mono_ns() + timeout_ns;
  for (;;) {
    if (auto st = take_locked(pid)) return st;
    const Nanos left = until - mono_ns();
    const int wait_ms = left > 0 ? static_cast<int>(std::min<Nanos>(left / 1'000'000 + 1, 100)) : 0;
    if (!pump_locked(wait_ms) || left <= 0) return take_locked(pid);
  }
}

}  // namespace collie::remote
