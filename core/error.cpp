#include "core/error.h"

#include <sstream>

namespace collie {

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kSizeMismatch: return "size_mismatch";
    case ErrorKind::kDTypeMismatch: return "dtype_mismatch";
    case ErrorKind::kCollectiveMismatch: return "collective_mismatch";
    case ErrorKind::kGroupMismatch: return "group_mismatch";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kDeadlock: return "deadlock";
    case ErrorKind::kTransport: return "transport";
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kUnsupported: return "unsupported";
  }
  return "unknown";
}

std::string format_error(ErrorKind kind, const OpContext& ctx, const std::string& detail) {
  std::ostringstream os;
  os << error_kind_name(kind) << ": ";
  bool any = false;
  if (ctx.rank >= 0) {
    os << "rank " << ctx.rank;
    any = true;
  }
  if (!ctx.op.empty()) {
    os << (any ? ", " : "") << ctx.op;
    if (ctx.seq >= 0) os << " #" << ctx.seq;
    if (!ctx.group.empty()) os << " on " << ctx.group;
    any = true;
  }
  if (!ctx.peers.empty()) {
    os << (any ? " " : "") << "(peer" << (ctx.peers.size() > 1 ? "s" : "") << " ";
    for (std::size_t i = 0; i < ctx.peers.size(); ++i) os << (i ? "," : "") << ctx.peers[i];
    os << ")";
    any = true;
  }
  if (any) os << ": ";
  os << detail;
  return os.str();
}

Error::Error(ErrorKind kind, OpContext ctx, const std::string& detail)
    : std::runtime_error(format_error(kind, ctx, detail)), kind_(kind), ctx_(std::move(ctx)), detail_(detail) {}

}  // namespace collie
