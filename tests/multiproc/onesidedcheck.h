// One-sided operations (collPutSignal / collSignal / collWaitSignal on windows): checks run on
// every rank of a communicator at once, by the thread tests and by the process worker. Each
// returns "" or the first thing that was wrong.
#pragma once

#include <string>

#include "coll/coll.h"

namespace colltest {

/// Windows over memory from collMemAlloc (fromMemAlloc) or from the heap, then: a ring of puts
/// over several rounds, a halo exchange with both neighbours, puts queued on a host stream, bare
/// signals, bad arguments (each refused with its sentence and nothing moved), a wait's deadline
/// (collCommSetTimeout), and a put into a window after its deregistration. Exact by construction,
/// with every untouched byte of the windows checked still poisoned.
std::string checkOneSided(collComm_t comm, bool fromMemAlloc);

/// The same on device windows of the emulated device (COLL_DEVICE_EMULATION: its memory is host
/// memory the check fills and reads), every call on `stream`: a ring of puts over several rounds
/// and sizes, a halo exchange, bare signals, and the refusals (a put from host memory on a device
/// stream, a device window from a NULL stream). Exact, with untouched bytes checked poisoned.
std::string checkDeviceOneSided(collComm_t comm, collStream_t stream);

/// Rank `victim` is killed (SIGKILL) while rank 0 waits for its signal (a put it never made; with
/// midPut, in the middle of one of its 64 MiB puts into rank 0's window): rank 0 must see
/// collRemoteError naming it within a few seconds. Run in processes.
std::string checkOneSidedPeerDies(collComm_t comm, int victim, bool midPut = false);

}  // namespace colltest
