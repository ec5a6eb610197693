// The tuner: COLL_ALGO parsing in NCCL's syntax, and the cost model's choices.
#include <catch2/catch.hpp>

#include <cmath>

#include "algorithms/tuner.h"

using namespace coll::algorithms;

namespace {

AlgoFilter parsed(const std::string& spec) {
  AlgoFilter f;
  std::string error;
  INFO(spec);
  REQUIRE(parseAlgoSpec(spec, &f, &error));
  CHECK(error.empty());
  return f;
}

std::string parseError(const std::string& spec) {
  AlgoFilter f;
  std::string error;
  CHECK_FALSE(parseAlgoSpec(spec, &f, &error));
  return error;
}

}  // namespace

TEST_CASE("COLL_ALGO: lists, exclusions and per-collective entries", "[tuner]") {
  AlgoFilter all = parsed("");
  for (int c = 0; c < 6; ++c)
    for (Algorithm a : algorithmsFor(static_cast<Collective>(c))) CHECK(all.permits(static_cast<Collective>(c), a));

  AlgoFilter only = parsed("ring,chain,pairwise");
  CHECK(only.permits(Collective::kAllReduce, Algorithm::kRing));
  CHECK_FALSE(only.permits(Collective::kAllReduce, Algorithm::kTree));
  CHECK(only.permits(Collective::kBroadcast, Algorithm::kChain));

  AlgoFilter notRing = parsed("^ring");
  CHECK_FALSE(notRing.permits(Collective::kAllReduce, Algorithm::kRing));
  CHECK(notRing.permits(Collective::kAllReduce, Algorithm::kTree));
  CHECK(notRing.permits(Collective::kAllGather, Algorithm::kRhd));

  AlgoFilter per = parsed("AllReduce:Tree,rhd; broadcast:^tree");
  CHECK(per.permits(Collective::kAllReduce, Algorithm::kTree));
  CHECK(per.permits(Collective::kAllReduce, Algorithm::kRhd));
  CHECK_FALSE(per.permits(Collective::kAllReduce, Algorithm::kRing));
  CHECK_FALSE(per.permits(Collective::kBroadcast, Algorithm::kTree));
  CHECK(per.permits(Collective::kBroadcast, Algorithm::kChain));
  CHECK(per.permits(Collective::kAllGather, Algorithm::kRing));  // untouched collectives keep everything
}

TEST_CASE("COLL_ALGO: the windows path is on by default, forced alone, one more choice in a list", "[tuner]") {
  AlgoFilter all = parsed("");
  for (int c = 0; c < 6; ++c) {
    CHECK(all.permitsWindow(static_cast<Collective>(c)));
    CHECK_FALSE(all.forcesWindow(static_cast<Collective>(c)));
  }
  // Alone: forced where the buffers allow, every schedule algorithm kept for other buffers.
  AlgoFilter forced = parsed("window");
  CHECK(forced.forcesWindow(Collective::kAllReduce));
  CHECK(forced.forcesWindow(Collective::kAllToAll));
  CHECK(forced.permits(Collective::kAllReduce, Algorithm::kRing));
  CHECK(forced.permits(Collective::kBroadcast, Algorithm::kChain));
  // In a list: one more choice for the tuner, not forced; the list's algorithms only.
  AlgoFilter listed = parsed("ring,Window");
  CHECK(listed.permitsWindow(Collective::kAllReduce));
  CHECK_FALSE(listed.forcesWindow(Collective::kAllReduce));
  CHECK_FALSE(listed.permits(Collective::kAllReduce, Algorithm::kTree));
  // "ring" alone means only the ring, as NCCL's lists do: the windows path is off.
  CHECK_FALSE(parsed("ring").permitsWindow(Collective::kAllReduce));
  AlgoFilter off = parsed("^window");
  CHECK_FALSE(off.permitsWindow(Collective::kReduceScatter));
  CHECK(off.permits(Collective::kReduceScatter, Algorithm::kRing));
  AlgoFilter per = parsed("allreduce:window;broadcast:^window");
  CHECK(per.forcesWindow(Collective::kAllReduce));
  CHECK_FALSE(per.permitsWindow(Collective::kBroadcast));
  CHECK(per.permitsWindow(Collective::kAllGather));
  CHECK_FALSE(per.forcesWindow(Collective::kAllGather));
  CHECK_THAT(parseError("windw"), Catch::Contains("window"));
}

TEST_CASE("tuner: the windows path's predicted time grows with its bytes and pays two arrivals", "[tuner]") {
  CostModel m;
  for (int c = 0; c < 6; ++c) {
    auto coll = static_cast<Collective>(c);
    CHECK(predictWindowUs(coll, 1, 1 << 20, m) == 0);
    CHECK(predictWindowUs(coll, 2, 8, m) >= 2 * m.windowAlphaUs);
    CHECK(predictWindowUs(coll, 4, 1 << 20, m) > predictWindowUs(coll, 4, 1 << 10, m));
  }
  // Across hosts: all-reduce alone, when every host holds the same number of ranks; its network
  // part is the hierarchical algorithm's, its part inside the host the windows'.
  CostModel hosts = shmModel();
  hosts.hosts = 2;
  hosts.ranksPerHost = 2;
  double across = predictWindowUs(Collective::kAllReduce, 4, 16 << 20, hosts);
  CHECK(std::isfinite(across));
  CHECK(across < predictUs(Algorithm::kHier, Collective::kAllReduce, 4, 16 << 20, hosts));
  CHECK(predictWindowUs(Collective::kReduceScatter, 4, 1 << 20, hosts) == HUGE_VAL);
  hosts.ranksPerHost = 0;
  CHECK(predictWindowUs(Collective::kAllReduce, 4, 1 << 20, hosts) == HUGE_VAL);
}

TEST_CASE("COLL_ALGO: mistakes are errors that say what is wrong", "[tuner]") {
  CHECK_THAT(parseError("rnig"), Catch::Contains("unknown algorithm 'rnig'"));
  CHECK_THAT(parseError("allreduse:ring"), Catch::Contains("unknown collective 'allreduse'"));
  CHECK_THAT(parseError("allgather:tree"), Catch::Contains("allgather with no algorithm"));
  CHECK_THAT(parseError("allreduce:^ring,tree,rhd,rd,exchange,hier"), Catch::Contains("allreduce with no algorithm"));
}

TEST_CASE("COLL_ALGO/COLL_PROTO: NCCL-style lists apply where they can", "[tuner]") {
  AlgoFilter f;
  std::string error, notes;
  // "Ring" as NCCL users write it: the collectives that have a ring use only it; broadcast,
  // reduce and all-to-all have none and keep their own, which the note says.
  REQUIRE(parseAlgoSpec("Ring", &f, &error, &notes));
  CHECK(f.permits(Collective::kAllReduce, Algorithm::kRing));
  CHECK_FALSE(f.permits(Collective::kAllReduce, Algorithm::kTree));
  CHECK(f.permits(Collective::kBroadcast, Algorithm::kChain));
  CHECK(f.permits(Collective::kBroadcast, Algorithm::kTree));
  CHECK(f.permits(Collective::kAllToAll, Algorithm::kPairwise));
  CHECK_THAT(notes, Catch::Contains("broadcast has none of 'Ring' and keeps its own (chain, tree)"));
  // "tree" used to fail (reduce-scatter has no tree); now the all-reduce gets the tree only.
  REQUIRE(parseAlgoSpec("tree", &f, &error, &notes));
  CHECK_FALSE(f.permits(Collective::kAllReduce, Algorithm::kRing));
  CHECK(f.permits(Collective::kReduceScatter, Algorithm::kRing));
  // NCCL-only algorithms are skipped, not typos.
  REQUIRE(parseAlgoSpec("Ring,NVLS", &f, &error, &notes));
  CHECK_FALSE(f.permits(Collective::kAllReduce, Algorithm::kTree));
  CHECK_THAT(notes, Catch::Contains("NVLS does not exist in coll"));
  REQUIRE(parseAlgoSpec("^PAT", &f, &error, &notes));
  CHECK(f.permits(Collective::kAllReduce, Algorithm::kRing));

  ProtoSet p;
  REQUIRE(parseProtoSpec("LL", &p, &error, &notes));
  CHECK(p.ll);
  CHECK_FALSE(p.direct);
  CHECK_THAT(notes, Catch::Contains("Simple stays on"));
  REQUIRE(parseProtoSpec("LL128,Simple", &p, &error, &notes));
  CHECK(p.ll);
  CHECK_THAT(notes, Catch::Contains("LL128 is taken as LL"));
  REQUIRE(parseProtoSpec("^Simple", &p, &error, &notes));
  CHECK(p.ll);
  CHECK(p.direct);
  CHECK_FALSE(parseProtoSpec("LL,Fast", &p, &error, &notes));
  CHECK_THAT(error, Catch::Contains("unknown protocol 'Fast'"));
}

TEST_CASE("tuner: logarithmic algorithms for small all-reduces, bandwidth-optimal ones for large", "[tuner]") {
  CostModel m;
  AlgoFilter all;
  Algorithm a;
  for (int n : {8, 64, 1024}) {
    REQUIRE(chooseAlgorithm(Collective::kAllReduce, n, 8, m, all, &a));
    INFO("n=" << n << " small: " << algorithmName(a));
    CHECK((a == Algorithm::kRd || a == Algorithm::kRhd || a == Algorithm::kTree));
    REQUIRE(chooseAlgorithm(Collective::kAllReduce, n, size_t(256) << 20, m, all, &a));
    INFO("n=" << n << " large: " << algorithmName(a));
    CHECK((a == Algorithm::kRing || a == Algorithm::kRhd || a == Algorithm::kTree));
  }
  // Time grows with size for every algorithm, and a filter is obeyed.
  for (Algorithm x : algorithmsFor(Collective::kAllReduce))
    if (x != Algorithm::kHier)  // one host: never offered (infinite)
      CHECK(predictUs(x, Collective::kAllReduce, 8, 1 << 20, m) > predictUs(x, Collective::kAllReduce, 8, 1 << 10, m));
  AlgoFilter ringOnly;
  std::string error;
  REQUIRE(parseAlgoSpec("allreduce:ring", &ringOnly, &error));
  REQUIRE(chooseAlgorithm(Collective::kAllReduce, 64, 8, m, ringOnly, &a));
  CHECK(a == Algorithm::kRing);
}

TEST_CASE("tuner plan: chunk, LL and Direct follow the algorithm, the size and COLL_PROTO", "[tuner]") {
  CostModel m;
  m.hosts = 4;
  m.ranksPerHost = 2;
  AlgoFilter all, hierOnly, ringOnly;
  std::string error;
  REQUIRE(parseAlgoSpec("allreduce:hier", &hierOnly, &error));
  REQUIRE(parseAlgoSpec("allreduce:ring", &ringOnly, &error));
  ProtoSet every, noDirect, noLL;
  REQUIRE(parseProtoSpec("^Direct", &noDirect, &error));
  REQUIRE(parseProtoSpec("^LL", &noLL, &error));

  Plan p;
  REQUIRE(choosePlan(Collective::kAllReduce, 8, size_t(64) << 20, m, hierOnly, every, &p));
  CHECK(p.algorithm == Algorithm::kHier);
  CHECK(p.chunkBytes == m.hierChunkBytes);  // smaller than the FIFO half
  CHECK_FALSE(p.direct);                    // 64 MiB output: above directMaxBytes
  CHECK(std::string(protocolName(p)) == "Simple");
  REQUIRE(choosePlan(Collective::kAllReduce, 8, size_t(64) << 20, m, ringOnly, every, &p));
  CHECK(p.chunkBytes == m.chunkBytes);

  REQUIRE(choosePlan(Collective::kAllReduce, 8, 1 << 20, m, ringOnly, every, &p));
  CHECK(p.direct);
  CHECK(std::string(protocolName(p)) == "Simple+Direct");
  REQUIRE(choosePlan(Collective::kAllReduce, 8, 1 << 20, m, ringOnly, noDirect, &p));
  CHECK_FALSE(p.direct);
  // All-gather's output is nranks times the input: 4 MiB x 8 is past directMaxBytes.
  REQUIRE(choosePlan(Collective::kAllGather, 8, 4 << 20, m, all, every, &p));
  CHECK_FALSE(p.direct);

  // LL: a ring's step moves a block (1/n), other algorithms the whole vector or half of it.
  REQUIRE(choosePlan(Collective::kAllReduce, 8, 8 * kLLBytes, m, ringOnly, every, &p));
  CHECK(p.ll);
  REQUIRE(choosePlan(Collective::kAllReduce, 8, 8 * kLLBytes + 8, m, ringOnly, every, &p));
  CHECK_FALSE(p.ll);
  REQUIRE(choosePlan(Collective::kAllReduce, 8, 8, m, all, noLL, &p));
  CHECK_FALSE(p.ll);
  CHECK(std::string(protocolName(p)) != "LL");
}

TEST_CASE("tuner: hosts that share one machine's cores cost as oversubscribed", "[tuner]") {
  // 4 hosts x 2 ranks on their own 2-core machines, and the same on one 2-core machine (network
  // namespaces): the shared machine is 4 times oversubscribed, and every algorithm slows.
  CostModel own, shared;
  own.hosts = shared.hosts = 4;
  own.ranksPerHost = shared.ranksPerHost = 2;
  own.oversubscription = 1;
  shared.oversubscription = 4;
  shared.hostsPerMachine = 4;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kHier, Algorithm::kRd})
    CHECK(predictUs(a, Collective::kAllReduce, 8, 1 << 20, shared) >
          2 * predictUs(a, Collective::kAllReduce, 8, 1 << 20, own));
}
