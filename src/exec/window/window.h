// The one-copy collectives on windows (COLL_WIN_COLL_SYMMETRIC): every rank reads and writes the
// other ranks' buffers directly, through the pointers core/windows.h sets up at registration, with
// no FIFO between them. A call is two arrivals around the data movement:
//
//   arrive (publish where this rank's buffers are) -> wait for every rank
//   this rank's share: its block of the vector, read from and written to every rank as needed
//   arrive -> wait for every rank (nobody returns while a peer may still read or write its buffers)
//
// The block a rank handles is the same for every collective (blockOf), so that the ranks share
// the copies and reductions evenly and never write the same bytes. Only the second arrival lets a
// rank return: its own buffers are then neither read nor written by anyone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/catalog.h"
#include "base/status.h"
#include "coll/coll.h"
#include "exec/executor.h"

namespace coll::exec::window {

/// The buffers of one call as this rank reaches them, by rank: in[p] is rank p's input, out[p] its
/// output (nullptr where the collective does not touch it, e.g. a non-root's reduce output).
struct Args {
  algorithms::Collective collective = algorithms::Collective::kAllReduce;
  std::vector<const char*> in;
  std::vector<char*> out;
  size_t count = 0;  // NCCL's count for the collective
  collDataType_t type = collFloat32;
  collRedOp_t op = collSum;  // built-in ops only (PreMulSum scales its input, which peers read here)
  int nranks = 1;
  int rank = 0;
  int root = 0;
};

/// Elements [*begin, *end) of an n-element vector that rank r handles among nranks: equal blocks,
/// their edges on 64-byte boundaries of the element type where the vector allows it, so that two
/// ranks never write one cache line.
void blockOf(size_t n, size_t elem, int nranks, int r, size_t* begin, size_t* end);

/// This rank's share of the data movement, between the two arrivals. One function per collective,
/// each in its own file.
void allReduce(const Args& a);
void reduceScatter(const Args& a);
void allGather(const Args& a);
void broadcast(const Args& a);
void reduce(const Args& a);
void allToAll(const Args& a);
/// Runs the function of a.collective.
void run(const Args& a);

/// Reduces elements [begin, end) of the nranks inputs srcs[q] + srcShift (bytes) and writes the
/// result (divided by nranks for collAvg) into the ndst outputs dsts[i] (null ones skipped), all at
/// the same element offset. Goes a few KiB at a time through a buffer that stays in the core's
/// cache, so every input is read once and no output is read at all; inputs and outputs may be the
/// same memory (in place).
void reduceInto(const char* const* srcs, size_t srcShift, char* const* dsts, size_t ndst, size_t begin, size_t end,
                collDataType_t type, collRedOp_t op, int nranks);

/// One rank's arrival word and what it publishes with it, on a cache line of its own in memory
/// the other ranks map. Written only by its rank.
struct Arrival {
  uint64_t epoch;       // arrivals so far (release store, after the fields below)
  uint64_t print;       // a fingerprint of the call (collective, count, type, op, root)
  uint64_t sendWindow;  // where this rank's input lies: the window's serial (0: none) and offset
  uint64_t sendOffset;
  uint64_t recvWindow;
  uint64_t recvOffset;
  uint64_t pad[2];
};
static_assert(sizeof(Arrival) == 64, "one cache line per rank");

/// Waits until every rank's epoch (arrivals[p], as this rank maps it; null: a rank not waited
/// for, on another host) reaches `target`, under the
/// communicator's wait policy (links: spins, yields, naps, abort, dead local peers, its wait
/// state) and deadline. When `print` is not 0, a rank that arrived with another print fails the
/// call (collInvalidUsage naming both, each print put in words by `describe`). Ranks are at most
/// one arrival apart, so a rank past the target has already compared its print with this rank's.
Status waitArrivals(const std::vector<const Arrival*>& arrivals, int rank, uint64_t target, uint64_t print,
                    std::string (*describe)(uint64_t), const Links& links, const char* opName, int64_t timeoutMs);

}  // namespace coll::exec::window
