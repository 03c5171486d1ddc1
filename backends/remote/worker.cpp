#include "backends/remote/worker.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "backends/remote/call_codec.h"
#include "backends/remote/op_protocol.h"
#include "core/error.h"

namespace collie::remote {

namespace {

// What the worker itself saw the library do wrong to an op the library said
// had succeeded: sent as kind "check" (op_protocol.h).
struct WorkerCheck : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using json = nlohmann::json;

// An op this rank was asked to run, over its own copies of the buffers, and
// the bytes, as issued, of each buffer it must not write: (operand, bytes).
struct Op {
  DecodedCall decoded;
  Work work;
  std::vector<std::pair<std::size_t, std::vector<std::byte>>> read_only;
};

std::vector<std::byte> bytes_of(const Tensor& t) {
  const std::span<const std::byte> s = t.byte_span();
  return {s.begin(), s.end()};
}

bool same_bytes(const Tensor& t, const std::vector<std::byte>& b) {
  const std::span<const std::byte> s = t.byte_span();
  return s.size() == b.size() && (b.empty() || std::memcmp(s.data(), b.data(), b.size()) == 0);
}

// The pattern a buffer's slack (the bytes past its last element) holds
// while the library has it: a write past the end changes it.
std::byte guard_byte(std::size_t i) { return static_cast<std::byte>(0xC5 ^ ((i * 29) & 0xFF)); }

// The pattern of the bytes before a buffer's first element, counted back
// from it.
std::byte head_guard_byte(std::size_t i) { return static_cast<std::byte>(0x3A ^ ((i * 53) & 0xFF)); }

void fill_guard(Tensor& t) {
  const std::span<std::byte> g = t.slack();
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = guard_byte(i);
  const std::span<std::byte> h = t.head();
  for (std::size_t i = 0; i < h.size(); ++i) h[h.size() - 1 - i] = head_guard_byte(i);
}

// What a completed op's buffers that it only read are overwritten with (a
// library that reads one after the op completed delivers this instead).
void poison(Tensor& t) {
  auto* p = static_cast<std::byte*>(t.data());
  for (std::size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<std::byte>(0x9E ^ ((i * 7) & 0xFF));
}

// How far past t's last element the first changed byte of its slack lies
// (1-based), or 0.
std::size_t overrun(Tensor& t) {
  const std::span<std::byte> g = t.slack();
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i] != guard_byte(i)) return i + 1;
  return 0;
}

// How far before t's first element the farthest changed byte of its head
// lies (1-based), or 0.
std::size_t underrun(Tensor& t) {
  const std::span<std::byte> h = t.head();
  for (std::size_t i = h.size(); i-- > 0;)
    if (h[h.size() - 1 - i] != head_guard_byte(i)) return i + 1;
  return 0;
}

[[noreturn]] void protocol_error(const std::string& what) { throw std::runtime_error("the controller sent " + what); }

// The controller's connection, for the fatal-signal handler, and whether a
// message is being written on it (a crash frame then would tear it).
volatile std::sig_atomic_t g_controller_fd = -1;
volatile std::sig_atomic_t g_writing = 0;
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[std::size(kFatalSignals)];

// Says {"t":"crashed","signal":N} to the controller (only async-signal-safe
// calls), then lets the signal do what it did before -- the library's own
// handler (Open MPI's and UCX's print a backtrace) or the default: a fault
// of an instruction by returning to it (it faults again, in the same
// place), a signal that was sent (abort()) by sending it again.
extern "C" void on_fatal_signal(int sig, siginfo_t* info, void*) {
  const int fd = g_controller_fd;
  if (fd >= 0 && !g_writing) {
    char frame[64];
    static constexpr char kHead[] = "{\"t\":\"crashed\",\"signal\":";
    std::size_t n = 4;
    for (const char* p = kHead; *p; ++p) frame[n++] = *p;
    char digits[8];
    std::size_t d = 0;
    for (int v = sig; v > 0 && d < sizeof digits; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
    while (d > 0) frame[n++] = digits[--d];
    frame[n++] = '}';
    const auto body = static_cast<std::uint32_t>(n - 4);
    for (int b = 0; b < 4; ++b) frame[b] = static_cast<char>((body >> (8 * b)) & 0xff);
    [[maybe_unused]] const ssize_t w = ::write(fd, frame, n);
  }
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i)
    if (kFatalSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  if (!info || info->si_code <= 0) ::raise(sig);  // sent (SI_USER, SI_TKILL, ...): again
}

void report_fatal_signals(int fd) {
  g_controller_fd = fd;
  struct sigaction a {};
  a.sa_sigaction = on_fatal_signal;
  a.sa_flags = SA_SIGINFO;
  ::sigemptyset(&a.sa_mask);
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i) ::sigaction(kFatalSignals[i], &a, &g_previous[i]);
}

class Server {
 public:
  Server(Dist& dist, int fd, const WorkerHooks& hooks) : d_(dist), fd_(fd), hooks_(hooks) {}

  // `reader` may hold bytes that followed the handshake.
  int serve(MessageReader reader) {
    for (;;) {
      Message m = read_message(fd_, reader);
      const std::string t = m.head.value("t", "");
      if (t == "end") return 0;
      if (t == "begin") {
        begin(m.head);
      } else if (t == "group") {
        const auto ranks = m.head.at("ranks").get<std::vector<int>>();
        const Nanos timeout = m.head.value("timeout_ns", Nanos{0});
        const int id = m.head.at("group").get<int>();
        try {
          groups_[id] = make_group(ranks, timeout, m.head.value("name", ""));
        } catch (const std::exception& e) {
          group_errors_[id] = e.what();
        }
      } else if (t == "ungroup") {
        ungroup(m.head.at("group").get<int>());
      } else if (t == "op") {
        op(std::move(m));
      } else if (t == "wait") {
        const auto id = m.head.at("id").get<std::uint64_t>();
        if (answered_.erase(id)) continue;  // it failed when issued: answered already
        auto it = async_.find(id);
        if (it == async_.end()) protocol_error("a wait for op " + std::to_string(id) + ", which is not in flight");
        Op o = std::move(it->second);
        async_.erase(it);
        complete(id, o);
      } else if (t == "sync") {
        send(json{{"t", "synced"}, {"id", m.head.value("id", std::uint64_t{0})}});
      } else if (t == "bench") {
        bench(m.head);
      } else {
        protocol_error("a message of type '" + t + "'");
      }
    }
  }

 private:
  // Named as the controller names it ("world" for a run's base group).
  Group make_group(const std::vector<int>& ranks, Nanos timeout, const std::string& name) {
    return d_.new_group(ranks, timeout, name);
  }

  // The group stays in groups_, destroyed: an op on it is refused by
  // dispatch() naming it. The library's error, if it raises one, fails the
  // run's next op (the message has no answer).
  void ungroup(int id) {
    if (group_errors_.erase(id)) return;
    auto g = groups_.find(id);
    if (g == groups_.end()) protocol_error("destroy_group of group " + std::to_string(id) + ", which does not exist");
    try {
      d_.destroy_group(g->second);
    } catch (const std::exception& e) {
      if (destroy_error_.empty()) destroy_error_ = std::string("destroy_group of ") + g->second.name() + ": " + e.what();
    }
  }

  void begin(const json& head) {
    if (hooks_.begin_run) hooks_.begin_run();
    kept_.clear();
    kept_bytes_ = 0;
    ops_issued_ = 0;
    groups_.clear();
    group_errors_.clear();
    destroy_error_.clear();
    async_.clear();
    answered_.clear();
    timeout_ns_ = head.value("timeout_ns", Nanos{0});
    non_contiguous_ = !head.value("views", "").empty();
    // A run of fewer ranks than the job's: the others make its groups as
    // non-members (every rank numbers groups alike) and idle through it.
    const int world = head.value("world", d_.world_size());
    std::vector<int> all;
    for (int r = 0; r < world; ++r) all.push_back(r);
    try {
      groups_[0] = hooks_.world_is_the_default_group && world == d_.world_size() ? d_.world()
                                                                                 : make_group(all, timeout_ns_, "world");
    } catch (const std::exception& e) {
      group_errors_[0] = e.what();
    }
  }

  void reply_error(std::uint64_t id, const std::exception_ptr& e) {
    json h{{"t", "failed"}, {"id", id}};
    try {
      std::rethrow_exception(e);
    } catch (const WorkerCheck& x) {
      h["kind"] = "check";
      h["error"] = x.what();
    } catch (const Error& x) {
      h["kind"] = std::string(error_kind_name(x.kind()));
      h["error"] = x.detail();
      const OpContext& c = x.context();
      h["context"] = json{{"rank", c.rank}, {"op", c.op}, {"group", c.group}, {"seq", c.seq}, {"peers", c.peers}};
    } catch (const std::exception& x) {
      h["kind"] = "library";
      h["error"] = x.what();
    } catch (...) {
      h["kind"] = "library";
      h["error"] = "a non-standard exception";
    }
    send(h);
  }

  // What the library did to the program's buffers that only this process
  // can see (the controller gets back the outputs alone): a buffer the op
  // only reads -- a send's, a collective's input, every buffer of a rank
  // outside the group -- must be as issued when the op completes, and no
  // buffer of a completed op may change while later ops run (the latest
  // kKeptBuffers, up to kKeptBytes, are read again as each op completes).
  // A sentence saying what changed, or empty.
  static constexpr std::size_t kKeptBuffers = 64;
  static constexpr std::size_t kKeptBytes = std::size_t{8} << 20;
  struct Kept {
    std::string op;
    std::uint64_t id;
    std::size_t operand;
    Tensor buffer;  // shares the op's storage
    std::vector<std::byte> bytes;
  };
  std::string changed_buffers(Op& o) const {
    const std::string name(o.decoded.call.name());
    for (std::size_t k = 0; k < o.decoded.tensors.size(); ++k)
      if (const std::size_t at = overrun(o.decoded.tensors[k]))
        return name + " wrote past the end of its operand " + std::to_string(k) + " (" +
               std::to_string(o.decoded.tensors[k].bytes()) + " bytes): byte " + std::to_string(at) +
               " after its last element changed -- memory the program's buffer does not own";
    for (std::size_t k = 0; k < o.decoded.tensors.size(); ++k)
      if (const std::size_t at = underrun(o.decoded.tensors[k]))
        return name + " wrote before the start of its operand " + std::to_string(k) + " (" +
               std::to_string(o.decoded.tensors[k].bytes()) + " bytes at an address " +
               std::to_string(reinterpret_cast<std::uintptr_t>(o.decoded.tensors[k].data()) % 64) +
               " bytes past a 64-byte boundary): byte " + std::to_string(at) +
               " before its first element changed -- memory the program's buffer does not own";
    for (const auto& [k, bytes] : o.read_only)
      if (!same_bytes(o.decoded.tensors[k], bytes))
        return name + " changed its operand " + std::to_string(k) +
               ", which it only reads (a send's buffer, a collective's input, or a buffer of a rank outside the "
               "group): the library wrote into the program's buffer";
    for (const Kept& k : kept_)
      if (!same_bytes(k.buffer, k.bytes))
        return "a buffer of a completed " + k.op + " (its operand " + std::to_string(k.operand) + ", op id " +
               std::to_string(k.id) + ") changed after that op had completed, while later ops ran: the library " +
               "wrote into the program's buffer late";
    return {};
  }
  void keep_completed(std::uint64_t id, const Op& o) {
    const std::string name(o.decoded.call.name());
    for (std::size_t k = 0; k < o.decoded.tensors.size(); ++k) {
      const Tensor& t = o.decoded.tensors[k];
      if (t.byte_span().size() > kKeptBytes) continue;
      kept_.push_back(Kept{name, id, k, t, bytes_of(t)});
      kept_bytes_ += kept_.back().bytes.size();
    }
    while (!kept_.empty() && (kept_.size() > kKeptBuffers || kept_bytes_ > kKeptBytes)) {
      kept_bytes_ -= kept_.front().bytes.size();
      kept_.pop_front();
    }
  }

  // Polls an async op's handle as a program spinning on is_completed()
  // does, for up to the call's poll_ns: true when it completed so.
  bool completes_when_polled(Op& o) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::nanoseconds(o.decoded.call.poll_ns);
    auto done = [&o] { return o.work.is_completed(); };
    while (!hooks_.poll(done)) {
      if (std::chrono::steady_clock::now() >= give_up) return false;
      std::this_thread::yield();
    }
    return true;
  }

  void complete(std::uint64_t id, Op& o) {
    const bool polled = o.decoded.call.async && o.decoded.call.poll_ns > 0 && hooks_.poll;
    const bool done_when_polled = polled && completes_when_polled(o);
    try {
      o.work.wait();
    } catch (...) {
      reply_error(id, std::current_exception());
      return;
    }
    if (polled && !done_when_polled) {
      const bool p2p = o.decoded.call.kind == OpKind::kSend || o.decoded.call.kind == OpKind::kRecv;
      reply_error(id, std::make_exception_ptr(WorkerCheck(
                          "collie: " + std::string(o.decoded.call.name()) + "'s handle did not complete in " +
                          std::to_string(o.decoded.call.poll_ns / 1'000'000) +
                          " ms of polling without a wait (MPI_Test, is_completed()), " +
                          (p2p ? "its peer having issued the matching op" : "every member having issued it") +
                          "; wait() then completed it: the op progresses only inside wait(), and a program "
                          "that polls its handle before waiting spins for ever")));
      return;
    }
    if (const std::string changed = changed_buffers(o); !changed.empty()) {
      reply_error(id, std::make_exception_ptr(WorkerCheck("collie: " + changed)));
      return;
    }
    // Overwritten once complete: a send that completed before the library
    // read its payload (a large MPI_Isend completed at once, read later)
    // then delivers the pattern, which the receiver's check sees; an op
    // only reads them, so its answer is unchanged.
    for (const auto& [k, bytes] : o.read_only) poison(o.decoded.tensors[k]);
    keep_completed(id, o);
    json h{{"t", "done"}, {"id", id}, {"source", o.work.source_rank()}, {"not_member", o.work.not_member()}};
    std::vector<std::span<const std::byte>> blobs;
    json outs = json::array();
    if (!o.work.not_member())
      for (std::size_t k : o.decoded.writes) {
        outs.push_back(k);
        blobs.push_back(o.decoded.tensors[k].byte_span());
      }
    h["outputs"] = std::move(outs);
    send(h, blobs);
  }

  void op(Message m) {
    const json& h = m.head;
    const auto id = h.at("id").get<std::uint64_t>();
    // A run's first op gets buffers on 64-byte boundaries, later ones 1-7
    // elements past them (addresses aligned only as their elements are).
    Op o{decode_call(h, m.blobs, ops_issued_++ % 8), Work(), {}};
    for (Tensor& t : o.decoded.tensors) fill_guard(t);
    try {
      o.decoded.call.group = group_of(h, o.decoded.call);
      // A member may write its outputs; a rank outside the group nothing.
      const Group& g = o.decoded.call.group;
      const bool member = g.is_world_default() || g.is_member();
      const std::set<std::size_t> writes(o.decoded.writes.begin(), o.decoded.writes.end());
      for (std::size_t k = 0; k < o.decoded.tensors.size(); ++k)
        if (!member || !writes.count(k)) o.read_only.emplace_back(k, bytes_of(o.decoded.tensors[k]));
      if (non_contiguous_ && !hooks_.no_strided_views.empty())
        throw Error(ErrorKind::kUnsupported, OpContext{d_.rank(), std::string(o.decoded.call.name()), "", -1, {}},
                    hooks_.no_strided_views);
      o.work = dispatch(d_, o.decoded.call);
    } catch (...) {
      reply_error(id, std::current_exception());
      if (o.decoded.call.async) answered_.insert(id);  // the controller may still ask to wait for it
      return;
    }
    if (o.decoded.call.async && o.decoded.call.must_be_pending && hooks_.poll &&
        hooks_.poll([&o] { return o.work.is_completed(); })) {
      // A member of the group calls it later: it cannot have completed
      // (MPI_Test saying an Ibarrier is done before the others entered).
      reply_error(id, std::make_exception_ptr(WorkerCheck(
                          "collie: " + std::string(o.decoded.call.name()) + "'s handle said it completed (MPI_Test, "
                          "is_completed()) as it was issued, while a member of its group had not called it yet: it "
                          "cannot have completed")));
      answered_.insert(id);  // the controller still asks to wait for it
      abandoned_.push_back(std::move(o));  // the library may still write its buffers
      return;
    }
    if (o.decoded.call.async) {
      async_.emplace(id, std::move(o));
      return;
    }
    complete(id, o);
  }

  Group group_of(const json& h, const DistCall& c) {
    const int gid = h.value("group", 0);
    if (!destroy_error_.empty()) throw LibraryError(std::exchange(destroy_error_, {}));
    if (auto e = group_errors_.find(gid); e != group_errors_.end())
      throw Error(ErrorKind::kInvalidArgument, OpContext{d_.rank(), std::string(c.name()), "", -1, {}},
                  "its group could not be created: " + e->second);
    auto g = groups_.find(gid);
    if (g == groups_.end()) protocol_error("an op on group " + std::to_string(gid) + ", which does not exist");
    return g->second;
  }

  void bench(const json& h) {
    if (!hooks_.bench) {
      send(json{{"t", "bench_failed"}, {"error", "this worker has no bench"}});
      return;
    }
    try {
      json rows = hooks_.bench(d_, h.value("options", json::object()));
      send(json{{"t", "bench_rows"}, {"rows", std::move(rows)}});
    } catch (const std::exception& e) {
      send(json{{"t", "bench_failed"}, {"error", e.what()}});
    }
  }

  void send(const json& head, const std::vector<std::span<const std::byte>>& blobs = {}) {
    g_writing = 1;
    try {
      write_message(fd_, head, blobs);
    } catch (...) {
      g_writing = 0;
      throw;
    }
    g_writing = 0;
  }

  Dist& d_;
  int fd_;
  const WorkerHooks& hooks_;
  std::map<int, Group> groups_;
  std::map<int, std::string> group_errors_;
  std::string destroy_error_;  // a destroy_group the library refused, for the next op to report
  std::map<std::uint64_t, Op> async_;
  std::set<std::uint64_t> answered_;  // async ops that failed when issued
  // Ops answered as failed while the library may still complete them: kept,
  // buffers and all, for the worker's life (only a wrong library makes any).
  std::vector<Op> abandoned_;
  std::deque<Kept> kept_;             // completed ops' buffers, oldest first (changed_buffers())
  std::size_t kept_bytes_ = 0;
  Nanos timeout_ns_ = 0;
  std::uint64_t ops_issued_ = 0;  // op messages of this run decoded
  bool non_contiguous_ = false;  // the run asked for non-contiguous views ("strided" or "pitched")
};

}  // namespace

int serve_ops(Dist& dist, const std::string& library, const WorkerHooks& hooks) {
  const char* controller = std::getenv("COLLIE_CONTROLLER");
  if (!controller || !*controller) {
    std::cerr << "collie worker: COLLIE_CONTROLLER is not set (a worker is started by collie, not by hand)\n";
    return 2;
  }
  const char* token = std::getenv("COLLIE_JOB_TOKEN");
  int fd = -1;
  try {
    fd = connect_to(controller);
    MessageReader reader(kMaxUnauthenticatedBytes, 0);
    const Message challenge = read_message(fd, reader);
    const std::string nonce = challenge.head.value("nonce", "");
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    json hello{{"t", "hello"},
               {"rank", dist.rank()},
               {"world", dist.world_size()},
               {"pid", static_cast<int>(::getpid())},
               {"host", host},
               {"library", library},
               {"mac", hello_mac(token ? token : "", nonce, dist.rank())}};
    if (hooks.bootstrap && dist.rank() == 0) hello["bootstrap"] = hooks.bootstrap();
    write_message(fd, hello);
    MessageReader commands;
    if (hooks.joined) {
      const Message welcome = read_message(fd, commands);
      if (welcome.head.value("t", "") != "welcome")
        protocol_error("'" + welcome.head.value("t", "") + "' before the welcome that carries rank 0's bootstrap");
      hooks.joined(welcome.head.value("bootstrap", ""));
    }
    report_fatal_signals(fd);
    Server server(dist, fd, hooks);
    const int rc = server.serve(std::move(commands));
    g_controller_fd = -1;
    ::close(fd);
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "collie worker (rank " << dist.rank() << "): " << e.what() << "\n";
    if (fd >= 0) ::close(fd);
    return 1;
  }
}

}  // namespace collie::remote
