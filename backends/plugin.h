// The backend plugin ABI. A plugin is a shared library that exports
//
//   extern "C" const CollieBackendPlugin* collie_backend_plugin();
//
// returning a pointer to a static CollieBackendPlugin. collie checks
// abi_version, registers `name`, and calls `create` once per world. The
// plugin must be built against the same collie headers and the same C++
// standard library as the collie binary that loads it (the objects it
// returns are C++ objects). See docs/backends.md for a walk-through.
#pragma once

#include "backends/backend.h"

// 2: Transport gained charges_compute_time().
// 3: Transport derives from Executor; BackendOptions lost the simulator's fields.
// 4: InProcessBackend gained can_crash() and crash().
// 5: Transport gained memory_space().
// 6: FrameHeader gained its check words (core/frame_check.h).
#define COLLIE_PLUGIN_ABI_VERSION 6

extern "C" {

struct CollieBackendPlugin {
  int abi_version;          // COLLIE_PLUGIN_ABI_VERSION
  const char* name;         // what --backend takes; must not clash with a built-in
  const char* description;  // one line, shown by `collie backends`
  // A new world of options->world_size ranks; the caller owns the result.
  // Returning null, or throwing, fails the run with the plugin's name.
  collie::InProcessBackend* (*create)(const collie::BackendOptions* options);
};

const CollieBackendPlugin* collie_backend_plugin();
}
