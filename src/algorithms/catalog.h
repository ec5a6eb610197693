// Which algorithms exist, for which collectives, and how to build a schedule from a name.
//
// The runtime (core/enqueue.cc), the tuner, coll-info, the verifier tests and coll-sim all go
// through buildSchedule(), so they run the same schedules.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace coll::algorithms {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };
/// How many collective kinds there are (tables indexed by Collective have this size).
constexpr int kNumCollectives = 6;

enum class Algorithm {
  kRing,      // ring all-reduce / reduce-scatter / all-gather
  kChain,     // pipelined chain broadcast / reduce
  kTree,      // double binary tree all-reduce; binomial tree broadcast / reduce
  kRhd,       // recursive halving-doubling: Rabenseifner all-reduce, halving reduce-scatter, doubling all-gather
  kRd,        // recursive doubling all-reduce (whole vector each round)
  kExchange,  // every rank sends its input to every rank; local reduction
  kPairwise,  // all-to-all by n-1 shifted exchanges
  kHier,      // hierarchical all-reduce: inside hosts, across hosts, inside hosts
};
constexpr int kNumAlgorithms = 8;

/// Everything a schedule depends on. chunkElems bounds what a ring step sends at once (schedule.h).
struct ScheduleArgs {
  Collective collective = Collective::kAllReduce;
  int nranks = 1;
  int rank = 0;
  size_t count = 0;  // NCCL's count for the collective
  int root = 0;
  size_t chunkElems = size_t(1) << 20;
  int ranksPerHost = 0;  // positions numbered host by host, this many per host; 0: unknown (hier = ring)
  // The ring order, position -> rank (rank_order.h); null or empty: rank order. Algorithms for
  // which reordered() holds run over positions; ranksPerHost then counts positions.
  const std::vector<int>* order = nullptr;
};

/// Lower-case name as in COLL_ALGO ("ring", "tree", "rhd", ...).
const char* algorithmName(Algorithm a);
/// The algorithm called name, case-insensitive; false if none.
bool algorithmFromName(const std::string& name, Algorithm* out);
/// Lower-case collective name as in COLL_ALGO ("allreduce", "broadcast", ...).
const char* collectiveName(Collective c);
bool collectiveFromName(const std::string& name, Collective* out);

/// Whether the algorithm implements the collective.
bool supports(Algorithm a, Collective c);
/// The algorithms implementing c, in a fixed order.
std::vector<Algorithm> algorithmsFor(Collective c);

/// The schedule of one rank. Requires supports(a, args.collective); args.order, when given, a
/// permutation of the ranks.
Schedule buildSchedule(Algorithm a, const ScheduleArgs& args);

}  // namespace coll::algorithms
