// Symbolic execution of schedules: every rank's schedule runs in memory, on elements that record
// where their value came from instead of holding numbers.
//
// An element is (index, ranks): the element `index` of the inputs of a set of ranks, reduced
// together. A copy moves the record; a reduction unites two records of the same index. Reducing
// records of different indices, or of overlapping rank sets (double counting), or reading an
// element nobody wrote, is an error. A rank set is stored as one cyclic interval [lo, lo + len)
// mod nranks, which is what rings, trees and hierarchies produce, so 4096 ranks fit in memory;
// sets that are not (recursive halving's {v, v ^ mask, ...}) are kept as interval lists aside.
//
// Messages travel through unbounded per-connection queues in order; a receive takes the oldest
// message on its connection and must find the element count it expects. The run ends in an error
// naming the ranks when no rank can move while some are unfinished (a receive no send matches, or
// a cycle of waits), or when messages are left unreceived. The final contents are compared with
// what the collective must produce. FIFO capacity is not modeled: schedules that wait on a ring
// bound their chunks for that (schedule.h); the executor tests cover it.
//
// The same code runs the schedules the runtime runs: verification at 4096 ranks needs no machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "algorithms/catalog.h"
#include "algorithms/schedule.h"

namespace coll::algorithms {

/// A collective call to verify: count is NCCL's (per-rank block for reduce-scatter, all-gather
/// and all-to-all); inPlace uses NCCL's in-place layout.
struct SymbolicCall {
  Collective collective = Collective::kAllReduce;
  int nranks = 1;
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
};

struct SymbolicReport {
  bool ok = false;
  std::string error;          // empty when ok
  size_t steps = 0;           // steps run, all ranks
  size_t elementsMoved = 0;   // elements sent, all ranks
  size_t maxStepsOnRank = 0;  // the longest schedule
};

/// Runs schedule(rank) for every rank of the call and checks the result.
SymbolicReport runSymbolic(const SymbolicCall& call, const std::function<Schedule(int rank)>& schedule);

/// Elements of each buffer of a rank for a call (input, output), as the executor sees them.
size_t inputElems(const SymbolicCall& call, int rank);
size_t outputElems(const SymbolicCall& call, int rank);

}  // namespace coll::algorithms
