// Storage behind collGetLastError: per thread, and per communicator.
#pragma once

#include <string>

#include "coll/coll.h"

namespace coll::api {

/// Records text as the calling thread's last error and, when comm is a live comm, as comm's.
void setLastError(collComm_t comm, const std::string& text);
/// comm's last error if it has one, else the thread's; the pointer is valid until the thread's next call.
const char* lastError(collComm_t comm);

}  // namespace coll::api
