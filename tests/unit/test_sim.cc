// coll-sim's network model (tools/coll-sim/network.h): hand-computed times for single transfers,
// ports and NICs shared by concurrent transfers, bounded FIFOs (a schedule that needs more
// buffering than a connection has is reported as a deadlock), and every algorithm of the catalog
// finishing under bounded FIFOs, which the symbolic verifier (unbounded queues) cannot check.
// Last, the 8xH100 check: ring all-reduce against the published nccl-tests figure.
#include <catch2/catch.hpp>

#include <string>

#include "algorithms/catalog.h"
#include "network.h"
#include "topology.h"

using namespace coll;
using algorithms::Buf;
using algorithms::Prim;
using algorithms::Schedule;
using algorithms::Step;

namespace {

// A plain topology whose numbers are easy to check by hand: 10 GB/s inside a node (10 KB per us),
// 1 GB/s per NIC, 2 us and 20 us of latency, local work free.
sim::Topology plain(int nodes, int perNode, int nics) {
  sim::Topology t;
  t.nodes = nodes;
  t.ranksPerNode = perNode;
  t.intraGBs = 10;
  t.intraLatencyUs = 2;
  t.nicsPerNode = nics;
  t.nicGBs = 1;
  t.netLatencyUs = 20;
  t.copyGBs = t.reduceGBs = 1e6;
  t.launchUs = 0;
  t.fifoBytes = 1 << 20;  // 8 slots of 128 KiB
  t.slots = 8;
  return t;
}

Step send(int to, size_t n) { return Step{Prim::kSend, to, -1, Buf::kInput, 0, 0, n}; }
Step recv(int from, size_t n) { return Step{Prim::kRecv, -1, from, Buf::kOutput, 0, 0, n}; }

}  // namespace

TEST_CASE("sim: one transfer takes bytes / bandwidth + latency", "[sim]") {
  sim::Topology t = plain(1, 2, 1);
  const size_t bytes = 1 << 20;  // 8 pieces of 128 KiB, back to back at 10 GB/s
  sim::SimResult r =
      sim::simulate(t, 1, [&](int rank) { return rank == 0 ? Schedule{send(1, bytes)} : Schedule{recv(0, bytes)}; });
  INFO(r.error);
  REQUIRE(r.ok);
  double expect = bytes / 10e3 + 2;  // us
  CHECK(r.timeUs == Approx(expect).epsilon(0.001));
  CHECK(r.pieces == 8);
  CHECK(r.intraBytes == Approx(bytes));
  CHECK(r.netBytes == 0);

  t.launchUs = 5;
  r = sim::simulate(t, 1, [&](int rank) { return rank == 0 ? Schedule{send(1, bytes)} : Schedule{recv(0, bytes)}; });
  CHECK(r.timeUs == Approx(expect + 5).epsilon(0.001));
}

TEST_CASE("sim: transfers into one port share it", "[sim]") {
  sim::Topology t = plain(1, 3, 1);
  const size_t bytes = 1 << 20;
  sim::SimResult r = sim::simulate(t, 1, [&](int rank) {
    return rank == 2 ? Schedule{recv(0, bytes), recv(1, bytes)} : Schedule{send(2, bytes)};
  });
  INFO(r.error);
  REQUIRE(r.ok);
  // Rank 2 takes rank 0's pieces first, but rank 1's fit its FIFO, so both senders push into its
  // one port together: 2 MiB through 10 GB/s.
  CHECK(r.timeUs == Approx(2.0 * bytes / 10e3 + 2).epsilon(0.02));
}

TEST_CASE("sim: transfers between nodes share a NIC, and not two", "[sim]") {
  const size_t bytes = 1 << 20;
  // Ranks 0, 1 on node 0 send to ranks 2, 3 on node 1.
  auto schedule = [&](int rank) {
    return rank < 2 ? Schedule{send(rank + 2, bytes)} : Schedule{recv(rank - 2, bytes)};
  };
  sim::SimResult one = sim::simulate(plain(2, 2, 1), 1, schedule);
  sim::SimResult two = sim::simulate(plain(2, 2, 2), 1, schedule);
  REQUIRE(one.ok);
  REQUIRE(two.ok);
  CHECK(one.netBytes == Approx(2.0 * bytes));
  CHECK(one.timeUs == Approx(2.0 * bytes / 1e3 + 20).epsilon(0.01));
  CHECK(two.timeUs == Approx(1.0 * bytes / 1e3 + 20).epsilon(0.01));

  // A cap on the node's network traffic binds both NICs together.
  sim::Topology capped = plain(2, 2, 2);
  capped.nodeNetGBs = 1;
  sim::SimResult c = sim::simulate(capped, 1, schedule);
  REQUIRE(c.ok);
  CHECK(c.timeUs == Approx(one.timeUs).epsilon(0.01));
}

TEST_CASE("sim: a schedule that needs more than the FIFO holds is a deadlock", "[sim]") {
  sim::Topology t = plain(1, 2, 1);
  // Both ranks send before they receive: fine while the message fits the FIFO (1 MiB) ...
  auto both = [](size_t bytes) {
    return [bytes](int rank) { return Schedule{send(1 - rank, bytes), recv(1 - rank, bytes)}; };
  };
  sim::SimResult fits = sim::simulate(t, 1, both(1 << 20));
  INFO(fits.error);
  CHECK(fits.ok);
  // ... and a deadlock once it does not, naming the ranks and what they wait for.
  sim::SimResult stuck = sim::simulate(t, 1, both((1 << 20) + 1));
  CHECK_FALSE(stuck.ok);
  CHECK(stuck.error.find("deadlock") != std::string::npos);
  CHECK(stuck.error.find("rank 0") != std::string::npos);
  CHECK(stuck.error.find("free slot at rank 1") != std::string::npos);

  // A receive nobody sends for, and a message nobody receives.
  sim::SimResult orphanRecv = sim::simulate(t, 1, [](int rank) { return rank ? Schedule{recv(0, 8)} : Schedule{}; });
  CHECK_FALSE(orphanRecv.ok);
  CHECK(orphanRecv.error.find("rank 1 step 0 waits for a piece from rank 0") != std::string::npos);
  sim::SimResult orphanSend = sim::simulate(t, 1, [](int rank) { return rank ? Schedule{} : Schedule{send(1, 8)}; });
  CHECK_FALSE(orphanSend.ok);
  CHECK(orphanSend.error.find("never received") != std::string::npos);
}

TEST_CASE("sim: every algorithm finishes with bounded FIFOs", "[sim]") {
  // The runtime's chunking (half the FIFO per ring step) on 2, 3 and 8 slots, one node and several.
  for (int slots : {2, 3, 8})
    for (int nodes : {1, 3})
      for (int perNode : {1, 2, 3, 5, 8}) {
        sim::Topology t = plain(nodes, perNode, 1);
        t.slots = slots;
        t.fifoBytes = 64 << 10;
        int n = t.ranks();
        for (int c = 0; c < 6; ++c) {
          auto coll = static_cast<algorithms::Collective>(c);
          for (algorithms::Algorithm a : algorithms::algorithmsFor(coll))
            for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(100003)}) {
              algorithms::ScheduleArgs args;
              args.collective = coll;
              args.nranks = n;
              args.count = count;
              args.root = n - 1;
              args.chunkElems = t.fifoBytes / 2 / 4;
              args.ranksPerHost = nodes > 1 ? perNode : 0;
              sim::SimResult r = sim::simulate(t, 4, [&](int rank) {
                algorithms::ScheduleArgs x = args;
                x.rank = rank;
                return algorithms::buildSchedule(a, x);
              });
              INFO(algorithms::algorithmName(a)
                   << " " << algorithms::collectiveName(coll) << " n=" << n << " nodes=" << nodes << " count=" << count
                   << " slots=" << slots << ": " << r.error);
              CHECK(r.ok);
            }
        }
      }
}

TEST_CASE("sim: ring all-reduce on a modeled 8xH100 node lands near nccl-tests' figure", "[sim]") {
  // nccl-tests issue 212: with NCCL_ALGO=RING an 8xH100 node reaches about 370 GB/s busbw at large
  // sizes (NVLink's 450 GB/s less ~20% protocol overhead). The preset takes the 450 GB/s and the
  // 20% from that statement, so this checks what the schedule adds: the 2(n-1)/n traffic, the
  // pipeline through the slots, latency. Within 10% of 370 at 4 GiB.
  sim::Topology t;
  REQUIRE(sim::presetTopology("dgx-h100", &t));
  size_t count = size_t(1) << 30;  // 4 GiB of floats
  algorithms::ScheduleArgs args;
  args.nranks = 8;
  args.count = count;
  args.chunkElems = t.fifoBytes / 2 / 4;
  sim::SimResult r = sim::simulate(t, 4, [&](int rank) {
    algorithms::ScheduleArgs x = args;
    x.rank = rank;
    return algorithms::buildSchedule(algorithms::Algorithm::kRing, x);
  });
  REQUIRE(r.ok);
  double busbw = count * 4.0 / r.timeUs / 1e3 * 2 * 7 / 8;
  INFO("busbw " << busbw);
  CHECK(busbw > 370 * 0.9);
  CHECK(busbw < 370 * 1.1);
}

TEST_CASE("sim: topology descriptions", "[sim]") {
  sim::Topology t;
  std::string err;
  REQUIRE(sim::presetTopology("dgx-h100", &t));
  CHECK_FALSE(sim::presetTopology("nope", &t));
  CHECK(sim::applySetting("nodes = 4   # a comment", &t, &err));
  CHECK(t.nodes == 4);
  CHECK(sim::applySetting("fifo_bytes = 8M", &t, &err));
  CHECK(t.fifoBytes == size_t(8) << 20);
  CHECK(sim::applySetting("", &t, &err));
  CHECK_FALSE(sim::applySetting("nodez = 4", &t, &err));
  CHECK(err.find("unknown key 'nodez'") != std::string::npos);
  CHECK_FALSE(sim::applySetting("slots = 1", &t, &err));
  CHECK(err.find("out of range") != std::string::npos);
  CHECK_FALSE(sim::applySetting("nodes = 2.5", &t, &err));
  CHECK_FALSE(sim::applySetting("intra_GBs = fast", &t, &err));
  CHECK_FALSE(sim::applySetting("intra_GBs", &t, &err));
  // What describeTopology writes, applySetting reads back to the same machine.
  sim::Topology back;
  std::string text = sim::describeTopology(t);
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    REQUIRE(sim::applySetting(text.substr(at, nl - at), &back, &err));
    at = nl + 1;
  }
  CHECK(sim::describeTopology(back) == text);
}
