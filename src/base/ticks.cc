#include "base/ticks.h"

#include <thread>

namespace coll {

TickClock::TickClock() : tick0_(ticksNow()), steady0_(std::chrono::steady_clock::now()), wall0_(nowWallUs()) {}

int64_t TickClock::nowWallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t TickClock::wallUs(uint64_t t) {
  if (usPerTick_ == 0) {
    // The rate from one span: 20 ms against a steady clock of ~us resolution is within 1e-4.
    auto span = std::chrono::steady_clock::now() - steady0_;
    if (span < kMinSpan) std::this_thread::sleep_for(kMinSpan - span);
    uint64_t tick1 = ticksNow();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - steady0_).count();
    usPerTick_ = tick1 > tick0_ ? us / static_cast<double>(tick1 - tick0_) : 1e-3;
  }
  // Ticks before the anchor (none are taken) would come out negative: clamp to the anchor.
  double delta = t >= tick0_ ? static_cast<double>(t - tick0_) : 0.0;
  return wall0_ + static_cast<int64_t>(delta * usPerTick_);
}

}  // namespace coll
