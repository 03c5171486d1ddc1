// The NCCL library, loaded at run time (dlopen), so that collie builds and
// runs where libnccl is absent: `--backend nccl` then says so instead.
// Only the NCCL worker (tools/nccl_worker.cpp) includes this; it links the
// CUDA runtime, which NCCL needs anyway.
#pragma once

#include <nccl.h>

#include <string>

namespace collie::nccl {

struct NcclLibrary {
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRank) CommInitRank = nullptr;
  decltype(&ncclCommSplit) CommSplit = nullptr;  // null before NCCL 2.18: groups are refused
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
  decltype(&ncclGetLastError) GetLastError = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
  decltype(&ncclBroadcast) Broadcast = nullptr;
  decltype(&ncclReduce) Reduce = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
  decltype(&ncclAllGather) AllGather = nullptr;
  decltype(&ncclReduceScatter) ReduceScatter = nullptr;

  // "NCCL 2.28.9" (the loaded library's version).
  std::string version() const;
  // The library's words for `r`: its error string and its last error text.
  std::string error(ncclResult_t r) const;

  // The library, loaded once (LD_LIBRARY_PATH, the CUDA toolkit's lib64,
  // COLLIE_NCCL_LIBRARY); throws std::runtime_error with dlopen's words
  // ("libnccl.so.2: cannot open shared object file ...").
  static const NcclLibrary& load();
};

}  // namespace collie::nccl
