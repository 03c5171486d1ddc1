#include "backends/cuda/host_runtime.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "backends/cuda/elementwise.h"
#include "core/error.h"
#include "sim/prng.h"

namespace collie::cuda {

namespace {

constexpr std::size_t kAlignment = 256;       // as cudaMalloc
constexpr std::byte kFreshByte{0xCB};        // what a new allocation holds
constexpr std::byte kFreedByte{0xDD};        // what freed memory holds

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::kTransport, OpContext{}, "host runtime: " + what);
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// ---- the fault handler ------------------------------------------------------
// Every live arena's range, for the SIGSEGV handler: a fault inside one is a
// host access to device memory, reported by name before the process aborts;
// any other fault goes to the handler that was there before.

constexpr int kMaxArenas = 64;
struct ArenaRange {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
};
ArenaRange g_arenas[kMaxArenas];
struct sigaction g_previous {};
std::atomic<bool> g_installed{false};

// Async-signal-safe text: appends `s`, or `v` in hex / decimal.
struct SignalText {
  char buf[512];
  std::size_t n = 0;
  void add(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
  }
  void add_number(std::uintptr_t v, unsigned base) {
    char digits[32];
    int k = 0;
    do {
      digits[k++] = "0123456789abcdef"[v % base];
      v /= base;
    } while (v && k < 32);
    if (base == 16) add("0x");
    while (k > 0 && n + 1 < sizeof buf) buf[n++] = digits[--k];
  }
};

void on_fault(int sig, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const ArenaRange& a : g_arenas) {
    const std::uintptr_t b = a.begin.load(std::memory_order_relaxed), e = a.end.load(std::memory_order_relaxed);
    if (b == 0 || at < b || at >= e) continue;
    bool write = false;
#if defined(__x86_64__)
    write = (static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
    SignalText t;
    t.add("host runtime: a host ");
    t.add(write ? "write to" : "read of");
    t.add(" device memory at ");
    t.add_number(at, 16);
    t.add(" (arena offset ");
    t.add_number(at - b, 10);
    t.add(") outside the runtime: device memory is reached only through the device runtime "
          "(backends/cuda/device_runtime.h), so some path forgot the memory space of its tensor\n");
    (void)!::write(2, t.buf, t.n);
    ::signal(SIGABRT, SIG_DFL);
    ::abort();
  }
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) return g_previous.sa_handler(sig);
  ::signal(sig, SIG_DFL);  // returning re-runs the access, which now ends the process as it would have
}

void install_fault_handler() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, &g_previous);
}

// ---- element-wise work on host memory (elementwise.h's arithmetic) -----------

template <typename T, typename F>
void each(void* dst, const void* src, std::size_t count, F f) {
  auto* d = static_cast<T*>(dst);
  const auto* s = static_cast<const T*>(src);
  for (std::size_t i = 0; i < count; ++i) d[i] = f(d[i], s[i]);
}

void reduce_elements(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  const Op o = static_cast<Op>(static_cast<int>(op));
  switch (dtype) {
    case DType::kFloat16: return each<std::uint16_t>(dst, src, count, [o](auto a, auto b) { return half_combine(a, b, o); });
    case DType::kBFloat16: return each<std::uint16_t>(dst, src, count, [o](auto a, auto b) { return bf16_combine(a, b, o); });
    case DType::kFloat32: return each<float>(dst, src, count, [o](auto a, auto b) { return float_combine(a, b, o); });
    case DType::kFloat64: return each<double>(dst, src, count, [o](auto a, auto b) { return float_combine(a, b, o); });
    case DType::kInt8:
      return each<std::int8_t>(dst, src, count, [o](auto a, auto b) { return int_combine<std::int8_t, std::uint8_t>(a, b, o); });
    case DType::kUInt8:
      return each<std::uint8_t>(dst, src, count, [o](auto a, auto b) { return int_combine<std::uint8_t, std::uint8_t>(a, b, o); });
    case DType::kInt32:
      return each<std::int32_t>(dst, src, count, [o](auto a, auto b) { return int_combine<std::int32_t, std::uint32_t>(a, b, o); });
    case DType::kInt64:
      return each<std::int64_t>(dst, src, count, [o](auto a, auto b) { return int_combine<std::int64_t, std::uint64_t>(a, b, o); });
    case DType::kBool: return each<std::uint8_t>(dst, src, count, [o](auto a, auto b) { return bool_combine(a, b, o); });
  }
}

void average_elements(void* dst, std::size_t count, DType dtype, int n) {
  auto divide = [&](auto* d, auto f) {
    for (std::size_t i = 0; i < count; ++i) d[i] = f(d[i]);
  };
  switch (dtype) {
    case DType::kFloat16: return divide(static_cast<std::uint16_t*>(dst), [n](std::uint16_t v) { return half_average(v, n); });
    case DType::kBFloat16: return divide(static_cast<std::uint16_t*>(dst), [n](std::uint16_t v) { return bf16_average(v, n); });
    case DType::kFloat32: return divide(static_cast<float*>(dst), [n](float v) { return v / static_cast<float>(n); });
    case DType::kFloat64: return divide(static_cast<double*>(dst), [n](double v) { return v / static_cast<double>(n); });
    default: return;
  }
}

}  // namespace

std::string_view host_runtime_bug_name(HostRuntimeBug bug) {
  switch (bug) {
    case HostRuntimeBug::kNone: return "none";
    case HostRuntimeBug::kEarlyEvent: return "early_event";
    case HostRuntimeBug::kWrongStreamCopy: return "wrong_stream_copy";
    case HostRuntimeBug::kReduceSkipsWait: return "reduce_skips_wait";
    case HostRuntimeBug::kFreeWhileInUse: return "free_while_in_use";
  }
  return "?";
}

std::optional<HostRuntimeBug> parse_host_runtime_bug(std::string_view name) {
  for (int b = 0; b < kNumHostRuntimeBugs; ++b)
    if (host_runtime_bug_name(static_cast<HostRuntimeBug>(b)) == name) return static_cast<HostRuntimeBug>(b);
  return std::nullopt;
}

// ---- the runtime ------------------------------------------------------------

struct HostRuntime::Impl {
  // One operand of a queued operation: host memory (alloc 0) or a range of
  // the live allocation `alloc`, resolved when the operation was queued.
  struct Operand {
    std::byte* p = nullptr;
    std::uint64_t alloc = 0;
    int device = -1;
  };
  struct Operation {
    enum class Kind : std::uint8_t { kCopy, kReduce, kAverage, kRecord, kWait, kFree };
    explicit Operation(Kind k) : kind(k) {}
    Kind kind;
    std::uint64_t seq = 0;  // queue order over every stream
    Operand dst, src;
    std::size_t bytes = 0;
    std::vector<std::byte> staged;  // a copy from host memory: the bytes, read when queued
    std::size_t count = 0;
    DType dtype = DType::kFloat32;
    ReduceOp op = ReduceOp::kSum;
    int divisor = 1;
    int event = -1;
    std::uint64_t generation = 0;  // kRecord: the record it completes; kWait: the one it waits for
  };
  struct StreamState {
    int device = 0;
    std::deque<Operation> queue;
    Event marker;  // recorded by a copy to host memory, which waits for it
  };
  struct EventState {
    int device = 0;
    bool live = false;
    std::uint64_t recorded = 0;  // generations recorded
    // Recorded generations whose work has not finished. Records on
    // different streams finish in any order, and a wait is for the one
    // generation it saw, so each is tracked (there are few at a time).
    std::set<std::uint64_t> unfinished;
    int pending_waits = 0;        // queued waits that still name it
  };
  struct Allocation {
    std::size_t size = 0;
    int device = 0;
    std::uint64_t id = 0;
    bool free_queued = false;
  };

  explicit Impl(const HostRuntimeOptions& o) : options(o), prng(o.seed) {
    if (o.devices < 1) fail("HostRuntimeOptions::devices is " + std::to_string(o.devices) + "; it needs at least 1");
    capacity = round_up(o.arena_bytes, static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
    void* m = ::mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fail("cannot reserve " + std::to_string(capacity) + " bytes of address space for device memory");
    base = static_cast<std::byte*>(m);
    install_fault_handler();
    for (ArenaRange& a : g_arenas) {
      std::uintptr_t expected = 0;
      if (a.begin.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(base))) {
        a.end.store(reinterpret_cast<std::uintptr_t>(base) + capacity);
        slot = &a;
        break;
      }
    }
    peer_enabled.assign(static_cast<std::size_t>(o.devices * o.devices), false);
  }
  ~Impl() {
    if (slot) {
      slot->end.store(0);
      slot->begin.store(0);
    }
    ::munmap(base, capacity);
  }

  // ---- the arena: inaccessible except while an operation runs -------------
  // Opens [base, base + top) for the duration of one operation.
  struct Open {
    Impl& r;
    explicit Open(Impl& impl) : r(impl) { r.protect(PROT_READ | PROT_WRITE); }
    ~Open() { r.protect(PROT_NONE); }
  };
  void protect(int prot) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    if (top != 0 && ::mprotect(base, round_up(top, page), prot) != 0) fail("mprotect of the arena failed");
  }

  bool inside(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= base && b < base + capacity;
  }
  // The live allocation holding `p`, or null.
  const Allocation* find(const void* p, std::size_t* offset_in = nullptr) const {
    if (!inside(p)) return nullptr;
    const auto off = static_cast<std::size_t>(static_cast<const std::byte*>(p) - base);
    auto it = live.upper_bound(off);
    if (it == live.begin()) return nullptr;
    --it;
    if (off >= it->first + it->second.size) return nullptr;
    if (offset_in) *offset_in = off - it->first;
    return &it->second;
  }

  std::string describe_stream(Stream s) const {
    return "stream " + std::to_string(s.id) + " (device " + std::to_string(streams[static_cast<std::size_t>(s.id)].device) + ")";
  }

  // Resolves one operand of `call` on `s` now, when the operation is queued.
  Operand resolve(const void* p, std::size_t bytes, const char* role, const char* call, Stream s, bool kernel) {
    Operand o{const_cast<std::byte*>(static_cast<const std::byte*>(p)), 0, -1};
    const std::string where = std::string(call) + " on " + describe_stream(s) + ": " + role + " " + hex(p);
    if (!inside(p)) {
      if (kernel) fail(where + " is host memory; kernels touch device memory only");
      return o;
    }
    std::size_t off = 0;
    const Allocation* a = find(p, &off);
    if (!a) fail(where + " is device memory that is not allocated (freed, or never allocated)");
    if (a->free_queued && options.bug != HostRuntimeBug::kFreeWhileInUse)
      fail(where + " lies in allocation #" + std::to_string(a->id) + ", whose free() is already queued");
    if (off + bytes > a->size)
      fail(where + " + " + std::to_string(bytes) + " bytes runs past the end of allocation #" + std::to_string(a->id) +
           " (" + std::to_string(a->size) + " bytes)");
    o.alloc = a->id;
    o.device = a->device;
    const int sd = streams[static_cast<std::size_t>(s.id)].device;
    if (kernel && o.device != sd && !peer_enabled[static_cast<std::size_t>(sd * options.devices + o.device)])
      fail(where + " is memory of device " + std::to_string(o.device) + ", which kernels on device " +
           std::to_string(sd) + " may not touch (enable_peer_access(" + std::to_string(sd) + ", " +
           std::to_string(o.device) + ") was not called)");
    return o;
  }

  // When an operation runs: its operands' allocations are still the ones it
  // was queued with.
  void check_live(const Operation& op, const Operand& o, const char* role) {
    if (o.alloc == 0) return;
    const Allocation* a = find(o.p);
    if (a && a->id == o.alloc) return;
    fail_sticky(std::string(kind_name(op.kind)) + " #" + std::to_string(op.seq) + " " + role + " " + hex(o.p) +
                ": allocation #" + std::to_string(o.alloc) +
                " was freed before this operation ran (work still used memory that free() gave back)");
  }

  static const char* kind_name(Operation::Kind k) {
    switch (k) {
      case Operation::Kind::kCopy: return "copy";
      case Operation::Kind::kReduce: return "reduce";
      case Operation::Kind::kAverage: return "finish_average";
      case Operation::Kind::kRecord: return "record";
      case Operation::Kind::kWait: return "wait";
      case Operation::Kind::kFree: return "free";
    }
    return "?";
  }

  [[noreturn]] void fail_sticky(const std::string& what) {
    failed = Error(ErrorKind::kTransport, OpContext{}, "host runtime: " + what);
    throw *failed;
  }
  void check_failed() const {
    if (failed) throw *failed;
  }
  void check_stream(Stream s, const char* call) const {
    if (s.id < 0 || static_cast<std::size_t>(s.id) >= streams.size())
      fail(std::string(call) + ": stream " + std::to_string(s.id) + " was not created by this runtime");
  }
  EventState& event_state(Event e, const char* call) {
    if (e.id < 0 || static_cast<std::size_t>(e.id) >= events.size() || !events[static_cast<std::size_t>(e.id)].live)
      fail(std::string(call) + ": event " + std::to_string(e.id) + " is not a live event of this runtime");
    return events[static_cast<std::size_t>(e.id)];
  }

  void push(Stream s, Operation op) {
    op.seq = ++stats.queued;
    streams[static_cast<std::size_t>(s.id)].queue.push_back(std::move(op));
  }

  // A record (completing `generation` of `e`) or a wait (for it) on `s`.
  void push_event_op(Operation::Kind kind, Stream s, Event e, std::uint64_t generation) {
    Operation op{kind};
    op.event = e.id;
    op.generation = generation;
    push(s, std::move(op));
  }

  bool ready(const Operation& op) const {
    return op.kind != Operation::Kind::kWait || !events[static_cast<std::size_t>(op.event)].unfinished.count(op.generation);
  }
  // query(): the latest record's work has finished (earlier ones may not have).
  bool complete(const EventState& e) const { return !e.unfinished.count(e.recorded); }

  // The operation of stream `i` that may run next, or null: the head when
  // ready; with reduce_skips_wait, a reduction behind unfinished waits.
  std::deque<Operation>::iterator runnable(std::size_t i) {
    auto& q = streams[i].queue;
    if (q.empty()) return q.end();
    if (ready(q.front())) return q.begin();
    if (options.bug == HostRuntimeBug::kReduceSkipsWait) {
      auto it = q.begin();
      while (it != q.end() && it->kind == Operation::Kind::kWait) ++it;
      if (it != q.end() && it->kind == Operation::Kind::kReduce) return it;  // the bug: the waits are passed over
    }
    return q.end();
  }

  // Runs one operation of a stream drawn from the seed; false when none can run.
  bool step() {
    candidates.clear();
    for (std::size_t i = 0; i < streams.size(); ++i)
      if (runnable(i) != streams[i].queue.end()) candidates.push_back(i);
    if (candidates.empty()) return false;
    const std::size_t i = candidates[static_cast<std::size_t>(prng.below(candidates.size()))];
    auto it = runnable(i);
    Operation op = std::move(*it);
    streams[i].queue.erase(it);
    ++stats.executed;
    execute(op);
    return true;
  }

  void execute(Operation& op) {
    using K = Operation::Kind;
    switch (op.kind) {
      case K::kRecord: {
        EventState& e = events[static_cast<std::size_t>(op.event)];
        e.unfinished.erase(op.generation);
        return;
      }
      case K::kWait: --events[static_cast<std::size_t>(op.event)].pending_waits; return;
      case K::kFree: {
        check_live(op, op.dst, "frees");
        release(op.dst.p);
        return;
      }
      case K::kCopy: {
        check_live(op, op.dst, "writes");
        check_live(op, op.src, "reads");
        Open open(*this);
        std::memmove(op.dst.p, op.staged.empty() ? op.src.p : op.staged.data(), op.bytes);
        return;
      }
      case K::kReduce: {
        check_live(op, op.dst, "writes");
        check_live(op, op.src, "reads");
        Open open(*this);
        reduce_elements(op.dst.p, op.src.p, op.count, op.dtype, op.op);
        return;
      }
      case K::kAverage: {
        check_live(op, op.dst, "writes");
        Open open(*this);
        average_elements(op.dst.p, op.count, op.dtype, op.divisor);
        return;
      }
    }
  }

  void run_until_complete(const EventState& e) {
    while (!complete(e)) {
      if (!step()) fail_sticky("an event can never complete: no queued operation can run (internal error)");
    }
  }

  void release(std::byte* p) {
    const auto off = static_cast<std::size_t>(p - base);
    auto it = live.find(off);
    const std::size_t size = it->second.size;
    stats.live_bytes -= size;
    --stats.live_allocations;
    live.erase(it);
    {
      Open open(*this);
      std::memset(p, static_cast<int>(kFreedByte), size);
    }
    // Coalesce with the free neighbours.
    auto [at, inserted] = free_blocks.emplace(off, size);
    if (auto next = std::next(at); next != free_blocks.end() && at->first + at->second == next->first) {
      at->second += next->second;
      free_blocks.erase(next);
    }
    if (at != free_blocks.begin()) {
      auto prev = std::prev(at);
      if (prev->first + prev->second == at->first) {
        prev->second += at->second;
        free_blocks.erase(at);
      }
    }
  }

  const HostRuntimeOptions options;
  sim::Prng prng;
  std::byte* base = nullptr;
  std::size_t capacity = 0;
  std::size_t top = 0;  // the arena's used extent: bytes below it were handed out at some point
  ArenaRange* slot = nullptr;
  std::map<std::size_t, Allocation> live;         // by offset
  std::map<std::size_t, std::size_t> free_blocks; // offset -> bytes, coalesced, below top
  std::uint64_t next_alloc = 0;
  std::vector<StreamState> streams;
  std::vector<EventState> events;
  std::vector<int> free_events;
  std::vector<bool> peer_enabled;  // [device * devices + peer]
  std::vector<std::size_t> candidates;
  std::optional<Error> failed;
  HostRuntimeStats stats;
};

HostRuntime::HostRuntime(const HostRuntimeOptions& options) : impl_(std::make_unique<Impl>(options)) {}
HostRuntime::~HostRuntime() = default;

std::string HostRuntime::name() const {
  if (impl_->options.bug == HostRuntimeBug::kNone) return "host";
  return "host:" + std::string(host_runtime_bug_name(impl_->options.bug));
}

int HostRuntime::device_count() const { return impl_->options.devices; }

bool HostRuntime::can_access_peer(int device, int peer) const {
  const int n = impl_->options.devices;
  return device != peer && device >= 0 && peer >= 0 && device < n && peer < n && impl_->options.peer_access;
}

void HostRuntime::enable_peer_access(int device, int peer) {
  impl_->check_failed();
  if (!can_access_peer(device, peer))
    fail("enable_peer_access(" + std::to_string(device) + ", " + std::to_string(peer) +
         "): can_access_peer is false for these devices");
  impl_->peer_enabled[static_cast<std::size_t>(device * impl_->options.devices + peer)] = true;
}

void* HostRuntime::allocate(std::size_t bytes, Stream stream) {
  Impl& r = *impl_;
  r.check_failed();
  r.check_stream(stream, "allocate");
  const std::size_t size = round_up(std::max<std::size_t>(bytes, 1), kAlignment);
  std::size_t off = r.top;
  auto fit = std::find_if(r.free_blocks.begin(), r.free_blocks.end(), [&](const auto& b) { return b.second >= size; });
  if (fit != r.free_blocks.end()) {
    off = fit->first;
    const std::size_t rest = fit->second - size;
    r.free_blocks.erase(fit);
    if (rest) r.free_blocks.emplace(off + size, rest);
  } else {
    if (r.top + size > r.capacity)
      fail("out of device memory: " + std::to_string(bytes) + " bytes asked for, " +
           std::to_string(r.stats.live_bytes) + " of " + std::to_string(r.capacity) +
           " bytes in use (HostRuntimeOptions::arena_bytes)");
    r.top += size;
  }
  Impl::Allocation a;
  a.size = size;
  a.device = r.streams[static_cast<std::size_t>(stream.id)].device;
  a.id = ++r.next_alloc;
  r.live.emplace(off, a);
  ++r.stats.live_allocations;
  r.stats.live_bytes += size;
  Impl::Open open(r);
  std::memset(r.base + off, static_cast<int>(kFreshByte), size);
  return r.base + off;
}

void HostRuntime::free(void* p, Stream stream) noexcept {
  Impl& r = *impl_;
  if (r.failed) return;
  auto it = r.inside(p) ? r.live.find(static_cast<std::size_t>(static_cast<std::byte*>(p) - r.base)) : r.live.end();
  if (it == r.live.end() || it->second.free_queued || stream.id < 0 ||
      static_cast<std::size_t>(stream.id) >= r.streams.size()) {
    r.failed = Error(ErrorKind::kTransport, OpContext{},
                     "host runtime: free(" + hex(p) + ") on stream " + std::to_string(stream.id) +
                         ": not a live allocation of this runtime (freed twice, or never allocated), or not a stream");
    return;
  }
  if (r.options.bug == HostRuntimeBug::kFreeWhileInUse) {
    r.release(static_cast<std::byte*>(p));  // the bug: at once, whatever is still queued on it
    return;
  }
  it->second.free_queued = true;
  Impl::Operation op{Impl::Operation::Kind::kFree};
  op.dst = Impl::Operand{static_cast<std::byte*>(p), it->second.id, it->second.device};
  r.push(stream, std::move(op));
}

int HostRuntime::device_of(const void* p) const {
  const Impl::Allocation* a = impl_->find(p);
  return a ? a->device : -1;
}

bool HostRuntime::in_arena(const void* p) const { return impl_->inside(p); }

Stream HostRuntime::create_stream(int device) {
  Impl& r = *impl_;
  r.check_failed();
  if (device < 0 || device >= r.options.devices)
    fail("create_stream(" + std::to_string(device) + "): there are " + std::to_string(r.options.devices) + " devices");
  const Stream s{static_cast<int>(r.streams.size())};
  r.streams.push_back(Impl::StreamState{device, {}, {}});
  r.streams.back().marker = create_event(device);
  return s;
}

int HostRuntime::stream_device(Stream s) const {
  impl_->check_stream(s, "stream_device");
  return impl_->streams[static_cast<std::size_t>(s.id)].device;
}

Event HostRuntime::create_event(int device) {
  Impl& r = *impl_;
  r.check_failed();
  if (device < 0 || device >= r.options.devices)
    fail("create_event(" + std::to_string(device) + "): there are " + std::to_string(r.options.devices) + " devices");
  int id = static_cast<int>(r.events.size());
  if (!r.free_events.empty()) {
    id = r.free_events.back();
    r.free_events.pop_back();
  } else {
    r.events.emplace_back();
  }
  r.events[static_cast<std::size_t>(id)] = Impl::EventState{device, true, 0, {}, 0};
  return Event{id};
}

void HostRuntime::destroy_event(Event e) noexcept {
  Impl& r = *impl_;
  if (e.id < 0 || static_cast<std::size_t>(e.id) >= r.events.size() || !r.events[static_cast<std::size_t>(e.id)].live) {
    if (!r.failed) r.failed = Error(ErrorKind::kTransport, OpContext{}, "host runtime: destroy_event of a dead event");
    return;
  }
  Impl::EventState& st = r.events[static_cast<std::size_t>(e.id)];
  if (st.pending_waits > 0 && !r.failed)
    r.failed = Error(ErrorKind::kTransport, OpContext{},
                     "host runtime: destroy_event(" + std::to_string(e.id) + ") while a queued wait() still names it");
  st.live = false;
  r.free_events.push_back(e.id);
}

void HostRuntime::record(Event e, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  r.check_stream(s, "record");
  Impl::EventState& st = r.event_state(e, "record");
  if (st.device != r.streams[static_cast<std::size_t>(s.id)].device)
    fail("record of event " + std::to_string(e.id) + " (device " + std::to_string(st.device) + ") on " +
         r.describe_stream(s) + ": an event is recorded on streams of its own device only");
  ++st.recorded;
  if (r.options.bug == HostRuntimeBug::kEarlyEvent) return;  // the bug: complete before the work it captures ran
  st.unfinished.insert(st.recorded);
  r.push_event_op(Impl::Operation::Kind::kRecord, s, e, st.recorded);
}

bool HostRuntime::query(Event e) {
  Impl& r = *impl_;
  r.check_failed();
  const Impl::EventState& st = r.event_state(e, "query");
  ++r.stats.polls;
  // Late work: a few operations per poll, drawn from the seed (none half the time).
  const std::uint64_t before = r.stats.executed;
  bool queued = false;
  for (const auto& s : r.streams) queued = queued || !s.queue.empty();
  while (r.prng.below(2) == 1 && r.step()) {
  }
  if (queued && r.stats.executed == before) ++r.stats.idle_polls;
  return r.complete(st);
}

void HostRuntime::wait(Stream s, Event e) {
  Impl& r = *impl_;
  r.check_failed();
  r.check_stream(s, "wait");
  Impl::EventState& st = r.event_state(e, "wait");
  if (st.recorded == 0) return;  // never recorded: nothing to wait for
  ++st.pending_waits;
  r.push_event_op(Impl::Operation::Kind::kWait, s, e, st.recorded);
}

void HostRuntime::synchronize(Event e) {
  Impl& r = *impl_;
  r.check_failed();
  r.run_until_complete(r.event_state(e, "synchronize"));
}

void HostRuntime::copy(void* dst, const void* src, std::size_t bytes, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  r.check_stream(s, "copy");
  if (bytes == 0) return;
  // The bug: the copy goes to the next stream, unordered with the given one's work.
  const Stream on = r.options.bug == HostRuntimeBug::kWrongStreamCopy
                        ? Stream{static_cast<int>((static_cast<std::size_t>(s.id) + 1) % r.streams.size())}
                        : s;
  const bool dst_host = !r.inside(dst), src_host = !r.inside(src);
  if (dst_host && src_host) {
    std::memmove(dst, src, bytes);
    return;
  }
  Impl::Operation op{Impl::Operation::Kind::kCopy};
  op.src = r.resolve(src, bytes, "src", "copy", on, false);
  if (dst_host) {
    // To host memory: once the work queued before it on the stream finished.
    const Event marker = r.streams[static_cast<std::size_t>(on.id)].marker;
    record(marker, on);
    synchronize(marker);
    Impl::Operation now{Impl::Operation::Kind::kCopy};
    now.src = op.src;
    r.check_live(now, now.src, "reads");
    Impl::Open open(r);
    std::memcpy(dst, src, bytes);
    return;
  }
  op.dst = r.resolve(dst, bytes, "dst", "copy", on, false);
  op.bytes = bytes;
  if (src_host) op.staged.assign(static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
  r.push(on, std::move(op));
}

void HostRuntime::reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  r.check_stream(s, "reduce");
  if (count == 0) return;
  if (auto why = reduce_op_unsupported(op, dtype)) fail("reduce on " + r.describe_stream(s) + ": " + *why);
  const std::size_t bytes = count * dtype_size(dtype);
  Impl::Operation o{Impl::Operation::Kind::kReduce};
  o.dst = r.resolve(dst, bytes, "dst", "reduce", s, true);
  o.src = r.resolve(src, bytes, "src", "reduce", s, true);
  o.count = count;
  o.dtype = dtype;
  o.op = op;
  r.push(s, std::move(o));
}

void HostRuntime::finish_average(void* dst, std::size_t count, DType dtype, int divisor, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  r.check_stream(s, "finish_average");
  if (count == 0 || !is_floating(dtype)) return;
  Impl::Operation o{Impl::Operation::Kind::kAverage};
  o.dst = r.resolve(dst, count * dtype_size(dtype), "dst", "finish_average", s, true);
  o.count = count;
  o.dtype = dtype;
  o.divisor = divisor;
  r.push(s, std::move(o));
}

void HostRuntime::drain() {
  Impl& r = *impl_;
  r.check_failed();
  for (;;) {
    bool queued = false;
    for (const auto& s : r.streams) queued = queued || !s.queue.empty();
    if (!queued) return;
    if (!r.step()) r.fail_sticky("queued work can never run: every stream waits (internal error)");
  }
}

HostRuntimeStats HostRuntime::stats() const { return impl_->stats; }

}  // namespace collie::cuda
