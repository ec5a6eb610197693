// Schedules: what each rank does in a collective, as a list of steps, computed by pure functions.
//
// A step is one primitive on one chunk: receive from recvPeer and/or send to sendPeer, reading a
// slice of the input (or output) buffer and writing a slice of the output. Offsets and counts are
// in elements. The executor moves each step through the connection's slots in pieces, so a step
// may be large; schedules that wait on a ring bound their chunks (chunkElems) so that the first
// send of a round leaves at least one slot of the FIFO free (the tuner uses half of it): a rank
// holds a received slot while it waits for a free send slot, so a ring whose first sends filled
// every slot would deadlock.
// No I/O happens here: tests run schedules for many ranks in memory.
#pragma once

#include <cstddef>
#include <vector>

namespace coll::algorithms {

enum class Prim : unsigned char {
  kSend,                // src -> send
  kRecv,                // recv -> dst
  kRecvReduceSend,      // recv (op) src -> send
  kRecvReduceCopy,      // recv (op) src -> dst
  kRecvReduceCopySend,  // recv (op) src -> dst, and -> send
  kRecvCopySend,        // recv -> dst, and -> send
  kCopy,                // src -> dst (nothing if they are the same memory)
  kSendRecv,            // src -> send while recv -> dst, interleaved piece by piece
  kReduceBlocks,        // dst = scratch block 0 (op) block 1 (op) ... block n-1, in that order
  kSendRecvReduce,      // src -> send while dst = recv (op) dst; a piece of dst that is also sent
                        // is reduced only after it was sent (recursive doubling/halving)
};

enum class Buf : unsigned char { kInput, kOutput, kScratch };

struct Step {
  Prim prim;
  int sendPeer = -1;
  int recvPeer = -1;
  Buf src = Buf::kInput;
  size_t srcOff = 0;
  size_t dstOff = 0;
  size_t count = 0;
  bool final = false;  // this step writes final reduced values (collAvg divides here)
  Buf dst = Buf::kOutput;
  // kSendRecv and kSendRecvReduce: elements received, when not `count` (count is what is sent).
  size_t recvCount = kSameCount;
  static constexpr size_t kSameCount = ~size_t(0);
  size_t recvElems() const { return recvCount == kSameCount ? count : recvCount; }
  // Reserved, always 0: no executor reads it. Device operations use several channels by running
  // the whole schedule of a slice of the data on each (algorithms/channels.h), not by giving
  // steps of one schedule to different channels; every executor runs a schedule's steps in order.
  unsigned char channel = 0;
};

using Schedule = std::vector<Step>;

// Ring all-reduce: a ring reduce-scatter then a ring all-gather, in rounds of nranks chunks.
Schedule ringAllReduce(int nranks, int rank, size_t count, size_t chunkElems);
// The same ring among some of the ranks only: ranks[i] is the ring's i-th member, this rank is
// ranks[index]; in place on output elements [base, base + count) (the windows path's hierarchical
// all-reduce runs it across hosts on the block its host has summed).
Schedule ringAllReduceAmong(const std::vector<int>& ranks, int index, size_t base, size_t count, size_t chunkElems);
// Exchange all-reduce for small messages: every rank sends its input to every other rank, then
// reduces the nranks contributions locally in rank order. Needs a scratch of nranks x count.
Schedule exchangeAllReduce(int nranks, int rank, size_t count);
// Ring reduce-scatter: input holds nranks blocks of recvcount; output gets block `rank`.
Schedule ringReduceScatter(int nranks, int rank, size_t recvcount, size_t chunkElems);
// Ring all-gather: input holds sendcount; output gets nranks blocks in rank order.
Schedule ringAllGather(int nranks, int rank, size_t sendcount, size_t chunkElems);
// Pipelined chain broadcast from root.
Schedule chainBroadcast(int nranks, int rank, int root, size_t count);
// Pipelined chain reduce to root.
Schedule chainReduce(int nranks, int rank, int root, size_t count);
// Pairwise all-to-all: nranks-1 shifted exchanges.
Schedule pairwiseAllToAll(int nranks, int rank, size_t count);
// Recursive doubling all-reduce (small messages): log2 rounds exchanging the whole vector.
Schedule rdAllReduce(int nranks, int rank, size_t count);
// Rabenseifner all-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather.
Schedule rhdAllReduce(int nranks, int rank, size_t count);
// Recursive-halving reduce-scatter: input holds nranks blocks of recvcount.
Schedule rhdReduceScatter(int nranks, int rank, size_t recvcount);
// Recursive-doubling all-gather: output gets nranks blocks of sendcount.
Schedule rhdAllGather(int nranks, int rank, size_t sendcount);
// Binomial-tree broadcast and reduce from any root.
Schedule binomialBroadcast(int nranks, int rank, int root, size_t count);
Schedule binomialReduce(int nranks, int rank, int root, size_t count);
// Double binary tree all-reduce (two complementary trees, half the data each), in chunks.
Schedule treeAllReduce(int nranks, int rank, size_t count, size_t chunkElems);
// Hierarchical all-reduce, perHost ranks per host numbered host by host (else: the ring).
Schedule hierAllReduce(int nranks, int rank, int perHost, size_t count, size_t chunkElems);

/// Rank r's neighbours in tree `which` (0 or 1) of the double binary tree over n ranks; -1: none.
struct TreeNode {
  int parent = -1, child0 = -1, child1 = -1;
};
TreeNode doubleBinaryTree(int n, int r, int which);

/// Elements of scratch a schedule writes (0 when it uses none).
size_t scratchElems(const Schedule& s);

/// Which peers a schedule sends to and receives from (for connection setup).
void peersOf(const Schedule& s, std::vector<int>* sendPeers, std::vector<int>* recvPeers);

}  // namespace coll::algorithms
