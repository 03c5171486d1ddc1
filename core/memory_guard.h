// The memory guard: how much a command may allocate from what its user
// gave it (a scenario's tensors, a bench's sizes and ranks) before it
// starts, and how it says no. collie run and collie bench weigh their
// estimates against the same limit, so that a mistyped size is an error
// with the figures, not a machine brought down by the kernel's OOM killer.
#pragma once

#include <optional>
#include <string>

namespace collie {

// The default limit: 8 GiB.
inline constexpr double kMemoryGuardBytes = 8.0 * (1ull << 30);

// "5.0 MiB", "7.45 GiB", "24 GiB": sizes as a person reads them.
std::string human_bytes(double bytes);

// nullopt when `need` is within `limit`; otherwise "needs about 64 GiB of
// memory (limit 8.00 GiB)", for the caller to say what needs it and the
// way out.
std::optional<std::string> over_memory_guard(double need, double limit = kMemoryGuardBytes);

}  // namespace collie
