// Checks of host streams (non-blocking host operations), run by every rank of a communicator at
// once, as threads or as processes. Values are integers, so every result is exact.
#pragma once

#include <string>

#include "coll/coll.h"

namespace colltest {

/// Many operations in flight on one communicator, interleaved with compute on the calling thread;
/// order on a stream (each operation reads the last one's output), across two streams of one
/// communicator, and between queued work and a following blocking call; send/recv groups on a
/// stream; PreMulSum (destroyed right after the call) and bitwise ops on a stream; query; bad
/// arguments refused at the call with nothing queued. "" when correct.
std::string streamChecks(collComm_t comm);

/// Work queued while a peer goes away: rank 0 queues all-reduces and synchronizes, and must get
/// an error naming a peer within timeoutMs + slack; every other rank queues the same work and
/// destroys its communicator at once, which must return promptly, cancel what was queued (its
/// stream says so) and leave no thread behind. The communicator of ranks != 0 is destroyed here;
/// rank 0's is left to the caller. countThreads: each rank is a process of its own, so its thread
/// count must be back where it was (with ranks as threads, the others' threads come and go).
/// "" when it behaved so.
std::string streamPeerGone(collComm_t comm, int timeoutMs, bool countThreads);

}  // namespace colltest
