#include "core/memory_guard.h"

#include <cstdio>

namespace collie {

std::string human_bytes(double bytes) {
  static const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  else std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s", bytes, kUnits[u]);
  return buf;
}

std::optional<std::string> over_memory_guard(double need, double limit) {
  if (need <= limit) return std::nullopt;
  return "needs about " + human_bytes(need) + " of memory (limit " + human_bytes(limit) + ")";
}

}  // namespace collie
