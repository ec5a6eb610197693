#include "base/conn_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>

namespace coll::net {
namespace {

std::atomic<int64_t> gInUse{0};

}  // namespace

int64_t unauthBudgetLimit() {
  // Read once: the soft limit a process runs under rarely changes, and every listener must
  // count against the same number.
  static const int64_t limit = [] {
    rlimit r{};
    int64_t soft = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? static_cast<int64_t>(r.rlim_cur)
                                                                                    : (int64_t(1) << 20);
    return std::max<int64_t>(16, soft / 4);
  }();
  return limit;
}

int64_t unauthBudgetInUse() { return gInUse.load(std::memory_order_relaxed); }

bool UnauthSlot::tryTake() {
  if (held_) return true;
  int64_t limit = unauthBudgetLimit();
  int64_t now = gInUse.load(std::memory_order_relaxed);
  while (now < limit)
    if (gInUse.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel)) return held_ = true;
  return false;
}

void UnauthSlot::release() {
  if (held_) gInUse.fetch_sub(1, std::memory_order_acq_rel);
  held_ = false;
}

}  // namespace coll::net
