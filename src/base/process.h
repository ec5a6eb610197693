// Whether a process on this host has died; the calling thread's scheduling request.
#pragma once

#include <string>

namespace coll {

/// Descriptor fd of process pid, duplicated into this process (pidfd_open, pidfd_getfd: Linux
/// 5.6, and ptrace access to pid, which a process of the same user has); -1 with why set when the
/// kernel refuses. Shares a memfd or an exported allocation without a Unix socket.
int borrowFd(int pid, int fd, std::string* why);

/// True when pid no longer runs: gone (ESRCH), or exited and not yet reaped by its parent (a
/// zombie, state Z or X in /proc/<pid>/stat). kill(pid, 0) alone succeeds on a zombie, and a
/// launcher busy elsewhere (a Python multiprocessing parent, a shell script) may reap late.
bool processGone(int pid);

/// Asks the scheduler for short time slices (100 us) for the calling thread (Linux 6.12 and later:
/// sched_attr.sched_runtime of a normal thread, which lets a woken thread preempt one that runs a
/// longer slice). The emulated device's threads hand work to each other many times per operation;
/// beside a busy process on the same cores, a woken thread with the default slice waits out that
/// process's slice (milliseconds) at every hand-off. Older kernels ignore the request.
void requestShortSlices();

/// Naps of a few us would last the thread's timer slack (50 us by default) instead: a wait that
/// naps tightens it (tighten(), 1 us) for as long as it naps, and gives the thread its own value
/// back when it ends.
class TimerSlack {
 public:
  TimerSlack() = default;
  TimerSlack(const TimerSlack&) = delete;
  TimerSlack& operator=(const TimerSlack&) = delete;
  void tighten();
  ~TimerSlack();

 private:
  long saved_ = -1;
};

/// One pause of a spin-wait: tells the CPU the thread spins (x86 PAUSE; nothing elsewhere).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace coll
