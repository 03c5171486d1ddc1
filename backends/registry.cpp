#include <dlfcn.h>

#include <algorithm>

#include "backends/registry.h"

#include "backends/in_process_job.h"
#include "backends/plugin.h"
#include "backends/remote/child_processes.h"
#include "core/error.h"

namespace collie {

namespace {

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, OpContext{}, msg); }

}  // namespace

void BackendRegistry::add(BackendInfo info) {
  if (find(info.name)) usage("a backend named '" + info.name + "' is already registered");
  backends_.push_back(std::make_unique<BackendInfo>(std::move(info)));
}

void BackendRegistry::add(BackendFamily family) { families_.push_back(std::move(family)); }

const BackendInfo* BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name == name) return b.get();
  const auto colon = name.find(':');
  if (colon == std::string_view::npos || colon + 1 == name.size()) return nullptr;
  for (const Family& f : families_) {
    if (f.prefix != name.substr(0, colon)) continue;
    backends_.push_back(std::make_unique<BackendInfo>(f.make(std::string(name))));
    return backends_.back().get();
  }
  return nullptr;
}

const BackendInfo& BackendRegistry::require(std::string_view name) const {
  if (const BackendInfo* b = find(name)) return *b;
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  usage("unknown backend '" + std::string(name) + "' (available: " + known + ")");
}

std::vector<const BackendInfo*> BackendRegistry::list() const {
  std::vector<const BackendInfo*> out;
  for (const auto& b : backends_) {
    bool in_family = false;
    for (const Family& f : families_) in_family = in_family || b->name.rfind(f.prefix + ":", 0) == 0;
    if (!in_family) out.push_back(b.get());
  }
  return out;
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& b : backends_) {
    bool in_family = false;
    for (const Family& f : families_) in_family = in_family || b->name.rfind(f.prefix + ":", 0) == 0;
    if (!in_family) out.push_back(b->name);
  }
  for (const Family& f : families_) out.push_back(f.prefix + ":NAME");
  return out;
}

std::string BackendRegistry::load_plugin(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) usage("cannot load backend plugin " + path + ": " + dlerror());
  using Entry = const CollieBackendPlugin* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(h, "collie_backend_plugin"));
  if (!entry) {
    dlclose(h);
    usage("backend plugin " + path + " does not export collie_backend_plugin()");
  }
  const CollieBackendPlugin* p = entry();
  // Everything said about a refused plugin is read before dlclose(): its
  // descriptor lives in the library's own memory.
  std::string refused;
  if (!p) {
    refused = "backend plugin " + path + ": collie_backend_plugin() returned null";
  } else if (p->abi_version != COLLIE_PLUGIN_ABI_VERSION) {
    refused = "backend plugin " + path + " was built for plugin ABI version " + std::to_string(p->abi_version) +
              "; this collie loads version " + std::to_string(COLLIE_PLUGIN_ABI_VERSION) +
              " (rebuild it against this collie's headers, backends/plugin.h)";
  } else if (!p->name || !p->create) {
    refused = "backend plugin " + path + " (ABI version " + std::to_string(p->abi_version) + ") has no " +
              (p->name ? "create function" : "name");
  }
  if (!refused.empty()) {
    dlclose(h);
    usage(refused);
  }
  BackendInfo info;
  info.name = p->name;
  info.description = p->description ? p->description : "";
  info.selection = "--backend-plugin " + path + " --backend " + info.name;
  info.simulated = false;
  const std::string name = info.name;
  info.create = [p, name](const BackendOptions& o) {
    InProcessBackend* b = p->create(&o);
    if (!b) usage("backend plugin '" + name + "' failed to create a world of " + std::to_string(o.world_size));
    return std::unique_ptr<InProcessBackend>(b);
  };
  add(std::move(info));
  handles_.push_back(h);
  return name;
}

std::unique_ptr<Job> start_job(const BackendInfo& info, const JobOptions& options, bool processes) {
  if (info.unavailable)
    if (auto why = info.unavailable()) usage("backend '" + info.name + "' is not available here: " + *why);
  if (processes || !info.create) {
    if (!info.start) usage("backend '" + info.name + "' does not run as processes");
    return info.start(options);
  }
  BackendOptions bo;
  bo.world_size = options.world_size;
  bo.seed = options.seed;
  bo.trace = options.trace;
  bo.timing_only = options.timing_only;
  bo.simulation = options.simulation;
  return in_process_job(info.create(bo), options, info.name);
}

JobCache::~JobCache() {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.clear();
}

Job& JobCache::get(const BackendInfo& info, const JobOptions& options, bool processes) {
  std::unique_lock<std::mutex> lock(mu_);
  Kept& k = kept_[std::this_thread::get_id()];
  if (k.job && k.job->reusable() && k.backend == info.name && k.job->can_run_world(options.world_size)) {
    k.job->set_run_options(options);
    return *k.job;
  }
  std::unique_ptr<Job> old = std::move(k.job);
  lock.unlock();
  old.reset();
  JobOptions tracked = options;
  tracked.track_in_flight = true;
  std::unique_ptr<Job> job = start_job(info, tracked, processes);  // not under the lock: it takes seconds
  lock.lock();
  Kept& now = kept_[std::this_thread::get_id()];
  now.job = std::move(job);
  now.backend = info.name;
  now.world = options.world_size;
  return *now.job;
}

void JobCache::release() {
  std::unique_ptr<Job> done;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = kept_.find(std::this_thread::get_id());
  if (it == kept_.end() || (it->second.job && it->second.job->reusable())) return;
  done = std::move(it->second.job);
  kept_.erase(it);
}

void JobCache::clear() {
  std::unique_ptr<Job> done;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = kept_.find(std::this_thread::get_id());
  if (it == kept_.end()) return;
  done = std::move(it->second.job);
  kept_.erase(it);
}

void JobCache::end_thread() {
  clear();
  remote::wait_for_ended_children();
}

std::string JobCache::in_flight_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [thread, k] : kept_)
    if (k.job) out += k.job->in_flight_report();
  return out;
}

}  // namespace collie
