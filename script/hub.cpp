#include "script/hub.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "backends/tcp/auth.h"
#include "core/error.h"
#include "script/script_protocol.h"

namespace collie::script {

namespace {

using json = nlohmann::json;

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, OpContext{}, msg); }

constexpr std::size_t kOtherTailLines = 20;

std::string seconds_text(Nanos ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f s", static_cast<double>(ns) / 1e9);
  return b;
}

}  // namespace

std::string script_hello_mac(const std::string& token, const std::string& nonce_hex, long pid) {
  const std::string msg = nonce_hex + " " + std::to_string(pid);
  const tcp::Mac mac = tcp::prove(token, "collie script ",
                                  std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size()));
  return tcp::to_hex(mac);
}

std::string where_text(const json& where) {
  if (!where.is_array() || where.empty() || !where[0].is_array() || where[0].size() < 3) return {};
  const json& f = where[0];
  std::string file = f[0].is_string() ? f[0].get<std::string>() : "?";
  const auto slash = file.rfind('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  std::string s = file + ":" + (f[1].is_number() ? std::to_string(f[1].get<long>()) : "?");
  if (f[2].is_string() && f[2].get<std::string>() != "<module>") s += " (in " + f[2].get<std::string>() + ")";
  return s;
}

struct Hub::Conn {
  int fd = -1;
  remote::MessageReader reader{remote::kMaxUnauthenticatedBytes, 0};
  std::string nonce;
  bool authed = false;
  long pid = -1;
  int child = -1;          // index among the command's own processes, -1: started by the program
  int rank = -1;
  std::string partial;     // output not ended by a newline yet
  std::vector<std::string> held;  // lines written before init_process_group
  bool closed = false;
  bool exit_said = false;
  std::optional<int> exit_code;
  json exception;          // null: none reported
  std::string fate;        // set once closed
  bool on_this_host = false;  // came over the Unix socket or from a loopback address: `pid` is this host's
};

Hub::Hub(HubOptions options, OutputMerge& output) : options_(std::move(options)), output_(output) {
  t0_ = std::chrono::steady_clock::now();
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) usage(std::string("cannot create a socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, options_.listen_host.c_str(), &addr.sin_addr) != 1)
    usage("--listen: '" + options_.listen_host + "' is not an IPv4 address");
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0)
    usage("cannot listen on " + options_.listen_host + ": " + std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  address_ = options_.listen_host + ":" + std::to_string(ntohs(addr.sin_port));
  token_ = tcp::random_token();
  // The Unix socket is an optimisation: without one, everyone uses TCP.
  std::string dir = (std::filesystem::temp_directory_path() / "collie-run-XXXXXX").string();
  if (::mkdtemp(dir.data()) != nullptr) {
    unix_dir_ = dir;
    const std::string path = dir + "/controller";
    sockaddr_un ua{};
    ua.sun_family = AF_UNIX;
    unix_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (unix_fd_ >= 0 && path.size() < sizeof ua.sun_path) {
      std::memcpy(ua.sun_path, path.c_str(), path.size() + 1);
      if (::bind(unix_fd_, reinterpret_cast<sockaddr*>(&ua), sizeof ua) == 0 && ::listen(unix_fd_, 128) == 0)
        unix_path_ = path;
    }
    if (unix_path_.empty() && unix_fd_ >= 0) {
      ::close(unix_fd_);
      unix_fd_ = -1;
    }
  }
}

Hub::~Hub() {
  for (auto& c : conns_)
    if (c->fd >= 0) ::close(c->fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (unix_fd_ >= 0) ::close(unix_fd_);
  if (!unix_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(unix_dir_, ec);
  }
}

Nanos Hub::wall() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
}

void Hub::watch(remote::ChildProcesses* children) {
  children_ = children;
  child_partial_.assign(children ? children->size() : 0, {});
  if (!children) return;
  children->set_output_handler([this](std::size_t child, std::string_view bytes) {
    std::string& p = child_partial_[child];
    p.append(bytes);
    for (auto nl = p.find('\n'); nl != std::string::npos; nl = p.find('\n')) {
      std::string line = p.substr(0, nl);
      p.erase(0, nl + 1);
      other_tail_.push_back(line);
      if (other_tail_.size() > kOtherTailLines) other_tail_.pop_front();
      output_.add_other("process " + std::to_string(children_->pid(child)), std::move(line));
    }
  });
}

std::string Hub::label(const Conn& c) const {
  return c.rank >= 0 ? "rank " + std::to_string(c.rank) : "pid " + std::to_string(c.pid);
}

std::string Hub::recent_other_output() const {
  std::string s;
  for (const auto& l : other_tail_) s += "  | " + l + "\n";
  return s;
}

// ---- I/O --------------------------------------------------------------------

void Hub::accept_one(int listen_fd) {
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  const int one = 1;
  if (listen_fd == listen_fd_) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  c->on_this_host = listen_fd != listen_fd_ ||
                    (peer.ss_family == AF_INET &&
                     (ntohl(reinterpret_cast<const sockaddr_in&>(peer).sin_addr.s_addr) >> 24) == 127);
  c->nonce = tcp::to_hex(tcp::fresh_nonce());
  conns_.push_back(std::move(c));
  write_to(*conns_.back(), json{{"t", "challenge"}, {"nonce", conns_.back()->nonce}}, {});
}

void Hub::write_to(Conn& c, const json& head, const std::vector<std::span<const std::byte>>& blobs) {
  if (c.closed) return;
  write_bytes(c, remote::encode(head, blobs));
}

void Hub::write_bytes(Conn& c, const std::vector<std::byte>& bytes) {
  if (c.closed) return;
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(c.fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{c.fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    return;  // the reading side notices the lost connection
  }
}

void Hub::on_readable(std::size_t i) {
  Conn& c = *conns_[i];
  std::byte buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n > 0) {
      try {
        c.reader.feed(buf, static_cast<std::size_t>(n));
        while (!c.closed) {
          std::optional<remote::Message> m = c.reader.next();
          if (!m) break;
          on_message(i, std::move(*m));
        }
      } catch (const std::exception&) {
        on_closed(i);  // malformed, or too much before proving the token
        return;
      }
      if (!c.authed && c.reader.buffered() > remote::kMaxUnauthenticatedBytes) {
        on_closed(i);
        return;
      }
      if (c.closed) return;
      // A short read took all the socket held: the next poll says when there
      // is more (one read per message, not a second one that finds nothing).
      if (static_cast<std::size_t>(n) < sizeof buf) return;
      continue;
    }
    if (n == 0) {
      on_closed(i);
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) on_closed(i);
    return;
  }
}

void Hub::on_output(std::size_t i, const std::vector<std::byte>& bytes) {
  Conn& c = *conns_[i];
  c.partial.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  for (auto nl = c.partial.find('\n'); nl != std::string::npos; nl = c.partial.find('\n')) {
    std::string line = c.partial.substr(0, nl);
    c.partial.erase(0, nl + 1);
    if (c.rank >= 0) output_.add(c.rank, output_.stamp(c.rank), std::move(line));
    else c.held.push_back(std::move(line));
  }
  output_.flush_ready();
}

void Hub::on_message(std::size_t i, remote::Message m) {
  Conn& c = *conns_[i];
  if (m.head.is_null()) {  // a binary request (only read once authenticated): the rank's to read
    if (c.rank >= 0) {
      inbox_[static_cast<std::size_t>(c.rank)].push_back(std::move(m));
    } else if (m.blobs.size() == 2 && m.blobs[0].size() >= 16) {
      std::uint64_t id = 0;
      std::memcpy(&id, m.blobs[0].data() + 8, sizeof id);
      write_to(c, json{{"t", "failed"}, {"id", id}, {"at_issue", true},
                       {"error", "collie: call init_process_group before anything else of torch.distributed"}},
               {});
    }
    return;
  }
  const std::string t = m.head.value("t", "");
  if (!c.authed) {
    const long pid = m.head.value("pid", -1L);
    if (t != "hello" || pid <= 0 || m.head.value("mac", "") != script_hello_mac(token_, c.nonce, pid)) {
      on_closed(i);
      return;
    }
    c.authed = true;
    c.pid = pid;
    c.reader.set_limits(remote::kMaxHeaderBytes, std::size_t{1} << 40);
    c.reader.accept_binary(true);
    if (children_)
      for (std::size_t k = 0; k < children_->size(); ++k)
        if (children_->pid(k) == static_cast<pid_t>(pid)) c.child = static_cast<int>(k);
    return;
  }
  if (t == "out") {
    if (!m.blobs.empty()) on_output(i, m.blobs[0]);
    return;
  }
  if (t == "init") {
    on_init(i, std::move(m));
    return;
  }
  if (c.rank >= 0) {
    if (t == "exit" || t == "exception") {
      // Notes are the rank's too (its program reports them), but they are
      // also kept here: the rank may be killed before it reads them.
      if (t == "exit") {
        c.exit_said = true;
        if (m.head.contains("code") && m.head["code"].is_number_integer()) c.exit_code = m.head["code"].get<int>();
      } else {
        c.exception = m.head;
      }
    }
    inbox_[static_cast<std::size_t>(c.rank)].push_back(std::move(m));
    return;
  }
  // A process that is not (yet) a rank.
  if (t == "exit") {
    c.exit_said = true;
    if (m.head.contains("code") && m.head["code"].is_number_integer()) c.exit_code = m.head["code"].get<int>();
  } else if (t == "exception") {
    c.exception = m.head;
  } else if (m.head.contains("id")) {
    write_to(c, json{{"t", "failed"}, {"id", m.head["id"]}, {"at_issue", true},
                     {"error", "collie: call init_process_group before anything else of torch.distributed"}},
             {});
  }
}

void Hub::on_init(std::size_t i, remote::Message m) {
  Conn& c = *conns_[i];
  const json id = m.head.value("id", json());
  auto refuse = [&](const std::string& why) {
    write_to(c, json{{"t", "failed"}, {"id", id}, {"error", "collie: " + why}}, {});
    abort(why);
  };
  const int rank = m.head.value("rank", -1);
  const int world = m.head.value("world", -1);
  const std::string where = where_text(m.head.value("where", json::array()));
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(c.pid) +
                          (where.empty() ? "" : ", " + where) + ")";
  if (c.rank >= 0) {
    refuse("rank " + std::to_string(c.rank) + " called init_process_group a second time" +
           (where.empty() ? "" : " at " + where) + "; collie runs one world per run");
    return;
  }
  if (world < 1) {
    refuse(who + " called init_process_group with world_size=" + std::to_string(world));
    return;
  }
  if (world_ == 0) {
    world_ = world;
    world_declared_at_ = wall();
    first_init_text_ = who;
    rank_conn_.assign(static_cast<std::size_t>(world), -1);
    inbox_.assign(static_cast<std::size_t>(world), {});
    answered_at_.assign(static_cast<std::size_t>(world), 0);
    output_.set_world(world);
  } else if (world != world_) {
    refuse("the ranks call init_process_group with different world sizes: " + first_init_text_ + " with world_size=" +
           std::to_string(world_) + ", " + who + " with world_size=" + std::to_string(world));
    return;
  }
  if (rank < 0 || rank >= world_) {
    refuse(who + " called init_process_group with rank=" + std::to_string(rank) + ", outside a world of " +
           std::to_string(world_));
    return;
  }
  const int other = rank_conn_[static_cast<std::size_t>(rank)];
  if (other >= 0) {
    const bool copies = children_ && children_->size() > 1 && c.child < 0;
    refuse("two processes call init_process_group as rank " + std::to_string(rank) + ": pid " +
           std::to_string(conns_[static_cast<std::size_t>(other)]->pid) + " and " + who +
           (copies ? " (each of the -n copies starts processes of its own: run such a program without -n)" : ""));
    return;
  }
  c.rank = rank;
  rank_conn_[static_cast<std::size_t>(rank)] = static_cast<int>(i);
  answered_at_[static_cast<std::size_t>(rank)] = wall();
  // What it wrote before it knew its rank: at its clock's start.
  for (std::string& line : c.held) output_.add(rank, 0, std::move(line));
  c.held.clear();
  inbox_[static_cast<std::size_t>(rank)].push_back(std::move(m));
  output_.flush_ready();
}

std::string Hub::fate_of(Conn& c) {
  if (!c.fate.empty()) return c.fate;
  std::optional<std::string> status;
  if (c.child >= 0 && children_) {
    const auto k = static_cast<std::size_t>(c.child);
    for (int tries = 0; tries < 100 && !children_->exited(k); ++tries) {
      children_->reap();
      if (!children_->exited(k)) ::poll(nullptr, 0, 2);
    }
    if (children_->exited(k)) status = children_->fate(k);
  }
  if (!c.exception.is_null()) {
    c.fate = "raised " + c.exception.value("type", std::string("an exception")) +
             (c.exception.value("message", std::string()).empty() ? "" : ": " + c.exception.value("message", std::string()));
  } else if (status && *status != "exited with code 0") {
    c.fate = *status;
  } else if (c.exit_said && c.exit_code && *c.exit_code != 0) {
    c.fate = "exited with code " + std::to_string(*c.exit_code);
  } else if (c.exit_said || status) {
    c.fate = "exited with code 0";
  } else {
    c.fate = "ended without a word (killed by a signal, or os._exit)";
  }
  return c.fate;
}

void Hub::on_closed(std::size_t i) {
  Conn& c = *conns_[i];
  if (c.closed) return;
  c.closed = true;
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  if (!c.authed) return;
  if (!c.partial.empty()) {
    c.partial += '\n';
    on_output(i, {});
  }
  const std::string fate = fate_of(c);
  if (c.rank >= 0) {
    output_.set_done(c.rank);
    output_.flush_ready();
    return;
  }
  // A process that never became a rank: its lines now, and its failure.
  for (std::string& line : c.held) {
    other_tail_.push_back(line);
    if (other_tail_.size() > kOtherTailLines) other_tail_.pop_front();
    output_.add_other(label(c), std::move(line));
  }
  c.held.clear();
  if (fate != "exited with code 0") {
    std::string text = "process " + std::to_string(c.pid) + " (not a rank) " + fate;
    if (!c.exception.is_null()) text += "\n" + c.exception.value("traceback", std::string());
    while (!text.empty() && text.back() == '\n') text.pop_back();
    other_failures_.push_back(std::move(text));
  }
}

void Hub::poll_once(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<long> who;  // -1: listen, -2 - k: child pipe, else connection index
  fds.push_back({listen_fd_, POLLIN, 0});
  who.push_back(-1);
  if (unix_fd_ >= 0) {
    fds.push_back({unix_fd_, POLLIN, 0});
    who.push_back(-1);
  }
  for (std::size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i]->closed) continue;
    fds.push_back({conns_[i]->fd, POLLIN, 0});
    who.push_back(static_cast<long>(i));
  }
  if (children_)
    for (int fd : children_->output_fds()) {
      fds.push_back({fd, POLLIN, 0});
      who.push_back(-2);
    }
  const int rc = ::poll(fds.data(), fds.size(), timeout_ms);
  if (rc < 0) return;  // EINTR: the caller's loop polls again
  // Exit statuses are collected when a child's pipe says something (it
  // closes as the child ends) or nothing happened: not on every request.
  bool reap = rc == 0;
  for (std::size_t k = 0; k < fds.size(); ++k) {
    if (!fds[k].revents) continue;
    if (who[k] == -1) {
      accept_one(fds[k].fd);
    } else if (who[k] == -2) {
      children_->read_output(fds[k].fd);
      reap = true;
    } else {
      on_readable(static_cast<std::size_t>(who[k]));
    }
  }
  if (children_ && reap) children_->reap();
}

bool Hub::program_gone() {
  if (children_) {
    children_->reap();
    if (!children_->all_exited()) return false;
  }
  for (const auto& c : conns_) {
    if (!c->closed) return false;
    // Its connection closes before a killed process has ended: "no
    // process outlives the run" waits for the process itself (one on this
    // host: others are their launcher's).
    if (c->on_this_host && c->pid > 0 && !remote::process_ended(c->pid)) return false;
  }
  return true;
}

// ---- what the controller asks ----------------------------------------------

std::optional<int> Hub::await_world(std::string* why) {
  for (;;) {
    if (world_ > 0) return world_;
    if (!fatal_.empty()) {
      *why = fatal_;
      return std::nullopt;
    }
    if (program_gone()) {
      *why = "the program ended without calling torch.distributed.init_process_group";
      return std::nullopt;
    }
    if (wall() > options_.join_timeout_ns) {
      *why = "no process of the program called torch.distributed.init_process_group within " +
             seconds_text(options_.join_timeout_ns);
      return std::nullopt;
    }
    poll_once(100);
  }
}

Incoming Hub::next(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  for (;;) {
    if (!fatal_.empty()) return Incoming{Incoming::Kind::kAborted, {}, fatal_};
    if (!inbox_[r].empty()) {
      Incoming in;
      in.message = std::move(inbox_[r].front());
      inbox_[r].pop_front();
      return in;
    }
    const Nanos now = wall();
    const int ci = rank_conn_[r];
    if (ci >= 0) {
      Conn& c = *conns_[static_cast<std::size_t>(ci)];
      if (c.closed) return Incoming{Incoming::Kind::kEnded, {}, "its process " + fate_of(c)};
      if (now - answered_at_[r] > options_.compute_timeout_ns)
        return Incoming{Incoming::Kind::kSilent, {},
                        "rank " + std::to_string(rank) + " made no call to collie for " +
                            seconds_text(options_.compute_timeout_ns) +
                            " of wall time (--compute-timeout): it computes, or waits for something collie cannot "
                            "see (collie holds the virtual clock while a rank computes)"};
    } else {
      if (program_gone())
        return Incoming{Incoming::Kind::kEnded, {},
                        "the program's processes ended before rank " + std::to_string(rank) +
                            " called init_process_group (" + first_init_text_ + " declared a world of " +
                            std::to_string(world_) + ")"};
      if (now - world_declared_at_ > options_.join_timeout_ns)
        return Incoming{Incoming::Kind::kEnded, {},
                        "rank " + std::to_string(rank) + " did not call init_process_group within " +
                            seconds_text(options_.join_timeout_ns) + " of " + first_init_text_ +
                            ", which declared a world of " + std::to_string(world_)};
    }
    poll_once(100);
  }
}

void Hub::answer(int rank, const json& head, const std::vector<std::span<const std::byte>>& blobs) {
  const int ci = rank_conn_[static_cast<std::size_t>(rank)];
  if (ci < 0) return;
  answered_at_[static_cast<std::size_t>(rank)] = wall();
  write_to(*conns_[static_cast<std::size_t>(ci)], head, blobs);
}

void Hub::answer(int rank, const BinaryAnswer& a, const std::vector<std::size_t>& outputs,
                 const std::vector<std::span<const std::byte>>& blobs) {
  const int ci = rank_conn_[static_cast<std::size_t>(rank)];
  if (ci < 0) return;
  answered_at_[static_cast<std::size_t>(rank)] = wall();
  write_bytes(*conns_[static_cast<std::size_t>(ci)], encode_binary_answer(a, outputs, blobs));
}

void Hub::abort(const std::string& why) {
  if (fatal_.empty()) fatal_ = why;
}

long Hub::pid_of(int rank) const {
  if (rank < 0 || static_cast<std::size_t>(rank) >= rank_conn_.size()) return -1;
  const int ci = rank_conn_[static_cast<std::size_t>(rank)];
  return ci < 0 ? -1 : conns_[static_cast<std::size_t>(ci)]->pid;
}

std::vector<long> Hub::pids() const {
  std::vector<long> out;
  if (children_)
    for (std::size_t k = 0; k < children_->size(); ++k) out.push_back(children_->pid(k));
  for (const auto& c : conns_)
    if (c->pid > 0 && std::find(out.begin(), out.end(), c->pid) == out.end()) out.push_back(c->pid);
  return out;
}

void Hub::kill_rank(int rank) {
  const long pid = pid_of(rank);
  if (pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
}

void Hub::finish(bool kill, Nanos grace_ns) {
  const Nanos start = wall();
  auto kill_all = [&] {
    for (const auto& c : conns_)
      if (!c->closed && c->pid > 0) ::kill(static_cast<pid_t>(c->pid), SIGKILL);
    if (children_) children_->signal_all(SIGKILL);
  };
  if (kill) kill_all();
  bool killed = kill;
  for (;;) {
    if (program_gone()) break;
    if (!killed && wall() - start > grace_ns) {
      kill_all();
      killed = true;
    }
    if (killed && wall() - start > grace_ns + 5'000'000'000) break;  // unkillable: give up waiting
    poll_once(20);
  }
  if (children_) {
    for (int fd : children_->output_fds()) children_->read_output(fd);
    for (std::size_t k = 0; k < child_partial_.size(); ++k)
      if (!child_partial_[k].empty()) {
        output_.add_other("process " + std::to_string(children_->pid(k)), child_partial_[k]);
        child_partial_[k].clear();
      }
  }
}

}  // namespace collie::script
