// Mismatched collective calls under the in-band check (COLL_CHECK_CALLS's default: a fingerprint
// rides with the first piece each operation sends to each peer): every collective x {op, type,
// count, another collective, a skipped call}, named on every rank within a second, and the
// communicator still aborted and destroyed cleanly; root mismatches under COLL_CHECK_CALLS=full
// (the in-band check cannot see them where no piece moves between the ranks that differ). CI runs 2 and 3 ranks over
// shm and a sample at 8 ranks and over TCP (threads), and a sample as processes; the whole matrix at 2, 3 and 8 ranks
// over shm and TCP is the hidden "[mismatch-all]" case (tests/mismatch_matrix.sh runs it). Built into
// coll_thread_tests.
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "multiproc/checks.h"
#include "multiproc/mismatchcheck.h"
#include "multiproc/spawn.h"

namespace {

// Runs one mismatch on a fresh clique of n ranks (a failed call leaves a communicator unusable);
// shmDisable: over TCP. Every rank must pass checkMismatch, and abort and destroy cleanly.
void runMismatch(int n, int collective, colltest::Mismatch m, int odd, bool shmDisable) {
  if (shmDisable) setenv("COLL_SHM_DISABLE", "1", 1);
  if (!colltest::inBandSees(m)) setenv("COLL_CHECK_CALLS", "full", 1);  // see mismatchcheck.h
  std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
  collResult_t rc = collCommInitAll(comms.data(), n, nullptr);
  unsetenv("COLL_SHM_DISABLE");
  unsetenv("COLL_CHECK_CALLS");
  REQUIRE(rc == collSuccess);
  auto errors = colltest::onRanks(comms, [&](collComm_t c) { return colltest::checkMismatch(c, collective, m, odd); });
  INFO(colltest::mismatchCollectiveName(collective)
       << ", " << colltest::mismatchName(m) << " on rank " << odd << " of " << n << (shmDisable ? ", tcp" : ", shm"));
  for (const auto& e : errors) CHECK(e == "");
  for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
}

void matrix(int n, bool shmDisable) {
  for (int c = 0; c < 6; ++c)
    for (colltest::Mismatch m : colltest::mismatchesFor(c))
      DYNAMIC_SECTION(colltest::mismatchCollectiveName(c) << ", " << colltest::mismatchName(m)) {
        runMismatch(n, c, m, colltest::mismatchOddRank(c, m, n), shmDisable);
      }
}

}  // namespace

TEST_CASE("in-band call check: every collective x every mismatch, 2 ranks over shm", "[threads][mismatch]") {
  matrix(2, false);
}

TEST_CASE("in-band call check: every collective x every mismatch, 3 ranks over shm", "[threads][mismatch]") {
  matrix(3, false);
}

TEST_CASE("in-band call check: a sample at 8 ranks over shm and at 3 over TCP", "[threads][mismatch]") {
  SECTION("8 ranks, all-reduce op") { runMismatch(8, 0, colltest::Mismatch::kOp, 5, false); }
  SECTION("8 ranks, broadcast root") { runMismatch(8, 3, colltest::Mismatch::kRoot, 7, false); }
  SECTION("8 ranks, all-gather skipped") { runMismatch(8, 2, colltest::Mismatch::kSkip, 0, false); }
  SECTION("tcp, 3 ranks, reduce-scatter type") { runMismatch(3, 1, colltest::Mismatch::kType, 1, true); }
  SECTION("tcp, 3 ranks, all-to-all count") { runMismatch(3, 5, colltest::Mismatch::kCount, 2, true); }
  SECTION("tcp, 2 ranks, reduce root") { runMismatch(2, 4, colltest::Mismatch::kRoot, 1, true); }
}

TEST_CASE("in-band call check: the whole matrix at 2, 3 and 8 ranks over shm and TCP", "[.][mismatch-all]") {
  for (int n : {2, 3, 8})
    for (bool tcp : {false, true}) DYNAMIC_SECTION(n << " ranks" << (tcp ? ", tcp" : ", shm")) {
        matrix(n, tcp);
      }
}

TEST_CASE("in-band call check: matching calls never trip it; 0 turns it off", "[threads][mismatch]") {
  // COLL_CHECK_CALLS=0: a mismatch is not caught (results differ silently, as NCCL's do), which
  // shows that the in-band check is what catches it above.
  setenv("COLL_CHECK_CALLS", "0", 1);
  std::vector<collComm_t> comms(2, nullptr);
  collResult_t rc = collCommInitAll(comms.data(), 2, nullptr);
  unsetenv("COLL_CHECK_CALLS");
  REQUIRE(rc == collSuccess);
  auto errors = colltest::onRanks(comms, [&](collComm_t c) -> std::string {
    int me = -1;
    collCommUserRank(c, &me);
    std::vector<float> buf(1000, 1.0f);
    if (collAllReduce(buf.data(), buf.data(), 1000, collFloat32, me == 1 ? collMax : collSum, c, nullptr) !=
        collSuccess)
      return std::string("with the check off, a mismatched all-reduce failed: ") + collGetLastError(c);
    return "";
  });
  for (const auto& e : errors) CHECK(e == "");
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  // An unknown value fails init with the reason.
  setenv("COLL_CHECK_CALLS", "sometimes", 1);
  rc = collCommInitAll(comms.data(), 2, nullptr);
  unsetenv("COLL_CHECK_CALLS");
  CHECK(rc == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("COLL_CHECK_CALLS=sometimes"));
}

TEST_CASE("in-band call check: different roots on cold connections are named at connection setup within 1 s",
          "[threads][mismatch][cold]") {
  // The first call of a fresh clique, so every connection it needs is made for it. Two ranks
  // that both think they are a broadcast's root both only connect to send (each would wait for
  // the other's descriptor until the bootstrap timeout, 60 s); two that both think they are a
  // reduce's root both only connect to receive. The connection setup carries the call's print.
  for (int n : {2, 3})
    for (int collective : {3, 4})
      for (bool tcp : {false, true})
        DYNAMIC_SECTION((collective == 3 ? "broadcast" : "reduce")
                        << ", " << n << " ranks" << (tcp ? ", tcp" : ", shm")) {
          if (tcp) setenv("COLL_SHM_DISABLE", "1", 1);
          std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
          collResult_t rc = collCommInitAll(comms.data(), n, nullptr);
          unsetenv("COLL_SHM_DISABLE");
          REQUIRE(rc == collSuccess);
          auto errors = colltest::onRanks(comms, [&](collComm_t c) -> std::string {
            int me = -1;
            collCommUserRank(c, &me);
            int root = me == n - 1 ? n - 1 : 0;  // the last rank thinks it is the root
            std::vector<float> in(4096, 1.0f), out(4096, 0.0f);
            auto t0 = std::chrono::steady_clock::now();
            collResult_t r = collective == 3
                                 ? collBroadcast(in.data(), out.data(), in.size(), collFloat32, root, c, nullptr)
                                 : collReduce(in.data(), out.data(), in.size(), collFloat32, collSum, root, c, nullptr);
            double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::string why = collGetLastError(c);
            if (r == collSuccess) {
              // A rank whose call needed nothing of the odd one may return: its next call fails.
              r = collAllReduce(in.data(), out.data(), 1, collFloat32, collSum, c, nullptr);
              why = collGetLastError(c);
              if (r == collSuccess) return "rank " + std::to_string(me) + ": no error at all";
            }
            if (r != collInvalidUsage && r != collRemoteError)
              return "rank " + std::to_string(me) + ": " + collGetErrorString(r) + ": " + why;
            if (why.find("COLL_CHECK_CALLS") == std::string::npos)
              return "rank " + std::to_string(me) + ": not the check's sentence: " + why;
            if (took > 1.0) return "rank " + std::to_string(me) + ": took " + std::to_string(took) + " s: " + why;
            return "";
          });
          for (const auto& e : errors) CHECK(e == "");
          for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
        }
}

TEST_CASE("in-band call check: sends and receives that do not match are named on both ranks within 1 s",
          "[threads][mismatch][p2p]") {
  // Rank 0 sends, rank 1 receives a different count; or rank 1 calls an all-reduce where rank 0
  // sends to it. Matching exchanges run first (their prints agree), so connections exist and the
  // ordinals have moved on. The rank that sees the mismatch fails with it; the other (whose send
  // may have completed into the FIFO) fails its next call with the notice.
  for (bool tcp : {false, true})
    for (int what : {0, 1})
      DYNAMIC_SECTION((what == 0 ? "receive of another count" : "an all-reduce meets a send")
                      << (tcp ? ", tcp" : ", shm")) {
        if (tcp) setenv("COLL_SHM_DISABLE", "1", 1);
        std::vector<collComm_t> comms(2, nullptr);
        collResult_t rc = collCommInitAll(comms.data(), 2, nullptr);
        unsetenv("COLL_SHM_DISABLE");
        REQUIRE(rc == collSuccess);
        auto errors = colltest::onRanks(comms, [&](collComm_t c) -> std::string {
          int me = -1;
          collCommUserRank(c, &me);
          const int peer = 1 - me;
          std::vector<float> a(300000, float(me + 1)), b(300000, 0.0f);
          // Matching: both directions at once, 3 times, then a large one (several pieces).
          for (size_t n : {size_t(1), size_t(1000), size_t(7), size_t(300000)}) {
            collGroupStart();
            collSend(a.data(), n, collFloat32, peer, c, nullptr);
            collRecv(b.data(), n, collFloat32, peer, c, nullptr);
            if (collGroupEnd() != collSuccess) return std::string("a matching exchange failed: ") + collGetLastError(c);
            if (b[n - 1] != float(peer + 1)) return "a matching exchange delivered the wrong data";
          }
          auto t0 = std::chrono::steady_clock::now();
          collResult_t r;
          if (me == 0)
            r = collSend(a.data(), 1000, collFloat32, 1, c, nullptr);
          else if (what == 0)
            r = collRecv(b.data(), 1024, collFloat32, 0, c, nullptr);
          else
            r = collAllReduce(a.data(), b.data(), 1000, collFloat32, collSum, c, nullptr);
          // Rank 0's next calls: the odd rank's own all-reduce where it called one (so that only
          // the first mismatch is there to see; it may complete, having taken what it needed), then
          // any, which fails with the notice.
          if (r == collSuccess && what == 1)
            r = collAllReduce(a.data(), b.data(), 1000, collFloat32, collSum, c, nullptr);
          if (r == collSuccess) r = collAllReduce(a.data(), b.data(), 1, collFloat32, collSum, c, nullptr);
          double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          std::string why = collGetLastError(c);
          if (r != collInvalidUsage && r != collRemoteError)
            return "rank " + std::to_string(me) + ": " + collGetErrorString(r) + ": " + why;
          if (why.find("COLL_CHECK_CALLS") == std::string::npos)
            return "rank " + std::to_string(me) + ": not the check's sentence: " + why;
          const char* expect = what == 0
                                   ? "receive #5 from rank 0 expects 4096 bytes while that rank's send #5 has 4000"
                                   : "while rank 0 sends (#5 to it, 4000 bytes)";
          if (why.find(expect) == std::string::npos) return "rank " + std::to_string(me) + ": " + why;
          if (took > 1.0) return "rank " + std::to_string(me) + ": took " + std::to_string(took) + " s";
          return "";
        });
        for (const auto& e : errors) CHECK(e == "");
        for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
      }
}
