// The algorithms behind each collective, and how one is chosen.
//
// Every algorithm is written once, over the transport seam, and is correct
// for every group size (powers of two or not) and every count including 0.
// Selection is a pure function of (collective, bytes per rank, group size),
// so every rank of a correct program picks the same one; a forced choice
// travels in the call's fingerprint, so ranks that force different ones get a
// collective_mismatch error instead of garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/frame.h"

namespace collie {

enum class Algorithm : std::uint8_t {
  kAuto = 0,
  kRing = 1,               // all_reduce (reduce-scatter + all-gather, pipelined), all_gather
  kRecursiveDoubling = 2,  // all_reduce for small messages
  kHalvingDoubling = 3,    // all_reduce: Rabenseifner's reduce-scatter + all-gather
  kBinomialTree = 4,       // broadcast, reduce, scatter, gather
  kLinear = 5,             // broadcast, reduce, scatter, gather: root talks to everyone
  kDissemination = 6,      // barrier
  kBruck = 7,              // all_gather in ceil(log2 n) steps, any n (latency bound, and at scale);
                           // all_to_all with equal blocks in ceil(log2 n) steps
  kPairwise = 8,           // reduce_scatter, all_to_all: every pair exchanges its block directly
};

std::string_view algorithm_name(Algorithm a);  // "ring", "halving_doubling", ...
std::optional<Algorithm> parse_algorithm(std::string_view name);

// The algorithms that implement `op`, in the order documentation lists them.
std::vector<Algorithm> algorithms_for(CollectiveKind op);
bool algorithm_supports(Algorithm a, CollectiveKind op);

// Tunables of the automatic choice. Units are bytes per rank.
struct AlgorithmSelection {
  // all_reduce at or below this size uses recursive doubling (latency bound).
  std::size_t allreduce_small_bytes = 16 * 1024;
  // all_reduce whose per-rank chunk (bytes / group size) is at least this uses
  // the pipelined ring; between the two, halving-doubling.
  std::size_t allreduce_ring_chunk_bytes = 64 * 1024;
  // all_gather whose per-rank block is at least this uses the ring (n-1
  // steps that pipeline well); smaller blocks use Bruck (ceil(log2 n) steps).
  std::size_t allgather_ring_block_bytes = 64 * 1024;
  // reduce_scatter whose output block is at least this uses the pipelined
  // ring (n-1 steps, each moving one block in segments); smaller blocks use
  // pairwise exchange (all n-1 messages at once, latency bound).
  std::size_t reduce_scatter_ring_block_bytes = 64 * 1024;
  // scatter/gather moving at most this many bytes in total use the binomial
  // tree; above it, linear (the tree would copy large blocks twice).
  std::size_t scatter_tree_total_bytes = 64 * 1024;
  // Segment size of the pipelined ring: each chunk is sent in segments of at
  // most this many bytes so that forwarding overlaps receiving.
  std::size_t ring_segment_bytes = 256 * 1024;
};

// The automatic choice. `bytes_per_rank` is the input per rank (broadcast,
// reduce, all_reduce, all_gather: the tensor; scatter/gather: one block;
// reduce_scatter: the output block; all_to_all: not used -- pairwise, as
// block sizes may differ between ranks).
Algorithm select_algorithm(CollectiveKind op, std::size_t bytes_per_rank, int group_size,
                           const AlgorithmSelection& sel);

}  // namespace collie
