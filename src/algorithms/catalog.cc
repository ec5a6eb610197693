#include "algorithms/catalog.h"

#include <strings.h>

#include <algorithm>

#include "algorithms/rank_order.h"

namespace coll::algorithms {
namespace {

const char* const kAlgorithmNames[kNumAlgorithms] = {"ring", "chain",    "tree",     "rhd",
                                                     "rd",   "exchange", "pairwise", "hier"};
const char* const kCollectiveNames[kNumCollectives] = {"allreduce", "reducescatter", "allgather",
                                                       "broadcast", "reduce",        "alltoall"};

}  // namespace

const char* algorithmName(Algorithm a) { return kAlgorithmNames[static_cast<int>(a)]; }

bool algorithmFromName(const std::string& name, Algorithm* out) {
  for (int i = 0; i < kNumAlgorithms; ++i)
    if (strcasecmp(name.c_str(), kAlgorithmNames[i]) == 0) return *out = static_cast<Algorithm>(i), true;
  return false;
}

const char* collectiveName(Collective c) { return kCollectiveNames[static_cast<int>(c)]; }

bool collectiveFromName(const std::string& name, Collective* out) {
  for (int i = 0; i < kNumCollectives; ++i)
    if (strcasecmp(name.c_str(), kCollectiveNames[i]) == 0) return *out = static_cast<Collective>(i), true;
  return false;
}

bool supports(Algorithm a, Collective c) {
  switch (a) {
    case Algorithm::kRing:
    case Algorithm::kRhd:
      return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kAllGather;
    case Algorithm::kChain:
      return c == Collective::kBroadcast || c == Collective::kReduce;
    case Algorithm::kTree:
      return c == Collective::kAllReduce || c == Collective::kBroadcast || c == Collective::kReduce;
    case Algorithm::kRd:
    case Algorithm::kExchange:
    case Algorithm::kHier:
      return c == Collective::kAllReduce;
    case Algorithm::kPairwise:
      return c == Collective::kAllToAll;
  }
  return false;
}

std::vector<Algorithm> algorithmsFor(Collective c) {
  std::vector<Algorithm> v;
  for (int i = 0; i < kNumAlgorithms; ++i)
    if (supports(static_cast<Algorithm>(i), c)) v.push_back(static_cast<Algorithm>(i));
  return v;
}

namespace {

Schedule buildInRankOrder(Algorithm a, const ScheduleArgs& x) {
  int n = x.nranks, r = x.rank;
  Collective c = x.collective;
  switch (a) {
    case Algorithm::kRing:
      if (c == Collective::kAllGather) return ringAllGather(n, r, x.count, x.chunkElems);
      if (c == Collective::kReduceScatter) return ringReduceScatter(n, r, x.count, x.chunkElems);
      return ringAllReduce(n, r, x.count, x.chunkElems);
    case Algorithm::kChain:
      return c == Collective::kBroadcast ? chainBroadcast(n, r, x.root, x.count) : chainReduce(n, r, x.root, x.count);
    case Algorithm::kTree:
      if (c == Collective::kBroadcast) return binomialBroadcast(n, r, x.root, x.count);
      if (c == Collective::kReduce) return binomialReduce(n, r, x.root, x.count);
      return treeAllReduce(n, r, x.count, x.chunkElems);
    case Algorithm::kRhd:
      if (c == Collective::kAllGather) return rhdAllGather(n, r, x.count);
      if (c == Collective::kReduceScatter) return rhdReduceScatter(n, r, x.count);
      return rhdAllReduce(n, r, x.count);
    case Algorithm::kRd:
      return rdAllReduce(n, r, x.count);
    case Algorithm::kExchange:
      return exchangeAllReduce(n, r, x.count);
    case Algorithm::kPairwise:
      return pairwiseAllToAll(n, r, x.count);
    case Algorithm::kHier:
      return hierAllReduce(n, r, x.ranksPerHost, x.count, x.chunkElems);
  }
  return {};
}

}  // namespace

Schedule buildSchedule(Algorithm a, const ScheduleArgs& x) {
  if (!x.order || x.order->empty() || !reordered(a, x.collective)) return buildInRankOrder(a, x);
  const std::vector<int>& order = *x.order;
  auto position = [&](int rank) {
    return static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
  };
  ScheduleArgs p = x;
  p.rank = position(x.rank);
  p.root = position(x.root);
  return toRanks(buildInRankOrder(a, p), order, x.collective, x.count);
}

}  // namespace coll::algorithms
