#include "api/last_error.h"

#include <mutex>

#include "core/comm.h"

namespace coll::api {
namespace {
thread_local std::string tThreadError;
thread_local std::string tReturned;  // what the last collGetLastError returned on this thread
}  // namespace

void setLastError(collComm_t comm, const std::string& text) {
  tThreadError = text;
  CallGuard guard(comm);
  if (!guard.ok()) return;
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  comm->lastError = text;
}

const char* lastError(collComm_t comm) {
  tReturned = tThreadError;
  if (comm) {
    CallGuard guard(comm);
    if (guard.ok()) {
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      if (!comm->lastError.empty()) tReturned = comm->lastError;
    }
  }
  return tReturned.c_str();
}

}  // namespace coll::api
