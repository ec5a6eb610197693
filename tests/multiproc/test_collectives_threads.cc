// Every collective on host memory with ranks as threads: every type and op, several counts,
// in-place and out-of-place, over shm and (COLL_SHM_DISABLE=1) over TCP.
#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <thread>

#include "coll/coll.h"
#include "multiproc/checks.h"
#include "multiproc/collcheck.h"
#include "multiproc/redopcheck.h"

using colltest::Case;
using colltest::Coll;

using colltest::onRanks;

namespace {

std::vector<collComm_t> makeComms(int n) {
  std::vector<collComm_t> comms(n);
  REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
  return comms;
}

void destroy(std::vector<collComm_t>& comms) {
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

const Coll kAll[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                     Coll::kAllToAll,  Coll::kSendRecv,  Coll::kGather, Coll::kScatter};

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

// Every collective x type x op x count x placement on one communicator.
std::string matrix(collComm_t comm, const std::vector<size_t>& counts) {
  int n = 0;
  collCommCount(comm, &n);
  for (Coll c : kAll) {
    for (int t = 0; t < collNumTypes; ++t) {
      for (int op = 0; op < (reduces(c) ? collNumOps : 1); ++op) {
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Coll::kSendRecv) continue;  // one buffer for a send and a receive: meaningless
            int root = (count + t) % n;
            std::string e = colltest::runCase(
                comm, Case{c, static_cast<collDataType_t>(t), static_cast<collRedOp_t>(op), count, inPlace, root});
            if (!e.empty()) return e;
          }
        }
      }
    }
  }
  return "";
}

void runMatrix(int n, const std::vector<size_t>& counts) {
  auto comms = makeComms(n);
  auto errors = onRanks(comms, [&](collComm_t c) { return matrix(c, counts); });
  for (const auto& e : errors) CHECK(e == "");
  destroy(comms);
}

// Large counts (many pieces and rounds) for every collective, two type/op pairs.
void runLarge(int n, const std::vector<size_t>& counts) {
  auto comms = makeComms(n);
  auto errors = onRanks(comms, [&](collComm_t comm) -> std::string {
    for (Coll c : kAll) {
      for (size_t count : counts) {
        std::string e = colltest::runCase(comm, Case{c, collFloat32, collSum, count, false, n - 1});
        if (e.empty()) e = colltest::runCase(comm, Case{c, collInt8, collMax, count, c != Coll::kSendRecv, 0});
        if (!e.empty()) return e;
      }
    }
    return "";
  });
  for (const auto& e : errors) CHECK(e == "");
  destroy(comms);
}

}  // namespace

TEST_CASE("threads over shm: every collective, type, op and placement", "[collectives][threads]") {
  for (int n : {1, 2, 3, 5, 8}) {
    DYNAMIC_SECTION("nranks " << n) { runMatrix(n, {0, 1, 2, 3, 17, 1031}); }
  }
}

TEST_CASE("threads over shm, every piece read straight from the sending thread's buffer",
          "[collectives][threads][ref]") {
  setenv("COLL_SHM_DIRECT_MIN", "1", 1);
  setenv("COLL_BUFFSIZE", "65536", 1);
  setenv("COLL_NSLOTS", "4", 1);
  for (int n : {2, 3, 5}) {
    DYNAMIC_SECTION("nranks " << n) { runMatrix(n, {1, 17, 1031, 40000}); }
  }
  unsetenv("COLL_SHM_DIRECT_MIN");
  unsetenv("COLL_BUFFSIZE");
  unsetenv("COLL_NSLOTS");
}

TEST_CASE("threads: every algorithm, forced with COLL_ALGO", "[collectives][threads][algo]") {
  // Each entry leaves one algorithm per collective that has it; the rest keep their only one.
  for (const char* algo : {"allreduce:tree;broadcast:tree;reduce:tree", "rhd,chain,pairwise", "allreduce:rd",
                           "allreduce:exchange", "ring,chain,pairwise"}) {
    setenv("COLL_ALGO", algo, 1);
    for (int n : {2, 3, 5, 8}) {
      DYNAMIC_SECTION(algo << ", nranks " << n) { runMatrix(n, {0, 1, 3, 17, 1031}); }
    }
    // Counts past the FIFO: many pieces and rounds, for two type/op pairs.
    DYNAMIC_SECTION(algo << ", large counts") { runLarge(5, {(size_t(1) << 20) + 1}); }
  }
  unsetenv("COLL_ALGO");
}

TEST_CASE("threads: COLL_PROTO without LL or without Direct", "[collectives][threads][proto]") {
  for (const char* proto : {"^LL", "^Direct", "Simple"}) {
    setenv("COLL_PROTO", proto, 1);
    setenv("COLL_SHM_DIRECT_MIN", "1", 1);
    DYNAMIC_SECTION(proto) { runMatrix(3, {1, 5, 1031}); }
  }
  unsetenv("COLL_PROTO");
  unsetenv("COLL_SHM_DIRECT_MIN");
}

TEST_CASE("threads over TCP (COLL_SHM_DISABLE=1): every collective, type, op and placement",
          "[collectives][threads][tcp]") {
  setenv("COLL_SHM_DISABLE", "1", 1);
  for (int n : {2, 3, 4}) {
    DYNAMIC_SECTION("nranks " << n) { runMatrix(n, {0, 1, 7, 1031}); }
  }
  unsetenv("COLL_SHM_DISABLE");
}

TEST_CASE("threads: large counts cross FIFO rounds and slots", "[collectives][threads]") {
  for (int n : {2, 3, 4, 7}) {
    DYNAMIC_SECTION("nranks " << n) { runLarge(n, {size_t(1) << 20 | 1, size_t(3) << 19}); }
  }
}

TEST_CASE("threads: PreMulSum and bitwise ops, over shm and TCP (COLL_SHM_DISABLE=1), 1..4 ranks",
          "[collectives][threads][redop]") {
  // Counts 0, 1, odd, and past one FIFO slot (1M + 3 elements; reduce-scatter: per rank).
  for (const char* shmOff : {"0", "1"}) {
    setenv("COLL_SHM_DISABLE", shmOff, 1);
    for (int n : {1, 2, 3, 4}) {
      DYNAMIC_SECTION("COLL_SHM_DISABLE=" << shmOff << ", nranks " << n) {
        auto comms = makeComms(n);
        auto errors = onRanks(comms, [&](collComm_t c) {
          return colltest::runRedOpChecks(c, {0, 1, 7, 1031}, (size_t(1) << 20) + 3);
        });
        for (const auto& e : errors) CHECK(e == "");
        destroy(comms);
      }
    }
  }
  unsetenv("COLL_SHM_DISABLE");
}

TEST_CASE("ranks that disagree on the count end in an error, not a hang or a write out of bounds",
          "[collectives][threads][failure]") {
  setenv("COLL_TIMEOUT_MS", "2000", 1);
  for (size_t base : {size_t(1000), size_t(1) << 20}) {  // exchange path, then ring
    DYNAMIC_SECTION("counts " << base << " and " << 2 * base) {
      auto comms = makeComms(2);
      std::vector<collResult_t> rcs(2);
      std::vector<std::thread> ts;
      for (int r = 0; r < 2; ++r)
        ts.emplace_back([&, r] {
          size_t count = base * (r + 1);
          // Guard zones after each buffer: a write past `count` would change them.
          std::vector<float> buf(count + 1024, 1.0f);
          rcs[r] = collAllReduce(buf.data(), buf.data(), count, collFloat32, collSum, comms[r], nullptr);
          for (size_t i = count; i < buf.size(); ++i)
            if (buf[i] != 1.0f) rcs[r] = collInternalError;  // flags an out-of-bounds write
        });
      for (auto& t : ts) t.join();
      // No rank writes out of bounds; at least one reports the mismatch. (A rank whose whole
      // operation matches a prefix of the other's can finish: its data was consistent.)
      int errors = 0;
      for (int r = 0; r < 2; ++r) {
        INFO("rank " << r << " result " << rcs[r]);
        CHECK(rcs[r] != collInternalError);
        errors += rcs[r] == collInvalidUsage || rcs[r] == collTimeout || rcs[r] == collRemoteError;
      }
      CHECK(errors >= 1);
      destroy(comms);
    }
  }
  unsetenv("COLL_TIMEOUT_MS");
}

// One thread drives every rank of a collCommInitAll clique inside one group, as single-process
// multi-device programs do with NCCL: the group must run the communicators together.
TEST_CASE("one thread, every communicator of a clique in one group", "[collectives][threads][group]") {
  for (const char* shmOff : {"0", "1"}) {
    setenv("COLL_SHM_DISABLE", shmOff, 1);
    for (int n : {1, 2, 3, 5}) {
      INFO("ranks " << n << ", COLL_SHM_DISABLE=" << shmOff);
      auto comms = makeComms(n);
      // Large enough that no rank's share fits in its FIFOs: run one after the other, rank 0's
      // all-reduce would wait for rank 1 forever.
      const size_t count = (3u << 20) + 7;
      std::vector<std::vector<float>> in(n), out(n);
      for (int r = 0; r < n; ++r) {
        in[r].assign(count, static_cast<float>(r + 1));
        out[r].assign(count, -1.0f);
      }
      REQUIRE(collGroupStart() == collSuccess);
      for (int r = 0; r < n; ++r)
        REQUIRE(collAllReduce(in[r].data(), out[r].data(), count, collFloat32, collSum, comms[r], nullptr) ==
                collSuccess);
      REQUIRE(collGroupEnd() == collSuccess);
      const float want = static_cast<float>(n * (n + 1) / 2);
      for (int r = 0; r < n; ++r) {
        size_t bad = 0;
        for (float v : out[r]) bad += v != want;
        CHECK(bad == 0);
      }

      // Every rank sends to and receives from every rank (itself too), all from this thread.
      const size_t per = 100003;
      std::vector<std::vector<int32_t>> sendBuf(n), recvBuf(n);
      for (int r = 0; r < n; ++r) {
        sendBuf[r].resize(per * n);
        recvBuf[r].assign(per * n, -1);
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < per; ++i) sendBuf[r][p * per + i] = static_cast<int32_t>(r * 1000003 + p * 7 + i);
      }
      REQUIRE(collGroupStart() == collSuccess);
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          REQUIRE(collSend(&sendBuf[r][p * per], per, collInt32, p, comms[r], nullptr) == collSuccess);
          REQUIRE(collRecv(&recvBuf[r][p * per], per, collInt32, p, comms[r], nullptr) == collSuccess);
        }
      }
      REQUIRE(collGroupEnd() == collSuccess);
      for (int r = 0; r < n; ++r) {
        size_t bad = 0;
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < per; ++i)
            bad += recvBuf[r][p * per + i] != static_cast<int32_t>(p * 1000003 + r * 7 + i);
        CHECK(bad == 0);
      }
      destroy(comms);
    }
  }
  unsetenv("COLL_SHM_DISABLE");
}

namespace {

// CPU seconds the calling thread used while rank 0 of a 2-rank all-reduce waited ~400 ms for
// rank 1, which comes late; and the wait's wall time. (Catch's REQUIRE is not for other threads:
// they return their results.)
struct LateWait {
  double cpu = 0, wall = 0;
  bool ok = true;
  float result = 0;
};

LateWait lateWaitCpu() {
  auto comms = makeComms(2);
  std::vector<float> a(1024, 1.0f), b(1024, 2.0f);
  LateWait out;
  auto run = [&](bool late) {
    std::thread t1([&] {
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
      if (collAllReduce(b.data(), b.data(), b.size(), collFloat32, collSum, comms[1], nullptr) != collSuccess)
        out.ok = false;
    });
    timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    auto w0 = std::chrono::steady_clock::now();
    if (collAllReduce(a.data(), a.data(), a.size(), collFloat32, collSum, comms[0], nullptr) != collSuccess)
      out.ok = false;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    out.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    out.cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) + static_cast<double>(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    t1.join();
  };
  run(false);  // warm up: connections are made by the first call, outside the measured wait
  run(true);
  out.result = a[0];  // (1 + 2), then (3 + 3)
  destroy(comms);
  return out;
}

}  // namespace

// A blocking call on host memory runs its waits in the calling thread; with COLL_SPIN_US=200 a
// wait that outlasts 200 us sleeps in naps, so a rank whose peer is late leaves the core to the
// computation beside it (DDP's backward pass). Without naps the wait spins and yields and takes
// close to all of a core on an idle machine (printed for COLL_SPIN_US=-1); under load its share
// depends on the competing processes, so only the nap's bound is asserted. (A napping wait still
// takes about a quarter of a core here: it wakes every 50 us.)
TEST_CASE("a rank waiting for a late peer naps after COLL_SPIN_US instead of spinning", "[collectives][threads][nap]") {
  setenv("COLL_SPIN_US", "200", 1);
  LateWait nap = lateWaitCpu();
  setenv("COLL_SPIN_US", "-1", 1);
  LateWait spin = lateWaitCpu();
  unsetenv("COLL_SPIN_US");
  INFO("naps: " << nap.cpu << " s CPU in " << nap.wall << " s; spinning: " << spin.cpu << " s CPU in " << spin.wall
                << " s");
  REQUIRE(nap.ok);
  REQUIRE(spin.ok);
  CHECK(nap.result == 6.0f);
  CHECK(spin.result == 6.0f);
  REQUIRE(nap.wall > 0.3);
  REQUIRE(spin.wall > 0.3);
  CHECK(nap.cpu < 0.5 * nap.wall);
}

// The executor's waits poll the communicator's abort flag: a rank blocked in a collective whose
// peer never comes is woken by collCommAbort long before the 300 s default deadline. (Under
// COLL_EXECUTOR=device-host the proxy loop raises the channel's abort word, as a GPU build's
// proxy thread would for a kernel.)
TEST_CASE("collCommAbort wakes a rank waiting in a collective for a peer that never comes",
          "[collectives][threads][failure]") {
  auto comms = makeComms(2);
  std::vector<float> a(4096, 1.0f), b(4096, 1.0f);
  collResult_t rc = collSuccess, rc1 = collSuccess;
  // Connections first, so that the wait below is the executor's, not the connection setup's.
  std::thread peer([&] { rc1 = collAllReduce(b.data(), b.data(), b.size(), collFloat32, collSum, comms[1], nullptr); });
  rc = collAllReduce(a.data(), a.data(), a.size(), collFloat32, collSum, comms[0], nullptr);
  peer.join();
  REQUIRE(rc == collSuccess);
  REQUIRE(rc1 == collSuccess);
  auto start = std::chrono::steady_clock::now();
  std::thread blocked(
      [&] { rc = collAllReduce(a.data(), a.data(), a.size(), collFloat32, collSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(collCommAbort(comms[0]) == collSuccess);
  blocked.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(rc == collRemoteError);
  CHECK(s < 5.0);
  CHECK(collCommDestroy(comms[1]) == collSuccess);
}

// Survivors shrink: every rank not excluded calls collCommShrink at once, the excluded do not.
std::vector<collComm_t> shrinkSurvivors(const std::vector<collComm_t>& comms, std::vector<int> excluded, int flags) {
  std::vector<collComm_t> out(comms.size(), nullptr);
  std::vector<collResult_t> rc(comms.size(), collSuccess);
  std::vector<std::string> why(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    if (std::find(excluded.begin(), excluded.end(), static_cast<int>(r)) != excluded.end()) continue;
    threads.emplace_back([&, r] {
      rc[r] = collCommShrink(comms[r], excluded.data(), static_cast<int>(excluded.size()), &out[r], nullptr, flags);
      if (rc[r] != collSuccess) why[r] = collGetLastError(comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < comms.size(); ++r) {
    INFO("rank " << r << ": " << why[r]);
    CHECK(rc[r] == collSuccess);
  }
  return out;
}

TEST_CASE("collCommShrink: the survivors of an aborted rank form a communicator and reduce correctly",
          "[collectives][threads][shrink]") {
  auto comms = makeComms(4);
  // Connections exist, then rank 3 goes away without a word (its communicator aborted).
  onRanks(comms, [&](collComm_t c) {
    std::vector<float> v(100, 1.0f);
    return collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, c, nullptr) == collSuccess ? "" : "ar";
  });
  REQUIRE(collCommAbort(comms[3]) == collSuccess);
  auto shrunk = shrinkSurvivors(comms, {3}, COLL_SHRINK_ABORT);
  std::vector<std::thread> threads;
  std::vector<float> got(3, -1);
  for (int r = 0; r < 3; ++r) {
    REQUIRE(shrunk[r] != nullptr);
    int n = 0, me = -1;
    CHECK(collCommCount(shrunk[r], &n) == collSuccess);
    CHECK(collCommUserRank(shrunk[r], &me) == collSuccess);
    CHECK((n == 3 && me == r));
    threads.emplace_back([&, r] {
      std::vector<float> v(1000, static_cast<float>(r + 1));
      if (collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, shrunk[r], nullptr) == collSuccess)
        got[r] = v[999];
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) CHECK(got[r] == 6.0f);
  // Shrinking again, by default, without rank 0: ranks 1 and 2 of the shrunk one become 0 and 1.
  std::vector<collComm_t> second(shrunk.begin(), shrunk.begin() + 3);
  auto again = shrinkSurvivors(second, {0}, COLL_SHRINK_DEFAULT);
  int me = -1;
  CHECK(collCommUserRank(again[2], &me) == collSuccess);
  CHECK(me == 1);
  // Refusals, each with its sentence, nothing sent.
  collComm_t none = nullptr;
  int self[] = {0}, twice[] = {1, 1}, far[] = {7};
  CHECK(collCommShrink(second[0], self, 1, &none, nullptr, COLL_SHRINK_DEFAULT) == collInvalidUsage);
  CHECK_THAT(collGetLastError(second[0]), Catch::Contains("an excluded rank does not call collCommShrink"));
  CHECK(collCommShrink(second[0], twice, 2, &none, nullptr, COLL_SHRINK_DEFAULT) == collInvalidArgument);
  CHECK_THAT(collGetLastError(second[0]), Catch::Contains("excluded twice"));
  CHECK(collCommShrink(second[0], far, 1, &none, nullptr, COLL_SHRINK_DEFAULT) == collInvalidArgument);
  CHECK(collCommShrink(second[0], far, 0, &none, nullptr, 5) == collInvalidArgument);
  CHECK_THAT(collGetLastError(second[0]), Catch::Contains("shrinkFlags=5"));
  CHECK(none == nullptr);
  for (int r = 1; r < 3; ++r) CHECK(collCommDestroy(again[r]) == collSuccess);
  for (int r = 0; r < 3; ++r) CHECK(collCommDestroy(shrunk[r]) == collSuccess);
  for (int r = 0; r < 3; ++r) CHECK(collCommDestroy(comms[r]) == collSuccess);
}

// NCCL's non-blocking shrink: one thread shrinks every survivor in turn (a blocking shrink would
// wait for the survivors after it), each call returns collInProgress with the new communicator,
// which settles and reduces correctly.
TEST_CASE("non-blocking collCommShrink: one thread shrinks every survivor, then polls",
          "[collectives][threads][shrink]") {
  auto comms = makeComms(4);
  REQUIRE(collCommAbort(comms[1]) == collSuccess);
  int out[] = {1};
  std::vector<collComm_t> shrunk;
  for (int r : {0, 2, 3}) {
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    collComm_t c = nullptr;
    REQUIRE(collCommShrink(comms[r], out, 1, &c, &cfg, COLL_SHRINK_DEFAULT) == collInProgress);
    REQUIRE(c != nullptr);
    shrunk.push_back(c);
  }
  for (auto c : shrunk) REQUIRE(colltest::settle(c) == collSuccess);
  // Non-blocking like their config: the all-reduces are issued from this thread, then polled.
  std::vector<std::vector<float>> v(3);
  for (int i = 0; i < 3; ++i) {
    int n = 0, me = -1;
    CHECK(collCommCount(shrunk[i], &n) == collSuccess);
    CHECK(collCommUserRank(shrunk[i], &me) == collSuccess);
    CHECK((n == 3 && me == i));
    v[i].assign(1000, static_cast<float>(i + 1));
    REQUIRE(collAllReduce(v[i].data(), v[i].data(), v[i].size(), collFloat32, collSum, shrunk[i], nullptr) ==
            collInProgress);
  }
  for (auto c : shrunk) REQUIRE(colltest::settle(c) == collSuccess);
  for (int i = 0; i < 3; ++i) CHECK(v[i][999] == 6.0f);
  for (auto c : shrunk) CHECK(collCommDestroy(c) == collSuccess);
  for (int r : {0, 2, 3}) CHECK(collCommDestroy(comms[r]) == collSuccess);
}

// collCommRevoke (NCCL 2.29's ncclCommRevoke): an all-reduce waiting for a peer that never comes
// ends at once, data calls are refused afterwards, and the revoked ranks split into a communicator
// that works.
TEST_CASE("collCommRevoke ends what runs; the revoked ranks split and reduce", "[collectives][threads][revoke]") {
  auto comms = makeComms(2);
  std::vector<float> v(1000, 1.0f);
  collResult_t inFlight = collSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread waiting(
      [&] { inFlight = collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 1 never calls
  CHECK(collCommRevoke(comms[0], 7) == collInvalidArgument);
  REQUIRE(collCommRevoke(comms[0], COLL_REVOKE_DEFAULT) == collSuccess);
  waiting.join();
  CHECK(inFlight != collSuccess);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr) == collInvalidUsage);
  CHECK_THAT(collGetLastError(comms[0]), Catch::Contains("revoked"));
  CHECK(collCommRevoke(comms[0], COLL_REVOKE_DEFAULT) == collSuccess);  // again: a no-op
  REQUIRE(collCommRevoke(comms[1], COLL_REVOKE_DEFAULT) == collSuccess);
  std::vector<collComm_t> kids(2, nullptr);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < 2; ++r) REQUIRE(collCommSplit(comms[r], 0, r, &kids[r], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  std::vector<float> got(2, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> x(1000, static_cast<float>(r + 1));
      if (collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, kids[r], nullptr) == collSuccess)
        got[r] = x[999];
    });
  for (auto& t : threads) t.join();
  CHECK(got[0] == 3.0f);
  CHECK(got[1] == 3.0f);
  for (auto c : kids) CHECK(collCommDestroy(c) == collSuccess);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

// Ranks as threads read a large piece straight from the sending thread's buffer. A rank whose
// operation fails takes those references back before it returns (fifo.h, voidRefs), and its
// caller may unmap the buffer at once: a peer that comes to the piece afterwards must fail, naming
// the cause, without touching it. Here the peer mostly learns of the failure from the failed
// rank's notice before it looks at the piece; the race of a pin against the void is the unit
// test's ("fifo: a failed producer voids its references...").
TEST_CASE("threads: a failed operation's references are not read after it returns, even once its buffer is unmapped",
          "[collectives][threads][failure][ref]") {
  setenv("COLL_SHM_DIRECT_MIN", "1", 1);
  setenv("COLL_TIMEOUT_MS", "300", 1);
  auto comms = makeComms(3);
  // Connections first (every rank), so that what follows waits on pieces, not on setup.
  auto warm = onRanks(comms, [](collComm_t c) {
    std::vector<float> v(1024, 1.0f);
    return collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, c, nullptr) == collSuccess
               ? ""
               : "warm-up failed";
  });
  for (const auto& e : warm) REQUIRE(e == "");
  // Rank 0 publishes its first piece to rank 1 by reference, then waits for rank 2, which never
  // calls: it times out, and its buffer is unmapped. Rank 1 arrives afterwards.
  const size_t count = size_t(1) << 20;
  const size_t bytes = count * sizeof(float);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  std::fill_n(static_cast<float*>(mem), count, 1.0f);
  std::vector<float> other(count, 1.0f);
  collResult_t rc0 = collSuccess, rc1 = collSuccess;
  std::string why1;
  std::atomic<bool> unmapped{false};
  std::thread r0([&] {
    rc0 = collAllReduce(mem, mem, count, collFloat32, collSum, comms[0], nullptr);
    munmap(mem, bytes);
    unmapped = true;
  });
  std::thread r1([&] {
    while (!unmapped) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rc1 = collAllReduce(other.data(), other.data(), count, collFloat32, collSum, comms[1], nullptr);
    if (rc1 != collSuccess) why1 = collGetLastError(comms[1]);
  });
  r0.join();
  r1.join();
  INFO("rank 1: " << why1);
  CHECK(rc0 != collSuccess);
  CHECK(rc1 != collSuccess);
  for (auto c : comms) collCommAbort(c);
  unsetenv("COLL_SHM_DIRECT_MIN");
  unsetenv("COLL_TIMEOUT_MS");
}
