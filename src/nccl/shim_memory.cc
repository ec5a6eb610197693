// Memory, registration, windows and suspension: NCCL's calls onto coll.h's twins.
#include "nccl/shim.h"

using collnccl::Result;
using collnccl::shim::refuse;
using collnccl::shim::result;

NCCL_EXPORT Result pncclMemAlloc(void** ptr, size_t size) { return result(collMemAlloc(ptr, size)); }
NCCL_ALIAS(Result, ncclMemAlloc, (void** ptr, size_t size))

NCCL_EXPORT Result pncclMemFree(void* ptr) { return result(collMemFree(ptr)); }
NCCL_ALIAS(Result, ncclMemFree, (void* ptr))

NCCL_EXPORT Result pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return result(collCommRegister(comm, buff, size, handle), comm);
}
NCCL_ALIAS(Result, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))

NCCL_EXPORT Result pncclCommDeregister(const ncclComm_t comm, void* handle) {
  return result(collCommDeregister(comm, handle), comm);
}
NCCL_ALIAS(Result, ncclCommDeregister, (const ncclComm_t comm, void* handle))

NCCL_EXPORT Result pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  return result(collCommWindowRegister(comm, buff, size, reinterpret_cast<collWindow_t*>(win), flags), comm);
}
NCCL_ALIAS(Result, ncclCommWindowRegister, (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags))

NCCL_EXPORT Result pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return result(collCommWindowDeregister(comm, reinterpret_cast<collWindow_t>(win)), comm);
}
NCCL_ALIAS(Result, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))

NCCL_EXPORT Result pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return result(collWinGetUserPtr(comm, reinterpret_cast<collWindow_t>(win), outUserPtr), comm);
}
NCCL_ALIAS(Result, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr))

NCCL_EXPORT Result pncclCommSuspend(ncclComm_t comm, int flags) { return result(collCommSuspend(comm, flags), comm); }
NCCL_ALIAS(Result, ncclCommSuspend, (ncclComm_t comm, int flags))

NCCL_EXPORT Result pncclCommResume(ncclComm_t comm) { return result(collCommResume(comm), comm); }
NCCL_ALIAS(Result, ncclCommResume, (ncclComm_t comm))

// NCCL's four statistics are coll's first four, value for value (tests/nccl/abi_check.cc).
NCCL_EXPORT Result pncclCommMemStats(ncclComm_t comm, int stat, uint64_t* value) {
  if (stat < collnccl::kStatGpuMemSuspend || stat > collnccl::kStatGpuMemTotal)
    return refuse(collnccl::kInvalidArgument, "ncclCommMemStats",
                  "stat " + std::to_string(stat) + " is not an ncclCommMemStat_t");
  unsigned long long v = 0;
  collResult_t r = collCommMemStats(comm, static_cast<collCommMemStat_t>(stat), value ? &v : nullptr);
  if (r == collSuccess) *value = v;
  return result(r, comm);
}
NCCL_ALIAS(Result, ncclCommMemStats, (ncclComm_t comm, int stat, uint64_t* value))
