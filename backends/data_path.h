// Files collie ships beside its binary -- the scenarios, the torch driver --
// found the same way from a build tree and from an install.
#pragma once

#include <string>

namespace collie {

// The path of `relative` (e.g. "scenarios", "backends/torch/
// collie_torch_worker.py"), looked for in $COLLIE_DATA_DIR, in
// <prefix>/share/collie of the running binary (an install: bin/collie), and
// in the source tree it was built from. Empty when it is in none of them.
std::string collie_data_path(const std::string& relative);

}  // namespace collie
