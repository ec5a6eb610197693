// The device path of the enqueue: calls on device buffers go to the communicator's device
// executor (exec/cuda/device_executor.h) on the caller's stream and return once enqueued.
//
// A communicator gets its device connections (device transports: transport.h) and its device
// executor on its first device call. Collectives of one call or group run as one launch, in call
// order; the sends and receives of a group as a second one. A failure found later (a launch's
// result) breaks the communicator: collCommGetAsyncError reports it, and later calls refuse.
#pragma once

#include <vector>

#include "base/status.h"
#include "core/enqueue.h"
#include "exec/executor.h"

namespace coll {

/// Enqueues comm's ops (validated, all onDevice, one stream) on the device. Blocks only while
/// new connections are built (collective with the peers, as on the host path).
Status enqueueDevice(collComm_t comm, const std::vector<OpArgs>& ops);

/// Enqueues one work of the device executor that is not a call's collective (a one-sided
/// operation's window work: core/device_onesided.h) on stream, making comm's device path first
/// if need be. A failure breaks comm, as enqueueDevice's do.
Status enqueueDeviceWork(collComm_t comm, const exec::Work& work, collStream_t stream);

/// Reaps comm's completed launches; a failure among them breaks comm. Cheap when idle.
void pollDevice(collComm_t comm);

/// Fills *out with what comm's kernels measured since the last call (zeros before any device
/// call) and starts a new count.
void deviceTimings(collComm_t comm, collDeviceTimings_t* out);

/// Waits for every launch of comm (collCommFinalize flushes, as NCCL's does); a failure among them
/// breaks comm and is returned.
Status drainDevice(collComm_t comm);

/// At release (and revoke): raises the device abort word when abort is true, then waits for every
/// launch.
void stopDevice(collComm_t comm, bool abort);

/// collCommSuspend's device half, once comm's launches are drained: frees the scratch and staged
/// copies and trims the pool (DeviceExecutor::releaseMemory). Nothing before the first device call.
Status releaseDeviceMemory(collComm_t comm);

/// Device bytes comm holds (0 before its first device call): *scratch, what releaseDeviceMemory
/// frees; *fifos, its device connections' buffers, held until destroy. Not thread-safe against
/// device calls on comm (they may add connections).
void deviceMemory(collComm_t comm, size_t* scratch, size_t* fifos);

}  // namespace coll
