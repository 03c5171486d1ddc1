#include "backends/data_path.h"

#include <cstdlib>
#include <filesystem>

#include "backends/remote/child_processes.h"

#ifndef COLLIE_SOURCE_DIR
#define COLLIE_SOURCE_DIR ""
#endif

namespace collie {

std::string collie_data_path(const std::string& relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* d = std::getenv("COLLIE_DATA_DIR"); d && *d) roots.emplace_back(d);
  const fs::path exe = remote::self_executable();
  roots.push_back(exe.parent_path().parent_path() / "share" / "collie");
  if (*COLLIE_SOURCE_DIR) roots.emplace_back(COLLIE_SOURCE_DIR);
  for (const fs::path& root : roots) {
    std::error_code ec;
    const fs::path p = root / relative;
    if (fs::exists(p, ec)) return p.string();
  }
  return {};
}

}  // namespace collie
