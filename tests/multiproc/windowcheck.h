// Collectives on windows (the one-copy path, COLL_WIN_COLL_SYMMETRIC): checks run on every rank
// of a communicator at once, by the thread tests and by the process worker. Each returns "" or
// the first thing that was wrong.
#pragma once

#include <string>

#include "coll/coll.h"

namespace colltest {

/// Every collective (all-reduce, reduce-scatter, all-gather, broadcast, reduce, all-to-all) on
/// buffers in two symmetric windows (from collMemAlloc, or from the heap), counts 0, 1, 7, 1000
/// and 65537, in place and out of place, every root where rooted, and reductions in float32 (sum),
/// int32 (max), uint8 (sum, wrapping), float64 (avg) and int64 (min). Outputs are poisoned before
/// each call, checked exactly after it, and the window bytes past each output checked still
/// poisoned. `path` says which calls must have run on windows (collStatWindowCollectives counts
/// them): kTaken, each call with data on 2+ ranks except an in-place all-to-all (which must not);
/// kNotTaken, none; kEither, any (the tuner's choice); kAllReduceOnly, each all-reduce with data
/// and nothing else (ranks on several hosts).
enum class WindowPath { kTaken, kNotTaken, kEither, kAllReduceOnly };
std::string checkWindowCollectives(collComm_t comm, bool fromMemAlloc, WindowPath path);

/// The same on device memory of the emulated device (COLL_DEVICE_EMULATION; its memory is host
/// memory, which the check fills and reads): windows from collMemAlloc on the calling thread's
/// current device, calls on `stream` waited for after each. kTaken there: every collective but
/// reduce, which keeps the FIFOs on device memory (core/device_window_path.h).
std::string checkDeviceWindowCollectives(collComm_t comm, collStream_t stream, WindowPath path);

/// Rank 0 calls an all-reduce on device windows with another count than the others: the launch
/// of every rank must end in collInvalidUsage (or collRemoteError carrying a peer's sentence)
/// naming a rank, within a second.
std::string checkDeviceWindowMismatch(collComm_t comm, collStream_t stream);

/// Rank 0 calls an all-reduce on windows with another count than the others: every rank must
/// fail with collInvalidUsage naming a rank and the counts within a second.
std::string checkWindowMismatch(collComm_t comm);

/// Rank `victim` is killed (SIGKILL) instead of calling an all-reduce on windows: every other rank
/// must fail with collRemoteError naming it within a few seconds. Run in processes.
std::string checkWindowPeerDies(collComm_t comm, int victim);

}  // namespace colltest
