#include "core/op_info.h"

namespace collie {

std::string OpInfo::describe() const {
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (fp.op != CollectiveKind::kNone) return s + describe_call(fp) + " on " + group;
  s += op + " #" + std::to_string(seq) + " on " + group + (is_send ? " to " : " from ");
  s += any_source ? std::string("any rank") : "rank " + std::to_string(peer);
  return s + " (tag " + std::to_string(tag) + ", " + std::string(dtype_name(dtype)) + " x " + std::to_string(count) + ")";
}

std::string OpInfo::step() const {
  if (!step_phase) return {};
  return step_index < 0 ? std::string(step_phase) : std::string(step_phase) + " " + std::to_string(step_index);
}

}  // namespace collie
