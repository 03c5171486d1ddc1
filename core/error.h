// Typed errors.
//
// Every error an op can raise is a collie::Error with a kind a program can
// switch on and a message a person can act on. Errors raised by an op carry
// the op's context: which rank, which op, which group, the op's sequence
// number in that group, and the peer ranks involved. The message always
// contains all of it, so printing what() is enough.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace collie {

enum class ErrorKind {
  kInvalidArgument,     // bad argument caught before anything was sent
  kSizeMismatch,        // a message's byte count differs from the receive buffer
  kDTypeMismatch,       // a message's dtype differs from the receive buffer
  kCollectiveMismatch,  // ranks called different collectives / shapes / roots
  kGroupMismatch,       // ranks disagree on a group's membership
  kTimeout,             // an op did not complete within its timeout
  kDeadlock,            // nothing can make progress and ops are still pending
  kTransport,           // the transport reported a failure
  kUsage,               // the API was used in a way that cannot work
  kUnsupported,         // the implementation does not provide this op, dtype or reduce op
};

std::string_view error_kind_name(ErrorKind k);  // "invalid_argument", "size_mismatch", ...

// Where an error happened. Fields that do not apply are left at their
// defaults and are not printed.
struct OpContext {
  int rank = -1;           // global rank that raised the error
  std::string op;          // "recv", "all_reduce", ...
  std::string group;       // "world" or "group#2[0,1]"
  std::int64_t seq = -1;   // the op's sequence number in its group (1-based)
  std::vector<int> peers;  // global ranks involved
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, OpContext ctx, const std::string& detail);
  ErrorKind kind() const { return kind_; }
  const OpContext& context() const { return ctx_; }
  const std::string& detail() const { return detail_; }

 private:
  ErrorKind kind_;
  OpContext ctx_;
  std::string detail_;
};

// "rank 1: recv #3 on world (peers 0): <detail>" with the parts that apply.
std::string format_error(ErrorKind kind, const OpContext& ctx, const std::string& detail);

}  // namespace collie
