#include "backends/remote/process_job.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "backends/remote/op_protocol.h"
#include "backends/remote/remote_dist.h"
#include "backends/tcp/auth.h"
#include "core/error.h"

namespace collie::remote {

namespace {

using json = nlohmann::json;

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, OpContext{}, msg); }

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string signal_name(int sig) {
  const char* s = ::strsignal(sig);
  return s ? s : "unknown signal";
}

std::string seconds(Nanos ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", static_cast<double>(ns) / 1e9);
  return b;
}

std::optional<ErrorKind> parse_kind(const std::string& k) {
  for (int i = 0; i <= static_cast<int>(ErrorKind::kUnsupported); ++i)
    if (error_kind_name(static_cast<ErrorKind>(i)) == k) return static_cast<ErrorKind>(i);
  return std::nullopt;
}

// One op sent to a rank's process and not answered yet -- or held back
// until the process has done everything before it, for a fault to hit it.
struct Pending {
  std::shared_ptr<WorkState> work;
  std::vector<TensorView> tensors;  // the caller's buffers, where outputs land
  bool async = false;
  bool wait_sent = false;
  // Held for a process fault: the op's message (sent once the process
  // answered "synced"), the fault, and whether its wait was asked for.
  std::optional<json> held;
  const ProcessFault* fault = nullptr;
  bool wait_wanted = false;
};

struct RankLink {
  int fd = -1;
  MessageReader reader;
  std::deque<std::vector<std::byte>> out;
  std::size_t out_off = 0;
  pid_t pid = -1;
  std::string host;
  bool dead = false;
  std::string fate;          // how its process ended, once dead
  bool crashed = false;      // killed by an injected fault
  std::shared_ptr<OpInfo> last_op;  // the last op it started in this run
  std::string last_op_text;
};

class ProcessJob final : public Job, public Executor, public RankChannel {
 public:
  ProcessJob(const ProcessJobSpec& spec, const JobOptions& options) : spec_(spec), options_(options) {
    world_ = run_world_ = options.world_size;
    t0_ = std::chrono::steady_clock::now();
    ranks_.resize(static_cast<std::size_t>(world_));
    start();
  }
  ~ProcessJob() override {
    for (auto& r : ranks_) {
      if (r.fd < 0 || r.dead) continue;
      queue(r, json{{"t", "end"}}, {});
      flush(r);
    }
    // The children end in the background: the next job need not wait for
    // this one's launcher to shut down.
    end_in_background(std::move(children_), 2.0);
    for (auto& r : ranks_)
      if (r.fd >= 0) ::close(r.fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (spec_.clean_up && !token_.empty()) spec_.clean_up(token_);
  }

  // ---- Job ----------------------------------------------------------------
  int world_size() const override { return world_; }
  std::string implementation() const override { return implementation_; }
  bool reusable() const override { return reusable_; }
  bool can_run_world(int world) const override {
    return world == world_ || (spec_.serves_smaller_worlds && world >= 1 && world < world_);
  }
  void set_run_options(const JobOptions& o) override {
    options_.timeout_ns = o.timeout_ns;
    options_.stall_after_failure_ns = o.stall_after_failure_ns;
    options_.process_faults = o.process_faults;
    options_.views = o.views;
    if (can_run_world(o.world_size)) run_world_ = o.world_size;
  }
  RunResult run(const DistProgram& program, const RunContext& context) override;
  std::string bench_in_ranks(const std::string& options_json) override;

  // ---- Executor -----------------------------------------------------------
  void schedule(std::coroutine_handle<> h) override { ready_.push_back(h); }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override { timers_.emplace(when, h); }
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override {
    const Drive d = drive(done, deadline);
    if (d == Drive::kStalled)
      throw Error(ErrorKind::kTimeout, OpContext{}, "no rank of the job made progress for " + seconds(stall_timeout()));
    return d == Drive::kDone;
  }
  Nanos now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  }
  void awaited(WorkState& w) noexcept override {
    if (!w.info) return;
    auto it = pending_.find({w.info->rank, w.info->id});
    if (it == pending_.end() || !it->second.async || it->second.wait_sent) return;
    if (it->second.held) {
      it->second.wait_wanted = true;
      return;
    }
    it->second.wait_sent = true;
    RankLink& r = ranks_[static_cast<std::size_t>(w.info->rank)];
    if (r.dead) return;
    queue(r, json{{"t", "wait"}, {"id", w.info->id}}, {});
    flush(r);
  }

  // ---- RankChannel (remote_dist.h) ---------------------------------------
  Executor& executor() override { return *this; }
  Work issue(int rank, const std::shared_ptr<OpInfo>& info, json head, std::vector<TensorView> tensors, bool async,
             std::string description) override;
  void announce_group(int rank, int id, const std::vector<int>& ranks, Nanos timeout_ns,
                      const std::string& name) override {
    json head{{"t", "group"}, {"group", id}, {"ranks", ranks}, {"name", name}};
    if (timeout_ns > 0) head["timeout_ns"] = timeout_ns;
    std::vector<int> to{rank};
    // Ranks idle in this run make each group too (as the first rank to make
    // it says), so that group ids stay the same on every rank.
    if (id > idle_groups_) {
      idle_groups_ = id;
      for (int idle = run_world_; idle < world_; ++idle) to.push_back(idle);
    }
    tell(to, head);
  }
  void announce_destroyed(int rank, int id) override {
    const json head{{"t", "ungroup"}, {"group", id}};
    std::vector<int> to{rank};
    if (idle_destroyed_.insert(id).second)
      for (int idle = run_world_; idle < world_; ++idle) to.push_back(idle);
    tell(to, head);
  }
  // Sends `head` (no buffers) to each live rank of `to`.
  void tell(const std::vector<int>& to, const json& head) {
    for (int t : to) {
      RankLink& r = ranks_[static_cast<std::size_t>(t)];
      if (r.dead) continue;
      queue(r, head, {});
      flush(r);
    }
  }
  Nanos default_timeout_ns() const override { return options_.timeout_ns; }
  std::vector<std::string> pending_of(int rank) const override {
    std::vector<std::string> out;
    for (const auto& [key, p] : pending_)
      if (key.first == rank) out.push_back(p.work->describe());
    return out;
  }

 private:
  enum class Drive { kDone, kDeadline, kStalled };

  void start();
  void handshake(int fd, std::map<int, MessageReader>& readers, std::map<int, std::string>& nonces);
  [[noreturn]] void failed_start(const std::string& why);
  void queue(RankLink& r, const json& head, const std::vector<std::span<const std::byte>>& blobs);
  void flush(RankLink& r);
  void on_readable(int rank);
  void on_message(int rank, Message m);
  void lost(int rank, const std::string& why);
  Drive drive(const std::function<bool()>& done, std::optional<Nanos> deadline);
  Nanos stall_timeout() const {
    // The library's own timeouts (the op timeout, passed on) fire first:
    // the margin is half the timeout, between 1 s and 5 s. A library without
    // them gets it only once a rank's process is lost: its launcher then
    // takes a moment to end the job (mpirun, on a loaded machine).
    if (run_failed_ && options_.stall_after_failure_ns > 0) return options_.stall_after_failure_ns;
    if (options_.timeout_ns <= 0) return 60'000'000'000;
    if (!spec_.library_timeouts &&
        std::none_of(ranks_.begin(), ranks_.end(), [](const RankLink& r) { return r.dead; }))
      return options_.timeout_ns;
    return options_.timeout_ns + std::clamp<Nanos>(options_.timeout_ns / 2, 1'000'000'000, 5'000'000'000);
  }
  const ProcessFault* fault_for(int rank, std::uint64_t op_number) const;
  void send_op(int rank, Pending& p, const json& head);
  void on_synced(int rank, std::uint64_t id);
  std::string hang_report(const std::vector<int>& blocked) const;

  ProcessJobSpec spec_;
  JobOptions options_;
  int world_ = 0;
  int run_world_ = 0;  // the runs' world: ranks from it on idle (serves_smaller_worlds)
  int idle_groups_ = 0;  // groups of this run the idle ranks were told of
  std::set<int> idle_destroyed_;  // groups of this run the idle ranks were told are destroyed
  std::chrono::steady_clock::time_point t0_;
  int listen_fd_ = -1;
  std::string token_;
  std::unique_ptr<ChildProcesses> children_;
  std::vector<RankLink> ranks_;
  std::map<std::pair<int, std::uint64_t>, Pending> pending_;
  std::deque<std::coroutine_handle<>> ready_;
  std::multimap<Nanos, std::coroutine_handle<>> timers_;
  std::multimap<Nanos, int> resume_at_;  // stalled ranks' SIGCONT times
  Nanos last_progress_ = 0;
  bool run_failed_ = false;  // an op of this run failed (JobOptions::stall_after_failure_ns)
  bool reusable_ = true;
  bool in_run_ = false;
  std::string implementation_;
  std::optional<std::string> bootstrap_;  // rank 0's hello's, handed to every rank once all joined
  std::map<int, json> bench_answers_;
  std::uint64_t run_number_ = 0;
  Nanos run_started_ = 0;
  // Proven workers that said another world size (explain_wrong_world).
  bool draining_ = false;  // lost() is reading the other ranks' last messages
  int wrong_world_ = 0;
  int wrong_world_said_ = 0;
  std::string wrong_world_library_;
};

// ---- ProcessJob: starting ---------------------------------------------------

void ProcessJob::failed_start(const std::string& why) {
  std::string msg = spec_.backend + ": " + why;
  if (wrong_world_ > 0) {
    msg += "; " + std::to_string(wrong_world_) +
           (wrong_world_ > 1 ? " processes proved the job's token but said they are ranks"
                             : " process proved the job's token but said it is a rank") +
           " of a world of " + std::to_string(wrong_world_said_) + ", not " + std::to_string(world_);
    if (spec_.explain_wrong_world)
      if (const std::string advice = spec_.explain_wrong_world(wrong_world_said_, wrong_world_library_); !advice.empty())
        msg += ": " + advice;
  }
  if (children_) {
    children_->reap();
    for (int fd : children_->output_fds()) children_->read_output(fd);
    std::string out;
    for (std::size_t i = 0; i < children_->size() && out.empty(); ++i) out = children_->output_tail(i);
    if (spec_.explain_failed_start) {
      const std::string advice = spec_.explain_failed_start(out);
      if (!advice.empty()) msg += "; " + advice;
    } else if (!last_line(out).empty()) {
      msg += ": " + last_line(out);
    }
    children_->terminate(1.0);
  }
  if (spec_.clean_up && !token_.empty()) spec_.clean_up(token_);
  throw Error(ErrorKind::kUsage, OpContext{}, msg);
}

void ProcessJob::start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) usage(spec_.backend + ": cannot create a socket: " + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, spec_.listen_host.c_str(), &addr.sin_addr) != 1)
    usage(spec_.backend + ": the controller address '" + spec_.listen_host + "' is not an IPv4 address");
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0)
    usage(spec_.backend + ": cannot listen on " + spec_.listen_host + ": " + std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string controller = spec_.listen_host + ":" + std::to_string(ntohs(addr.sin_port));
  const std::string token = tcp::random_token();
  token_ = token;
  try {
    children_ = std::make_unique<ChildProcesses>(spec_.children(world_, controller, token));
  } catch (const std::exception& e) {
    usage(spec_.backend + ": cannot start the job: " + e.what());
  }

  std::map<int, MessageReader> readers;  // connections still proving themselves
  std::map<int, std::string> nonces;
  int joined = 0;
  const Nanos until = now() + spec_.start_timeout_ns;
  while (joined < world_) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& [fd, r] : readers) fds.push_back({fd, POLLIN, 0});
    for (int fd : children_->output_fds()) fds.push_back({fd, POLLIN, 0});
    const int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc < 0 && errno != EINTR) failed_start(std::string("poll failed: ") + std::strerror(errno));
    for (const pollfd& p : fds) {
      if (!p.revents) continue;
      if (p.fd == listen_fd_) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;  // EMFILE and friends: keep accepting the others
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        const std::string nonce = tcp::to_hex(tcp::fresh_nonce());
        try {
          write_message(fd, json{{"t", "challenge"}, {"nonce", nonce}});
        } catch (const std::exception&) {
          ::close(fd);
          continue;
        }
        readers.emplace(fd, MessageReader(kMaxUnauthenticatedBytes, 0));
        nonces[fd] = nonce;
      } else if (readers.count(p.fd)) {
        handshake(p.fd, readers, nonces);
      } else {
        children_->read_output(p.fd);
      }
    }
    joined = 0;
    for (const RankLink& r : ranks_) joined += r.fd >= 0 ? 1 : 0;
    if (joined == world_) break;
    children_->reap();
    for (std::size_t i = 0; i < children_->size(); ++i) {
      if (!children_->exited(i)) continue;
      const std::string who = spec_.child_per_rank ? "rank " + std::to_string(i) + "'s process" : "the launcher";
      failed_start(who + " " + children_->fate(i) + " before every rank joined the job (" + std::to_string(joined) +
                   "/" + std::to_string(world_) + " joined)");
    }
    if (now() > until) {
      std::string missing;
      for (int r = 0; r < world_; ++r)
        if (ranks_[static_cast<std::size_t>(r)].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      failed_start(std::to_string(joined) + "/" + std::to_string(world_) + " ranks joined within " +
                   seconds(spec_.start_timeout_ns) + "; missing: " + missing);
    }
  }
  for (const auto& [fd, r] : readers) ::close(fd);
  ::close(listen_fd_);
  listen_fd_ = -1;
  for (RankLink& r : ranks_) {
    r.reader.set_limits(kMaxHeaderBytes, std::size_t{1} << 40);
    ::fcntl(r.fd, F_SETFL, ::fcntl(r.fd, F_GETFL) | O_NONBLOCK);
    // Rank 0's bootstrap (NCCL's unique id) to every rank, before anything else.
    if (bootstrap_) {
      queue(r, json{{"t", "welcome"}, {"bootstrap", *bootstrap_}}, {});
      flush(r);
    }
  }
}

void ProcessJob::handshake(int fd, std::map<int, MessageReader>& readers, std::map<int, std::string>& nonces) {
  auto drop = [&] {
    ::close(fd);
    readers.erase(fd);
    nonces.erase(fd);
  };
  std::byte buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    drop();
    return;
  }
  MessageReader& reader = readers.at(fd);
  std::optional<Message> m;
  try {
    reader.feed(buf, static_cast<std::size_t>(n));
    m = reader.next();
  } catch (const std::exception&) {
    drop();  // too large or malformed before authenticating
    return;
  }
  if (!m) {
    if (reader.buffered() > kMaxUnauthenticatedBytes) drop();
    return;
  }
  const json& h = m->head;
  const int rank = h.value("rank", -1);
  const bool proven =
      h.value("t", "") == "hello" && rank >= 0 && rank < world_ && h.value("mac", "") == hello_mac(token_, nonces[fd], rank);
  if (proven && h.value("world", -1) != world_) {
    // One of ours, started alone (a worker under a foreign launcher).
    ++wrong_world_;
    wrong_world_said_ = h.value("world", -1);
    wrong_world_library_ = h.value("library", "");
    drop();
    if (wrong_world_ >= world_) failed_start("0/" + std::to_string(world_) + " ranks joined");
    return;
  }
  const bool ok = proven && ranks_[static_cast<std::size_t>(rank)].fd < 0;
  if (!ok) {
    drop();
    return;
  }
  RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  r.fd = fd;
  r.pid = h.value("pid", -1);
  r.host = h.value("host", "");
  if (rank == 0) implementation_ = h.value("library", spec_.backend);
  if (rank == 0 && h.contains("bootstrap") && h["bootstrap"].is_string()) bootstrap_ = h["bootstrap"].get<std::string>();
  readers.erase(fd);
  nonces.erase(fd);
}

// ---- ProcessJob: I/O --------------------------------------------------------

void ProcessJob::queue(RankLink& r, const json& head, const std::vector<std::span<const std::byte>>& blobs) {
  r.out.push_back(encode(head, blobs));
}

void ProcessJob::flush(RankLink& r) {
  while (!r.out.empty() && !r.dead) {
    const auto& front = r.out.front();
    const ssize_t n = ::send(r.fd, front.data() + r.out_off, front.size() - r.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return;  // the reader side notices the lost connection
    }
    r.out_off += static_cast<std::size_t>(n);
    if (r.out_off == front.size()) {
      r.out.pop_front();
      r.out_off = 0;
    }
  }
}

void ProcessJob::on_readable(int rank) {
  RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  std::byte buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(r.fd, buf, sizeof buf);
    if (n > 0) {
      try {
        r.reader.feed(buf, static_cast<std::size_t>(n));
        while (auto m = r.reader.next()) on_message(rank, std::move(*m));
      } catch (const std::exception& e) {
        lost(rank, std::string("sent a malformed message (") + e.what() + ")");
        return;
      }
      continue;
    }
    if (n == 0) {
      lost(rank, "");
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) lost(rank, std::strerror(errno));
    return;
  }
}

void ProcessJob::on_message(int rank, Message m) {
  last_progress_ = now();
  const json& h = m.head;
  const std::string t = h.value("t", "");
  if (t == "bench_rows" || t == "bench_failed") {
    bench_answers_[rank] = std::move(m.head);
    return;
  }
  if (t == "synced") {
    on_synced(rank, h.value("id", std::uint64_t{0}));
    return;
  }
  if (t == "crashed") {  // the worker's signal handler: the connection closes next
    const int sig = h.value("signal", 0);
    RankLink& r = ranks_[static_cast<std::size_t>(rank)];
    if (r.fate.empty() && sig > 0)
      r.fate = "was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
    return;
  }
  if (t != "done" && t != "failed") return;
  const std::uint64_t id = h.value("id", std::uint64_t{0});
  auto it = pending_.find({rank, id});
  if (it == pending_.end()) return;  // an answer from an earlier run, or to nothing
  Pending p = std::move(it->second);
  pending_.erase(it);
  WorkState& w = *p.work;
  const OpInfo& info = *w.info;
  if (t == "failed") {
    run_failed_ = true;
    const std::string kind = h.value("kind", "library");
    const std::string text = h.value("error", "(no message)");
    const auto k = parse_kind(kind);
    if (!k || *k != ErrorKind::kUnsupported) reusable_ = false;  // a library error may leave it inconsistent
    if (k) {
      OpContext ctx = info.context();
      if (h.contains("context") && h["context"].is_object()) {
        const json& c = h["context"];
        ctx = OpContext{c.value("rank", -1), c.value("op", ""), c.value("group", ""), c.value("seq", std::int64_t{-1}),
                        c.value("peers", std::vector<int>{})};
      }
      w.finish(std::make_exception_ptr(Error(*k, std::move(ctx), text)));
    } else if (kind == "check") {
      w.finish(std::make_exception_ptr(LibraryCheckFailure(w.describe() + ": " + text)));
    } else {
      w.finish(std::make_exception_ptr(LibraryError(w.describe() + ": " + text)));
    }
    return;
  }
  w.source = h.value("source", -1);
  w.not_member = h.value("not_member", false);
  const json outputs = h.value("outputs", json::array());
  if (!outputs.is_array() || outputs.size() != m.blobs.size()) {
    reusable_ = false;
    w.finish(std::make_exception_ptr(
        Error(ErrorKind::kTransport, info.context(), "rank " + std::to_string(rank) + "'s process answered with " +
                                                         std::to_string(m.blobs.size()) + " buffers for " +
                                                         std::to_string(outputs.size()) + " outputs (a worker bug)")));
    return;
  }
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto idx = outputs[k].get<std::size_t>();
    if (idx >= p.tensors.size() || m.blobs[k].size() != p.tensors[idx].bytes()) {
      reusable_ = false;
      w.finish(std::make_exception_ptr(Error(
          ErrorKind::kTransport, info.context(),
          "rank " + std::to_string(rank) + "'s process returned " + std::to_string(m.blobs[k].size()) +
              " bytes for buffer " + std::to_string(idx) + " of " + w.describe() + ", which holds " +
              (idx < p.tensors.size() ? std::to_string(p.tensors[idx].bytes()) : std::string("nothing")))));
      return;
    }
    if (!m.blobs[k].empty()) std::memcpy(p.tensors[idx].data, m.blobs[k].data(), m.blobs[k].size());
  }
  w.finish();
}

void ProcessJob::lost(int rank, const std::string& why) {
  RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  if (r.dead) return;
  r.dead = true;
  reusable_ = false;
  // The process is usually gone by the time its connection closes; give it
  // a moment to be reaped so that its fate can be named.
  if (children_) {
    for (int i = 0; i < 50; ++i) {
      children_->reap();
      const std::size_t c = spec_.child_per_rank ? static_cast<std::size_t>(rank) : 0;
      if (c < children_->size() && children_->exited(c)) break;
      ::poll(nullptr, 0, 2);
    }
  }
  // A launcher ends every rank when one dies: first take what the others
  // said (a dying worker's "crashed"), so that the one that died first is
  // named in the others' reports.
  if (!spec_.child_per_rank && !draining_) {
    draining_ = true;
    for (int other = 0; other < world_; ++other)
      if (other != rank && !ranks_[static_cast<std::size_t>(other)].dead) on_readable(other);
    draining_ = false;
  }
  if (r.fate.empty()) {
    if (spec_.child_per_rank && children_ && children_->exited(static_cast<std::size_t>(rank))) {
      r.fate = children_->fate(static_cast<std::size_t>(rank));
    } else if (!spec_.child_per_rank && children_ && children_->exited(0)) {
      r.fate = "ended with the job: the launcher " + children_->fate(0);
    } else {
      r.fate = "closed its connection" + (why.empty() ? std::string() : " (" + why + ")");
    }
    for (int other = 0; other < world_ && !spec_.child_per_rank; ++other) {
      const std::string& f = ranks_[static_cast<std::size_t>(other)].fate;
      if (other != rank && f.rfind("was killed by signal", 0) == 0) {
        r.fate += " (after rank " + std::to_string(other) + "'s process " + f + ")";
        break;
      }
    }
  }
  // Its last words: what it (or the launcher, which carries every rank's
  // output) wrote last -- the library's message of why, as a rule.
  std::string words;
  if (children_ && !r.crashed) {
    for (int fd : children_->output_fds()) children_->read_output(fd);
    const std::size_t c = spec_.child_per_rank ? static_cast<std::size_t>(rank) : 0;
    if (c < children_->size()) {
      const std::string tail = children_->output_tail(c, 4000);
      for (const std::string& l : spec_.last_words ? spec_.last_words(tail) : last_lines(tail, 6))
        words += (words.empty() ? "" : "\n") + std::string("      | ") + l;
    }
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->first.first != rank) {
      ++it;
      continue;
    }
    WorkState& w = *it->second.work;
    auto err = std::make_exception_ptr(Error(ErrorKind::kTransport, w.info->context(),
                                             "rank " + std::to_string(rank) + "'s process " + r.fate + " during " +
                                                 w.describe() +
                                                 (words.empty() ? std::string()
                                                                : "; the last lines on its stderr" +
                                                                      std::string(spec_.child_per_rank
                                                                                      ? ""
                                                                                      : " (the launcher's, every rank's)") +
                                                                      ":\n" + words)));
    auto keep = it->second.work;
    it = pending_.erase(it);
    keep->finish(err);
  }
}

ProcessJob::Drive ProcessJob::drive(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  for (;;) {
    while (!ready_.empty()) {
      auto h = ready_.front();
      ready_.pop_front();
      h.resume();
    }
    if (done()) return Drive::kDone;
    const Nanos t = now();
    bool fired = false;
    while (!timers_.empty() && timers_.begin()->first <= t) {
      ready_.push_back(timers_.begin()->second);
      timers_.erase(timers_.begin());
      fired = true;
    }
    while (!resume_at_.empty() && resume_at_.begin()->first <= t) {
      const int rank = resume_at_.begin()->second;
      resume_at_.erase(resume_at_.begin());
      RankLink& r = ranks_[static_cast<std::size_t>(rank)];
      if (!r.dead && r.pid > 0) ::kill(r.pid, SIGCONT);
      last_progress_ = t;
    }
    if (fired) continue;
    if (deadline && t >= *deadline) return Drive::kDeadline;
    if (t - last_progress_ >= stall_timeout()) return Drive::kStalled;
    Nanos wake = last_progress_ + stall_timeout();
    if (deadline) wake = std::min(wake, *deadline);
    if (!timers_.empty()) wake = std::min(wake, timers_.begin()->first);
    if (!resume_at_.empty()) wake = std::min(wake, resume_at_.begin()->first);
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int rank = 0; rank < world_; ++rank) {
      RankLink& r = ranks_[static_cast<std::size_t>(rank)];
      if (r.dead) continue;
      fds.push_back({r.fd, static_cast<short>(POLLIN | (r.out.empty() ? 0 : POLLOUT)), 0});
      who.push_back(rank);
    }
    if (children_)
      for (int fd : children_->output_fds()) {
        fds.push_back({fd, POLLIN, 0});
        who.push_back(-1);
      }
    const int ms = static_cast<int>(std::clamp<Nanos>((wake - t + 999'999) / 1'000'000, 0, 1000));
    const int rc = ::poll(fds.data(), fds.size(), ms);
    if (rc < 0 && errno != EINTR) throw Error(ErrorKind::kTransport, OpContext{}, std::string("poll: ") + std::strerror(errno));
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      if (who[i] < 0) {
        children_->read_output(fds[i].fd);
        continue;
      }
      RankLink& r = ranks_[static_cast<std::size_t>(who[i])];
      if (fds[i].revents & POLLOUT) flush(r);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) on_readable(who[i]);
    }
  }
}

const ProcessFault* ProcessJob::fault_for(int rank, std::uint64_t op_number) const {
  const RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  for (const ProcessFault& f : options_.process_faults)
    if (f.rank == rank && f.before_op == op_number && !r.dead && r.pid > 0) return &f;
  return nullptr;
}

void ProcessJob::send_op(int rank, Pending& p, const json& head) {
  RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  std::vector<std::span<const std::byte>> blobs;
  for (const TensorView& t : p.tensors) blobs.emplace_back(t.byte_data(), t.bytes());
  queue(r, head, blobs);
  flush(r);
}

// The process of `rank` has done everything before held op `id`: the fault
// hits now.
void ProcessJob::on_synced(int rank, std::uint64_t id) {
  auto it = pending_.find({rank, id});
  if (it == pending_.end() || !it->second.held) return;
  Pending& p = it->second;
  RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  const ProcessFault& f = *p.fault;
  reusable_ = false;
  if (f.kind == ProcessFault::Kind::kCrash) {
    ::kill(r.pid, SIGKILL);
    r.crashed = true;
    if (children_ && spec_.child_per_rank)
      for (int i = 0; i < 500 && !children_->exited(static_cast<std::size_t>(rank)); ++i) {
        children_->reap();
        if (!children_->exited(static_cast<std::size_t>(rank))) ::poll(nullptr, 0, 1);
      }
    r.fate = "was killed (SIGKILL) by the injected fault " + f.text + " before " + p.work->describe();
    lost(rank, "");
    return;
  }
  ::kill(r.pid, SIGSTOP);
  resume_at_.emplace(now() + f.stall_ms * 1'000'000, rank);
  const json head = std::move(*p.held);
  p.held.reset();
  send_op(rank, p, head);
  if (p.wait_wanted) {
    p.wait_sent = true;
    queue(r, json{{"t", "wait"}, {"id", id}}, {});
    flush(r);
  }
}

Work ProcessJob::issue(int rank, const std::shared_ptr<OpInfo>& info, json head, std::vector<TensorView> tensors,
                       bool async, std::string description) {
  RankLink& r = ranks_[static_cast<std::size_t>(rank)];
  auto w = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
  w->executor = this;
  w->info = info;
  w->more().description = std::move(description);
  w->posted_at = now();
  info->started_at = w->posted_at;
  r.last_op = info;
  r.last_op_text = w->description();
  if (r.dead) {
    w->finish(std::make_exception_ptr(
        Error(ErrorKind::kTransport, info->context(), "rank " + std::to_string(rank) + "'s process " + r.fate)));
    return Work(w);
  }
  Pending& p = pending_.emplace(std::make_pair(rank, info->id), Pending{w, std::move(tensors), async, false, std::nullopt, nullptr, false}).first->second;
  if (const ProcessFault* f = fault_for(rank, info->id)) {
    // The fault hits once the process has done everything before this op.
    p.held = std::move(head);
    p.fault = f;
    queue(r, json{{"t", "sync"}, {"id", info->id}}, {});
    flush(r);
    return Work(w);
  }
  send_op(rank, p, head);
  return Work(w);
}

std::string ProcessJob::hang_report(const std::vector<int>& blocked) const {
  std::ostringstream os;
  const Nanos t = now();
  if (run_failed_ && options_.stall_after_failure_ns > 0)
    os << "no rank answered for " << seconds(t - last_progress_) << " after an op of the run failed (the others wait "
       << "for it, a run that expects no error is decided); each rank's last started op:\n";
  else
    os << "no rank answered for " << seconds(t - last_progress_) << " (" << spec_.backend
       << " hangs, or an op is slower than the timeout; --timeout-us sets it); each rank's last started op:\n";
  for (int rank = 0; rank < run_world_; ++rank) {
    const RankLink& r = ranks_[static_cast<std::size_t>(rank)];
    const bool is_blocked = std::find(blocked.begin(), blocked.end(), rank) != blocked.end();
    os << "  rank " << rank << ": ";
    if (!r.last_op) {
      os << "started no op";
    } else {
      os << r.last_op_text.substr(r.last_op_text.find(": ") == std::string::npos ? 0 : r.last_op_text.find(": ") + 2)
         << ", started " << seconds(t - r.last_op->started_at) << " ago";
    }
    os << (is_blocked ? " -- blocked" : r.dead ? " -- its process " + r.fate : " -- finished") << "\n";
  }
  return os.str();
}

// ---- ProcessJob: a run ------------------------------------------------------

RunResult ProcessJob::run(const DistProgram& program, const RunContext& context) {
  if (!reusable_ || in_run_)
    throw Error(ErrorKind::kUsage, OpContext{}, spec_.backend + ": this job cannot run again (a run left it broken)");
  in_run_ = true;
  ++run_number_;
  idle_groups_ = 0;
  idle_destroyed_.clear();
  run_failed_ = false;
  run_started_ = now();
  last_progress_ = run_started_;
  for (RankLink& r : ranks_) {
    r.last_op.reset();
    r.last_op_text.clear();
    if (r.dead) continue;
    json begin{{"t", "begin"}};
    if (options_.timeout_ns > 0) begin["timeout_ns"] = options_.timeout_ns;
    if (options_.views != ViewLayout::kContiguous) begin["views"] = view_layout_name(options_.views);
    if (run_world_ < world_) begin["world"] = run_world_;
    queue(r, begin, {});
    flush(r);
  }
  const int world = run_world_;
  RunResult res;
  res.ranks.resize(static_cast<std::size_t>(world));
  std::size_t finished = 0;
  {
    std::vector<std::unique_ptr<RemoteDist>> dists;
    for (int r = 0; r < world; ++r) dists.push_back(std::make_unique<RemoteDist>(*this, r, world));
    SpawnRegistry programs;
    for (int r = 0; r < world; ++r)
      programs.spawn(run_rank(program, *dists[static_cast<std::size_t>(r)], res.ranks[static_cast<std::size_t>(r)], finished));
    const Drive d = drive([&] { return finished == static_cast<std::size_t>(world); }, std::nullopt);
    if (d == Drive::kStalled) {
      res.deadlocked = true;
      res.stalled = true;
      for (int r = 0; r < world; ++r)
        if (!res.ranks[static_cast<std::size_t>(r)].finished) res.blocked_ranks.push_back(r);
      res.deadlock_report = hang_report(res.blocked_ranks) + (context.replay.empty() ? "" : "replay: " + context.replay + "\n");
      reusable_ = false;
    }
    // Ops still executing in a process: their buffers die with the run.
    if (!pending_.empty()) reusable_ = false;
    pending_.clear();
    ready_.clear();
    timers_.clear();
  }  // programs, then the dists they use
  // Times are the run's own: from its start, not the job's.
  for (int r = 0; r < world; ++r) {
    RankOutcome& o = res.ranks[static_cast<std::size_t>(r)];
    const RankLink& link = ranks_[static_cast<std::size_t>(r)];
    o.crashed = link.crashed;
    if (link.dead) o.fate = link.fate;
    if (o.finished) o.end_time -= run_started_;
    res.end_time = std::max(res.end_time, o.end_time);
  }
  res.stopped_at = now() - run_started_;
  in_run_ = false;
  return res;
}

std::string ProcessJob::bench_in_ranks(const std::string& options_json) {
  json options = json::parse(options_json);
  bench_answers_.clear();
  last_progress_ = now();
  for (RankLink& r : ranks_) {
    queue(r, json{{"t", "bench"}, {"options", options}}, {});
    flush(r);
  }
  // A bench takes as long as it takes: only silence from every rank and
  // a dead process end it early.
  auto all = [&] {
    for (int rank = 0; rank < world_; ++rank)
      if (!bench_answers_.count(rank) && !ranks_[static_cast<std::size_t>(rank)].dead) return false;
    return true;
  };
  const Drive d = drive(all, std::nullopt);
  if (d == Drive::kStalled) {
    reusable_ = false;
    throw Error(ErrorKind::kTimeout, OpContext{}, spec_.backend + ": the bench stopped making progress\n" + hang_report({}));
  }
  for (int rank = 0; rank < world_; ++rank) {
    const RankLink& r = ranks_[static_cast<std::size_t>(rank)];
    if (r.dead)
      throw Error(ErrorKind::kTransport, OpContext{rank, "bench", "", -1, {}}, "its process " + r.fate + " during the bench");
    const json& a = bench_answers_[rank];
    if (a.value("t", "") != "bench_rows")
      throw Error(ErrorKind::kTransport, OpContext{rank, "bench", "", -1, {}}, a.value("error", "the bench failed"));
  }
  return bench_answers_[0].value("rows", json::array()).dump();
}

}  // namespace

bool says_something(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return false;
  const bool frame = line.find("(+0x") != std::string::npos ||
                     (line.find("[0x") != std::string::npos && line.find_last_not_of(" \t\r") == line.rfind(']'));
  return !frame;
}

std::vector<std::string> last_lines(const std::string& output, int n, const std::function<bool(const std::string&)>& noise) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) {
    while (!l.empty() && l.back() == '\r') l.pop_back();
    if (says_something(l) && !(noise && noise(l))) lines.push_back(l);
  }
  if (lines.size() > static_cast<std::size_t>(n)) lines.erase(lines.begin(), lines.end() - n);
  return lines;
}

std::vector<std::pair<std::string, std::string>> local_rank_env(int rank, int world, const std::string& master_port,
                                                                const std::string& controller, const std::string& token) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", master_port},
          {"COLLIE_CONTROLLER", controller},
          {"COLLIE_JOB_TOKEN", token}};
}

std::unique_ptr<Job> start_process_job(const ProcessJobSpec& spec, const JobOptions& options) {
  if (options.world_size < 1) usage(spec.backend + ": a job needs at least one rank");
  return std::make_unique<ProcessJob>(spec, options);
}

}  // namespace collie::remote
