// Mismatched collective calls under the in-band check (COLL_CHECK_CALLS's default): checks run on
// every rank of a communicator at once, by the thread tests and by the process worker. Each
// returns "" or the first thing that was wrong.
#pragma once

#include <string>
#include <vector>

#include "coll/coll.h"
#include "multiproc/collcheck.h"

namespace colltest {

/// What rank `odd` does differently from the others.
enum class Mismatch { kOp, kType, kCount, kRoot, kCollective, kSkip };
const char* mismatchName(Mismatch m);
/// The collectives (0..5: all-reduce, reduce-scatter, all-gather, broadcast, reduce, all-to-all)
/// and the mismatches that apply to each (op: reducing ones; root: rooted ones).
std::vector<Mismatch> mismatchesFor(int collective);
/// "all-reduce", ... for collective 0..5, in test names.
const char* mismatchCollectiveName(int collective);
/// The rank that differs in a matrix's case: the first or the last, alternating over the cases.
inline int mismatchOddRank(int collective, Mismatch m, int n) {
  return (collective + static_cast<int>(m)) % 2 ? n - 1 : 0;
}

/// A matching all-reduce and all-to-all first (checked; every pair connected), then collective
/// `collective` where rank `odd` calls
/// it with mismatch m (kSkip: it skips the call and makes the next one, a broadcast), then one
/// more all-reduce. Every rank must fail within 1 s of the mismatched call, with collInvalidUsage
/// (it saw the mismatch) or collRemoteError (a peer told it), in a sentence that says
/// COLL_CHECK_CALLS and names rank `odd` or is a peer's; a rank whose mismatched call returned
/// (it received nothing from a rank that differs) must fail its next call the same way. The
/// communicator is broken afterwards: the caller aborts it.
/// The in-band check sees a mismatch only where a piece travels between ranks that differ; a
/// root mismatch may move none (two ranks that both think they are a broadcast's root only
/// send), so the tests run kRoot under COLL_CHECK_CALLS=full (inBandSees says which).
/// mem: the buffers in its (device) memory and the calls on its stream; each call's outcome is
/// then the communicator's asynchronous error once the stream has passed it.
std::string checkMismatch(collComm_t comm, int collective, Mismatch m, int odd, const Memory* mem = nullptr);
/// Whether the in-band check alone is expected to catch mismatch m (not a root mismatch).
inline bool inBandSees(Mismatch m) { return m != Mismatch::kRoot; }

}  // namespace colltest
