// What the drop-in's files share: the export macros, NCCL's names for coll's handles, and the
// error model NCCL programs expect (NCCL's result codes and strings, one last error per process).
#pragma once

#include <string>

#include "coll/coll.h"
#include "nccl/nccl_abi.h"

using ncclComm_t = collComm_t;
using cudaStream_t = collStream_t;
using ncclWindow_t = struct ncclWindow_vidmem*;

#define NCCL_EXPORT extern "C" __attribute__((visibility("default")))
// ncclX as a weak alias of pncclX, both exported (profilers interpose the ncclX names).
#define NCCL_ALIAS(ret, name, params) NCCL_EXPORT ret name params __attribute__((weak, alias("p" #name)));

namespace collnccl::shim {

/// coll's result as NCCL's (the codes are the same, ncclTimeout included). A failure's sentence
/// becomes the process's last error: coll's sentence for comm (or the calling thread's, with
/// comm NULL, which a destroyed communicator must pass).
Result result(collResult_t r, collComm_t comm = nullptr);

/// Fails with r and "fn: why" as the last error (the drop-in's own refusals).
Result refuse(Result r, const char* fn, const std::string& why);

/// ncclInvalidUsage for an NCCL call coll does not implement, naming it and what it is for.
Result unsupported(const char* fn, const char* what);

/// The process's last error (ncclGetLastError): NCCL keeps one per process, not per thread.
const char* lastError();

static_assert(int{kFloat8e4m3} == int{collFloat8e4m3} && int{kFloat8e5m2} == int{collFloat8e5m2} &&
                  int{kNumTypes} == int{collNumTypes},
              "NCCL's datatypes are coll's");

/// NCCL's type as coll's: the values are the same (float8 included); coll checks the value and
/// names a bad one.
inline collDataType_t type(int t) { return static_cast<collDataType_t>(t); }

}  // namespace collnccl::shim
