// streaming_copy: memmove, but a large copy between disjoint buffers is
// written past the caches (non-temporal stores).
//
// Why: a simulated world holds every rank's tensors at once; at 1,024
// ranks x 1 MiB an algorithm step's copies cover hundreds of MiB, so the
// lines they write are evicted before anyone reads them. Ordinary stores
// first read each destination line into the cache (a third stream of
// memory traffic); streaming ones do not (the real-data all_reduce of
// bench/sim_vs_smpi.sh; figures in docs/PERFORMANCE.md).
//
// Guarantees: afterwards dst holds what src held, for any sizes,
// alignments and overlaps (overlapping or small copies are memmove's); the
// stores are fenced before it returns. Only a way of writing: nothing that
// reads dst later can tell.
#pragma once

#include <cstddef>

namespace collie::sim {

// Copies of at least this many bytes stream.
inline constexpr std::size_t kStreamingCopyBytes = std::size_t{128} << 10;

void streaming_copy(void* dst, const void* src, std::size_t bytes);

}  // namespace collie::sim
