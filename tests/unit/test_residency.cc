// Co-residency of the device kernels (core/residency.h): the budget every rank computes from the
// ranks' table, the send/receive channel cap, and the refusals, at the SM counts of an H100 SXM
// (132), an H100 PCIe (114) and a tiny GPU (2), one interpreter CTA per SM.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/residency.h"

using coll::CtaBudget;
using coll::bootstrap::RankInfo;

namespace {

// n ranks on `gpus` GPUs of one host (rank r on GPU r % gpus), each GPU holding ctas[g] CTAs.
std::vector<RankInfo> table(int n, const std::vector<int>& ctas, uint64_t host = 7) {
  std::vector<RankInfo> t(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    t[r].rank = r;
    t[r].cudaDev = r % static_cast<int>(ctas.size());
    t[r].hostHash = host;
    t[r].gpuCtas = ctas[r % ctas.size()];
  }
  return t;
}

// The CTAs of a group in which a rank sends to and receives from every rank (itself too), each
// message of `bytes` split as p2pChannels says.
int allToAllCtas(int n, size_t bytes, const CtaBudget& b) {
  return 2 * n * coll::p2pChannels(bytes, n, 8, 256 << 10, b);
}

}  // namespace

TEST_CASE("co-residency: 8 ranks on a 132-SM GPU fit an all-to-all of send/recv at any size", "[residency]") {
  CtaBudget b = coll::ctaBudget(table(8, {132}));
  REQUIRE(b.known);
  CHECK(b.perRank == 16);
  CHECK(b.ranksOnGpu == 8);
  for (size_t bytes : {size_t(8), size_t(512) << 10, size_t(64) << 20}) {
    INFO("bytes per peer " << bytes);
    int ctas = allToAllCtas(8, bytes, b);
    CHECK(ctas == 16);  // one channel per message: 8 ranks x 16 = 128 <= 132
    CHECK(coll::residencyProblem("collGroupEnd", ctas, b) == "");
  }
  // Without the cap, 512 KiB per peer would take 2 channels: 32 CTAs a rank, 256 on the GPU.
  CHECK(2 * 8 * coll::p2pChannels(size_t(512) << 10, 8, 8, 256 << 10, CtaBudget{}) == 32);
  // A collective's channels: the default 8 fits under 16.
  CHECK(std::min(8, b.perRank) == 8);
}

TEST_CASE("co-residency: 8 ranks on a 114-SM GPU cannot hold an all-to-all that includes self", "[residency]") {
  CtaBudget b = coll::ctaBudget(table(8, {114}));
  CHECK(b.perRank == 14);
  int ctas = allToAllCtas(8, size_t(1) << 20, b);
  CHECK(ctas == 16);
  std::string why = coll::residencyProblem("collGroupEnd", ctas, b);
  CHECK(why.find("needs 16 CTAs") != std::string::npos);
  CHECK(why.find("holds 114 CTAs") != std::string::npos);
  CHECK(why.find("8 ranks of this communicator share") != std::string::npos);
  CHECK(why.find("14 per rank") != std::string::npos);
  // Without sends to self (7 peers each way) it fits exactly.
  CHECK(coll::residencyProblem("collGroupEnd", 14, b) == "");
}

TEST_CASE("co-residency: a 2-SM GPU", "[residency]") {
  CtaBudget two = coll::ctaBudget(table(2, {2}));
  CHECK(two.perRank == 1);
  CHECK(coll::p2pChannels(size_t(64) << 20, 2, 8, 256 << 10, two) == 1);
  CHECK(coll::residencyProblem("collSend", 1, two) == "");      // one message to one peer
  CHECK(coll::residencyProblem("collGroupEnd", 2, two) != "");  // a send and a receive
  CtaBudget three = coll::ctaBudget(table(3, {2}));
  CHECK(three.perRank == 0);
  std::string why = coll::residencyProblem("the first device call", 1, three);
  CHECK(why.find("fewer than one per rank") != std::string::npos);
  CHECK(why.find("at most 2 ranks on one GPU") != std::string::npos);
}

TEST_CASE("co-residency: the least GPU sets the budget; host-only ranks set none", "[residency]") {
  // 6 ranks on two GPUs of one host: GPU 0 (132) gets ranks 0, 2, 4; GPU 1 (114) gets 1, 3, 5.
  CtaBudget b = coll::ctaBudget(table(6, {132, 114}));
  CHECK(b.perRank == 38);  // 114 / 3
  CHECK(b.gpuCtas == 114);
  CHECK(b.rank == 1);
  // The same device number on two hosts is two GPUs.
  std::vector<RankInfo> t = table(4, {2});
  t[2].hostHash = t[3].hostHash = 9;
  CHECK(coll::ctaBudget(t).perRank == 1);
  // Host-only ranks (or GPUs that did not tell): no budget, nothing refused.
  std::vector<RankInfo> host = table(3, {0});
  for (RankInfo& r : host) r.cudaDev = -1;
  CtaBudget none = coll::ctaBudget(host);
  CHECK_FALSE(none.known);
  CHECK(coll::residencyProblem("collGroupEnd", 1000, none) == "");
  CHECK(coll::p2pChannels(size_t(64) << 20, 3, 8, 256 << 10, none) == 8);
}
