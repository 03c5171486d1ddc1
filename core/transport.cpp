#include "core/transport.h"

#include <cstring>
#include <new>
#include <sstream>

namespace collie {

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
  auto* p = static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t{64}));
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t{64}); });
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
  }
  return "?";
}

}  // namespace collie
