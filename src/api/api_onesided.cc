// One-sided operations (collPutSignal, collSignal, collWaitSignal): every argument checked on the
// caller's thread, then run there (NULL stream), queued on a host stream (core/onesided.h), or
// launched on a device stream (device windows: core/device_onesided.h).
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "api/api_util.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/device_onesided.h"
#include "core/enqueue.h"
#include "core/host_stream.h"
#include "core/onesided.h"
#include "core/signals.h"
#include "device/runtime.h"
#include "kernels/cpu/reduce.h"

using coll::CallGuard;
using coll::Status;

namespace {

// The checks every one-sided call makes first.
Status checkCommon(collComm_t comm, const char* fn, int sigIdx, int ctx, unsigned flags) {
  COLL_TRY(coll::checkReady(comm));
  if (sigIdx != 0 || ctx != 0 || flags != 0)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("sigIdx {}, ctx {} and flags {} must all be 0 (as NCCL's)"),
                      sigIdx, ctx, flags);
  if (!comm->signals)
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{}: the signals are set up with the communicator's first window: register one "
                                 "(collCommWindowRegister) on every rank first"),
                      fn);
  return Status::ok();
}

Status checkPeer(collComm_t comm, int peer) {
  if (peer < 0 || peer >= comm->nranks)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("peer {} is not a rank of this {}-rank communicator"), peer,
                      comm->nranks);
  return comm->signals->check(peer);
}

// Where a call runs: on the caller's thread (a NULL stream), on a host stream, or on a device
// stream (device windows: core/device_onesided.h, once the device can reach the signal areas).
struct Target {
  coll::HostStream* host = nullptr;
  bool device = false;
};

Status targetOf(collComm_t comm, collStream_t stream, const char* fn, Target* out) {
  *out = Target{};
  if (!stream) return Status::ok();
  if ((out->host = coll::HostStream::find(stream))) return Status::ok();
  coll::device::Runtime* rt = coll::device::runtime();
  if (!rt || !rt->isStream(stream))
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("stream {} is neither NULL, a live coll host stream (collHostStreamCreate) nor a "
                                 "device stream"),
                      static_cast<const void*>(stream));
  if (comm->cudaDev < 0 || !comm->signals->deviceReady())
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{} on a device stream: this communicator's signal areas are not addressable by "
                                 "the device (it has no device, or registering them failed: see the log)"),
                      fn);
  out->device = true;
  return Status::ok();
}

// Runs task where a host target says: on this thread (no host stream), queued in a host stream's
// order, or queued for a non-blocking communicator (*background then set). A template, so that the
// blocking path (the common one, an 8-byte put in a fraction of a microsecond) allocates no
// std::function.
template <typename Task>
Status dispatch(collComm_t comm, coll::HostStream* hs, const char* fn, Task&& task, bool* background) {
  if (hs) {
    uint64_t seq = hs->issue(1);
    Status queued = comm->hostQueue->enqueueTask(fn, std::function<Status()>(std::forward<Task>(task)), hs, seq);
    if (!queued.isOk()) hs->finishPart(seq, Status::ok());  // reported here, not on the stream
    return queued;
  }
  if (!comm->options.blocking) {
    COLL_TRY(comm->hostQueue->enqueueTask(fn, std::function<Status()>(std::forward<Task>(task)), nullptr, 0));
    *background = true;
    return Status::ok();
  }
  comm->hostQueue->drain();  // what was queued before comes first
  return task();
}

template <typename Body>
collResult_t onComm(const char* fn, collComm_t comm, Body body) {
  bool background = false;
  collResult_t rc = coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return body(&background);
  });
  if (rc != collSuccess) coll::api::refuseGroup(rc, comm);  // inside a group: it drops the group
  return rc == collSuccess && background ? collInProgress : rc;
}

// Runs a checked call (run(bool* background, HostStream* hs): hs is at's host stream) now, or,
// inside a group, at collGroupEnd (puts and signals before the group's other operations, waits
// after them: api_util.h), where the host stream is looked up again (it may have been destroyed
// since).
template <typename Run>
Status runOrDefer(const char* fn, collComm_t comm, const Target& at, collStream_t stream, bool wait, Run&& run,
                  bool* background) {
  if (!coll::api::inGroup()) return run(background, at.host);  // no copy of run: the common path
  bool onHostStream = at.host != nullptr;
  coll::api::deferOneSided(wait, [fn, comm, stream, onHostStream, run = std::forward<Run>(run)]() mutable {
    return onComm(fn, comm, [&](bool* bg) -> Status {
      COLL_TRY(coll::checkReady(comm));
      coll::HostStream* hs = onHostStream ? coll::HostStream::find(stream) : nullptr;
      if (onHostStream && !hs) return Status(collInvalidArgument, "the host stream was destroyed inside the group");
      return run(bg, hs);
    });
  });
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collPutSignal(const void* localbuff, size_t count, collDataType_t datatype, int peer,
                                    collWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                                    collComm_t comm, collStream_t stream) {
  return onComm("collPutSignal", comm, [&](bool* background) -> Status {
    COLL_TRY(checkCommon(comm, "collPutSignal", sigIdx, ctx, flags));
    int type = coll::rawEnum(datatype);
    COLL_TRY(coll::checkTypeAndCount(type, count));
    COLL_TRY(checkPeer(comm, peer));
    size_t bytes = count * coll::kernels::typeSize(static_cast<collDataType_t>(type));
    if (bytes > 0 && !localbuff)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("localbuff is NULL with count {}"), count);
    Target at;
    COLL_TRY(targetOf(comm, stream, "collPutSignal", &at));
    coll::device::Runtime* rt = coll::device::runtime();
    int dev = -1;
    bool localOnDevice = rt && bytes > 0 && rt->isDeviceMemory(localbuff, &dev);
    if (localOnDevice && !at.device)
      return COLL_ERROR(collInvalidUsage,
                        FMT_STRING("localbuff is memory of device {}: a put from device memory goes on a device "
                                   "stream"),
                        dev);
    if (at.device && bytes > 0 && !localOnDevice)
      return COLL_ERROR(collInvalidUsage,
                        FMT_STRING("a put on a device stream copies from device memory: localbuff is host memory"));
    COLL_ASSIGN_OR_RETURN(coll::Registration win, comm->registrations.find(peerWin, true, "peerWin"));
    const coll::PeerRange& target = win.peers->ranks[static_cast<size_t>(peer)];
    if (target.access == coll::PeerRange::Access::kNone)
      return COLL_ERROR(collInvalidUsage, FMT_STRING("rank {}'s part of window {} cannot be reached: {}"), peer,
                        static_cast<const void*>(peerWin), target.why);
    if (peerWinOffset > target.size || bytes > target.size - peerWinOffset)
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("{} bytes at offset {} pass the end of rank {}'s window ({} bytes)"), bytes,
                        peerWinOffset, peer, target.size);
    if (at.device != target.device)
      return COLL_ERROR(collInvalidUsage, FMT_STRING("window {} is {} memory: puts into it go on {}"),
                        static_cast<const void*>(peerWin), target.device ? "device" : "host",
                        target.device ? "a device stream" : "a NULL or host stream");
    char* to = target.base + peerWinOffset;
    coll::PutArgs put{localbuff, bytes, peer, win.peers, peerWinOffset};
    bool device = at.device;
    return runOrDefer(
        "collPutSignal", comm, at, stream, false,
        // mutable: run once, it moves what it holds into the task (no copy of the window's
        // shared pointer or of a wait's list on the blocking path).
        [comm, put = std::move(put), device, to, stream](bool* bg, coll::HostStream* hs) mutable -> Status {
          if (device) return coll::enqueuePutSignalDevice(comm, put.src, put.bytes, to, put.peer, stream);
          return dispatch(
              comm, hs, "collPutSignal", [comm, put = std::move(put)] { return coll::runPutSignal(comm, put); }, bg);
        },
        background);
  });
}

COLL_API collResult_t collSignal(int peer, int sigIdx, int ctx, unsigned int flags, collComm_t comm,
                                 collStream_t stream) {
  return onComm("collSignal", comm, [&](bool* background) -> Status {
    COLL_TRY(checkCommon(comm, "collSignal", sigIdx, ctx, flags));
    COLL_TRY(checkPeer(comm, peer));
    Target at;
    COLL_TRY(targetOf(comm, stream, "collSignal", &at));
    bool device = at.device;
    return runOrDefer(
        "collSignal", comm, at, stream, false,
        [comm, peer, device, stream](bool* bg, coll::HostStream* hs) -> Status {
          if (device) return coll::enqueueSignalDevice(comm, peer, stream);
          return dispatch(
              comm, hs, "collSignal", [comm, peer] { return coll::runSignal(comm, peer); }, bg);
        },
        background);
  });
}

COLL_API collResult_t collWaitSignal(int nDesc, const collWaitSignalDesc_t* signalDescs, collComm_t comm,
                                     collStream_t stream) {
  return onComm("collWaitSignal", comm, [&](bool* background) -> Status {
    COLL_TRY(checkCommon(comm, "collWaitSignal", 0, 0, 0));
    if (nDesc < 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("nDesc {} is negative"), nDesc);
    if (nDesc > 0 && !signalDescs)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("signalDescs is NULL with nDesc {}"), nDesc);
    // Conditions on one peer add up: two descriptors of 1 each from rank 3 wait for 2 signals.
    std::vector<coll::SignalWait> waits;
    waits.reserve(static_cast<size_t>(nDesc));
    for (int i = 0; i < nDesc; ++i) {
      const collWaitSignalDesc_t& d = signalDescs[i];
      if (d.sigIdx != 0 || d.ctx != 0)
        return COLL_ERROR(collInvalidArgument, FMT_STRING("signalDescs[{}]: sigIdx {} and ctx {} must be 0"), i,
                          d.sigIdx, d.ctx);
      if (d.opCnt < 0)
        return COLL_ERROR(collInvalidArgument, FMT_STRING("signalDescs[{}]: opCnt {} is negative"), i, d.opCnt);
      if (d.peer < 0 || d.peer >= comm->nranks)
        return COLL_ERROR(collInvalidArgument,
                          FMT_STRING("signalDescs[{}]: peer {} is not a rank of this {}-rank communicator"), i, d.peer,
                          comm->nranks);
      COLL_TRY(comm->signals->check(d.peer));  // a peer that cannot reach back would be waited for in vain
      if (d.opCnt == 0) continue;
      auto same = std::find_if(waits.begin(), waits.end(), [&](const coll::SignalWait& w) { return w.peer == d.peer; });
      if (same != waits.end())
        same->count += static_cast<uint64_t>(d.opCnt);
      else
        waits.push_back(coll::SignalWait{d.peer, static_cast<uint64_t>(d.opCnt)});
    }
    Target at;
    COLL_TRY(targetOf(comm, stream, "collWaitSignal", &at));
    bool device = at.device;
    int64_t timeoutMs = comm->timeoutMs.load(std::memory_order_relaxed);
    return runOrDefer(
        "collWaitSignal", comm, at, stream, true,
        [comm, waits = std::move(waits), device, stream, timeoutMs](bool* bg, coll::HostStream* hs) mutable -> Status {
          if (device) return waits.empty() ? Status::ok() : coll::enqueueWaitSignalDevice(comm, waits, stream);
          return dispatch(
              comm, hs, "collWaitSignal",
              [comm, waits = std::move(waits), timeoutMs] { return coll::runWaitSignal(comm, waits, timeoutMs); }, bg);
        },
        background);
  });
}
