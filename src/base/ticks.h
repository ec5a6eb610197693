// A cheap timestamp for per-operation bookkeeping (the flight recorder): the CPU's time-stamp
// counter where it has one, read in a few ns without the vDSO's clock arithmetic (a
// clock_gettime is ~19 ns on the development VM, and an 8-byte all-reduce read it twice per call
// for the recorder alone). Ticks become wall-clock microseconds only when they are read out.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace coll {

/// The current tick: the time-stamp counter on x86 (constant and synchronized across cores on
/// every CPU this targets), the virtual counter on AArch64, steady-clock ns elsewhere.
inline uint64_t ticksNow() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
#endif
}

/// Converts ticks to wall-clock microseconds: anchored when made (a tick and the wall clock read
/// together), with the tick rate measured against the steady clock between then and the first
/// conversion (at least kMinSpan apart, waited for if need be; conversions are rare: a dump).
class TickClock {
 public:
  TickClock();
  /// Wall-clock microseconds since the epoch at tick t (t from ticksNow() after construction).
  int64_t wallUs(uint64_t t);
  /// Wall-clock microseconds now (system_clock), for stamps that need no tick.
  static int64_t nowWallUs();

 private:
  static constexpr std::chrono::milliseconds kMinSpan{20};
  uint64_t tick0_;
  std::chrono::steady_clock::time_point steady0_;
  int64_t wall0_;
  double usPerTick_ = 0;  // 0 until measured
};

}  // namespace coll
