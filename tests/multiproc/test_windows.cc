// Collectives on windows (the one-copy path over COLL_WIN_COLL_SYMMETRIC windows): ranks as
// threads (heap or collMemAlloc windows, both reached by pointer) at 1-8 ranks, forced with
// COLL_ALGO=window and left to the tuner, turned off with ^window; ranks as processes over shm and
// TCP (collMemAlloc windows mapped: the path; heap windows: not, the processes reach them only
// through the kernel's copies); a mismatched call; a rank killed instead of calling. Built into
// coll_tagged_tests (ctest "tagged") beside the one-sided puts, which share the windows.
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "multiproc/checks.h"
#include "multiproc/spawn.h"
#include "multiproc/windowcheck.h"

namespace {

const std::string kWorker = COLL_WORKER_PATH;

// COLL_ALGO for the communicators made while it lives (read at init), then restored.
class AlgoEnv {
 public:
  explicit AlgoEnv(const char* value) {
    if (const char* old = getenv("COLL_ALGO")) saved_ = old, had_ = true;
    if (value)
      setenv("COLL_ALGO", value, 1);
    else
      unsetenv("COLL_ALGO");
  }
  ~AlgoEnv() {
    if (had_)
      setenv("COLL_ALGO", saved_.c_str(), 1);
    else
      unsetenv("COLL_ALGO");
  }

 private:
  std::string saved_;
  bool had_ = false;
};

std::vector<std::string> onThreads(int n, const char* algo, const std::function<std::string(collComm_t)>& f) {
  std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
  {
    AlgoEnv env(algo);
    REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
  }
  auto errors = colltest::onRanks(comms, f);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  return errors;
}

}  // namespace

TEST_CASE("collectives on windows, ranks as threads: every collective, exact, on the path", "[windows][threads]") {
  using colltest::WindowPath;
  for (int n : {1, 2, 3, 5, 8}) {
    for (bool memAlloc : {true, false}) {
      if (!memAlloc && n != 2 && n != 3) continue;
      DYNAMIC_SECTION(n << " ranks, " << (memAlloc ? "collMemAlloc" : "heap") << " windows, COLL_ALGO=window") {
        auto errors = onThreads(n, "window", [memAlloc](collComm_t c) {
          return colltest::checkWindowCollectives(c, memAlloc, WindowPath::kTaken);
        });
        for (const auto& e : errors) CHECK(e == "");
      }
    }
  }
  SECTION("3 ranks, the tuner's choice") {
    auto errors = onThreads(
        3, nullptr, [](collComm_t c) { return colltest::checkWindowCollectives(c, true, WindowPath::kEither); });
    for (const auto& e : errors) CHECK(e == "");
  }
  SECTION("2 ranks, COLL_ALGO=^window") {
    auto errors = onThreads(
        2, "^window", [](collComm_t c) { return colltest::checkWindowCollectives(c, true, WindowPath::kNotTaken); });
    for (const auto& e : errors) CHECK(e == "");
  }
}

TEST_CASE("collectives on windows: a mismatched call fails on every rank, named", "[windows][threads]") {
  for (int n : {2, 3}) {
    DYNAMIC_SECTION(n << " ranks") {
      std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
      {
        AlgoEnv env("window");
        REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
      }
      auto errors = colltest::onRanks(comms, colltest::checkWindowMismatch);
      for (const auto& e : errors) CHECK(e == "");
      for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
    }
  }
}

TEST_CASE("collectives on windows, ranks as processes over shm and TCP", "[windows][processes]") {
  for (const char* shmDisable : {"0", "1"}) {
    for (int n : {2, 3}) {
      for (const char* what : {"", "heap"}) {
        if (std::string(shmDisable) == "1" && (n == 3 || std::string(what) == "heap")) continue;
        DYNAMIC_SECTION((shmDisable[0] == '1' ? "tcp, " : "shm, ") << n << " ranks " << what) {
          std::vector<std::string> args = {"windows"};
          if (*what) args.push_back(what);
          auto outs = colltest::runAll(
              colltest::directJob(kWorker, n, args, {{"COLL_SHM_DISABLE", shmDisable}, {"COLL_ALGO", "window"}}), 240);
          for (int r = 0; r < n; ++r) {
            INFO("rank " << r << ": " << outs[r].output);
            CHECK(outs[r].exitCode() == 0);
            CHECK(outs[r].output.find("ok (pid") != std::string::npos);
          }
        }
      }
    }
  }
}

TEST_CASE("collectives on windows across simulated hosts: all-reduce composed with the ring between hosts",
          "[windows][processes][hosts]") {
  // One coll-run per "host", each with its own COLL_HOSTID: windows reach the host's ranks, the
  // hosts are joined over TCP. perHost 0: three ranks, one per run, on two hosts (2 + 1).
  struct Shape {
    int hosts, perHost;
  };
  for (Shape shape : {Shape{2, 2}, Shape{2, 3}, Shape{3, 2}, Shape{2, 0}}) {
    DYNAMIC_SECTION(shape.hosts << " hosts x " << shape.perHost << " ranks") {
      bool uneven = shape.perHost == 0;
      int runs = uneven ? 3 : shape.hosts;
      std::string master = "127.0.0.1:" + std::to_string(colltest::freePort());
      std::string secret = fmt::format("{:08x}{:08x}", std::random_device{}(), std::random_device{}());
      std::vector<colltest::Command> jobs;
      for (int h = 0; h < runs; ++h)
        jobs.push_back(
            {{COLL_RUN_PATH, "-n", uneven ? "1" : std::to_string(shape.perHost), "--nnodes", std::to_string(runs),
              "--node-rank", std::to_string(h), "--master", master, kWorker, "windows", uneven ? "uneven" : "hosts"},
             {{"COLL_HOSTID", "simhost-" + std::to_string(uneven ? h % 2 : h)},
              {"COLL_ALGO", "window"},
              {"COLL_BOOTSTRAP_SECRET", secret}}});
      auto outs = colltest::runAll(jobs, 300);
      for (int h = 0; h < runs; ++h) {
        INFO("run " << h << ": " << outs[h].output);
        CHECK(outs[h].exitCode() == 0);
        int oks = 0;
        for (size_t at = outs[h].output.find("ok (pid"); at != std::string::npos;
             at = outs[h].output.find("ok (pid", at + 1))
          ++oks;
        CHECK(oks == (uneven ? 1 : shape.perHost));
      }
    }
  }
}

TEST_CASE("collectives on windows, processes: a mismatch and a killed rank are named",
          "[windows][processes][failure]") {
  SECTION("mismatched counts") {
    auto outs =
        colltest::runAll(colltest::directJob(kWorker, 3, {"windows", "mismatch"}, {{"COLL_ALGO", "window"}}), 120);
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r << ": " << outs[r].output);
      CHECK(outs[r].exitCode() == 0);
    }
  }
  SECTION("a rank killed") {
    auto outs =
        colltest::runAll(colltest::directJob(kWorker, 3, {"windows", "die", "1"}, {{"COLL_ALGO", "window"}}), 120);
    CHECK(outs[1].exitCode() == 128 + SIGKILL);
    for (int r : {0, 2}) {
      INFO("rank " << r << ": " << outs[r].output);
      CHECK(outs[r].exitCode() == 0);
      CHECK(outs[r].seconds < 20);
    }
  }
}

TEST_CASE("collectives on device windows, ranks as processes on the emulated device", "[windows][processes][device]") {
  // Each process maps the others' device allocations at registration (emulated: their memfds).
  for (int n : {2, 3}) {
    DYNAMIC_SECTION(n << " ranks") {
      auto outs = colltest::runAll(colltest::directJob(kWorker, n, {"windows", "device"},
                                                       {{"COLL_DEVICE_EMULATION", "1"},
                                                        {"COLL_DEVICE_NCHANNELS", "3"},
                                                        {"COLL_DEVICE_CHANNEL_MIN_BYTES", "4096"}}),
                                   300);
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK(outs[r].output.find("ok (pid") != std::string::npos);
      }
    }
  }
  SECTION("mismatched counts") {
    auto outs = colltest::runAll(
        colltest::directJob(kWorker, 2, {"windows", "device-mismatch"}, {{"COLL_DEVICE_EMULATION", "1"}}), 120);
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << outs[r].output);
      CHECK(outs[r].exitCode() == 0);
    }
  }
}
