// collGetVersion, collGetErrorString, collGetLastError, collGetUniqueId.
#include "api/api_util.h"
#include "api/last_error.h"
#include "base/ifaddr.h"
#include "base/params.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/unique_id.h"
#include "coll/coll.h"
#include "device/runtime.h"

using coll::Status;

COLL_API collResult_t collGetVersion(int* version) {
  return coll::api::guarded("collGetVersion", nullptr, [&]() -> Status {
    if (!version) return Status(collInvalidArgument, "version is NULL");
    *version = COLL_VERSION_CODE;
    return Status::ok();
  });
}

COLL_API collResult_t collGetDeviceCount(int* count) {
  return coll::api::guarded("collGetDeviceCount", nullptr, [&]() -> Status {
    if (!count) return Status(collInvalidArgument, "count is NULL");
    coll::device::Runtime* rt = coll::device::runtime();
    *count = rt ? rt->deviceCount() : 0;
    return Status::ok();
  });
}

COLL_API const char* collGetErrorString(collResult_t result) {
  switch (result) {
    case collSuccess:
      return "no error";
    case collUnhandledCudaError:
      return "unhandled cuda error (run with COLL_DEBUG=INFO for details)";
    case collSystemError:
      return "unhandled system error (run with COLL_DEBUG=INFO for details)";
    case collInternalError:
      return "internal error - please report this issue to the coll developers";
    case collInvalidArgument:
      return "invalid argument (collGetLastError says why)";
    case collInvalidUsage:
      return "invalid usage (collGetLastError says why)";
    case collRemoteError:
      return "remote process exited or there was a network error";
    case collInProgress:
      return "operation in progress";
    case collTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

COLL_API const char* collGetLastError(collComm_t comm) {
  try {
    return coll::api::lastError(comm);
  } catch (...) {
    return "";
  }
}

COLL_API collResult_t collGetUniqueId(collUniqueId* uniqueId) {
  return coll::api::guarded("collGetUniqueId", nullptr, [&]() -> Status {
    if (!uniqueId) return Status(collInvalidArgument, "uniqueId is NULL");
    COLL_TRY(coll::param::validateAll());
    COLL_ASSIGN_OR_RETURN(coll::net::Interface iface, coll::net::selectInterfaceFromEnv());
    coll::net::Address bind = iface.address;
    bind.setPort(0);
    COLL_ASSIGN_OR_RETURN(collUniqueId id, coll::bootstrap::startRoot(bind, nullptr, false, coll::randomU64(),
                                                                      coll::params::kBootstrapTimeoutMs.get()));
    *uniqueId = id;
    return Status::ok();
  });
}
