// Running a schedule over a ring order other than rank order.
//
// Rings, chains and trees pass data between neighbours in rank order. When the launcher numbered
// ranks so that neighbours sit on different hosts (or NUMA nodes), every hop of the ring crosses
// the network. Instead of teaching every algorithm about placement, the schedule is built for
// "positions" (a rank's place in the topology-aware order) and its peers are then renamed to
// the ranks at those positions. Where the data layout depends on the rank (reduce-scatter's
// input blocks, all-gather's output blocks), block b of the position schedule is block order[b]
// of the rank's buffer; that needs every step to stay inside one block, which only the ring
// guarantees, so the other block-structured algorithms keep rank order (reordered() says which).
#pragma once

#include <vector>

#include "algorithms/catalog.h"

namespace coll::algorithms {

/// Whether buildSchedule follows ScheduleArgs::order for a and c (otherwise rank order).
bool reordered(Algorithm a, Collective c);

/// Whether order is a permutation of 0..n-1.
bool isPermutation(const std::vector<int>& order, int n);

/// The schedule built for position pos(rank) (args.rank and args.root taken as positions), with
/// its peers renamed position -> rank and, for reduce-scatter and all-gather, its blocks moved to
/// the rank's blocks. order[position] = rank.
Schedule toRanks(Schedule s, const std::vector<int>& order, Collective c, size_t blockElems);

}  // namespace coll::algorithms
