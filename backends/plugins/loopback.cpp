// An example backend plugin: every rank in this process, frames handed over
// in FIFO order through one queue, no notion of time beyond counting events.
// It is what a minimal correct transport looks like, and the conformance
// suite passes on it.
//
// It is also the suite's own acceptance test: a family of broken
// transports, one per class of transport bug, each of which `collie
// conformance` must fail with a report that names the class
// (docs/backends.md). Built with LOOPBACK_BUG=<class> (and LOOPBACK_EVERY=N)
// the bug is fixed at compile time. Built with LOOPBACK_FAMILY, one build
// serves the whole family: it is copied once per variant, and each copy
// reads its variant from its own file name (lossy_loopback.so is
// lossy_loopback; kVariants below), so that `--backend-plugin X.so
// --backend X` works for every member without compiling each.
//   lossy_loopback               drops every N-th frame
//   duplicating_loopback         delivers every N-th frame twice
//   double_completing_loopback   completes every N-th send twice
//   late_reading_loopback        reports a send complete, reads its payload later
//   reads_after_completion_loopback  reports every send complete at once, reads its payload right
//                                    after (before its rank runs again: only scribbling shows it)
//   thousandth_frame_loopback    delivers its 1000th frame (and every 1000th after) twice: only
//                                long runs reach it
//   short_payload_loopback       delivers every N-th payload one byte short
//   bf16_truncating_loopback     bfloat16 SUM truncates instead of rounding to nearest even
//   early_returning_loopback     run_until returns when idle instead of reporting a deadlock
//   eager_resuming_loopback      schedule() resumes the coroutine inside the call
//   eager_completing_loopback    completes a send inside post_send()
//   backwards_clock_loopback     now() goes back now and then
//   hanging_loopback             drops every N-th frame, then waits forever instead of reporting the deadlock
//   timerless_loopback           schedule_at() never fires: op timeouts never expire
//   silent_crash_loopback        a crashed rank's peers are never told (no on_peer_lost)
//   frozen_clock_loopback        now() always reads 0 (timers still fire, when idle)
//   always_resuming_loopback     schedule() resumes every coroutine inside the call (collie crashed on it)
//   resuming_in_post_loopback    post_send() resumes a waiting coroutine inside the call
//   synchronous_loopback         delivers every N-th frame inside post_send()
//   eager_timer_loopback         schedule_at() resumes the coroutine inside the call
//   corrupt_<kind>_<field>_loopback  changes one header field of every few frames of one kind in transit
//   forged_<kind>_<field>_loopback   the same, sealing the header again (only the protocol can tell)
//   old_abi_loopback             says it was built for the previous plugin ABI (collie must refuse it)
//   zombie_loopback              a crashed rank's peers are told, but it runs on and its frames still arrive
//   nack_forgetting_loopback     never completes a NACK's send (no op waits for one: only the end of a run shows it)
//   payload_lying_loopback       moves_payloads() says false, yet delivers every payload (collie crashed on it)
//   misaligned_alloc_loopback    allocate() above 1 KiB returns a block 4 bytes past alignment (right values on x86)
//   int64_minmax_double_loopback int64 MIN/MAX compares through double (2^63-1 and 2^63-2 are one double)
//   clock_step_back_loopback     the clock steps back 300 ns once, at the world's 400th event, for good
//   channel_wrap_loopback        from a channel's 65,537th frame on, an eager payload repeats the channel's
//                                last one of its length (slots indexed by a 16-bit counter that wraps)
//   landing_sum_only_loopback    lands data payloads through landing_zone(), reducing with SUM whatever the
//                                landing's op says
// And ones that bend the contract without breaking it, which must pass:
//   late_completing_loopback     completes every send 40 turns of the queue late (after a peer's loss
//                                was reported too, after every rank finished too)
//   landing_loopback             lands every data payload it can through landing_zone()
//   schedule_low_priority_loopback  resumes schedule()'s coroutines only when nothing else is pending
#include <dlfcn.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <bit>
#include <chrono>
#include <cstring>
#include <thread>

#include "backends/plugin.h"
#include "core/error.h"
#include "core/frame_check.h"

#define LOOPBACK_CORRECT 0
#define LOOPBACK_DROP 1
#define LOOPBACK_DUPLICATE 2
#define LOOPBACK_DOUBLE_COMPLETE 3
#define LOOPBACK_LATE_READ 4
#define LOOPBACK_SHORT_PAYLOAD 5
#define LOOPBACK_BF16_TRUNCATE 6
#define LOOPBACK_EARLY_RETURN 7
#define LOOPBACK_RESUME_INSIDE_SCHEDULE 8
#define LOOPBACK_COMPLETE_INSIDE_POST 9
#define LOOPBACK_CLOCK_BACKWARDS 10
#define LOOPBACK_HANG 11
#define LOOPBACK_DROP_TIMERS 12
#define LOOPBACK_SILENT_CRASH 13
#define LOOPBACK_FROZEN_CLOCK 14
#define LOOPBACK_OLD_ABI 15
#define LOOPBACK_RESUME_INSIDE_POST 16
#define LOOPBACK_DELIVER_INSIDE_POST 17
#define LOOPBACK_TIMER_INSIDE_CALL 18
#define LOOPBACK_CORRUPT_HEADER 19
#define LOOPBACK_READ_AFTER_COMPLETE 20
#define LOOPBACK_ZOMBIE 21
#define LOOPBACK_FORGET_NACK_COMPLETION 22
#define LOOPBACK_LATE_COMPLETION 23
#define LOOPBACK_PAYLOAD_LYING 24
#define LOOPBACK_MISALIGNED_ALLOC 25
#define LOOPBACK_INT64_MINMAX_DOUBLE 26
#define LOOPBACK_CLOCK_STEP_BACK 27
#define LOOPBACK_CHANNEL_WRAP 28
#define LOOPBACK_LANDING 29
#define LOOPBACK_LANDING_SUM_ONLY 30
#define LOOPBACK_COARSE_CLOCK 31
#define LOOPBACK_COARSE_TIMER_MAP 32
#define LOOPBACK_STAGING_RING 33
#define LOOPBACK_COMPLETE_INSIDE_COPY 34
#define LOOPBACK_CONTEXT8 35
#define LOOPBACK_AVG_OVER_16 36
#define LOOPBACK_COMPLETION_QUEUE 37
#define LOOPBACK_LOSS_DROPS_COMPLETIONS 38
#define LOOPBACK_RENDEZVOUS_ID_BITS 39
#define LOOPBACK_NACK_TEXT_128 40
#define LOOPBACK_LOSS_FANOUT_BREAK 41
#define LOOPBACK_DEAD_TIMER_SLOT 42
#define LOOPBACK_IDLE_LOSS_CLEAN 43
#define LOOPBACK_DEAD_SET_PROCESS_WIDE 44
#define LOOPBACK_F16_SATFINITE 45
#define LOOPBACK_SEGMENT_COUNT 46
#define LOOPBACK_TIMER_IN_TIMER_LOST 47
#define LOOPBACK_NACK_KIND_BIT 48
#define LOOPBACK_SCHEDULE_LOW_PRIORITY 49
#ifndef LOOPBACK_BUG
#define LOOPBACK_BUG LOOPBACK_CORRECT
#endif
#ifndef LOOPBACK_EVERY
#define LOOPBACK_EVERY 50
#endif
#ifndef LOOPBACK_NAME
#define LOOPBACK_NAME "loopback"
#endif
#ifndef LOOPBACK_DESCRIPTION
#define LOOPBACK_DESCRIPTION "example plugin: in-process FIFO loopback, no virtual time"
#endif

namespace {

using collie::FrameHeader;
using collie::Nanos;

#ifdef LOOPBACK_FAMILY
// The family: which bug each copy has, by the copy's file name.
struct Variant {
  const char* name;
  int bug;
  std::uint64_t every;  // the bug strikes every `every`-th time it can
  const char* description;
};

constexpr Variant kVariants[] = {
    {"loopback", LOOPBACK_CORRECT, 1, "example plugin: in-process FIFO loopback, no virtual time"},
    {"lossy_loopback", LOOPBACK_DROP, 50, "broken on purpose: drops every 50th frame (must fail conformance)"},
    {"duplicating_loopback", LOOPBACK_DUPLICATE, 50, "broken on purpose: delivers every 50th frame twice"},
    {"double_completing_loopback", LOOPBACK_DOUBLE_COMPLETE, 50, "broken on purpose: completes every 50th send twice"},
    {"late_reading_loopback", LOOPBACK_LATE_READ, 50,
     "broken on purpose: reads a send's payload after reporting it complete"},
    {"reads_after_completion_loopback", LOOPBACK_READ_AFTER_COMPLETE, 1,
     "broken on purpose: completes every send at once and reads its payload right after"},
    {"thousandth_frame_loopback", LOOPBACK_DUPLICATE, 1000,
     "broken on purpose: delivers its 1000th frame (and every 1000th after) twice"},
    {"short_payload_loopback", LOOPBACK_SHORT_PAYLOAD, 50, "broken on purpose: delivers every 50th payload one byte short"},
    {"bf16_truncating_loopback", LOOPBACK_BF16_TRUNCATE, 1,
     "broken on purpose: bfloat16 SUM truncates instead of rounding"},
    {"early_returning_loopback", LOOPBACK_EARLY_RETURN, 1,
     "broken on purpose: run_until returns when idle instead of reporting a deadlock"},
    {"eager_resuming_loopback", LOOPBACK_RESUME_INSIDE_SCHEDULE, 50,
     "broken on purpose: schedule() resumes the coroutine inside the call"},
    {"eager_completing_loopback", LOOPBACK_COMPLETE_INSIDE_POST, 50,
     "broken on purpose: completes a send inside post_send()"},
    {"backwards_clock_loopback", LOOPBACK_CLOCK_BACKWARDS, 1, "broken on purpose: now() goes back now and then"},
    {"hanging_loopback", LOOPBACK_HANG, 50,
     "broken on purpose: drops every 50th frame, then hangs instead of reporting the deadlock"},
    {"timerless_loopback", LOOPBACK_DROP_TIMERS, 1,
     "broken on purpose: schedule_at() never fires (timeouts never expire)"},
    {"silent_crash_loopback", LOOPBACK_SILENT_CRASH, 1,
     "broken on purpose: never tells a crashed rank's peers (no on_peer_lost)"},
    {"frozen_clock_loopback", LOOPBACK_FROZEN_CLOCK, 1, "broken on purpose: now() always reads 0"},
    {"always_resuming_loopback", LOOPBACK_RESUME_INSIDE_SCHEDULE, 1,
     "broken on purpose: schedule() resumes every coroutine inside the call (collie crashed on it)"},
    {"resuming_in_post_loopback", LOOPBACK_RESUME_INSIDE_POST, 50,
     "broken on purpose: post_send() resumes a waiting coroutine inside the call"},
    {"synchronous_loopback", LOOPBACK_DELIVER_INSIDE_POST, 50,
     "broken on purpose: delivers every 50th frame inside post_send()"},
    {"eager_timer_loopback", LOOPBACK_TIMER_INSIDE_CALL, 1,
     "broken on purpose: schedule_at() resumes the coroutine inside the call"},
    {"old_abi_loopback", LOOPBACK_OLD_ABI, 1,
     "broken on purpose: says it was built for the previous plugin ABI (must be refused)"},
    {"zombie_loopback", LOOPBACK_ZOMBIE, 1,
     "broken on purpose: a crashed rank's peers are told it is lost, but it runs on and its frames arrive"},
    {"nack_forgetting_loopback", LOOPBACK_FORGET_NACK_COMPLETION, 1,
     "broken on purpose: never completes a NACK's send"},
    {"late_completing_loopback", LOOPBACK_LATE_COMPLETION, 40,
     "correct, bending the contract: completes every send 40 turns of its queue late"},
    {"payload_lying_loopback", LOOPBACK_PAYLOAD_LYING, 1,
     "broken on purpose: moves_payloads() says false, yet every payload is delivered"},
    {"misaligned_alloc_loopback", LOOPBACK_MISALIGNED_ALLOC, 1,
     "broken on purpose: allocate() above 1 KiB returns a block 4 bytes past alignment"},
    {"int64_minmax_double_loopback", LOOPBACK_INT64_MINMAX_DOUBLE, 1,
     "broken on purpose: int64 MIN/MAX compares through double"},
    {"clock_step_back_loopback", LOOPBACK_CLOCK_STEP_BACK, 400,
     "broken on purpose: the clock steps back 300 ns once, at the 400th event"},
    {"channel_wrap_loopback", LOOPBACK_CHANNEL_WRAP, 65536,
     "broken on purpose: from a channel's 65,537th frame on, a payload repeats the last one of its length"},
    {"landing_sum_only_loopback", LOOPBACK_LANDING_SUM_ONLY, 1,
     "broken on purpose: lands data payloads, reducing with SUM whatever the landing says"},
    {"landing_loopback", LOOPBACK_LANDING, 1, "correct: lands every data payload it can through landing_zone()"},
    {"coarse_clock_loopback", LOOPBACK_COARSE_CLOCK, 1,
     "correct, bending the contract: now() ticks in 1 ms steps (never before the last timer fired)"},
    {"coarse_timer_map_loopback", LOOPBACK_COARSE_TIMER_MAP, 1,
     "broken on purpose: coarse_clock, and a timer set for the time of a pending one replaces it"},
    {"staging_ring_loopback", LOOPBACK_STAGING_RING, 1024,
     "broken on purpose: stages payloads in a ring of 1,024 slots, overwriting one still in flight"},
    {"completing_in_copy_loopback", LOOPBACK_COMPLETE_INSIDE_COPY, 50,
     "broken on purpose: copy() completes a pending send inside the call (a stream sync that polls completions)"},
    {"context8_loopback", LOOPBACK_CONTEXT8, 1,
     "broken on purpose: the context travels in 8 bits (a communicator-id field): a context of 256 or more arrives cut"},
    {"avg_over_16_loopback", LOOPBACK_AVG_OVER_16, 16,
     "broken on purpose: finish_average() takes 1/n from a table of 16: more than 16 members divide by 16"},
    {"completion_queue_4096_loopback", LOOPBACK_COMPLETION_QUEUE, 4096,
     "broken on purpose: a completion queue of 4,096 per rank; completions past it are lost"},
    {"loss_drops_completions_loopback", LOOPBACK_LOSS_DROPS_COMPLETIONS, 1,
     "broken on purpose: a peer's loss resets the observer's completion queue: its queued send completions, to any "
     "peer, are lost"},
    {"rendezvous_id16_loopback", LOOPBACK_RENDEZVOUS_ID_BITS, 16,
     "broken on purpose: the rendezvous id travels in 16 bits: an id of 65,536 or more arrives cut"},
    {"rendezvous_id32_loopback", LOOPBACK_RENDEZVOUS_ID_BITS, 32,
     "broken on purpose: the rendezvous id travels in 32 bits (a uint32_t field): an id of 2^32 or more arrives cut"},
    {"nack_text_128_loopback", LOOPBACK_NACK_TEXT_128, 128,
     "broken on purpose: a NACK's reason travels in a 128-byte inline control message: a longer text arrives cut"},
    {"loss_fanout_break_loopback", LOOPBACK_LOSS_FANOUT_BREAK, 1,
     "broken on purpose: telling the survivors of a crash stops at the first rank already dead (break, not "
     "continue)"},
    {"dead_timer_slot_loopback", LOOPBACK_DEAD_TIMER_SLOT, 1,
     "broken on purpose: a crashed rank's armed timer slots go back to the pool armed: the next timer set takes "
     "the dead one's expiry when sooner"},
    {"idle_loss_clean_loopback", LOOPBACK_IDLE_LOSS_CLEAN, 1,
     "broken on purpose: a crashed peer with nothing in flight to or from the observer is reported clean (its "
     "socket's FIN taken for a goodbye)"},
    {"dead_set_process_wide_loopback", LOOPBACK_DEAD_SET_PROCESS_WIDE, 1,
     "broken on purpose: the set of crashed ranks is process-wide: the next world of the same size inherits it"},
    {"f16_satfinite_loopback", LOOPBACK_F16_SATFINITE, 1,
     "broken on purpose: float16 SUM/PRODUCT round back with a saturating convert: an overflow gives +-65504, not "
     "+-inf"},
    {"segment_count_loopback", LOOPBACK_SEGMENT_COUNT, 65536,
     "broken on purpose: payloads over 64 KiB go in 64 KiB segments counted as (bytes + 65534) / 65536: a last "
     "segment of one byte is lost"},
    {"timer_in_timer_lost_loopback", LOOPBACK_TIMER_IN_TIMER_LOST, 1,
     "broken on purpose: a timer armed while a timer's resumption runs (the wheel's firing slot) is lost"},
    {"nack_kind_bit_loopback", LOOPBACK_NACK_KIND_BIT, 1,
     "broken on purpose: a NACK's refusal kind travels in one bit (size or dtype): a group mismatch arrives as a "
     "size mismatch"},
    {"schedule_low_priority_loopback", LOOPBACK_SCHEDULE_LOW_PRIORITY, 1,
     "correct, bending the contract: schedule()'s resumptions wait until no frame, completion or loss report is "
     "pending"},
};

// This module's file name without folder and extension.
std::string module_stem() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&module_stem), &info) || !info.dli_fname) return {};
  std::string_view path = info.dli_fname;
  if (const auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (const auto dot = path.find('.'); dot != std::string_view::npos) path = path.substr(0, dot);
  return std::string(path);
}
#endif

// Which bug this build has: LOOPBACK_BUG, or with LOOPBACK_FAMILY the entry
// of kVariants named by the module's file name.
struct Config {
  std::string name = LOOPBACK_NAME;
  std::string description = LOOPBACK_DESCRIPTION;
  int bug = LOOPBACK_BUG;
  std::uint64_t every = LOOPBACK_EVERY;
  // LOOPBACK_CORRUPT_HEADER: which field of which kind of frame changes
  // between post_send() and delivery, and whether the header is sealed
  // again afterwards (a forged header: its check words hold, so only what
  // the protocol implies can give it away).
  collie::FrameKind kind = collie::FrameKind::kEager;
  std::string field;
  bool reseal = false;
};

#ifdef LOOPBACK_FAMILY
// corrupt_<kind>_<field>_loopback and forged_<kind>_<field>_loopback: ONE
// field of ONE kind of frame, every few frames of that kind.
bool parse_header_variant(const std::string& stem, Config& out) {
  const std::string suffix = "_loopback";
  std::string rest;
  for (const char* prefix : {"corrupt_", "forged_"}) {
    const std::string p = prefix;
    if (stem.rfind(p, 0) == 0 && stem.size() > p.size() + suffix.size() &&
        stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
      rest = stem.substr(p.size(), stem.size() - p.size() - suffix.size());
      out.reseal = p == "forged_";
    }
  }
  const auto cut = rest.find('_');
  if (cut == std::string::npos) return false;
  const std::string kind = rest.substr(0, cut), field = rest.substr(cut + 1);
  static const std::pair<const char*, collie::FrameKind> kinds[] = {
      {"eager", collie::FrameKind::kEager}, {"rts", collie::FrameKind::kRts}, {"cts", collie::FrameKind::kCts},
      {"nack", collie::FrameKind::kNack}, {"data", collie::FrameKind::kData}};
  static const char* fields[] = {"src",           "dst",   "context", "group_digest", "tag",   "channel_seq",
                                 "rendezvous_id", "dtype", "count",   "bytes",        "fingerprint"};
  bool known_kind = false, known_field = false;
  for (const auto& [name, k] : kinds)
    if (kind == name) known_kind = true, out.kind = k;
  for (const char* f : fields) known_field = known_field || field == f;
  if (!known_kind || !known_field) return false;
  out.name = stem;
  out.bug = LOOPBACK_CORRUPT_HEADER;
  out.field = field;
  // Eager frames are many; the rendezvous's few; NACKs come one per refusal.
  out.every = out.kind == collie::FrameKind::kEager ? 50 : out.kind == collie::FrameKind::kNack ? 1 : 7;
  out.description = std::string("broken on purpose: ") + (out.reseal ? "forges" : "changes") + " the " + field +
                    " of every " + std::to_string(out.every) + "th " + kind + " frame" +
                    (out.reseal ? ", sealing the header again" : " in transit");
  return true;
}
#endif

const Config& config() {
  static const Config c = [] {
    Config out;
#ifdef LOOPBACK_FAMILY
    const std::string stem = module_stem();
    for (const Variant& v : kVariants) {
      if (stem != v.name) continue;
      out.name = v.name;
      out.description = v.description;
      out.bug = v.bug;
      out.every = v.every;
      return out;
    }
    if (parse_header_variant(stem, out)) return out;
    // A copy under a name the family does not know is refused by name
    // (create() fails), never silently correct.
    out.name = stem;
    out.description = "unknown member of the loopback family";
    out.bug = -1;
#endif
    return out;
  }();
  return c;
}
int bug() { return config().bug; }
std::uint64_t every() { return config().every; }

class Loopback;

class Endpoint final : public collie::Transport {
 public:
  Endpoint(Loopback& world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override;
  void attach(collie::FrameSink* sink) override { sink_ = sink; }
  void post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) override;
  void schedule(std::coroutine_handle<> h) override;
  void schedule_after_compute(std::uint64_t, std::coroutine_handle<> h) override { schedule(h); }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override;
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override;
  Nanos now() const override;
  bool moves_payloads() const override { return bug() != LOOPBACK_PAYLOAD_LYING; }  // the bug: it does
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override {
    std::shared_ptr<std::byte> p = collie::Transport::allocate(bytes + (bug() == LOOPBACK_MISALIGNED_ALLOC ? 4 : 0));
    if (bug() != LOOPBACK_MISALIGNED_ALLOC || bytes <= 1024) return p;
    return std::shared_ptr<std::byte>(p, p.get() + 4);  // the bug: 4 bytes past the aligned block
  }
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void finish_average(void* dst, std::size_t count, collie::DType dtype, int divisor) override {
    if (bug() == LOOPBACK_AVG_OVER_16 && divisor > static_cast<int>(every())) divisor = static_cast<int>(every());  // the bug
    collie::Transport::finish_average(dst, count, dtype, divisor);
  }
  void reduce(void* dst, const void* src, std::size_t count, collie::DType dtype, collie::ReduceOp op) override {
    if (bug() == LOOPBACK_F16_SATFINITE && dtype == collie::DType::kFloat16 &&
        (op == collie::ReduceOp::kSum || op == collie::ReduceOp::kProduct || op == collie::ReduceOp::kAvg)) {
      auto* d = static_cast<std::uint16_t*>(dst);
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < count; ++i) {
        const bool inf_in = (d[i] & 0x7fff) == 0x7c00 || (s[i] & 0x7fff) == 0x7c00;
        collie::Transport::reduce(&d[i], &s[i], 1, dtype, op);
        // The bug: an overflow saturates to the largest finite half.
        if (!inf_in && (d[i] & 0x7fff) == 0x7c00) d[i] = static_cast<std::uint16_t>((d[i] & 0x8000) | 0x7bff);
      }
      return;
    }
    if (bug() == LOOPBACK_INT64_MINMAX_DOUBLE && dtype == collie::DType::kInt64 &&
        (op == collie::ReduceOp::kMin || op == collie::ReduceOp::kMax)) {
      // The bug: compared as doubles, which cannot tell 2^63-1 from 2^63-2.
      auto* d = static_cast<std::int64_t*>(dst);
      const auto* s = static_cast<const std::int64_t*>(src);
      for (std::size_t i = 0; i < count; ++i) {
        const double a = static_cast<double>(d[i]), b = static_cast<double>(s[i]);
        if (op == collie::ReduceOp::kMax ? b > a : b < a) d[i] = s[i];
      }
      return;
    }
    if (bug() != LOOPBACK_BF16_TRUNCATE || dtype != collie::DType::kBFloat16 || op != collie::ReduceOp::kSum)
      return collie::Transport::reduce(dst, src, count, dtype, op);
    // bfloat16 SUM by truncating float32 sums (the bug: torch rounds to
    // nearest even).
    auto* d = static_cast<std::uint16_t*>(dst);
    const auto* s = static_cast<const std::uint16_t*>(src);
    for (std::size_t i = 0; i < count; ++i) {
      const float sum = std::bit_cast<float>(std::uint32_t{d[i]} << 16) + std::bit_cast<float>(std::uint32_t{s[i]} << 16);
      d[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(sum) >> 16);
    }
  }
  collie::FrameSink* sink() const { return sink_; }

 private:
  Loopback& world_;
  int rank_;
  collie::FrameSink* sink_ = nullptr;
};

class Loopback final : public collie::InProcessBackend {
 public:
  explicit Loopback(int n) {
    for (int r = 0; r < n; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
    if (bug() == LOOPBACK_DEAD_SET_PROCESS_WIDE) {
      // The bug: the dead set is reset only when the world's size changes.
      static std::vector<bool> process_dead;
      if (process_dead.size() != static_cast<std::size_t>(n)) process_dead.assign(static_cast<std::size_t>(n), false);
      dead_ = process_dead;
      process_dead_ = &process_dead;
    }
  }
  collie::Transport& transport(int rank) override { return *endpoints_[static_cast<std::size_t>(rank)]; }
  std::uint64_t events() const override { return events_; }
  // A crashed rank does nothing more, and every other rank's transport
  // reports it lost (as a reset connection would) on its next turn.
  bool can_crash() const override { return true; }
  void crash(int rank, const std::string& why) override {
    dead_.resize(endpoints_.size());
    dead_[static_cast<std::size_t>(rank)] = true;
    if (process_dead_) (*process_dead_)[static_cast<std::size_t>(rank)] = true;
    if (bug() == LOOPBACK_DEAD_TIMER_SLOT)  // the bug: the dead rank's slots are freed still armed
      for (auto t = timers_.begin(); t != timers_.end();) {
        if (t->second.first != rank) {
          ++t;
          continue;
        }
        stale_timer_slots_.push_back(t->first);
        t = timers_.erase(t);
      }
    if (bug() == LOOPBACK_SILENT_CRASH) return;  // the bug: nobody is told
    for (int p = 0; p < size(); ++p) {
      if (p == rank) continue;
      if (bug() == LOOPBACK_LOSS_FANOUT_BREAK && crashed(p)) break;  // the bug: the loop ends at a dead peer
      Item lost{Item::kLost, p, nullptr, {}, {}, nullptr, rank, why};
      if (bug() == LOOPBACK_IDLE_LOSS_CLEAN)  // the bug: nothing in flight between the two: a clean close
        lost.clean = std::none_of(queue_.begin(), queue_.end(), [&](const Item& i) {
          return i.kind == Item::kDeliver &&
                 ((i.header.src == rank && i.header.dst == p) || (i.header.src == p && i.header.dst == rank));
        });
      queue_.push_back(std::move(lost));
    }
  }
  bool crashed(int rank) const override {
    return static_cast<std::size_t>(rank) < dead_.size() && dead_[static_cast<std::size_t>(rank)];
  }

  struct Item {
    enum Kind { kResume, kDeliver, kSent, kReadLate, kLost, kSentLate } kind;
    int rank;
    void* ptr;
    FrameHeader header;
    std::vector<std::byte> payload;
    const std::byte* source = nullptr;  // kReadLate: the sender's buffer, read when this comes up again
    int turns = 0;                      // kLost: the rank lost; kSentLate: turns still to wait
    std::string why = {};               // kLost
    std::uint64_t staged = 0;           // kDeliver, staging_ring_loopback: its slot's number (1 on)
    bool clean = false;                 // kLost: reported as a goodbye (idle_loss_clean_loopback)
    bool from_timer = false;            // kResume: a timer's (timer_in_timer_lost_loopback)
  };
  void push(Item it) {
    if (bug() == LOOPBACK_ZOMBIE || (!crashed(it.rank) && !(it.kind == Item::kDeliver && crashed(it.header.src)))) {
      if (it.kind == Item::kSent) {
        if (completions_.size() <= static_cast<std::size_t>(it.rank)) completions_.resize(static_cast<std::size_t>(it.rank) + 1);
        ++completions_[static_cast<std::size_t>(it.rank)];
      }
      queue_.push_back(std::move(it));
    }
  }
  // Send completions of `rank` queued and not yet reported.
  std::uint64_t queued_completions(int rank) const {
    return static_cast<std::size_t>(rank) < completions_.size() ? completions_[static_cast<std::size_t>(rank)] : 0;
  }
  // Timers fire, in time order, only when nothing else can run: the clock
  // then jumps to them.
  void timer(Nanos when, int rank, void* h) {
    // The bug: timers kept by time alone (a coarse clock makes equal times
    // common), so the older one is lost.
    if (bug() == LOOPBACK_COARSE_TIMER_MAP) timers_.erase(when);
    if (bug() == LOOPBACK_DEAD_TIMER_SLOT && !stale_timer_slots_.empty()) {
      // The bug: a reused slot keeps the dead rank's expiry when that is sooner.
      when = std::min(when, stale_timer_slots_.front());
      stale_timer_slots_.erase(stale_timer_slots_.begin());
    }
    timers_.emplace(when, std::make_pair(rank, h));
  }
  std::uint64_t next_frame() { return ++frames_; }
  // channel_wrap_loopback: frames posted on src -> dst, and its last eager
  // payload of each length up to 64 bytes.
  using Channel = std::pair<std::uint64_t, std::map<std::size_t, std::vector<std::byte>>>;
  Channel& channel(int src, int dst) { return channels_[{src, dst}]; }
  std::uint64_t next_of_kind(int kind) { return ++of_kind_[static_cast<std::size_t>(kind)]; }
  // Resumes the first coroutine waiting in the queue, at once.
  void resume_one_now() {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->kind != Item::kResume) continue;
      void* h = it->ptr;
      queue_.erase(it);
      return std::coroutine_handle<>::from_address(h).resume();
    }
  }
  // completing_in_copy: `rank`'s first pending send completion, made now.
  void complete_one_now(int rank) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->kind != Item::kSent || it->rank != rank) continue;
      void* cookie = it->ptr;
      queue_.erase(it);
      return endpoint(rank).sink()->on_send_complete(cookie);
    }
  }
  Endpoint& endpoint(int rank) { return *endpoints_[static_cast<std::size_t>(rank)]; }
  int size() const { return static_cast<int>(endpoints_.size()); }
  Nanos clock() const { return static_cast<Nanos>(events_) + jump_ - back_; }

  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
    if (running_)
      throw collie::Error(collie::ErrorKind::kUsage, {}, "blocking wait inside a loopback rank; use co_await");
    running_ = true;
    struct Reset {
      bool& b;
      ~Reset() { b = false; }
    } reset{running_};
    while (!done()) {
      if (deadline && clock() >= *deadline) return false;
      if (queue_.empty() && !low_.empty()) {
        // schedule_low_priority_loopback: nothing else is pending (a timer
        // fires only when nothing can run).
        queue_.push_back(std::move(low_.front()));
        low_.pop_front();
      }
      if (queue_.empty() && !timers_.empty() && (!deadline || timers_.begin()->first < *deadline)) {
        auto t = timers_.begin();
        jump_ = std::max(jump_, t->first - static_cast<Nanos>(events_) + back_);
        last_fired_ = std::max(last_fired_, t->first);
        queue_.push_back({Item::kResume, t->second.first, t->second.second, {}, {}});
        queue_.back().from_timer = true;
        timers_.erase(t);
      }
      if (queue_.empty()) {
        if (deadline) return false;
        if (bug() == LOOPBACK_EARLY_RETURN) return false;
        if (bug() == LOOPBACK_HANG)
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the bug: a hang, not a report
        throw collie::Error(collie::ErrorKind::kDeadlock, {}, "loopback: no frame or coroutine is pending");
      }
      Item it = std::move(queue_.front());
      queue_.pop_front();
      ++events_;
      if (bug() == LOOPBACK_CLOCK_STEP_BACK && events_ == every()) back_ = 300;  // the bug: for good
      if (crashed(it.rank) && bug() != LOOPBACK_ZOMBIE) continue;  // a dead rank does nothing (the bug: it does)
      Endpoint& ep = *endpoints_[static_cast<std::size_t>(it.rank)];
      switch (it.kind) {
        case Item::kResume:
          in_timer_ = it.from_timer;
          std::coroutine_handle<>::from_address(it.ptr).resume();
          in_timer_ = false;
          break;
        case Item::kDeliver:
          if (it.staged) {
            // The bug: the frame's slot may hold a later frame's payload by now.
            const auto& [staged, bytes] = ring_[it.staged % ring_.size()];
            if (staged != it.staged && bytes.size() == it.payload.size()) it.payload = bytes;
          }
          deliver(ep, it.header, it.payload);
          break;
        case Item::kSent:
          --completions_[static_cast<std::size_t>(it.rank)];
          ep.sink()->on_send_complete(it.ptr);
          break;
        case Item::kSentLate:
          if (it.turns-- > 0) {
            queue_.push_back(std::move(it));
            break;
          }
          ep.sink()->on_send_complete(it.ptr);
          break;
        case Item::kLost:
          if (bug() == LOOPBACK_LOSS_DROPS_COMPLETIONS)  // the bug: the observer's queued completions go
            for (auto q = queue_.begin(); q != queue_.end();) {
              if (q->kind != Item::kSent || q->rank != it.rank) {
                ++q;
                continue;
              }
              --completions_[static_cast<std::size_t>(it.rank)];
              q = queue_.erase(q);
            }
          ep.sink()->on_peer_lost(it.turns, it.why, it.clean);
          break;
        case Item::kReadLate:
          // Behind the sender's resumption in the queue: it has run on (and
          // may have reused its buffer) by the time the payload is read.
          if (it.turns++ == 0) {
            queue_.push_back(std::move(it));
            break;
          }
          it.kind = Item::kDeliver;
          it.payload.assign(it.source, it.source + it.header.bytes);
          queue_.push_back(std::move(it));
          break;
      }
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::deque<Item> queue_;
  std::uint64_t events_ = 0, frames_ = 0;
  std::uint64_t of_kind_[5] = {};  // frames posted, per FrameKind
  std::multimap<Nanos, std::pair<int, void*>> timers_;
  std::vector<bool> dead_;  // crashed ranks
  std::vector<bool>* process_dead_ = nullptr;  // dead_set_process_wide_loopback: the process's set
  std::vector<Nanos> stale_timer_slots_;       // dead_timer_slot_loopback: expiries left armed
  std::map<std::pair<int, int>, Channel> channels_;
  Nanos jump_ = 0;
  Nanos back_ = 0;  // clock_step_back_loopback: how far the clock stepped back
  bool running_ = false;

 public:
  Nanos last_fired_ = 0;  // the latest timer time fired (coarse_clock_loopback)
  bool in_timer_ = false;  // a timer's resumption runs (timer_in_timer_lost_loopback)
  std::deque<Item> low_;   // schedule_low_priority_loopback: resumptions waiting for an empty queue
  // staging_ring_loopback: (the frame's number, its payload) per slot.
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> ring_;
  std::uint64_t staged_ = 0;
  std::uint64_t copies_ = 0;
  std::vector<std::uint64_t> completions_;  // by rank: kSent items in the queue  // completing_in_copy: copy() calls so far

 private:
  // Hands a frame to its rank's core: the landing variants write a data
  // payload straight into the receive's buffer when the core names one
  // (asked right before the write, as the contract says), else on_frame()
  // gets it as is.
  static void deliver(Endpoint& ep, const FrameHeader& h, const std::vector<std::byte>& payload) {
    const bool lands = bug() == LOOPBACK_LANDING || bug() == LOOPBACK_LANDING_SUM_ONLY;
    if (!lands || h.kind != collie::FrameKind::kData || payload.empty()) return ep.sink()->on_frame(h, payload);
    const collie::FrameSink::Landing z = ep.sink()->landing_zone(h);
    if (z.dst.size() != payload.size()) return ep.sink()->on_frame(h, payload);
    if (z.reduce) {
      const collie::ReduceOp op = bug() == LOOPBACK_LANDING_SUM_ONLY ? collie::ReduceOp::kSum : z.op;  // the bug
      ep.reduce(z.dst.data(), payload.data(), z.dst.size() / collie::dtype_size(z.dtype), z.dtype, op);
    } else {
      std::memcpy(z.dst.data(), payload.data(), payload.size());
    }
    ep.sink()->on_frame(h, {z.dst.data(), z.dst.size()});
  }
};

int Endpoint::world_size() const { return world_.size(); }
Nanos Endpoint::now() const {
  if (bug() == LOOPBACK_FROZEN_CLOCK) return 0;  // the bug: time never passes
  const Nanos t = world_.clock();
  // Legal: whole milliseconds, monotonic, and never before a timer that
  // fired (a timer's resumption reads at least its time).
  if (bug() == LOOPBACK_COARSE_CLOCK || bug() == LOOPBACK_COARSE_TIMER_MAP)
    return std::max(t - t % 1'000'000, world_.last_fired_);
  return bug() == LOOPBACK_CLOCK_BACKWARDS && t % 5 == 0 && t > 100 ? t - 100 : t;
}
void Endpoint::schedule_at(Nanos when, std::coroutine_handle<> h) {
  if (bug() == LOOPBACK_DROP_TIMERS) return;  // the bug: the timer is forgotten
  if (bug() == LOOPBACK_TIMER_IN_TIMER_LOST && world_.in_timer_) return;  // the bug: the firing slot is cleared after
  if (bug() == LOOPBACK_TIMER_INSIDE_CALL) return h.resume();
  world_.timer(when, rank_, h.address());
}
void Endpoint::schedule(std::coroutine_handle<> h) {
  if (bug() == LOOPBACK_RESUME_INSIDE_SCHEDULE && world_.next_frame() % every() == 0) return h.resume();
  if (bug() == LOOPBACK_SCHEDULE_LOW_PRIORITY) return world_.low_.push_back({Loopback::Item::kResume, rank_, h.address(), {}, {}});
  world_.push({Loopback::Item::kResume, rank_, h.address(), {}, {}});
}
bool Endpoint::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  return world_.run_until(done, deadline);
}

// Changes config().field of `h` (LOOPBACK_CORRUPT_HEADER): the header as
// delivered, not as routed.
void corrupt(FrameHeader& h, int world) {
  const std::string& f = config().field;
  if (f == "src") h.src = (h.src + 1) % world;
  else if (f == "dst") h.dst = (h.dst + 1) % world;
  else if (f == "context") h.context ^= 2;
  else if (f == "group_digest") h.group_digest ^= 1;
  else if (f == "tag") h.tag ^= 1;
  else if (f == "channel_seq") h.channel_seq ^= 1;
  else if (f == "rendezvous_id") h.rendezvous_id ^= 1;
  else if (f == "dtype") h.dtype = static_cast<collie::DType>((static_cast<int>(h.dtype) + 1) % collie::kNumDTypes);
  else if (f == "count") h.count ^= 1;
  else if (f == "bytes") h.bytes ^= 1;
  else if (f == "fingerprint") h.fp.seq ^= 1;
  if (config().reseal) collie::seal(h);
}

void Endpoint::post_send(const FrameHeader& header, std::span<const std::byte> payload, void* cookie) {
  using Item = Loopback::Item;
  const std::uint64_t n = world_.next_frame();
  const bool nth = n % every() == 0;
  FrameHeader h = header;
  if (bug() == LOOPBACK_CORRUPT_HEADER && h.kind == config().kind &&
      world_.next_of_kind(static_cast<int>(h.kind)) % every() == 0) {
    corrupt(h, world_.size());
    world_.push({Item::kDeliver, header.dst, nullptr, h, {payload.begin(), payload.end()}});
    if (cookie) world_.push({Item::kSent, rank_, cookie, {}, {}});
    return;
  }
  if (bug() == LOOPBACK_SEGMENT_COUNT && payload.size() > every() && payload.size() % every() == 1) {
    // The bug: (bytes + 65534) / 65536 segments; the last, of one byte, never goes (the receiver's buffer keeps
    // what it held there, zero here).
    std::vector<std::byte> p(payload.begin(), payload.end());
    p.back() = std::byte{0};
    world_.push({Item::kDeliver, h.dst, nullptr, h, std::move(p)});
    if (cookie) world_.push({Item::kSent, rank_, cookie, {}, {}});
    return;
  }
  if (bug() == LOOPBACK_NACK_KIND_BIT && h.kind == collie::FrameKind::kNack &&
      h.tag != static_cast<std::int32_t>(collie::ErrorKind::kDTypeMismatch)) {
    h.tag = static_cast<std::int32_t>(collie::ErrorKind::kSizeMismatch);  // the bug: one bit, dtype or not
    collie::seal(h);
  }
  if (bug() == LOOPBACK_NACK_TEXT_128 && h.kind == collie::FrameKind::kNack && payload.size() > every()) {
    payload = payload.first(every());  // the bug: the inline message holds every() bytes; the header is rebuilt
    h.bytes = payload.size();
    collie::seal(h);
  }
  if (bug() == LOOPBACK_RENDEZVOUS_ID_BITS && (h.rendezvous_id >> every()) != 0) {
    h.rendezvous_id &= (std::uint64_t{1} << every()) - 1;  // the bug: the wire's field has every() bits
    collie::seal(h);
  }
  if (bug() == LOOPBACK_CONTEXT8 && h.context > 0xff) {
    h.context &= 0xff;  // the bug: the wire's field has 8 bits; the header is rebuilt from it
    collie::seal(h);
  }
  switch (bug()) {
    case LOOPBACK_DROP:
    case LOOPBACK_HANG:
      if (!nth) world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      break;
    case LOOPBACK_DUPLICATE:
      world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      if (nth) world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      break;
    case LOOPBACK_LATE_READ:
      // Zero-copy gone wrong: completion first, the payload read afterwards.
      // Only payloads up to 64 KiB, whose memory stays mapped when the core
      // frees it (below malloc's mmap threshold): the bug must give wrong
      // values for the suite to find, not crash this process.
      if (payload.size() <= 65536) {
        if (cookie) world_.push({Item::kSent, rank_, cookie, {}, {}});
        world_.push({Item::kReadLate, h.dst, nullptr, h, {}, payload.data()});
        return;
      }
      world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      break;
    case LOOPBACK_READ_AFTER_COMPLETE:
      // Completion at once, the payload read on the very next turn: before
      // anything of the sender runs again, so the program never changed the
      // buffer and its values are right -- unless the core made the buffer
      // provably unused (core/send_scribble.h). Payloads up to 64 KiB, as
      // late_reading_loopback, so that a freed buffer is still mapped.
      if (cookie && payload.size() <= 65536) {
        world_.push({Item::kSent, rank_, cookie, {}, {}});
        world_.push({Item::kReadLate, h.dst, nullptr, h, {}, payload.data(), 1});
        return;
      }
      world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      break;
    case LOOPBACK_DELIVER_INSIDE_POST:
      if (nth) {
        world_.endpoint(h.dst).sink()->on_frame(h, payload);
        break;
      }
      world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      break;
    case LOOPBACK_SHORT_PAYLOAD:
      world_.push({Item::kDeliver, h.dst, nullptr, h,
                   {payload.begin(), payload.end() - (nth && !payload.empty() ? 1 : 0)}});
      break;
    case LOOPBACK_CHANNEL_WRAP: {
      // Payload slots indexed by a 16-bit counter that wraps onto a stale
      // slot: past the channel's 65,536th frame, an eager payload is
      // delivered as the channel's last earlier one of its length.
      auto& [frames, last] = world_.channel(rank_, h.dst);
      std::vector<std::byte>* stale = nullptr;
      if (h.kind == collie::FrameKind::kEager && payload.size() <= 64) stale = &last[payload.size()];
      if (++frames > every() && stale && !stale->empty()) {
        world_.push({Item::kDeliver, h.dst, nullptr, h, *stale});
      } else {
        world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
      }
      if (stale) stale->assign(payload.begin(), payload.end());
      break;
    }
    case LOOPBACK_STAGING_RING: {
      world_.ring_.resize(every());
      const std::uint64_t k = ++world_.staged_;
      world_.ring_[k % every()] = {k, {payload.begin(), payload.end()}};
      Loopback::Item it{Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}};
      it.staged = k;
      world_.push(std::move(it));
      break;
    }
    default:
      world_.push({Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
  }
  if (bug() == LOOPBACK_RESUME_INSIDE_POST && nth) world_.resume_one_now();
  if (cookie && bug() == LOOPBACK_COMPLETE_INSIDE_POST && nth) return sink_->on_send_complete(cookie);
  if (cookie && bug() == LOOPBACK_FORGET_NACK_COMPLETION && h.kind == collie::FrameKind::kNack) return;
  if (cookie && bug() == LOOPBACK_LATE_COMPLETION) {
    // The payload was copied above: the buffer is free now, its completion
    // merely late (and still exactly once).
    world_.push({Item::kSentLate, rank_, cookie, {}, {}, nullptr, static_cast<int>(every())});
    return;
  }
  if (cookie && bug() == LOOPBACK_COMPLETION_QUEUE) {
    // The bug: a full queue drops the completion.
    if (world_.queued_completions(rank_) >= every()) return;
  }
  if (cookie) world_.push({Item::kSent, rank_, cookie, {}, {}});
  if (cookie && bug() == LOOPBACK_DOUBLE_COMPLETE && nth) world_.push({Item::kSent, rank_, cookie, {}, {}});
}

void Endpoint::copy(void* dst, const void* src, std::size_t bytes) {
  collie::Transport::copy(dst, src, bytes);
  if (bug() == LOOPBACK_COMPLETE_INSIDE_COPY && ++world_.copies_ % every() == 0) world_.complete_one_now(rank_);
}

collie::InProcessBackend* create(const collie::BackendOptions* o) {
  if (bug() < 0)
    throw collie::Error(collie::ErrorKind::kUsage, {},
                        "the loopback family has no member named '" + config().name +
                            "' (backends/plugins/loopback.cpp, kVariants)");
  return new Loopback(o->world_size);
}

}  // namespace

extern "C" const CollieBackendPlugin* collie_backend_plugin() {
  static const CollieBackendPlugin plugin{COLLIE_PLUGIN_ABI_VERSION - (bug() == LOOPBACK_OLD_ABI ? 1 : 0),
                                          config().name.c_str(),
                                          config().description.c_str(), &create};
  return &plugin;
}
