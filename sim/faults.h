// Faults the simulator injects, deterministically from the run's seed.
//
// A FaultPlan is declared in a scenario's `faults:` section, given on the
// command line (--fault), or drawn at random from a seed (collie fuzz). The
// simulator applies it; it never checks anything. What it did is recorded as
// FaultRecords that traces and deadlock diagnosis show.
//
// What the core masks: delay and reorder (per-channel sequence numbers
// restore order), so results still equal the oracle. What it detects and
// names: duplicate, a frame delivered twice -- a transport contract
// violation (core/transport.h), failed as a transport error naming the
// frame. What it cannot: drop, partition and crash, which end in an error
// (with timeouts) or a deadlock that the diagnosis explains.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/frame.h"
#include "core/transport.h"
#include "sim/prng.h"

namespace collie::sim {

struct TimeWindow {
  Nanos from_ns = 0;
  Nanos until_ns = std::numeric_limits<Nanos>::max();
  bool contains(Nanos t) const { return t >= from_ns && t < until_ns; }
};

// A fault on messages between ranks. A "message" is a send's first frame
// (eager data or rendezvous request); with `nth` set the fault hits the
// nth message (1-based) on each matching channel, otherwise every frame with
// `probability`.
struct MessageFault {
  enum class Kind { kDrop, kDelay, kDuplicate, kReorder } kind = Kind::kDrop;
  int src = -1;  // -1: any
  int dst = -1;  // -1: any
  std::uint64_t nth = 0;
  double probability = 1.0;
  TimeWindow window;
  // Extra latency (kDelay), or how long a reordered frame is held back so
  // later ones overtake it (kReorder): fixed, uniform in [delay_us,
  // delay_max_us], or exponential with mean delay_us.
  enum class Distribution { kFixed, kUniform, kExponential } distribution = Distribution::kFixed;
  double delay_us = 0;
  double delay_max_us = 0;
};

// Messages between side a and side b (everyone else when b is empty) are
// lost during the window; one_way loses only a -> b.
struct Partition {
  std::vector<int> a;
  std::vector<int> b;
  TimeWindow window;
  bool one_way = false;
};

// Slower links: bandwidth times `bandwidth_factor` (0.1 = ten times slower),
// `added_latency_us` more latency.
struct LinkDegradation {
  enum class Scope { kPair, kNode, kInterNode } scope = Scope::kInterNode;
  int a = -1;  // kPair: one end; kNode: the node index
  int b = -1;  // kPair: the other end
  double bandwidth_factor = 1.0;
  double added_latency_us = 0;
  TimeWindow window;
};

// A rank stops for good: at a virtual time, when it issues its nth op, or
// when one of its collectives enters an algorithm step whose name starts
// with at_step ("reduce_scatter", "reduce_scatter 2").
// Peers learn of the crash detect_ns after it, as a reset connection tells
// a real transport's (FrameSink::on_peer_lost); without it the crash is
// silent, and only timeouts or the deadlock report tell.
struct Crash {
  int rank = 0;
  std::optional<Nanos> at_ns;
  std::uint64_t at_op = 0;
  std::string at_step;
  std::optional<Nanos> detect_ns;
};

// A rank whose compute and NIC take `factor` times as long.
struct SlowRank {
  int rank = 0;
  double factor = 1.0;
};

// A rank whose clock reads offset + rate x true time: its timeouts fire
// early (rate > 1) or late.
struct ClockSkew {
  int rank = 0;
  double rate = 1.0;
  double offset_us = 0;
};

struct FaultPlan {
  std::vector<MessageFault> messages;
  std::vector<Partition> partitions;
  std::vector<LinkDegradation> degradations;
  std::vector<Crash> crashes;
  std::vector<SlowRank> slow;
  std::vector<ClockSkew> skews;

  bool empty() const {
    return messages.empty() && partitions.empty() && degradations.empty() && crashes.empty() && slow.empty() &&
           skews.empty();
  }
  std::size_t size() const {
    return messages.size() + partitions.size() + degradations.size() + crashes.size() + slow.size() + skews.size();
  }
  // One line per fault, in plan order ("drop the 3rd message 0->1").
  std::vector<std::string> describe() const;
  // Adds `other`'s faults after this plan's, kind by kind.
  void append(const FaultPlan& other);
};

// A random fault profile for `world` ranks, a different mix per seed.
// Benign profiles hold only faults the core must mask (delay, reorder, slow
// ranks, clock skew, degraded links); destructive ones may add duplicates,
// drops, partitions and crashes.
FaultPlan random_fault_plan(std::uint64_t seed, int world, bool destructive);

// Parses one fault from the command line's compact form, e.g.
//   drop:src=0,dst=1,nth=3        delay:us=50,p=0.5        duplicate:p=0.1
//   reorder:us=20,p=0.3           partition:a=0+1,b=2+3,from_us=0,until_us=100
//   degrade:scope=inter,bw=0.1,lat_us=5     crash:rank=2,at_us=30   crash:rank=1,op=3,detect_us=50
//   crash:rank=0,step=reduce_scatter        slow:rank=3,factor=4    skew:rank=1,rate=1.5
// Returns an error text instead on failure.
std::optional<std::string> parse_fault(const std::string& text, FaultPlan& plan);

// The first fault of `plan` that names a rank outside a world of `world`
// ranks, said as "crash:rank=9 names rank 9, outside world 4"; nullopt
// when every rank named is in the world.
std::optional<std::string> fault_outside_world(const FaultPlan& plan, int world);

// The plan as parse_fault() strings, one per fault, in plan order; parsing
// them back gives the same plan. Defaults are left out (drop:src=0,dst=1).
std::vector<std::string> fault_args(const FaultPlan& plan);

// The faults of `plan` that did nothing in a run, one line each
// ("crash:rank=2,op=99 did not fire: rank 2 never started its 99th op"),
// given the texts of what the run injected (FaultRecord::describe(): each
// names the plan's fault that did it, "... by fault 'crash rank 2 at its
// 99th op'"). Judged: crashes, drops and partitions -- what a run reports
// as injected (core/diagnosis.h's InjectedFault); delays, duplicates,
// reorders, degraded links, slow ranks and skewed clocks are not.
std::vector<std::string> unfired_faults(const FaultPlan& plan, const std::vector<std::string>& injected);

// What the simulator did on purpose, in the order it did it.
struct FaultRecord {
  enum class Kind { kDrop, kDelay, kDuplicate, kReorder, kPartition, kDeadDestination, kCrash } kind = Kind::kDrop;
  Nanos time = 0;
  int rank = -1;           // kCrash: the rank; otherwise the sender
  int dst = -1;
  FrameHeader header;      // message faults
  std::string fault;       // which fault of the plan ("drop the 3rd message 0->1")
  std::string describe() const;
};

}  // namespace collie::sim
