// processGone: a dead child counts as gone while it is still a zombie (not yet reaped).
// cpuLoad: parsing /proc/loadavg, the decision, and a machine made busy on purpose.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "base/cpu_load.h"
#include "base/process.h"

TEST_CASE("processGone sees running, zombie and reaped processes", "[process]") {
  CHECK_FALSE(coll::processGone(getpid()));
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();  // until killed
    _exit(0);
  }
  CHECK_FALSE(coll::processGone(child));
  kill(child, SIGKILL);
  // Not reaped: kill(child, 0) still succeeds; the state in /proc turns to Z once it has exited.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = coll::processGone(child);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(gone);
  CHECK(kill(child, 0) == 0);  // still a zombie: this is the case kill() alone misses
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(coll::processGone(child));
  CHECK_FALSE(coll::processGone(0));
  CHECK_FALSE(coll::processGone(-1));
}

TEST_CASE("cpuLoad reads the run queue and sees a machine whose cores are all taken", "[process]") {
  using coll::cpu_load::oversubscribed;
  using coll::cpu_load::parseRunning;
  using coll::cpu_load::parseState;
  CHECK(parseRunning("0.46 2.34 2.99 1/79 12345\n") == 1);
  CHECK(parseRunning("12.00 9.50 3.10 17/1024 99") == 17);
  CHECK(parseRunning("0.00 0.00 0.00") == -1);
  CHECK(parseRunning("0.1 0.2 0.3 x/5 1") == -1);
  CHECK(parseRunning("") == -1);
  CHECK(parseState("1234 (python3) R 1 2 3") == 'R');
  CHECK(parseState("1234 (a) b (c)) S 1 2 3") == 'S');
  CHECK(parseState("1234 (cut") == 0);
  // The caller is one of the runnable threads: two ranks spinning on two cores are not too many.
  CHECK_FALSE(oversubscribed(2.0, 2));
  CHECK_FALSE(oversubscribed(2.4, 2));
  CHECK(oversubscribed(2.5, 2));
  CHECK(oversubscribed(4.0, 2));
  CHECK_FALSE(oversubscribed(16.0, 16));
  // This thread reads the count, so it is running.
  CHECK(coll::cpu_load::runnableThreadsHere() >= 1);

  // Three more spinning threads of this process than cores: every sample counts at least cores + 3
  // runnable threads on the machine and at least one here besides the caller, so both must show
  // once kMinHere samples are in; 3 s allows for a loaded test machine.
  int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < cores + 3; ++i)
    spinners.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  coll::CpuLoad load;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!(load.oversubscribed && load.othersRunnableHere) && std::chrono::steady_clock::now() < until) {
    load = coll::cpuLoad(std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto& t : spinners) t.join();
  CHECK(load.oversubscribed);
  CHECK(load.othersRunnableHere);
}
