// Tagged messages (collIsend / collIrecv with any source and tags): ranks as threads over shared
// memory for 1 to 8 ranks, ranks as processes over shm and TCP, a sender killed while a receive
// waits for it, and the bound of held messages.
#include <signal.h>
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "multiproc/checks.h"
#include "multiproc/spawn.h"
#include "multiproc/taggedcheck.h"

namespace {

const std::string kWorker = COLL_WORKER_PATH;

std::vector<collComm_t> clique(int n) {
  std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
  REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
  return comms;
}

int count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("tagged messages, ranks as threads over shm: any source, tag order, self, truncation, deadlines",
          "[tagged][threads]") {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    DYNAMIC_SECTION(n << " ranks") {
      auto comms = clique(n);
      auto errors = colltest::onRanks(comms, colltest::checkTagged);
      for (const auto& e : errors) CHECK(e == "");
      for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
    }
  }
}

TEST_CASE("tagged messages: destroy ends a pending receive; requests outlive their communicator", "[tagged][threads]") {
  auto comms = clique(2);
  auto inits = colltest::onRanks(comms, [](collComm_t c) {
    return collCommTaggedInit(c) == collSuccess ? std::string() : std::string(collGetLastError(c));
  });
  for (const auto& e : inits) REQUIRE(e == "");
  int v = 0;
  collRequest_t pending = nullptr, withdrawn = nullptr;
  REQUIRE(collIrecv(&v, 1, collInt32, COLL_ANY_SOURCE, 3, comms[0], &pending) == collSuccess);
  REQUIRE(collIrecv(&v, 1, collInt32, 1, 4, comms[0], &withdrawn) == collSuccess);
  CHECK(collRequestFree(&withdrawn) == collSuccess);
  CHECK(withdrawn == nullptr);
  int done = 1;
  CHECK(collTest(&pending, &done, nullptr) == collSuccess);
  CHECK(done == 0);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  CHECK(collWait(&pending, nullptr) == collRemoteError);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("collCommDestroy was called"));
  CHECK(pending == nullptr);
}

TEST_CASE("tagged messages, ranks as processes over shm and TCP", "[tagged][processes]") {
  for (const char* shmDisable : {"0", "1"}) {
    for (int n : {2, 3, 6}) {
      if (std::string(shmDisable) == "1" && n == 6) continue;  // TCP: 2 and 3 ranks
      DYNAMIC_SECTION((shmDisable[0] == '1' ? "tcp, " : "shm, ") << n << " ranks") {
        auto outs =
            colltest::runAll(colltest::directJob(kWorker, n, {"tagged"}, {{"COLL_SHM_DISABLE", shmDisable}}), 240);
        for (int r = 0; r < n; ++r) {
          INFO("rank " << r << ": " << outs[r].output);
          CHECK(outs[r].exitCode() == 0);
          CHECK(count(outs[r].output, "worker rank \\d+/" + std::to_string(n) + " ok") == 1);
        }
      }
    }
  }
}

TEST_CASE("tagged messages: a sender killed while receives wait for it (one by rank, one from any source)",
          "[tagged][processes][failure]") {
  for (const char* shmDisable : {"0", "1"}) {
    DYNAMIC_SECTION((shmDisable[0] == '1' ? "tcp" : "shm")) {
      auto outs = colltest::runAll(
          colltest::directJob(kWorker, 3, {"tagged", "die", "1"}, {{"COLL_SHM_DISABLE", shmDisable}}), 120);
      CHECK(outs[1].exitCode() == 128 + SIGKILL);
      for (int r : {0, 2}) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK(outs[r].seconds < 20);
      }
    }
  }
}

TEST_CASE("tagged messages: passing COLL_P2P_UNEXPECTED_BYTES fails the receives with a sentence",
          "[tagged][processes][failure]") {
  auto outs = colltest::runAll(
      colltest::directJob(kWorker, 2, {"tagged", "bound"}, {{"COLL_P2P_UNEXPECTED_BYTES", "65536"}}), 120);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << outs[r].output);
    CHECK(outs[r].exitCode() == 0);
  }
}
