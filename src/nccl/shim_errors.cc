// The drop-in's error model: NCCL's result codes, NCCL's strings, and one last error per process
// (a framework's watchdog thread reads the error that its worker thread's call left).
#include <cstring>
#include <mutex>

#include "nccl/shim.h"

namespace collnccl::shim {
namespace {

std::mutex gMu;
// Two buffers, written in turn, so that a pointer lastError() returned stays readable while the
// next failure is recorded (NCCL returns a static buffer too).
char gText[2][2048];
int gCurrent = 0;

void record(const std::string& text) {
  std::lock_guard<std::mutex> lock(gMu);
  int next = gCurrent ^ 1;
  std::strncpy(gText[next], text.c_str(), sizeof(gText[next]) - 1);
  gText[next][sizeof(gText[next]) - 1] = '\0';
  gCurrent = next;
}

}  // namespace

Result result(collResult_t r, collComm_t comm) {
  if (r != collSuccess && r != collInProgress) record(collGetLastError(comm));
  return static_cast<Result>(r);
}

Result refuse(Result r, const char* fn, const std::string& why) {
  record(std::string(fn) + ": " + why);
  return r;
}

Result unsupported(const char* fn, const char* what) {
  return refuse(kInvalidUsage, fn, std::string("coll's NCCL drop-in does not support ") + what);
}

const char* lastError() {
  std::lock_guard<std::mutex> lock(gMu);
  return gText[gCurrent];
}

}  // namespace collnccl::shim

using collnccl::Result;

// NCCL's own sentences, which frameworks print and some match ("remote process exited or there
// was a network error"); coll's sentence for the failure is ncclGetLastError's.
NCCL_EXPORT const char* pncclGetErrorString(int r) {  // an int: any value may come in
  switch (r) {
    case collnccl::kSuccess:
      return "no error";
    case collnccl::kUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case collnccl::kSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case collnccl::kInternalError:
      return "internal error - please report this issue to the coll developers";
    case collnccl::kInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case collnccl::kInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case collnccl::kRemoteError:
      return "remote process exited or there was a network error";
    case collnccl::kInProgress:
      return "NCCL operation in progress";
    case collnccl::kTimeout:
      return "timeout";
    default:
      return "unknown result code";
  }
}
NCCL_ALIAS(const char*, ncclGetErrorString, (int r))

// NCCL keeps one last error for the process, whatever comm is passed.
NCCL_EXPORT const char* pncclGetLastError(ncclComm_t) { return collnccl::shim::lastError(); }
NCCL_ALIAS(const char*, ncclGetLastError, (ncclComm_t comm))
