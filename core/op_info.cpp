#include "core/op_info.h"

namespace collie {

std::string OpInfo::describe() const {
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (fp.op != CollectiveKind::kNone) return s + describe_call(fp) + " on " + group;
  s += op + " #" + std::to_string(seq) + " on " + group + (is_send ? " to " : " from ");
  s += any_source ? std::string("any rank") : "rank " + std::to_string(peer);
  return s + " (tag " + std::to_string(tag) + ", " + std::string(dtype_name(dtype)) + " x " + std::to_string(count) + ")";
}

}  // namespace collie
