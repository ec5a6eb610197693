// collMemAlloc/collMemFree, registration and windows, collCommSuspend/Resume, collCommMemStats.
#include <cstring>

#include "api/api_util.h"
#include "core/comm.h"
#include "core/device_enqueue.h"
#include "core/registration.h"
#include "core/signals.h"
#include "core/windows.h"

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

// A call on comm: guarded at the C boundary, comm held in use (CallGuard) while body runs.
template <typename Body>
collResult_t onComm(const char* fn, collComm_t comm, Body body) {
  return coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return body();
  });
}

// The checks every registration makes: a buffer, or size 0 (NCCL accepts an empty one).
Status checkRange(const void* buff, size_t size, const void* out, const char* outName) {
  if (!out) return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is NULL"), outName);
  if (!buff && size != 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("buff is NULL with size {}"), size);
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collCommRegister(const collComm_t comm, void* buff, size_t size, void** handle) {
  if (handle) *handle = nullptr;
  return onComm("collCommRegister", comm, [&]() -> Status {
    COLL_TRY(checkRange(buff, size, handle, "handle"));
    *handle = comm->registrations.add(buff, size, false, 0);
    return Status::ok();
  });
}

COLL_API collResult_t collCommDeregister(const collComm_t comm, void* handle) {
  return onComm("collCommDeregister", comm,
                [&]() -> Status { return comm->registrations.remove(handle, false, "handle"); });
}

COLL_API collResult_t collCommWindowRegister(collComm_t comm, void* buff, size_t size, collWindow_t* win, int flags) {
  if (win) *win = nullptr;
  return onComm("collCommWindowRegister", comm, [&]() -> Status {
    COLL_TRY(checkRange(buff, size, win, "win"));
    if (flags & ~(COLL_WIN_COLL_SYMMETRIC | COLL_WIN_STRICT_ORDERING))
      return COLL_ERROR(collInvalidArgument, FMT_STRING("flags 0x{:x} has bits that are not COLL_WIN_*"), flags);
    COLL_TRY(coll::checkReady(comm));
    comm->hostQueue->drain();  // the bootstrap serves one path at a time
    COLL_ASSIGN_OR_RETURN(std::shared_ptr<coll::WindowPeers> peers, coll::exchangeRanges(comm, buff, size));
    peers->serial = ++comm->windowsRegistered;
    // Every rank's first window is the same call, so every rank makes its signal area and its
    // arrival word for collectives on windows here.
    if (!comm->signals) {
      COLL_ASSIGN_OR_RETURN(comm->signals, coll::Signals::create(comm));
    }
    if (!comm->windowArrivals) {
      COLL_ASSIGN_OR_RETURN(comm->windowArrivals, coll::WindowArrivals::create(comm));
    }
    // The first window over device memory (every rank's, agreed): the device twin of the arrivals.
    if (peers->device && !comm->deviceWindowArrivals) {
      COLL_ASSIGN_OR_RETURN(comm->deviceWindowArrivals, coll::DeviceWindowArrivals::create(comm));
    }
    *win = static_cast<collWindow_t>(comm->registrations.add(buff, size, true, flags, std::move(peers)));
    return Status::ok();
  });
}

COLL_API collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win) {
  return onComm("collCommWindowDeregister", comm, [&]() -> Status {
    COLL_TRY(comm->registrations.find(win, true, "window").status());
    comm->hostQueue->drain();  // puts queued into the window go first
    // Launches on the window too (a device window is unmapped below, which they must not outlive).
    COLL_TRY(coll::drainDevice(comm));
    // Once every rank is here, none writes into the window any more: then it can be unmapped.
    Status everyone = comm->bootstrap->barrier();
    COLL_TRY(comm->registrations.remove(win, true, "window"));
    return everyone;
  });
}

COLL_API collResult_t collWinGetUserPtr(collComm_t comm, collWindow_t win, void** ptr) {
  return onComm("collWinGetUserPtr", comm, [&]() -> Status {
    if (!ptr) return Status(collInvalidArgument, "ptr is NULL");
    COLL_ASSIGN_OR_RETURN(coll::Registration r, comm->registrations.find(win, true, "window"));
    *ptr = r.buff;
    return Status::ok();
  });
}

COLL_API collResult_t collCommSuspend(collComm_t comm, int flags) {
  return onComm("collCommSuspend", comm, [&]() -> Status {
    if (flags & ~COLL_SUSPEND_MEM)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("flags 0x{:x} has bits other than COLL_SUSPEND_MEM"), flags);
    COLL_TRY(coll::checkReady(comm));  // a suspended one too: no nesting
    // What is queued or running finishes first (it may use what is released below).
    comm->hostQueue->drain();
    COLL_TRY(coll::drainDevice(comm));
    if (flags & COLL_SUSPEND_MEM) {
      COLL_TRY(coll::releaseDeviceMemory(comm));
      std::vector<char>().swap(comm->scratch);  // the host schedules' scratch
    }
    comm->suspended.store(true, std::memory_order_release);
    return Status::ok();
  });
}

COLL_API collResult_t collCommResume(collComm_t comm) {
  return onComm("collCommResume", comm, [&]() -> Status {
    if (!comm->suspended.exchange(false, std::memory_order_acq_rel))
      return Status(collInvalidUsage, "the communicator is not suspended");
    return Status::ok();
  });
}

COLL_API collResult_t collCommMemStats(collComm_t comm, collCommMemStat_t stat, unsigned long long* value) {
  return onComm("collCommMemStats", comm, [&]() -> Status {
    if (!value) return Status(collInvalidArgument, "value is NULL");
    size_t suspendable = 0, persistent = 0;
    coll::deviceMemory(comm, &suspendable, &persistent);
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
      case collStatWindowCollectives:
        // A call that failed on the way is not counted.
        *value = comm->windowArrivals ? comm->windowArrivals->calls.load(std::memory_order_relaxed) : 0;
        if (comm->deviceWindowArrivals) *value += comm->deviceWindowArrivals->calls.load(std::memory_order_relaxed);
        break;
      default:
        return COLL_ERROR(collInvalidArgument, FMT_STRING("stat {} is not a collCommMemStat_t"), which);
    }
    return Status::ok();
  });
}
