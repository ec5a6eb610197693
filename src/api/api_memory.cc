// collMemAlloc/collMemFree, registration and windows, collCommSuspend/Resume, collCommMemStats,
// collCommRevoke.
#include <chrono>
#include <cstring>
#include <thread>

#include "api/api_util.h"
#include "core/comm.h"
#include "core/device_enqueue.h"
#include "core/registration.h"

using coll::CallGuard;
using coll::Status;

COLL_API collResult_t collMemAlloc(void** ptr, size_t size) {
  return coll::api::guarded("collMemAlloc", nullptr, [&]() -> Status {
    if (!ptr) return Status(collInvalidArgument, "ptr is NULL");
    return coll::memAlloc(size, ptr);
  });
}

COLL_API collResult_t collMemFree(void* ptr) {
  return coll::api::guarded("collMemFree", nullptr, [&]() -> Status { return coll::memFree(ptr); });
}

namespace {

// The checks every registration makes: a buffer, or size 0 (NCCL accepts an empty one).
Status checkRange(const void* buff, size_t size, const void* out, const char* outName) {
  if (!out) return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is NULL"), outName);
  if (!buff && size != 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("buff is NULL with size {}"), size);
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collCommRegister(const collComm_t comm, void* buff, size_t size, void** handle) {
  return coll::api::guarded("collCommRegister", comm, [&]() -> Status {
    if (handle) *handle = nullptr;
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(checkRange(buff, size, handle, "handle"));
    *handle = comm->registrations.add(buff, size, false, 0);
    return Status::ok();
  });
}

COLL_API collResult_t collCommDeregister(const collComm_t comm, void* handle) {
  return coll::api::guarded("collCommDeregister", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return comm->registrations.remove(handle, false, "handle");
  });
}

COLL_API collResult_t collCommWindowRegister(collComm_t comm, void* buff, size_t size, collWindow_t* win, int flags) {
  return coll::api::guarded("collCommWindowRegister", comm, [&]() -> Status {
    if (win) *win = nullptr;
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(checkRange(buff, size, win, "win"));
    if (flags & ~(COLL_WIN_COLL_SYMMETRIC | COLL_WIN_STRICT_ORDERING))
      return COLL_ERROR(collInvalidArgument, FMT_STRING("flags 0x{:x} has bits that are not COLL_WIN_*"), flags);
    *win = static_cast<collWindow_t>(comm->registrations.add(buff, size, true, flags));
    return Status::ok();
  });
}

COLL_API collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win) {
  return coll::api::guarded("collCommWindowDeregister", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return comm->registrations.remove(win, true, "window");
  });
}

COLL_API collResult_t collWinGetUserPtr(collComm_t comm, collWindow_t win, void** ptr) {
  return coll::api::guarded("collWinGetUserPtr", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!ptr) return Status(collInvalidArgument, "ptr is NULL");
    COLL_ASSIGN_OR_RETURN(coll::Registration r, comm->registrations.find(win, true, "window"));
    *ptr = r.buff;
    return Status::ok();
  });
}

COLL_API collResult_t collCommSuspend(collComm_t comm, int flags) {
  return coll::api::guarded("collCommSuspend", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (flags & ~COLL_SUSPEND_MEM)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("flags 0x{:x} has bits other than COLL_SUSPEND_MEM"), flags);
    COLL_TRY(coll::checkReady(comm));  // a suspended one too: no nesting
    // What is queued or running finishes first (it may use what is released below).
    comm->hostQueue->drain();
    COLL_TRY(coll::drainDevice(comm));
    if (flags & COLL_SUSPEND_MEM) {
      if (comm->deviceExecutor) COLL_TRY(comm->deviceExecutor->releaseMemory());
      std::vector<char>().swap(comm->scratch);  // the host schedules' scratch
    }
    comm->suspended.store(true, std::memory_order_release);
    return Status::ok();
  });
}

COLL_API collResult_t collCommResume(collComm_t comm) {
  return coll::api::guarded("collCommResume", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!comm->suspended.exchange(false, std::memory_order_acq_rel))
      return Status(collInvalidUsage, "the communicator is not suspended");
    return Status::ok();
  });
}

COLL_API collResult_t collCommMemStats(collComm_t comm, collCommMemStat_t stat, unsigned long long* value) {
  return coll::api::guarded("collCommMemStats", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!value) return Status(collInvalidArgument, "value is NULL");
    // Read by the calling thread while no call of comm's runs that builds device state (as the
    // other non-thread-safe queries): the device executor and connections exist once made.
    unsigned long long suspendable = comm->deviceExecutor ? comm->deviceExecutor->scratchBytes() : 0;
    unsigned long long persistent = comm->deviceConns ? comm->deviceConns->deviceBytes() : 0;
    // Read as an int: a C caller may pass any value, which C++ may not even load as the enum.
    int which;
    std::memcpy(&which, &stat, sizeof(which));
    switch (which) {
      case collStatDeviceMemSuspendable:
        *value = suspendable;
        break;
      case collStatDeviceMemSuspended:
        *value = comm->suspended.load(std::memory_order_acquire) ? 1 : 0;
        break;
      case collStatDeviceMemPersistent:
        *value = persistent;
        break;
      case collStatDeviceMemTotal:
        *value = suspendable + persistent;
        break;
      case collStatHostMemRegistered:
        *value = comm->registrations.bytes();
        break;
      default:
        return COLL_ERROR(collInvalidArgument, FMT_STRING("stat {} is not a collCommMemStat_t"), which);
    }
    return Status::ok();
  });
}

// collCommRevoke: stop what runs, then leave only split, shrink and destroy. The communicator's
// abort word ends every wait (host links, the device's abort word, queued host-stream work is
// cancelled); once nothing of comm runs, the word is lowered again, because the bootstrap that a
// later split or shrink uses watches it too.
COLL_API collResult_t collCommRevoke(collComm_t comm, int flags) {
  return coll::api::guarded("collCommRevoke", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (flags != COLL_REVOKE_DEFAULT)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("revokeFlags={} is not COLL_REVOKE_DEFAULT (0)"), flags);
    if (comm->asyncError.load() == collInProgress)
      return Status(collInvalidUsage, "the communicator is still initializing (poll collCommGetAsyncError)");
    if (comm->revoked.exchange(true)) return Status::ok();  // already revoked: nothing runs
    comm->abortFlag.store(true);
    comm->hostQueue->cancel("the communicator was revoked (collCommRevoke)");
    comm->hostQueue->drain();
    if (comm->deviceExecutor) {
      comm->deviceExecutor->abort();
      (void)comm->deviceExecutor->drain();  // the launches' failures are the revoke's doing
    }
    // Blocking calls of other threads end at the abort word; this call's guard is the one left.
    while (comm->activeCalls.load() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    comm->abortFlag.store(false);
    return Status::ok();
  });
}
