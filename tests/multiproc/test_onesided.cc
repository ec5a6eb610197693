// One-sided puts and signals on windows (collPutSignal, collSignal, collWaitSignal): ranks as
// threads (pointers) for 1 to 8 ranks, ranks as processes (windows from collMemAlloc mapped, heap
// windows through process_vm_writev) over shm and TCP, and a rank killed while its signal is
// awaited. Built into coll_tagged_tests (ctest "tagged"): both are host point-to-point engines.
#include <signal.h>
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "multiproc/checks.h"
#include "multiproc/onesidedcheck.h"
#include "multiproc/spawn.h"

namespace {

const std::string kWorker = COLL_WORKER_PATH;

}  // namespace

TEST_CASE("one-sided puts, ranks as threads: rings, halos, host streams, bad arguments, deadlines",
          "[onesided][threads]") {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (bool memAlloc : {true, false}) {
      DYNAMIC_SECTION(n << " ranks, " << (memAlloc ? "collMemAlloc" : "heap") << " windows") {
        std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
        REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
        auto errors =
            colltest::onRanks(comms, [memAlloc](collComm_t c) { return colltest::checkOneSided(c, memAlloc); });
        for (const auto& e : errors) CHECK(e == "");
        for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
      }
    }
  }
}

TEST_CASE("one-sided calls before any window are refused with the reason", "[onesided][threads]") {
  std::vector<collComm_t> comms(1, nullptr);
  REQUIRE(collCommInitAll(comms.data(), 1, nullptr) == collSuccess);
  int v = 1;
  CHECK(collSignal(0, 0, 0, 0, comms[0], nullptr) == collInvalidUsage);
  CHECK_THAT(collGetLastError(comms[0]), Catch::Contains("collCommWindowRegister"));
  collWaitSignalDesc_t d{1, 0, 0, 0};
  CHECK(collWaitSignal(1, &d, comms[0], nullptr) == collInvalidUsage);
  CHECK(collPutSignal(&v, 1, collInt32, 0, nullptr, 0, 0, 0, 0, comms[0], nullptr) == collInvalidUsage);
  CHECK(collCommDestroy(comms[0]) == collSuccess);
}

TEST_CASE("one-sided puts, ranks as processes over shm and TCP", "[onesided][processes]") {
  // TCP: the windows and signals still go through memory (the ranks share a host); only the
  // collectives between the phases change transport.
  for (const char* shmDisable : {"0", "1"}) {
    for (int n : {2, 3, 6}) {
      if (std::string(shmDisable) == "1" && n == 6) continue;
      DYNAMIC_SECTION((shmDisable[0] == '1' ? "tcp, " : "shm, ") << n << " ranks") {
        auto outs =
            colltest::runAll(colltest::directJob(kWorker, n, {"onesided"}, {{"COLL_SHM_DISABLE", shmDisable}}), 240);
        for (int r = 0; r < n; ++r) {
          INFO("rank " << r << ": " << outs[r].output);
          CHECK(outs[r].exitCode() == 0);
          CHECK(outs[r].output.find("ok (pid") != std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("one-sided: a rank killed while its signal is awaited is named", "[onesided][processes][failure]") {
  // Killed before it puts, or in the middle of a 64 MiB put into rank 0's window.
  for (const char* how : {"die", "die-mid-put"}) {
    DYNAMIC_SECTION(how) {
      auto outs = colltest::runAll(colltest::directJob(kWorker, 3, {"onesided", how, "1"}, {}), 120);
      CHECK(outs[1].exitCode() == 128 + SIGKILL);
      for (int r : {0, 2}) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK(outs[r].seconds < 20);
      }
    }
  }
}

TEST_CASE("one-sided puts on device windows, ranks as processes on the emulated device",
          "[onesided][processes][device]") {
  // Each process maps the others' device windows and signal areas at registration.
  for (int n : {2, 3}) {
    DYNAMIC_SECTION(n << " ranks") {
      auto outs = colltest::runAll(
          colltest::directJob(kWorker, n, {"onesided", "device"}, {{"COLL_DEVICE_EMULATION", "1"}}), 240);
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK(outs[r].output.find("ok (pid") != std::string::npos);
      }
    }
  }
}
