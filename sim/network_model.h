// The simulator's cost model (alpha-beta-gamma with NIC serialization and a
// two-level topology).
//
// A message of B bytes from rank s to rank d, posted at time t:
//   start   = max(t, nic_free[s])          -- a rank's NIC sends one message at a time
//   inject  = B / bandwidth                -- nic_free[s] = start + inject
//   arrival = start + inject + alpha * (1 + jitter * U[0,1))
// where (alpha, bandwidth) is `intra` when s and d are on the same node and
// `inter` otherwise. Ranks r and r' share a node when
// r / ranks_per_node == r' / ranks_per_node. Reducing B bytes costs
// B / reduce_bandwidth of the rank's compute time, one reduction at a time.
//
// CPU-bound mode (cpu_bound: true), for transports whose bytes are moved by
// the ranks' own CPUs (TCP over loopback, shared memory): a rank has one
// timeline for its sends, receives and reductions, and a node runs at most
// cores_per_node of them at once. A message of B bytes costs
//   d = overhead + B / bandwidth
// of the sender's CPU from start = max(t, cpu_free[s]) (a rendezvous's RTS
// and CTS frames cost no overhead: they belong to their message), and d of the
// receiver's CPU from max(start + overhead + alpha, cpu_free[d]) -- pipelined
// with the sender: it arrives at max(that + d, start + d + alpha).
// So a one-way stream of B-byte messages moves at bandwidth, while two ranks
// exchanging at once each take 2d (both directions share one CPU).
// A node with more ranks than cores_per_node time-slices them: its ranks
// sleep between messages, and each message costs each end a further
// oversubscribed_overhead_us (a wake-up and a context switch), and all its
// CPU costs take oversubscribed_cpu_factor times longer (collie calibrate
// fits the factor to ring shifts of cores_per_node + 1 ranks).
//
// Caches (cache_bytes > 0): a message larger than cache_bytes moves at the
// memory rate; a smaller message that is a segment of a collective whose
// per-rank tensor (all_gather: its output) does not fit (a ring's) at the
// harmonic mean of the two
// rates (one end streams it from memory, the other has it in cache). A
// rank's reductions use memory_reduce_GBps after receiving such a frame.
#pragma once

#include <cstddef>
#include <cstdint>

namespace collie::sim {

struct LinkModel {
  double alpha_us = 1.0;         // latency per message, microseconds
  double bandwidth_GBps = 25.0;  // 10^9 bytes per second
};

struct NetworkModel {
  // Consecutive ranks per node; 0 puts every rank on one node.
  int ranks_per_node = 8;
  LinkModel intra{0.5, 50.0};   // shared memory / NVLink-class
  LinkModel inter{5.0, 12.5};   // 100 Gb/s-class network
  // gamma: reduction throughput per rank, 10^9 bytes per second.
  double reduce_GBps = 10.0;
  // Blocking sends of at most this many bytes complete without waiting for
  // the receiver (eager); larger ones wait for a matching receive.
  std::size_t eager_threshold_bytes = 64 * 1024;
  // Each message's alpha is scaled by 1 + jitter_fraction * U[0,1), drawn
  // from the run's seed: different seeds explore different interleavings.
  double jitter_fraction = 0.1;

  // CPU-bound transfers (see above); off: the NIC model.
  bool cpu_bound = false;
  double overhead_us = 0;   // cpu_bound: CPU time per message at each end, microseconds
  int cores_per_node = 0;   // cpu_bound: ranks of a node running at once; 0: one core per rank
  // cpu_bound: CPU time per message at each end, on top of overhead_us, on a
  // node running more ranks than cores_per_node, microseconds.
  double oversubscribed_overhead_us = 0;
  // cpu_bound: on a node running more ranks than cores_per_node, every CPU
  // cost of its ranks (messages, reductions) is this many times longer
  // (>= 1; time slicing loses more than the share of a core: caches refill
  // after every switch, and a woken rank waits for a core).
  double oversubscribed_cpu_factor = 1;

  // Caches: an op whose tensor (a collective's per-rank tensor, a
  // point-to-point message) is larger than cache_bytes streams from memory,
  // so its bytes move at no more than memory_bandwidth_GBps and reduce at
  // memory_reduce_GBps (each used when > 0). 0: no cache effect.
  std::size_t cache_bytes = 0;
  double memory_bandwidth_GBps = 0;
  double memory_reduce_GBps = 0;
};

}  // namespace collie::sim
