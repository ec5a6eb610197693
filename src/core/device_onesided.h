// One-sided operations on device windows (collPutSignal, collSignal, collWaitSignal on a device
// stream): each is one launch of the window kernel (exec/cuda/window_run.h) on the caller's
// stream, in stream order with the rank's other device work. A put is the kernel's stores into the
// peer's window (mapped at registration, core/windows.h), then a release add to this rank's
// signal word in the peer's signal area (host memory the device reaches: core/signals.h); a wait
// is a kernel that spins on this rank's own signal words until they reach what the waits so far
// have taken, so the stream's later work runs after the signals came. A dead peer or a stalled
// one ends the wait as any device wait does (collRemoteError or collTimeout naming it).
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"
#include "coll/coll.h"
#include "core/onesided.h"

struct collComm;

namespace coll {

/// Puts bytes from src (device memory) at dst (peer's window, as this process maps it), then
/// raises this rank's signal in peer's area.
Status enqueuePutSignalDevice(collComm* comm, const void* src, size_t bytes, char* dst, int peer, collStream_t stream);
/// Raises this rank's signal in peer's area, after the stream's earlier work.
Status enqueueSignalDevice(collComm* comm, int peer, collStream_t stream);
/// The stream's later work waits until every condition holds (signals taken in issue order, as
/// the host waits take them).
Status enqueueWaitSignalDevice(collComm* comm, const std::vector<SignalWait>& waits, collStream_t stream);

}  // namespace coll
