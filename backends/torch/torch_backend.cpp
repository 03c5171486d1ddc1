#include "backends/torch/torch_backend.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "backends/data_path.h"
#include "backends/remote/fork_server.h"
#include "backends/remote/process_job.h"

namespace collie::torch {

namespace {

constexpr const char* kDriver = "backends/torch/collie_torch_worker.py";
constexpr const char* kForkServer = "backends/remote/collie_fork_server.py";

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::string dirs = path;
  std::size_t at = 0;
  while (at <= dirs.size()) {
    const std::size_t colon = dirs.find(':', at);
    const std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    if (!dir.empty() && executable(dir + "/" + program)) return dir + "/" + program;
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  return {};
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The one line of the driver's output that says why it could not start.
std::string explain(const std::string& output) {
  const auto at = output.rfind("collie torch worker: ");
  if (at != std::string::npos) {
    std::string line = output.substr(at + 21);
    return line.substr(0, line.find('\n'));
  }
  std::string t = output;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// Where rank 0 of the job started with `token` says its store's port
// (the driver's COLLIE_STORE_PORT_FILE): the kernel picks the port as rank 0
// binds it, so no other job can hold it.
std::string store_port_file(const std::string& token) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  return (dir / ("collie-torch-store-" + token.substr(0, 32) + ".port")).string();
}

// What a dead rank's report quotes of its driver's output: Python's fatal
// signal report (faulthandler: the error, then the innermost frames first,
// where the library was called) when there is one, else its last lines
// (a traceback's last lines are its error).
std::vector<std::string> last_words(const std::string& output) {
  const auto fatal = output.rfind("Fatal Python error: ");
  if (fatal == std::string::npos) return remote::last_lines(output, 6);
  std::vector<std::string> out;
  std::istringstream in(output.substr(fatal));
  for (std::string l; std::getline(in, l) && out.size() < 5;)
    if (l.rfind("Fatal Python error: ", 0) == 0 || l.rfind("  File ", 0) == 0) out.push_back(l);
  return out;
}

// The rank processes of every job under `py` are forked from one Python
// that imported torch once (fork_server.h): a job of 8 ranks then starts in
// a fraction of a second instead of 8 imports of torch (1.5 s of CPU each).
// Null (every rank started anew) without the server's script, or with
// COLLIE_TORCH_FORK_SERVER=0.
std::shared_ptr<remote::ForkServer> fork_server(const std::string& py, const std::string& driver) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<remote::ForkServer>> servers;
  const std::string script = collie_data_path(kForkServer);
  if (script.empty() || env("COLLIE_TORCH_FORK_SERVER") == "0") return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  auto& s = servers[py + "\n" + driver];
  if (!s)
    s = std::make_shared<remote::ForkServer>(std::vector<std::string>{py, "-u", script, driver, "torch", "torch.distributed"},
                                             remote::ForkServer::Env{{"OMP_NUM_THREADS", "1"}}, 300'000'000'000);
  return s;
}

BackendInfo make(const std::string& name) {
  const std::string backend = name.substr(name.find(':') + 1);
  BackendInfo info;
  info.name = name;
  info.description = "torch.distributed's '" + backend + "' backend through torch's Python API, one process per rank";
  info.selection = "--backend " + name + " [--python PATH] [--torch-import MODULE]";
  info.collie_core = false;
  info.unavailable = []() -> std::optional<std::string> {
    if (collie_data_path(kDriver).empty())
      return std::string("the torch driver ") + kDriver + " is not beside this collie (nor in COLLIE_DATA_DIR)";
    if (python().empty()) return std::string("no python3 (give one with --python or COLLIE_PYTHON)");
    return std::nullopt;
  };
  info.start = [backend, name](const JobOptions& o) {
    remote::ProcessJobSpec spec;
    spec.backend = name;
    spec.explain_failed_start = explain;
    spec.last_words = last_words;
    const std::string timeout_ns = o.timeout_ns > 0 ? std::to_string(o.timeout_ns) : "";
    spec.children = [backend, timeout_ns](int world, const std::string& controller, const std::string& token) {
      const std::string port = std::to_string(remote::free_local_port());
      const std::string driver = collie_data_path(kDriver);
      const auto server = fork_server(python(), driver);
      std::vector<remote::ChildSpec> children;
      for (int r = 0; r < world; ++r) {
        remote::ChildSpec c;
        c.argv = {python(), "-u", driver};
        c.env = remote::local_rank_env(r, world, port, controller, token);
        c.env.insert(c.env.end(), {{"COLLIE_TORCH_BACKEND", backend},
                                   {"COLLIE_STORE_PORT_FILE", store_port_file(token)},
                                   {"COLLIE_TORCH_IMPORT", env("COLLIE_TORCH_IMPORT")},
                                   // One thread per rank process: several ranks share the host's cores.
                                   {"OMP_NUM_THREADS", "1"}});
        if (!timeout_ns.empty()) c.env.emplace_back("COLLIE_TIMEOUT_NS", timeout_ns);
        c.fork_server = server;
        children.push_back(std::move(c));
      }
      return children;
    };
    spec.clean_up = [](const std::string& token) {
      // Rank 0 removes it once every rank has read it; this, when the job ended first.
      const std::string file = store_port_file(token);
      std::error_code ec;
      std::filesystem::remove(file, ec);
      std::filesystem::remove(file + ".partial", ec);
    };
    return remote::start_process_job(spec, o);
  };
  return info;
}

}  // namespace

std::string python() {
  if (const std::string p = env("COLLIE_PYTHON"); !p.empty()) return p;
  if (executable("/usr/bin/python3")) return "/usr/bin/python3";
  return on_path("python3");
}

std::string missing() {
  const std::string py = python();
  if (py.empty()) return "no python3 (set COLLIE_PYTHON)";
  const std::string cmd =
      "'" + py + "' -c 'import importlib.util as u, sys; sys.exit(u.find_spec(\"torch\") is None)' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return py + " finds no module torch";
  return {};
}

std::string probe() {
  const std::string py = python();
  if (py.empty()) return "not available: no python3 (give one with --python or COLLIE_PYTHON)";
  const std::string cmd = "'" + py +
                          "' -c 'import torch, torch.distributed as d; "
                          "print(torch.__version__, *[(\"yes\" if f() else \"no\") for f in "
                          "(d.is_gloo_available, d.is_mpi_available, d.is_nccl_available)])' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) return "not available: cannot run " + py;
  std::string out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  char version[64] = {}, gloo[8] = {}, mpi[8] = {}, nccl[8] = {};
  if (std::sscanf(out.c_str(), "%63s %7s %7s %7s", version, gloo, mpi, nccl) != 4)
    return "not available: " + py + " cannot import torch.distributed (" + explain(out) + ")";
  return std::string("torch ") + version + " under " + py + ": gloo " + gloo + ", mpi " + mpi + ", nccl " + nccl;
}

BackendFamily make_torch_backends() {
  return BackendFamily{"torch", make,
                       "torch.distributed's backend NAME (gloo, mpi, nccl, or your own registered by a module given "
                       "with --torch-import) through torch's Python API, one process per rank",
                       "--backend torch:NAME [--python PATH] [--torch-import MODULE]"};
}

}  // namespace collie::torch
