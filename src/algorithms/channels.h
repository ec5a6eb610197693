// Splitting one collective across channels: the CTAs of a device launch (NCCL's channels).
//
// Each channel runs the collective's algorithm on a slice of the data, over connections of its
// own, so channels never wait for one another and a GPU's bandwidth is not bounded by what one
// CTA can copy. A slice is a range of elements of every rank's block: for all-reduce, broadcast
// and reduce the buffers are one block; for all-gather, reduce-scatter and all-to-all the buffers
// laid out as nranks blocks are cut in every block at the same place. A channel's schedule is the
// algorithm's schedule for the slice's count, re-addressed (spreadOverBlocks) so that block b of
// the slice lands in block b of the caller's buffers; the caller advances the buffer pointers to
// the slice's start. That needs every step to stay inside one block, which the block-local
// algorithms (ring, pairwise) do and recursive halving-doubling does not: those run on one channel.
// Every decision here depends only on the call's arguments, so all ranks slice alike.
#pragma once

#include <cstddef>

#include "algorithms/catalog.h"
#include "algorithms/schedule.h"

namespace coll::algorithms {

/// The most channels one operation may use (the device executor keeps ports for this many).
constexpr int kMaxChannels = 32;

/// Channels for an operation of `bytes` (its largest buffer): as many as give each at least
/// minBytes, within [1, maxChannels].
int channelsFor(size_t bytes, int maxChannels, size_t minBytes);

/// Elements [lo, lo + count) of a block: channel c's share of a block of `count` split n ways.
/// Slices start at multiples of alignElems (vector-aligned when the buffer is); the last channels
/// may get nothing when count is small.
struct Slice {
  size_t lo = 0;
  size_t count = 0;
};
Slice channelSlice(size_t count, int c, int n, size_t alignElems);

/// Whether c with algorithm a may run on several channels: true for collectives whose buffers
/// are one block, and for block-local algorithms of the others.
bool slicesAcrossChannels(Algorithm a, Collective c);

/// Whether c's input / output holds nranks blocks of count.
bool inputIsBlocked(Collective c);
bool outputIsBlocked(Collective c);

/// Re-addresses s, built for blocks of `slice` elements, to work on the first `slice` elements of
/// blocks of `block` elements: offsets into c's blocked buffers move to their block's position;
/// the other buffers keep theirs (scratch is the channel's own). false when a step straddles two
/// blocks or leaves its slice, which block-local algorithms never do. slice == block (one
/// channel) changes nothing.
bool spreadOverBlocks(Schedule* s, Collective c, size_t slice, size_t block);

}  // namespace coll::algorithms
