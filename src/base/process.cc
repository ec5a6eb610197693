#include "base/process.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace coll {

bool processGone(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;  // no /proc: only kill() can tell
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (!close || close[1] != ' ') return false;
  const char state = close[2];
  return state == 'Z' || state == 'X';
}

int borrowFd(int pid, int fd, std::string* why) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    *why = std::string("pidfd_open: ") + std::strerror(errno);
    return -1;
  }
  int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
  int err = errno;
  ::close(pidfd);
  if (got < 0) *why = std::string("pidfd_getfd: ") + std::strerror(err);
  return got;
}

void requestShortSlices() {
  // The kernel's struct sched_attr (its first version, 48 bytes): glibc's <sched.h> and
  // <linux/sched/types.h> cannot both be included.
  struct {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
  } attr{};
  static_assert(sizeof(attr) == 48, "SCHED_ATTR_SIZE_VER0");
  attr.size = sizeof(attr);
  attr.sched_policy = SCHED_OTHER;
  attr.sched_runtime = 100 * 1000;  // ns
  (void)syscall(SYS_sched_setattr, 0, &attr, 0);
}

void TimerSlack::tighten() {
  if (saved_ >= 0) return;
  saved_ = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (saved_ >= 0) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

TimerSlack::~TimerSlack() {
  if (saved_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(saved_), 0, 0, 0);
}

}  // namespace coll
