// Backends: ways to run N ranks of a job in this process, for scenarios and
// the conformance suite. A backend hands out one Transport per rank; all of
// them share one executor (see core/local_world.h for the contract).
//
// Built in: "sim" (the deterministic simulator). More register themselves in
// BackendRegistry::builtin(), or arrive as plugins: shared libraries loaded
// with --backend-plugin (backends/plugin.h, docs/backends.md).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnosis.h"
#include "core/observer.h"
#include "core/transport.h"
#include "sim/explorer.h"
#include "sim/faults.h"
#include "sim/network_model.h"

namespace collie {

struct BackendOptions {
  int world_size = 1;
  std::uint64_t seed = 1;     // every random choice of a simulated backend
  sim::NetworkModel network;  // the simulator's cost model; other backends may ignore it
  sim::FaultPlan faults;      // faults to inject; backends that cannot inject them ignore them
  bool trace = false;         // record a trace (write_trace)
  sim::Explorer* explorer = nullptr;  // the simulator's scheduling choices (collie explore)
  bool timing_only = false;   // payloads not materialised (simulated backends only; see sim/simulator.h)
};

class InProcessBackend {
 public:
  virtual ~InProcessBackend() = default;
  // Rank r's transport, valid for the backend's lifetime; rank() == r.
  virtual Transport& transport(int rank) = 0;
  // Simulated backends report a trace hash and event count; others 0.
  virtual std::uint64_t trace_hash() const { return 0; }
  virtual std::uint64_t events() const { return 0; }
  // Receives every op and step event (fault injection, traces); may be null.
  virtual OpObserver* observer() { return nullptr; }
  // What the backend broke on purpose, and which ranks it crashed.
  virtual std::vector<InjectedFault> injected_faults() const { return {}; }
  virtual bool crashed(int rank) const { (void)rank; return false; }
  // Writes the run's Chrome trace; false when the backend records none.
  virtual bool write_trace(std::ostream& out, Nanos end) const { (void)out; (void)end; return false; }
};

struct BackendInfo {
  std::string name;         // what --backend takes
  std::string description;  // one line
  std::string selection;    // how a user selects it
  bool simulated = false;   // virtual time and trace hashes are meaningful
  bool timing_only = false; // honours BackendOptions::timing_only
  std::function<std::unique_ptr<InProcessBackend>(const BackendOptions&)> create;
};

class BackendRegistry {
 public:
  // The backends compiled into this binary ("sim" first).
  static BackendRegistry& builtin();

  void add(BackendInfo info);
  const BackendInfo* find(std::string_view name) const;
  std::vector<const BackendInfo*> list() const;
  std::vector<std::string> names() const;

  // Loads a backend plugin (a shared library exporting collie_backend_plugin)
  // and registers it. Returns its name. Throws Error(kUsage) saying what is
  // wrong: the file, the symbol, the ABI version, a duplicate name.
  std::string load_plugin(const std::string& path);

 private:
  std::vector<std::unique_ptr<BackendInfo>> backends_;
  std::vector<void*> handles_;  // dlopen handles, kept for the process lifetime
};

}  // namespace collie
