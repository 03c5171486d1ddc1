#include "backends/nccl/nccl_backend.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "backends/remote/process_job.h"

#ifndef COLLIE_NCCL_WORKER
#define COLLIE_NCCL_WORKER ""
#endif

namespace collie::nccl {

namespace {

std::string worker() {
  if (const char* w = std::getenv("COLLIE_NCCL_WORKER"); w && *w) return w;
  const auto beside = std::filesystem::path(remote::self_executable()).parent_path() / "collie-nccl-worker";
  std::error_code ec;
  if (std::filesystem::exists(beside, ec)) return beside.string();
  if (*COLLIE_NCCL_WORKER && std::filesystem::exists(COLLIE_NCCL_WORKER, ec)) return COLLIE_NCCL_WORKER;
  return {};
}

// The worker's own verdict on this machine (`--probe`): "" when NCCL and a
// device are usable, else why not, in the driver's or the loader's words.
std::string probe(const std::string& w) {
  static const std::string verdict = [&] {
    const std::string cmd = "'" + w + "' --probe 2>&1";
    std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
    if (!p) return std::string("cannot run ") + w;
    std::string out;
    std::array<char, 512> buf{};
    while (std::fgets(buf.data(), buf.size(), p.get())) out += buf.data();
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out.rfind("ok", 0) == 0 ? std::string() : out;
  }();
  return verdict;
}

}  // namespace

BackendInfo make_nccl_backend() {
  BackendInfo info;
  info.name = "nccl";
  info.description = "NVIDIA's NCCL through its C API (collie-nccl-worker), one process per GPU";
  info.selection = "--backend nccl (COLLIE_NCCL_LIBRARY=PATH for another libnccl)";
  info.collie_core = false;
  info.no_timeouts = "NCCL has no operation timeouts: its calls block until they complete";
  info.unavailable = []() -> std::optional<std::string> {
    const std::string w = worker();
    if (w.empty())
      return std::string(*COLLIE_NCCL_WORKER ? "collie-nccl-worker is not beside collie (set COLLIE_NCCL_WORKER)"
                                             : "collie was built without the CUDA toolkit (CMake found no nccl.h "
                                               "and CUDA runtime); install CUDA and rebuild");
    if (std::string why = probe(w); !why.empty()) return why;
    return std::nullopt;
  };
  info.start = [](const JobOptions& o) {
    remote::ProcessJobSpec spec;
    spec.backend = "nccl";
    spec.children = [](int world, const std::string& controller, const std::string& token) {
      const std::string port = std::to_string(remote::free_local_port());
      std::vector<remote::ChildSpec> children;
      for (int r = 0; r < world; ++r) {
        remote::ChildSpec c;
        c.argv = {worker()};
        c.env = remote::local_rank_env(r, world, port, controller, token);
        children.push_back(std::move(c));
      }
      return children;
    };
    return remote::start_process_job(spec, o);
  };
  return info;
}

}  // namespace collie::nccl
