// Whether this machine's cores are all taken right now, and whether this process has work of its
// own waiting for them, for waits that choose between spinning and sleeping. A wait that spins
// while every core is taken takes slices from whoever else would run: the computation the rank
// overlaps with its communication (DDP's backward pass) first of all.
#pragma once

#include <chrono>

namespace coll {

/// The machine's load as last sampled.
struct CpuLoad {
  /// The machine's runnable threads (the kernel's nr_running, /proc/loadavg's fourth field, the
  /// caller included), averaged over the last ~80 ms, exceed its online cores by half a thread.
  bool oversubscribed = false;
  /// Besides the caller, this process had more than half a runnable thread (state R in
  /// /proc/self/task) on average over the same samples, at least cpu_load::kMinHere of them:
  /// computation a spinning wait would take a core from. Looked at only while the machine is
  /// oversubscribed (false otherwise).
  bool othersRunnableHere = false;
};

/// The load, sampled at most once per kSampleEvery by whichever caller finds the last sample stale
/// (one read of /proc/loadavg, a few us, and while oversubscribed one read of each thread's stat);
/// between samples a call is two atomic loads. Thread-safe. All false where /proc cannot be read.
CpuLoad cpuLoad(std::chrono::steady_clock::time_point now);

/// Whether a wait should leave the core at once: the machine is oversubscribed and this process
/// has other threads to run (cpuLoad).
inline bool computationWaits(std::chrono::steady_clock::time_point now) {
  CpuLoad load = cpuLoad(now);
  return load.oversubscribed && load.othersRunnableHere;
}

namespace cpu_load {
/// How often the load is sampled, and how many samples the averages span (the last kSpan: one
/// stray sample, a shell's command, cannot flip them alone). A sample older than the whole span
/// restarts them. The state of the threads is a snapshot, so that a computation is seen while it
/// runs, not diluted by the time it waits for the communication (as CPU-time counters were: with
/// getrusage, DDP beside busy loops was never seen computing).
constexpr std::chrono::milliseconds kSampleEvery{10};
constexpr int kSpan = 8;
constexpr int kMinHere = 3;

/// The decision for an average of `running` runnable threads on `cores` cores (exposed for tests).
inline bool oversubscribed(double running, int cores) { return running >= cores + 0.5; }

/// Parses /proc/loadavg's text into its runnable-thread count; -1 if it does not parse.
int parseRunning(const char* loadavg);

/// Parses a /proc/<pid>/task/<tid>/stat line into its state letter; 0 if it does not parse (the
/// command name, in parentheses, may itself hold spaces and parentheses: the state follows the last
/// ')').
char parseState(const char* stat);

/// This process's runnable threads (state R), the caller included; -1 where /proc/self/task
/// cannot be read.
int runnableThreadsHere();
}  // namespace cpu_load

}  // namespace coll
