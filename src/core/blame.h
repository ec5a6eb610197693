// Who stopped making progress: after a timeout, a rank follows the chain of waits over the
// bootstrap. It asks the peer it waited for whom that one waits for, then that rank, and so on:
// the chain ends at a rank that does not answer (stopped or hung: its inbox thread is frozen
// with it), at one that waits for nobody (it has not reached the operation, or is computing), or
// closes on itself (ranks waiting for each other: mismatched calls). Every survivor of a stall
// then names the same rank, not the neighbour it happened to wait for.
#pragma once

#include <string>

struct collComm;

namespace coll {

/// Follows the chain of waits from firstPeer (whom this rank waited for) and returns a sentence
/// naming the rank where it ends and why, or "" when nothing can be said. Each question waits at
/// most answerMs; the whole chain at most nranks questions.
std::string findStalledRank(collComm* comm, int firstPeer, int64_t answerMs);

}  // namespace coll
