#include "base/cpu_load.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace coll {

namespace cpu_load {

int parseRunning(const char* text) {
  // "0.46 2.34 2.99 1/79 12345": the fourth field is running/total.
  const char* p = text;
  for (int field = 0; field < 3; ++field) {
    while (*p && *p != ' ') ++p;
    while (*p == ' ') ++p;
  }
  char* end = nullptr;
  long running = std::strtol(p, &end, 10);
  if (end == p || *end != '/' || running < 0) return -1;
  return static_cast<int>(running);
}

char parseState(const char* stat) {
  const char* close = std::strrchr(stat, ')');
  if (!close || close[1] != ' ' || close[2] == '\0') return 0;
  return close[2];
}

// Reads a small /proc file whole into buf; false if it cannot.
static bool readSmall(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

int runnableThreadsHere() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int running = 0;
  char path[64], buf[512];
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof(path), "/proc/self/task/%.20s/stat", e->d_name);
    // A thread that ended since readdir is simply not counted.
    if (readSmall(path, buf, sizeof(buf)) && parseState(buf) == 'R') ++running;
  }
  closedir(dir);
  return running;
}

namespace {

struct Sampler {
  std::atomic<int64_t> lastNs{0};  // steady-clock ns of the last sample (0: none yet)
  std::atomic<bool> oversubscribedNow{false}, othersRunnableNow{false};
  std::mutex mu;  // one sampler at a time; the others keep the previous answer
  // Per sample: the machine's runnable threads, and this process's besides the sampler (-1: not
  // looked at, the machine was not oversubscribed).
  int machine[kSpan] = {}, here[kSpan] = {};
  int filled = 0, next = 0;
  int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  bool broken = false;  // /proc/loadavg unreadable: never report a load

  void restart() { filled = next = 0; }

  void sample() {
    char buf[128];
    int running = readSmall("/proc/loadavg", buf, sizeof(buf)) ? parseRunning(buf) : -1;
    if (running < 0 || cores < 1) {
      broken = true;
      oversubscribedNow.store(false, std::memory_order_relaxed);
      othersRunnableNow.store(false, std::memory_order_relaxed);
      return;
    }
    machine[next] = running;
    int n = std::min(filled + 1, kSpan), sum = 0;
    for (int i = 0; i < n; ++i) sum += machine[i];
    bool over = oversubscribed(static_cast<double>(sum) / n, cores);
    // The scan of this process's threads costs a few us per thread: only when it can matter.
    here[next] = over ? runnableThreadsHere() - 1 : -1;
    next = (next + 1) % kSpan;
    if (filled < kSpan) ++filled;
    int hereSum = 0, hereSamples = 0;
    for (int i = 0; i < filled; ++i)
      if (here[i] >= 0) hereSum += here[i], ++hereSamples;
    oversubscribedNow.store(over, std::memory_order_relaxed);
    // A majority of at least kMinHere samples: a thread that ran briefly (a communicator's setup,
    // a logger) must not make a process that only communicates nap.
    othersRunnableNow.store(over && hereSamples >= kMinHere && 2 * hereSum > hereSamples, std::memory_order_relaxed);
  }
};

Sampler& sampler() {
  static Sampler* s = new Sampler();  // never destroyed: waits may run during static destruction
  return *s;
}

}  // namespace
}  // namespace cpu_load

CpuLoad cpuLoad(std::chrono::steady_clock::time_point now) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  auto& s = cpu_load::sampler();
  int64_t ns = duration_cast<nanoseconds>(now.time_since_epoch()).count();
  if (ns - s.lastNs.load(std::memory_order_relaxed) >= duration_cast<nanoseconds>(cpu_load::kSampleEvery).count()) {
    std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
    if (lock.owns_lock() && !s.broken) {
      if (ns - s.lastNs.load(std::memory_order_relaxed) >
          duration_cast<nanoseconds>(cpu_load::kSampleEvery * cpu_load::kSpan).count())
        s.restart();
      s.lastNs.store(ns, std::memory_order_relaxed);
      s.sample();
    }
  }
  return {s.oversubscribedNow.load(std::memory_order_relaxed), s.othersRunnableNow.load(std::memory_order_relaxed)};
}

}  // namespace coll
