// Tagged messages (collIsend / collIrecv): checks run on every rank of a communicator at once, by
// the thread tests and by the process worker. Each returns "" or the first thing that was wrong.
#pragma once

#include <string>

#include "coll/coll.h"

namespace colltest {

/// collCommTaggedInit, then: receives from any source (sizes 0 to several slots), tag order per
/// source, any tag, messages to oneself, a message too long for its receive, bad arguments, a
/// receive posted while comm's collectives run, and a receive's deadline (collCommSetTimeout).
std::string checkTagged(collComm_t comm);

/// Rank `victim` is killed (SIGKILL) while rank 0 waits in a receive from it and in one from any
/// source: rank 0 must see collRemoteError naming it within a few seconds. Run in processes.
std::string checkTaggedSenderDies(collComm_t comm, int victim);

/// With COLL_P2P_UNEXPECTED_BYTES small: rank 1 sends more than it to rank 0, which posts a
/// receive for another tag only; rank 0's receive fails with the sentence naming rank 1.
std::string checkTaggedBound(collComm_t comm);

}  // namespace colltest
