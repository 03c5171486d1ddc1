#include "core/transport.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <sstream>

#include "core/small_pool.h"

namespace collie {

namespace {
// Scratch up to this size comes from the SmallPool.
constexpr std::size_t kPooledScratchBytes = 1024;
}  // namespace


void Transport::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

void Transport::reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  reduce_host(dst, src, count, dtype, op);
}

void Transport::finish_average(void* dst, std::size_t count, DType dtype, int divisor) {
  finish_average_host(dst, count, dtype, divisor);
}

std::shared_ptr<std::byte> Transport::allocate(std::size_t bytes) {
  if (bytes <= kPooledScratchBytes) {
    // Small scratch (a latency-bound op's temporary): block and count in one
    // pooled allocation, aligned for any element type.
    const std::size_t units = std::max<std::size_t>(1, (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
    auto block = std::allocate_shared<std::max_align_t[]>(PoolAllocator<std::max_align_t>{}, units);
    return std::shared_ptr<std::byte>(block, reinterpret_cast<std::byte*>(block.get()));
  }
  auto* p = static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t{64}));
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t{64}); });
}

std::string allocation_fault(const Transport& t, const void* p, std::size_t bytes) {
  if (!p) {
    if (bytes == 0 || !t.moves_payloads()) return {};
    return "allocate(" + std::to_string(bytes) + ") returned no memory (a transport that moves payloads returns a "
           "block of the size asked for)";
  }
  constexpr std::size_t kAlign = alignof(std::max_align_t);
  if (const auto off = reinterpret_cast<std::uintptr_t>(p) % kAlign; off != 0)
    return "allocate(" + std::to_string(bytes) + ") returned a block " + std::to_string(off) + " bytes past a " +
           std::to_string(kAlign) + "-byte boundary (scratch memory is aligned for any element type)";
  return {};
}

std::string collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kNone: return "p2p";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kMonitoredBarrier: return "monitored_barrier";
  }
  return "?";
}

}  // namespace collie
