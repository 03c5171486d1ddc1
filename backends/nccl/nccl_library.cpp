#include "backends/nccl/nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace collie::nccl {

namespace {

void* open_library() {
  std::vector<std::string> names;
  if (const char* p = std::getenv("COLLIE_NCCL_LIBRARY"); p && *p) names.emplace_back(p);
  names.insert(names.end(), {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2",
                             "/usr/lib/x86_64-linux-gnu/libnccl.so.2"});
  std::string first_error;
  for (const std::string& n : names) {
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    if (first_error.empty()) first_error = ::dlerror();
  }
  throw std::runtime_error("NCCL could not be loaded: " + first_error +
                           " (give its path with COLLIE_NCCL_LIBRARY, or add its directory to LD_LIBRARY_PATH)");
}

template <typename F>
void bind(void* lib, F& f, const char* name, bool required = true) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  if (!f && required) throw std::runtime_error(std::string("the loaded NCCL has no ") + name);
}

NcclLibrary load_once() {
  void* h = open_library();
  NcclLibrary l;
  bind(h, l.GetVersion, "ncclGetVersion");
  bind(h, l.GetUniqueId, "ncclGetUniqueId");
  bind(h, l.CommInitRank, "ncclCommInitRank");
  bind(h, l.CommSplit, "ncclCommSplit", false);
  bind(h, l.CommDestroy, "ncclCommDestroy");
  bind(h, l.CommAbort, "ncclCommAbort");
  bind(h, l.CommGetAsyncError, "ncclCommGetAsyncError");
  bind(h, l.GetErrorString, "ncclGetErrorString");
  bind(h, l.GetLastError, "ncclGetLastError", false);
  bind(h, l.GroupStart, "ncclGroupStart");
  bind(h, l.GroupEnd, "ncclGroupEnd");
  bind(h, l.Send, "ncclSend");
  bind(h, l.Recv, "ncclRecv");
  bind(h, l.Broadcast, "ncclBroadcast");
  bind(h, l.Reduce, "ncclReduce");
  bind(h, l.AllReduce, "ncclAllReduce");
  bind(h, l.AllGather, "ncclAllGather");
  bind(h, l.ReduceScatter, "ncclReduceScatter");
  return l;  // the handle stays open for the process's life
}

}  // namespace

std::string NcclLibrary::version() const {
  int v = 0;
  if (GetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z since 2.9; X*1000 + Y*100 + Z before.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

std::string NcclLibrary::error(ncclResult_t r) const {
  std::string s = GetErrorString(r);
  if (GetLastError) {
    const char* last = GetLastError(nullptr);
    if (last && *last) s += std::string(": ") + last;
  }
  return s;
}

const NcclLibrary& NcclLibrary::load() {
  static const NcclLibrary lib = load_once();
  return lib;
}

}  // namespace collie::nccl
