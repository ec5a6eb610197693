// Schedule verification: every algorithm of src/algorithms, run symbolically (algorithms/symbolic.h)
// for every rank count 1..64 and chosen counts up to 4096 ranks, checked for deadlock, double
// counting and the exact contents every output element must end with. The verifier itself is
// shown to catch broken schedules first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/catalog.h"
#include "algorithms/rank_order.h"
#include "algorithms/symbolic.h"

using namespace coll::algorithms;

namespace {

const Collective kCollectives[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                                   Collective::kBroadcast, Collective::kReduce,        Collective::kAllToAll};

bool rooted(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }

SymbolicReport verify(Algorithm a, Collective c, int n, size_t count, int root, bool inPlace, size_t chunk) {
  SymbolicCall call{c, n, count, root, inPlace};
  return runSymbolic(call, [&](int r) {
    ScheduleArgs args{c, n, r, count, root, chunk};
    return buildSchedule(a, args);
  });
}

std::string describe(Algorithm a, Collective c, int n, size_t count, int root, bool inPlace, size_t chunk) {
  return std::string(algorithmName(a)) + " " + collectiveName(c) + " n=" + std::to_string(n) +
         " count=" + std::to_string(count) + " root=" + std::to_string(root) + (inPlace ? " in-place" : "") +
         " chunk=" + std::to_string(chunk);
}

// Hand-written 2-rank schedules for the verifier's own tests: all-reduce of `count`.
SymbolicReport twoRanks(const Schedule& s0, const Schedule& s1, size_t count) {
  SymbolicCall call{Collective::kAllReduce, 2, count, 0, false};
  return runSymbolic(call, [&](int r) { return r == 0 ? s0 : s1; });
}

}  // namespace

TEST_CASE("symbolic verifier: a correct hand-written schedule passes", "[schedules][verifier]") {
  Schedule s0{Step{Prim::kSend, 1, -1, Buf::kInput, 0, 0, 5}, Step{Prim::kRecv, -1, 1, Buf::kOutput, 0, 0, 5}};
  Schedule s1{Step{Prim::kRecvReduceCopy, -1, 0, Buf::kInput, 0, 0, 5},
              Step{Prim::kSend, 0, -1, Buf::kOutput, 0, 0, 5}};
  SymbolicReport rep = twoRanks(s0, s1, 5);
  INFO(rep.error);
  CHECK(rep.ok);
  CHECK(rep.steps == 4);
  CHECK(rep.elementsMoved == 10);
}

TEST_CASE("symbolic verifier: broken schedules are caught", "[schedules][verifier]") {
  Step send0{Prim::kSend, 1, -1, Buf::kInput, 0, 0, 5};
  Step recv0{Prim::kRecv, -1, 1, Buf::kOutput, 0, 0, 5};
  Step reduce1{Prim::kRecvReduceCopy, -1, 0, Buf::kInput, 0, 0, 5};
  Step back1{Prim::kSend, 0, -1, Buf::kOutput, 0, 0, 5};
  SECTION("both ranks receive first: deadlock") {
    auto rep = twoRanks({recv0, send0}, {Step{Prim::kRecv, -1, 0, Buf::kOutput, 0, 0, 5}, back1}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("deadlock"));
  }
  SECTION("a rank's input counted twice") {
    Step again{Prim::kRecvReduceCopy, -1, 0, Buf::kOutput, 0, 0, 5};
    auto rep = twoRanks({send0, send0, recv0}, {reduce1, again, back1}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("twice"));
  }
  SECTION("elements of different indices reduced together") {
    Step shifted = reduce1;
    shifted.srcOff = 1;
    shifted.count = 4;
    Step send4 = send0;
    send4.count = 4;
    auto rep = twoRanks({send4, recv0}, {shifted, back1}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("reduces element"));
  }
  SECTION("a message of the wrong size") {
    Step short0 = send0;
    short0.count = 4;
    auto rep = twoRanks({short0, recv0}, {reduce1, back1}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("sent 4"));
  }
  SECTION("a message nobody receives") {
    auto rep = twoRanks({send0, send0, recv0}, {reduce1, back1}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("never received"));
  }
  SECTION("an output element left unwritten") {
    Step partial = recv0;
    partial.count = 4;
    Step back4 = back1;
    back4.count = 4;
    auto rep = twoRanks({send0, partial}, {reduce1, back4}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("output element 4"));
  }
  SECTION("writing past a buffer") {
    Step far = recv0;
    far.dstOff = 1;
    auto rep = twoRanks({send0, far}, {reduce1, back1}, 5);
    CHECK_FALSE(rep.ok);
    CHECK_THAT(rep.error, Catch::Contains("outside the output"));
  }
  SECTION("a ring all-reduce missing its last step on one rank") {
    SymbolicCall call{Collective::kAllReduce, 4, 11, 0, false};
    auto rep = runSymbolic(call, [](int r) {
      Schedule s = ringAllReduce(4, r, 11, 1 << 20);
      if (r == 2) s.pop_back();
      return s;
    });
    CHECK_FALSE(rep.ok);
  }
}

TEST_CASE("every algorithm, every collective, 1..64 ranks, in place and out of place", "[schedules]") {
  auto start = std::chrono::steady_clock::now();
  size_t runs = 0;
  for (int n = 1; n <= 64; ++n) {
    std::vector<size_t> counts{0, 1, 2, 3, static_cast<size_t>(n) + 1, 2 * static_cast<size_t>(n) + 3, 97};
    if (n > 1) counts.push_back(n - 1);
    for (Collective c : kCollectives) {
      for (Algorithm a : algorithmsFor(c)) {
        std::vector<int> roots{0};
        if (rooted(c) && n > 1) roots = {0, n / 2, n - 1};
        // Small chunks make rings and trees run many rounds.
        std::vector<size_t> chunks{size_t(1) << 20};
        if (a == Algorithm::kRing || a == Algorithm::kTree) chunks.push_back(2);
        for (size_t count : counts)
          for (int root : roots)
            for (bool inPlace : {false, true})
              for (size_t chunk : chunks) {
                SymbolicReport rep = verify(a, c, n, count, root, inPlace, chunk);
                ++runs;
                if (!rep.ok) FAIL(describe(a, c, n, count, root, inPlace, chunk) << ": " << rep.error);
              }
      }
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN(runs << " schedules verified in " << s << " s");
  CHECK(runs > 30000);
}

TEST_CASE("every algorithm at chosen rank counts up to 4096", "[schedules][large]") {
  auto start = std::chrono::steady_clock::now();
  const int kRanks[] = {127, 128, 129, 255, 256, 257, 509, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4093, 4095, 4096};
  for (int n : kRanks) {
    for (Collective c : kCollectives) {
      for (Algorithm a : algorithmsFor(c)) {
        // n^2 messages: the all-to-all style algorithms stop at 1025 ranks.
        bool quadratic = a == Algorithm::kExchange || a == Algorithm::kPairwise;
        if (quadratic && n > 1025) continue;
        // Counts whose buffers over all ranks stay within ~20M elements (memory), and no more than
        // one count for rings, which take 2(n-1) steps per round on every rank.
        std::vector<size_t> counts;
        for (size_t count : {static_cast<size_t>(n) + 1, size_t(3), size_t(1)}) {
          if (quadratic && count > 3) continue;  // and n x count of scratch per rank
          SymbolicCall probe{c, n, count, 0, false};
          size_t perRank = inputElems(probe, n - 1) + outputElems(probe, n - 1);
          if (quadratic) perRank *= 2;  // messages in flight
          if (perRank * static_cast<size_t>(n) > (size_t(20) << 20)) continue;
          counts.push_back(count);
          if (a == Algorithm::kRing || counts.size() == 2) break;
        }
        int root = rooted(c) ? n / 3 : 0;
        for (size_t count : counts) {
          auto t0 = std::chrono::steady_clock::now();
          SymbolicReport rep = verify(a, c, n, count, root, false, size_t(1) << 20);
          double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (took > 2) WARN(describe(a, c, n, count, root, false, 0) << " took " << took << " s");
          if (!rep.ok) FAIL(describe(a, c, n, count, root, false, size_t(1) << 20) << ": " << rep.error);
        }
      }
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("large rank counts verified in " << s << " s");
}

TEST_CASE("hierarchical all-reduce for hosts of several ranks, up to 4096 ranks", "[schedules][hier]") {
  // (ranks per host, hosts): small layouts exhaustively over counts, large ones at one count.
  std::vector<std::pair<int, int>> layouts;
  for (int perHost = 2; perHost <= 8; ++perHost)
    for (int hosts = 2; hosts <= 9; ++hosts) layouts.push_back({perHost, hosts});
  for (auto big : {std::pair<int, int>{8, 128}, {8, 512}, {4, 1024}, {64, 64}, {3, 1365}}) layouts.push_back(big);
  for (auto [perHost, hosts] : layouts) {
    int n = perHost * hosts;
    std::vector<size_t> counts{0, 1, 2, 7, static_cast<size_t>(n) - 1, static_cast<size_t>(n) * 3 + 1};
    if (n > 100) counts = {static_cast<size_t>(n) + 1};
    bool big = n > 100;  // one count, one placement, no small chunks: 4096 ranks x 2(L+H) steps
    for (size_t count : counts)
      for (bool inPlace : {false, true})
        for (size_t chunk : {size_t(2), size_t(1) << 20}) {
          if (big && (inPlace || chunk == 2)) continue;
          SymbolicCall call{Collective::kAllReduce, n, count, 0, inPlace};
          SymbolicReport rep = runSymbolic(call, [&](int r) {
            ScheduleArgs args{Collective::kAllReduce, n, r, count, 0, chunk, perHost};
            return buildSchedule(Algorithm::kHier, args);
          });
          if (!rep.ok)
            FAIL("hier " << perHost << " x " << hosts << " count " << count << (inPlace ? " in-place" : "") << " chunk "
                         << chunk << ": " << rep.error);
        }
  }
}

TEST_CASE("ring all-reduce among some ranks (the windows path between hosts)", "[schedules][hier]") {
  // Among all ranks in a shuffled order, in place: the verifier checks the sums and the peers.
  for (int n = 1; n <= 9; ++n) {
    std::vector<int> members(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
    std::mt19937 rng(static_cast<unsigned>(n));
    std::shuffle(members.begin(), members.end(), rng);
    for (size_t count : {size_t(1), size_t(7), size_t(100)})
      for (size_t chunk : {size_t(2), size_t(1) << 20}) {
        SymbolicReport rep = runSymbolic({Collective::kAllReduce, n, count, 0, true}, [&](int r) {
          int index = static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
          return ringAllReduceAmong(members, index, 0, count, chunk);
        });
        if (!rep.ok) FAIL("n=" << n << " count " << count << " chunk " << chunk << ": " << rep.error);
      }
  }
  // A range of the output, among ranks 5, 2 and 7: only those peers, only that range.
  std::vector<int> members{5, 2, 7};
  for (int index = 0; index < 3; ++index)
    for (const Step& st : ringAllReduceAmong(members, index, 1000, 33, 4)) {
      CHECK(st.src == Buf::kOutput);
      CHECK((st.sendPeer == -1 || st.sendPeer == members[static_cast<size_t>((index + 1) % 3)]));
      CHECK((st.recvPeer == -1 || st.recvPeer == members[static_cast<size_t>((index + 2) % 3)]));
      CHECK(st.srcOff >= 1000);
      CHECK(st.dstOff + st.count <= 1033);
    }
}

namespace {

std::string join(const std::vector<int>& v) {
  std::ostringstream out;
  for (int x : v) out << x << ' ';
  return out.str();
}

// Ring orders to run schedules over: reversed, hosts interleaved by the launcher (rank r on host
// r % hosts) and put back host by host, and shuffled.
std::vector<std::vector<int>> ordersFor(int n, unsigned seed) {
  std::vector<std::vector<int>> orders;
  std::vector<int> reversed(n);
  for (int i = 0; i < n; ++i) reversed[i] = n - 1 - i;
  orders.push_back(reversed);
  if (n >= 4) {
    int hosts = n % 3 == 0 ? 3 : 2;
    std::vector<int> byHost;
    for (int h = 0; h < hosts; ++h)
      for (int r = h; r < n; r += hosts) byHost.push_back(r);
    orders.push_back(byHost);
  }
  std::vector<int> shuffled(n);
  for (int i = 0; i < n; ++i) shuffled[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  orders.push_back(shuffled);
  return orders;
}

}  // namespace

TEST_CASE("every algorithm over a ring order other than rank order", "[schedules][order]") {
  size_t runs = 0;
  for (int n = 1; n <= 24; ++n) {
    for (const std::vector<int>& order : ordersFor(n, static_cast<unsigned>(n))) {
      REQUIRE(isPermutation(order, n));
      for (Collective c : kCollectives)
        for (Algorithm a : algorithmsFor(c)) {
          std::vector<int> roots{0};
          if (rooted(c) && n > 1) roots = {0, n - 1, order[0]};
          for (size_t count : {size_t(0), size_t(1), static_cast<size_t>(2 * n + 3)})
            for (int root : roots)
              for (bool inPlace : {false, true})
                for (size_t chunk : {size_t(2), size_t(1) << 20}) {
                  SymbolicCall call{c, n, count, root, inPlace};
                  SymbolicReport rep = runSymbolic(call, [&](int r) {
                    ScheduleArgs args{c, n, r, count, root, chunk};
                    args.order = &order;
                    return buildSchedule(a, args);
                  });
                  ++runs;
                  if (!rep.ok)
                    FAIL(describe(a, c, n, count, root, inPlace, chunk)
                         << " order " << join(order) << ": " << rep.error);
                }
        }
    }
  }
  WARN(runs << " reordered schedules verified");
}

TEST_CASE("a ring over hosts interleaved by the launcher enters and leaves each host once", "[schedules][order]") {
  // 3 hosts x 4 ranks, rank r on host r % 3; order: host by host.
  const int n = 12, hosts = 3;
  std::vector<int> order;
  for (int h = 0; h < hosts; ++h)
    for (int r = h; r < n; r += hosts) order.push_back(r);
  auto crossings = [&](const std::vector<int>* o) {
    std::set<std::pair<int, int>> links;
    for (int r = 0; r < n; ++r) {
      ScheduleArgs args{Collective::kAllReduce, n, r, 1000, 0, 100};
      args.order = o;
      for (const Step& st : buildSchedule(Algorithm::kRing, args))
        if (st.sendPeer >= 0 && st.sendPeer % hosts != r % hosts) links.insert({r, st.sendPeer});
    }
    return links.size();
  };
  CHECK(crossings(nullptr) == static_cast<size_t>(n));  // rank order: every hop crosses hosts
  CHECK(crossings(&order) == static_cast<size_t>(hosts));

  // The hierarchical all-reduce over the same placement: positions are host by host, so its
  // inside-host rings stay inside hosts and only one ring per local slot crosses them.
  for (size_t count : {size_t(0), size_t(1), size_t(77)}) {
    SymbolicCall call{Collective::kAllReduce, n, count, 0, false};
    SymbolicReport rep = runSymbolic(call, [&](int r) {
      ScheduleArgs args{Collective::kAllReduce, n, r, count, 0, 4, n / hosts};
      args.order = &order;
      return buildSchedule(Algorithm::kHier, args);
    });
    CHECK(rep.ok);
    INFO(rep.error);
  }
  std::set<std::pair<int, int>> crossing;
  for (int r = 0; r < n; ++r) {
    ScheduleArgs args{Collective::kAllReduce, n, r, 1000, 0, 100, n / hosts};
    args.order = &order;
    for (const Step& st : buildSchedule(Algorithm::kHier, args))
      if (st.sendPeer >= 0 && st.sendPeer % hosts != r % hosts) crossing.insert({r, st.sendPeer});
  }
  CHECK(crossing.size() == static_cast<size_t>(n));  // one inter-host ring per local slot: each rank sends across once
}
