// Host streams with ranks as threads: operations in flight, stream order, blocking calls after
// queued work, send/recv groups, refusals, over shm and TCP; errors (same sentence as the blocking
// call), abort waking a waiter, and destroy with work queued.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <regex>
#include <thread>

#include "coll/coll.h"
#include "multiproc/checks.h"
#include "multiproc/streamcheck.h"

using colltest::onRanks;

namespace {

using Clock = std::chrono::steady_clock;

std::vector<collComm_t> makeComms(int n) {
  std::vector<collComm_t> comms(n);
  REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
  return comms;
}

void runChecks(int n) {
  auto comms = makeComms(n);
  for (const auto& e : onRanks(comms, colltest::streamChecks)) CHECK(e == "");
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

// One all-reduce on every rank, so that connections exist and a later wait is on the data path
// (COLL_TIMEOUT_MS), not on connection setup (the bootstrap's deadline).
void warmUp(std::vector<collComm_t>& comms) {
  auto errors = onRanks(comms, [](collComm_t c) -> std::string {
    float v = 1;
    return collAllReduce(&v, &v, 1, collFloat32, collSum, c, nullptr) == collSuccess ? "" : collGetLastError(c);
  });
  for (const auto& e : errors) REQUIRE(e == "");
}

std::string digitsOut(const std::string& s) { return std::regex_replace(s, std::regex("[0-9]+ ms"), "N ms"); }

}  // namespace

TEST_CASE("host streams, threads over shm: in flight, ordered, mixed with blocking calls", "[streams][threads]") {
  for (int n : {1, 2, 3, 4}) {
    DYNAMIC_SECTION("nranks " << n) { runChecks(n); }
  }
}

TEST_CASE("host streams, threads over TCP (COLL_SHM_DISABLE=1)", "[streams][threads][tcp]") {
  setenv("COLL_SHM_DISABLE", "1", 1);
  for (int n : {2, 3}) {
    DYNAMIC_SECTION("nranks " << n) { runChecks(n); }
  }
  unsetenv("COLL_SHM_DISABLE");
}

TEST_CASE("host streams: a one-rank stream in a group of several communicators (one thread drives a clique)",
          "[streams][threads][group]") {
  auto comms = makeComms(3);
  collStream_t s;
  REQUIRE(collHostStreamCreate(&s) == collSuccess);
  std::vector<std::vector<int32_t>> bufs(3, std::vector<int32_t>(5000));
  for (int k = 0; k < 5; ++k) {
    for (int r = 0; r < 3; ++r)
      for (auto& v : bufs[r]) v = r + k;
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < 3; ++r)
      REQUIRE(collAllReduce(bufs[r].data(), bufs[r].data(), 5000, collInt32, collSum, comms[r], s) == collSuccess);
    REQUIRE(collGroupEnd() == collSuccess);
    REQUIRE(collStreamSynchronize(s) == collSuccess);
    for (int r = 0; r < 3; ++r) CHECK(bufs[r][4999] == 3 + 3 * k);
  }
  // Without a group, one thread can still drive every rank, with a stream per rank (one stream
  // would order rank 1's part after rank 0's, which waits for rank 1): each call returns at once.
  collStream_t per[3];
  for (int r = 0; r < 3; ++r) {
    REQUIRE(collHostStreamCreate(&per[r]) == collSuccess);
    for (auto& v : bufs[r]) v = 10 * r;
    REQUIRE(collAllReduce(bufs[r].data(), bufs[r].data(), 5000, collInt32, collSum, comms[r], per[r]) == collSuccess);
  }
  for (int r = 0; r < 3; ++r) REQUIRE(collStreamSynchronize(per[r]) == collSuccess);
  for (int r = 0; r < 3; ++r) CHECK(bufs[r][0] == 30);
  for (int r = 0; r < 3; ++r) CHECK(collHostStreamDestroy(per[r]) == collSuccess);
  CHECK(collHostStreamDestroy(s) == collSuccess);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("host streams: a failed operation reports the blocking call's sentence; later work fails fast",
          "[streams][threads][errors]") {
  setenv("COLL_TIMEOUT_MS", "1000", 1);
  // Rank 1 never calls: rank 0 times out, once blocking, once on a stream.
  std::string blocking, queued;
  {
    auto comms = makeComms(2);
    warmUp(comms);
    float v = 1;
    CHECK(collAllReduce(&v, &v, 1, collFloat32, collSum, comms[0], nullptr) == collTimeout);
    blocking = collGetLastError(comms[0]);
    for (auto c : comms) collCommDestroy(c);
  }
  {
    auto comms = makeComms(2);
    warmUp(comms);
    collStream_t s;
    REQUIRE(collHostStreamCreate(&s) == collSuccess);
    float v = 1, w = 2;
    REQUIRE(collAllReduce(&v, &v, 1, collFloat32, collSum, comms[0], s) == collSuccess);
    REQUIRE(collAllReduce(&w, &w, 1, collFloat32, collSum, comms[0], s) == collSuccess);  // on a broken comm
    auto t0 = Clock::now();
    CHECK(collStreamSynchronize(s) == collTimeout);
    queued = collGetLastError(nullptr);
    CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 5.0);
    // The communicator is broken, as after the blocking failure, and says so.
    collResult_t async = collSuccess;
    CHECK(collCommGetAsyncError(comms[0], &async) == collSuccess);
    CHECK(async == collTimeout);
    CHECK(std::string(collGetLastError(comms[0])).find("broken by an earlier error") != std::string::npos);
    CHECK(collStreamSynchronize(s) == collSuccess);  // the failure was returned once
    CHECK(collHostStreamDestroy(s) == collSuccess);
    for (auto c : comms) collCommDestroy(c);
  }
  unsetenv("COLL_TIMEOUT_MS");
  INFO("blocking: " << blocking << "\nqueued: " << queued);
  CHECK(blocking.find("rank 1") != std::string::npos);
  CHECK(digitsOut(queued) == digitsOut(blocking));
}

TEST_CASE("host streams: collCommAbort wakes a thread waiting in collStreamSynchronize", "[streams][threads][abort]") {
  setenv("COLL_TIMEOUT_MS", "60000", 1);
  auto comms = makeComms(2);
  collStream_t s;
  REQUIRE(collHostStreamCreate(&s) == collSuccess);
  std::vector<float> buf(1 << 16, 1.0f);
  for (int k = 0; k < 6; ++k)
    REQUIRE(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collSum, comms[0], s) == collSuccess);
  collResult_t got = collSuccess;
  std::string text;
  auto t0 = Clock::now();
  std::thread waiter([&] {
    got = collStreamSynchronize(s);
    text = collGetLastError(nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(collCommAbort(comms[0]) == collSuccess);
  waiter.join();
  double took = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(text);
  CHECK(got != collSuccess);
  CHECK(took < 5.0);
  CHECK((text.find("aborted") != std::string::npos || text.find("collCommAbort was called") != std::string::npos));
  CHECK(collHostStreamDestroy(s) == collSuccess);
  CHECK(collCommDestroy(comms[1]) == collSuccess);
  unsetenv("COLL_TIMEOUT_MS");
}

TEST_CASE("host streams: destroy with work queued cancels it, promptly, and the peer gets an error",
          "[streams][threads][destroy]") {
  setenv("COLL_TIMEOUT_MS", "1500", 1);
  for (int n : {2, 3}) {
    DYNAMIC_SECTION("nranks " << n) {
      auto comms = makeComms(n);
      auto errors = onRanks(comms, [](collComm_t c) { return colltest::streamPeerGone(c, 1500, false); });
      for (const auto& e : errors) CHECK(e == "");
      CHECK(collCommDestroy(comms[0]) == collSuccess);
    }
  }
  unsetenv("COLL_TIMEOUT_MS");
}
