// Checks shared by the thread tests and the process worker: each runs on every rank of a
// communicator at once and returns "" or a description of the first thing that was wrong.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "coll/coll.h"

namespace colltest {

/// Polls collCommGetAsyncError until comm is no longer collInProgress (a non-blocking init, split,
/// shrink, finalize or call), at most timeoutMs; its final state (collInProgress when it did not
/// settle, collInternalError when the poll itself failed).
collResult_t settle(collComm_t comm, int timeoutMs = 10000);

/// Runs f on every communicator of a clique at once, one thread each; returns each result.
std::vector<std::string> onRanks(std::vector<collComm_t>& comms, const std::function<std::string(collComm_t)>& f);

/// The memory of a test window: `bytes` from collMemAlloc (which the host's other processes can
/// map) or from the heap; ok false when collMemAlloc failed.
struct WindowMemory {
  WindowMemory(size_t bytes, bool fromMemAlloc);
  ~WindowMemory();
  WindowMemory(const WindowMemory&) = delete;
  WindowMemory& operator=(const WindowMemory&) = delete;
  size_t bytes;
  bool memAlloc;
  bool ok = false;
  char* data = nullptr;
  std::vector<char> heap;
};

/// The six collectives, in algorithms::Collective's order: kind 0 all-reduce, 1 reduce-scatter,
/// 2 all-gather, 3 broadcast, 4 reduce, 5 all-to-all (op and root are passed where they apply).
collResult_t callCollective(int kind, const void* in, void* out, size_t count, collDataType_t type, collRedOp_t op,
                            int root, collComm_t comm, collStream_t stream);

/// A barrier on comm's collectives (an all-reduce of one int): "" or what failed.
std::string barrier(collComm_t comm);

/// All-gathers (rank, pid, a per-rank pattern) over the bootstrap and checks every slot.
std::string checkAllGather(collComm_t comm);
/// Point-to-point over the bootstrap: every rank sends to every other, receives in reverse order.
std::string checkSendRecv(collComm_t comm);
/// Splits comm several ways (modulo colors, reversed keys, equal keys, NOCOLOR, nested) and checks
/// each new communicator's rank, size and membership; finalizes and destroys them.
std::string checkSplits(collComm_t comm);

}  // namespace colltest
