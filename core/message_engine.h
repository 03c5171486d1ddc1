// MessageEngine: one rank's point-to-point machinery, shared by user
// send/recv and by every collective algorithm.
//
// Guarantees (for the frames of one sender to this rank):
//   - Non-overtaking: frames enter matching in the order they were posted,
//     whatever order the transport delivers them in (channel_seq).
//   - A receive matches the first message, in that order, with the same
//     context, tag and collective sequence number, from its source (or from
//     anyone for an any-source receive); a message matches the first such
//     posted receive in posting order (MPI's rules).
//   - dtype and element count are checked before a byte is written: a
//     mismatch fails the receive (and, for rendezvous, the send) naming the
//     sender, the tag and both sizes. Nothing is truncated.
//   - Sends of at most eager_threshold_bytes complete without waiting for the
//     receiver (eager); larger ones complete only after the receiver posted a
//     matching receive (rendezvous: RTS -> CTS -> DATA), so head-to-head
//     blocking sends of large messages deadlock, as they can for real.
//   - Collective frames carry the call's Fingerprint; a frame whose
//     fingerprint or group digest disagrees with this rank's call of the same
//     sequence number fails that call with an error naming both calls.
// Not thread-safe: driven from the transport's executor only.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ascending_map.h"
#include "core/channel_table.h"
#include "core/error.h"
#include "core/frame.h"
#include "core/group.h"
#include "core/op_info.h"
#include "core/send_scribble.h"
#include "core/task.h"
#include "core/tensor.h"
#include "core/transport.h"
#include "core/work.h"

namespace collie {

struct SendSpec {
  int dst = -1;                // global rank
  std::uint32_t context = 0;
  std::uint64_t group_digest = 0;
  std::int32_t tag = 0;
  Fingerprint fp;              // zero for p2p
  TensorView buf;
  // Owns buf's memory until the transport no longer needs it (a
  // collective's scratch, which must outlive an algorithm that stops early).
  std::shared_ptr<void> keepalive;
};

struct RecvSpec {
  int src = kAnySource;        // global rank or kAnySource
  std::uint32_t context = 0;
  std::uint64_t group_digest = 0;
  std::int32_t tag = 0;
  std::uint64_t seq = 0;       // fp.seq of the collective; 0 for p2p
  TensorView buf;
  bool reduce = false;         // combine into buf instead of overwriting it
  ReduceOp op = ReduceOp::kSum;
};

class MessageEngine final : public FrameSink {
 public:
  // `scribble_completed_sends`: checking runs (core/send_scribble.h).
  // `first_send_id`: the first send's id (CommunicatorOptions).
  MessageEngine(Transport& transport, std::size_t eager_threshold_bytes, bool scribble_completed_sends = false,
                std::uint64_t first_send_id = 1);
  ~MessageEngine() override;
  MessageEngine(const MessageEngine&) = delete;
  MessageEngine& operator=(const MessageEngine&) = delete;

  // Posts a send; the returned state completes when `spec.buf` may be reused.
  // A send to this rank itself is matched locally and always eager.
  std::shared_ptr<WorkState> send(const SendSpec& spec, std::shared_ptr<const OpInfo> info);
  // Posts a receive; the returned state completes when `spec.buf` holds the
  // message (source set to the sender's global rank).
  std::shared_ptr<WorkState> recv(const RecvSpec& spec, std::shared_ptr<const OpInfo> info);

  // Declares that this rank is running the collective `fp` on `context`
  // until end_collective(); frames of the same sequence number are checked
  // against it. `outer` is the user's Work of the call, failed on mismatch.
  // `members` are the group's global ranks: if one of them is lost, the
  // call fails naming it.
  void begin_collective(std::uint32_t context, std::uint64_t group_digest, const Fingerprint& fp,
                        std::shared_ptr<WorkState> outer, std::shared_ptr<const OpInfo> info,
                        std::shared_ptr<const std::vector<int>> members = nullptr);
  void end_collective(std::uint32_t context, std::uint64_t seq);

  // Declares that `context` belongs to `group` (its membership digest,
  // name and sorted global ranks) on this rank; engines may share one
  // GroupIdentity (the world's: world_identity()). A frame that arrives on
  // a known context with another digest means the ranks created their
  // groups in different orders: every pending op of this rank then fails
  // with group_mismatch. `collective` says whether the context carries
  // collectives (their frames name a call) or point-to-point messages
  // (theirs name none): a frame that disagrees with either, or comes from
  // a rank outside the group, is the transport's (core/frame.h).
  void register_context(std::uint32_t context, std::shared_ptr<const GroupIdentity> group, bool collective);

  // The collectives this rank is running, for cross-rank diagnosis.
  struct RunningCollective {
    std::uint32_t context;
    std::string group;
    Fingerprint fp;
  };
  std::vector<RunningCollective> running_collectives() const;

  // What the collective (context, seq) -- or, for p2p, the op with `work` --
  // still waits for: "rank 2 (tag 5, float32 x 4 (16 bytes))", one per item;
  // `peers` gets the global ranks.
  std::vector<std::string> describe_waits(std::uint32_t context, std::uint64_t seq, std::vector<int>* peers) const;
  std::vector<std::string> describe_waits(const std::shared_ptr<WorkState>& work, std::vector<int>* peers) const;

  // Fails a collective call and every sub-operation it has in flight.
  void abort_collective(std::uint32_t context, std::uint64_t seq, std::exception_ptr err) {
    fail_collective(context, seq, std::move(err));
  }
  // Fails a point-to-point op that has not completed and forgets it.
  void abort_p2p(const std::shared_ptr<WorkState>& work, std::exception_ptr err);
  // Fails every op still pending with `err` and forgets it: after this the
  // engine touches no user buffer of those ops again (a late clear-to-send
  // or data frame for them is ignored). Returns how many ops it failed.
  std::size_t abort_all(std::exception_ptr err);

  // Everything this rank is blocked on, for wait-for graphs: one entry per
  // posted receive (peer = source or kAnySource) and per send waiting for
  // its receiver (rendezvous).
  struct Wait {
    bool is_send = false;
    int peer = kAnySource;
    std::int32_t tag = 0;
    std::uint32_t context = 0;
    std::uint64_t seq = 0;       // collective sequence number, 0 for p2p
    DType dtype = DType::kFloat32;
    std::uint64_t count = 0;
    Nanos since = 0;
    std::shared_ptr<const OpInfo> info;
    std::shared_ptr<WorkState> work;  // the (sub-)operation that waits
  };
  std::vector<Wait> waits() const;
  std::vector<std::string> describe_waits_if(const std::function<bool(const Wait&)>& pick,
                                             std::vector<int>* peers) const;

  // Messages that arrived and were never matched, for reports.
  struct Unmatched {
    FrameHeader header;
  };
  std::vector<Unmatched> unmatched() const;
  // Frames held back for order: they arrived, but a frame before them on
  // their channel never did (lost or misnumbered by the transport).
  struct HeldForOrder {
    int src = -1;
    std::uint64_t missing_seq = 0;       // the channel_seq the channel waits for
    std::vector<FrameHeader> held;       // in channel_seq order
  };
  std::vector<HeldForOrder> held_for_order() const;
  // The transport (or the executor it is) broke its contract in a way the
  // communicator saw (a timer fired early, a clock went back): fails every
  // op of this rank with a typed transport error saying `what`, as a bad
  // frame does.
  // A violation seen inside a core call (settle()) is reported first: it is
  // the earlier cause.
  void report_contract_violation(const std::string& what) {
    settle();
    contract_violation(nullptr, what);
  }
  // Applies the violations seen while the core was inside a call into the
  // transport (a callback ignored then; a coroutine resumed then, noted in
  // core/transport_call.h). Every callback does it first; the end of a run
  // does it once more, so that none goes unreported.
  void settle();
  // The transport's contract violation, as the rank's ops fail with it
  // ("transport: rank 1, recv #3 on world (peer 0): the transport broke
  // its contract ..."); empty while none happened.
  const std::string& contract_broken() const {
    static const std::string none;
    return rare_ ? rare_->violation : none;
  }
  // Puts back every completed send's buffer this rank's engine overwrote
  // (core/send_scribble.h): as a run ends, before anything reads them.
  void restore_scribbled() {
    if (scribble_) scribble_->restore();
  }
  // Frames the transport delivered to this rank so far.
  std::uint64_t frames_received() const { return frames_received_; }

  // One line per posted receive / unfinished send, for deadlock reports.
  std::vector<std::string> describe_pending() const;
  // Messages that arrived and were never received, one line each.
  std::vector<std::string> describe_unexpected() const;

  // Sends handed to the transport whose on_send_complete() has not come,
  // one line each -- less those to peers it reported lost (their
  // completions may never come). Once a run has ended and the transport
  // ran dry, any left were forgotten: the contract owes each exactly one.
  bool owes_completions() const;
  std::vector<std::string> owed_completions() const;

  // Whether the transport reported `peer` lost (on_peer_lost), cleanly or not.
  bool told_lost(int peer) const { return odd_ && odd_->lost_why.count(peer) != 0; }
  // Whether it reported `peer` lost cleanly (a goodbye: clean=true).
  bool told_lost_cleanly(int peer) const { return told_lost(peer) && odd_->lost_peers.count(peer) == 0; }

  // FrameSink
  void on_frame(const FrameHeader& header, std::span<const std::byte> payload) override;
  // A rendezvous receive into a buffer of the frame's size in the
  // transport's memory space.
  Landing landing_zone(const FrameHeader& header) override;
  void on_send_complete(void* cookie) override;
  void on_peer_lost(int peer, const std::string& why, bool clean) override;

 private:
  // The op's OpInfo is its Work state's (new_work()): one pointer, not one
  // in every record that names the op.
  struct PostedRecv {
    RecvSpec spec;
    std::shared_ptr<WorkState> work;
    const std::shared_ptr<const OpInfo>& info() const { return work->info; }
  };
  // A receive whose RTS was cleared (in inbound_, under (src, rendezvous
  // id)): the data must echo that RTS. Of it only what the receive does not
  // say is kept (rts() rebuilds the rest: the RTS matched the receive and
  // passed validate()); posted receives carry none of it.
  struct InboundRecv : PostedRecv {
    std::uint64_t channel_seq = 0;
    Fingerprint fp;
  };
  FrameHeader rts(const InboundRecv& r, int src, std::uint64_t rendezvous_id) const;
  struct StoredFrame {
    FrameHeader header;
    // Eager payloads only: a copy in the transport's memory (allocate() and
    // copy(), so a device transport's payload stays in device memory).
    std::shared_ptr<std::byte> payload;
    std::size_t size = 0;
    std::span<const std::byte> bytes() const { return {payload.get(), size}; }
  };
  // What a send's first frame (eager, RTS or NACK) said that its CTS must
  // echo and its data frame repeats: the header less what the sending rank
  // implies (src), what each frame sets anew (bytes) and the check words
  // (sealed per frame). 72 B instead of 112 in every pending send.
  struct SentHeader {
    FrameKind kind = FrameKind::kEager;
    DType dtype = DType::kFloat32;
    std::int32_t dst = -1;
    std::uint32_t context = 0;
    std::int32_t tag = 0;
    std::uint64_t group_digest = 0;
    std::uint64_t channel_seq = 0;
    std::uint64_t rendezvous_id = 0;
    std::uint64_t count = 0;
    Fingerprint fp;
    SentHeader() = default;
    explicit SentHeader(const FrameHeader& h)
        : kind(h.kind), dtype(h.dtype), dst(h.dst), context(h.context), tag(h.tag), group_digest(h.group_digest),
          channel_seq(h.channel_seq), rendezvous_id(h.rendezvous_id), count(h.count), fp(h.fp) {}
    // The header again, from rank `src`, with bytes 0 and no check words.
    FrameHeader frame(int src) const;
  };
  struct PendingSend {
    SentHeader header;  // as first posted (eager, RTS or NACK)
    TensorView buf;
    std::shared_ptr<WorkState> work;  // its info is the op's
    const std::shared_ptr<const OpInfo>& info() const { return work->info; }
    bool awaiting_cts = false;
    std::shared_ptr<void> keepalive;  // owns buf's memory for control frames
  };
  struct ActiveCollective {
    std::shared_ptr<const std::vector<int>> members;  // sorted; null: none
    Fingerprint fp;
    std::uint64_t group_digest = 0;
    std::shared_ptr<WorkState> outer;
    std::shared_ptr<const OpInfo> info;
  };

  static bool matches(const RecvSpec& s, const FrameHeader& h);
  // `h` with a copy of the `size` bytes at `data` that outlives the frame's
  // delivery (none when the transport moves no payloads: timing only).
  StoredFrame store(const FrameHeader& h, const std::byte* data, std::size_t size);
  void process_in_order(const FrameHeader& h, std::span<const std::byte> payload);
  void deliver(PostedRecv r, const FrameHeader& h, std::span<const std::byte> payload);
  void apply_payload(PostedRecv& r, const FrameHeader& h, std::span<const std::byte> payload);
  // Returns an error text if `h` cannot be received into `r`, else empty.
  std::string validate(const PostedRecv& r, const FrameHeader& h, ErrorKind* kind) const;
  bool check_collective(const FrameHeader& h);
  // The frame against its context, if known here: a group mismatch (the
  // program's) fails every op; a frame at odds with its context
  // (off_context()) is the transport's. False for either.
  bool check_context(const FrameHeader& h);
  struct KnownContext;
  // What `h` breaks of core/frame.h that it shows alone (check words,
  // codes, ranks, sizes), or empty. `payload` is checked against h.bytes
  // unless null (landing_zone()).
  std::optional<std::string> malformed(const FrameHeader& h, const std::span<const std::byte>* payload) const;
  // What an eager frame or RTS breaks of its context `c` (its kind of
  // traffic, its group's members), or empty: checked with the group digest
  // as the frame is matched (check_context()). A CTS, NACK or data frame
  // echoes an RTS that was.
  std::optional<std::string> off_context(const FrameHeader& h, const KnownContext& c) const;
  // A CTS, NACK or data frame that answers no rendezvous of this rank: why,
  // naming the one field that keeps it from the one it otherwise answers.
  std::string unanswered(const FrameHeader& h) const;
  // The data frame `h` against the receive `r` that cleared it, or empty.
  std::optional<std::string> data_mismatch(const FrameHeader& h, const InboundRecv& r) const;
  // A rendezvous that ended without its answer (aborted, failed, its peer
  // lost): the answer may still come, and is then dropped, not refused.
  void retire_send(std::uint64_t id) { rare().retired_sends.insert(id); }
  void retire_inbound(const std::pair<int, std::uint64_t>& key) { rare().retired_inbound.insert(key); }
  void fail_everything(std::exception_ptr err);
  // The transport broke core/transport.h's contract (`what`, about frame
  // `h` when there is one): every operation of this rank fails with a typed
  // transport error saying so, and so does every later one -- its traffic
  // can no longer be trusted. Never throws into the transport.
  void contract_violation(const FrameHeader* h, const std::string& what, const char* contract = "core/transport.h");
  // The op frame `h` is part of, as far as this rank knows it: the send
  // whose RTS a CTS or NACK answers, the receive a data frame fills, the
  // collective call it names, or a receive it matches; else what the frame
  // itself says (its call, its context's group). Peers: its src.
  OpContext frame_context(const FrameHeader& h) const;
  // Every FrameSink method starts here: true when the transport called it
  // from inside a call the core made (then it is ignored, and reported at
  // the next legitimate callback); else settles what such calls left.
  bool called_inside_a_call(const char* callback);
  // Whether a violation happened; then `w` is failed with it.
  bool refuse_if_broken(const std::shared_ptr<WorkState>& w);
  void fail_collective(std::uint32_t context, std::uint64_t seq, std::exception_ptr err);
  void send_control(FrameKind kind, const FrameHeader& about, std::string reason = {});
  // Every frame leaves through here: post_send() must return before the
  // send it posts completes.
  void post(const FrameHeader& h, std::span<const std::byte> payload, void* cookie);
  std::shared_ptr<WorkState> new_work(std::shared_ptr<const OpInfo> info);
  void finish_after_compute(std::shared_ptr<WorkState> w, std::uint64_t bytes);
  // Checking runs: overwrites what of the completed send `ps`'s buffer no
  // other send or receive of this rank still holds (core/send_scribble.h).
  void scribble_completed(const PendingSend& ps);
  // Checking runs: whether `payload` (of an eager, data or NACK frame)
  // holds the pattern, i.e. the sender's transport read the buffer after
  // completing the send; then the violation, naming it.
  bool read_after_completion(const FrameHeader& h, std::span<const std::byte> payload);

  Transport& t_;
  const int rank_;
  const std::size_t eager_threshold_;
  ChannelTable<> channels_;
  std::exception_ptr broken_;  // the transport's contract violation, once one happened
  std::uint64_t frames_received_ = 0;
  Nanos clock_ = 0;  // now() at the latest callback: it never goes back
  // Whether now() is at or past clock_ (and records it); else a contract
  // violation, and false.
  bool clock_holds();
  std::list<PostedRecv, PoolAllocator<PostedRecv>> posted_;
  std::list<StoredFrame, PoolAllocator<StoredFrame>> unexpected_;
  std::uint64_t next_send_id_ = 1;
  AscendingMap<PendingSend> sends_;  // by send id (== rendezvous id), oldest first
  std::map<std::pair<int, std::uint64_t>, InboundRecv, std::less<>,
           PoolAllocator<std::pair<const std::pair<int, std::uint64_t>, InboundRecv>>>
      inbound_;  // (src, rendezvous id) -> receive
  std::map<std::pair<std::uint32_t, std::uint64_t>, ActiveCollective, std::less<>,
           PoolAllocator<std::pair<const std::pair<std::uint32_t, std::uint64_t>, ActiveCollective>>>
      active_;
  struct KnownContext {
    std::uint32_t context;
    bool collective = false;
    std::shared_ptr<const GroupIdentity> group;  // never null; members null: not known
  };
  // Sorted by context (groups are made in order, so this only appends).
  std::vector<KnownContext> contexts_;
  const KnownContext* known(std::uint32_t context) const;
  // What only a misbehaving transport or a lost peer gives a rank, made
  // the first time it does (a simulation holds every rank's engine).
  struct Irregular {
    std::unordered_map<int, std::map<std::uint64_t, StoredFrame>> early;  // arrived ahead of order
    std::set<int> lost_peers;
    std::map<int, std::string> lost_why;
  };
  std::unique_ptr<Irregular> odd_;
  Irregular& odd() {
    if (!odd_) odd_ = std::make_unique<Irregular>();
    return *odd_;
  }
  // State that only a broken contract or an ended rendezvous needs: made
  // on first use, so that every rank's engine holds one pointer for it
  // (a large simulated world holds an engine per rank).
  struct Rare {
    std::string violation;  // a broken contract's text
    std::string deferred;   // a callback made inside a core call, not yet reported
    std::set<std::uint64_t> retired_sends;                   // rendezvous ids
    std::set<std::pair<int, std::uint64_t>> retired_inbound;  // (src, rendezvous id)
  };
  std::unique_ptr<Rare> rare_;
  Rare& rare() {
    if (!rare_) rare_ = std::make_unique<Rare>();
    return *rare_;
  }
  SpawnRegistry spawned_;
  std::unique_ptr<SendScribble> scribble_;  // checking runs only
};

}  // namespace collie
