// processGone: a dead child counts as gone while it is still a zombie (not yet reaped).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

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
