#include "exec/cuda/host_team.h"

#include <unistd.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace coll::exec::dev {

namespace {

// A team whose helpers wait between runs: a run bumps round_ and wakes them; each runs the body
// with its id and counts itself in finished_.
class PooledTeam {
 public:
  explicit PooledTeam(int n) : team_(n) {
    for (int id = 1; id < n; ++id) helpers_.emplace_back([this, id] { helperLoop(id); });
  }
  PooledTeam(const PooledTeam&) = delete;
  PooledTeam& operator=(const PooledTeam&) = delete;

  int size() const { return team_.size; }

  bool run(const std::function<bool(HostTeam&, int)>& body) {
    body_ = &body;
    finished_.store(0, std::memory_order_relaxed);
    round_.fetch_add(1, std::memory_order_release);
    futexWakeAll(&round_);
    bool ok = body(team_, 0);
    uint32_t want = static_cast<uint32_t>(team_.size - 1);
    for (int spin = 0;; ++spin) {
      uint32_t f = finished_.load(std::memory_order_acquire);
      if (f == want) break;
      if (spin > 64) futexWait(&finished_, f);
    }
    return ok;
  }

 private:
  void helperLoop(int id) {
    // No short slices here (base/process.h): 8-thread teams on 2 cores then preempted each other
    // at every wake-up, and the emulated suite took 68 s quiet instead of 21.
    uint32_t seen = 0;
    for (;;) {
      uint32_t r;
      for (int spin = 0; (r = round_.load(std::memory_order_acquire)) == seen; ++spin)
        if (spin > 64) futexWait(&round_, seen);
      seen = r;
      (*body_)(team_, id);
      finished_.fetch_add(1, std::memory_order_acq_rel);
      futexWakeAll(&finished_);
    }
  }

  HostTeam team_;
  const std::function<bool(HostTeam&, int)>* body_ = nullptr;
  std::atomic<uint32_t> round_{0};
  std::atomic<uint32_t> finished_{0};
  std::vector<std::thread> helpers_;  // never joined: the pool lives as long as the process
};

struct Pool {
  std::mutex mu;
  pid_t pid = getpid();
  std::vector<PooledTeam*> idle;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: its helpers wait until the process ends
  return *p;
}

}  // namespace

bool runOnTeam(int n, const std::function<bool(HostTeam&, int)>& body) {
  if (n <= 1) {
    HostTeam solo(1);
    return body(solo, 0);
  }
  Pool& p = pool();
  PooledTeam* team = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.pid != getpid()) {
      // A forked child: the parent's helpers do not exist here.
      p.idle.clear();
      p.pid = getpid();
    }
    for (size_t i = 0; i < p.idle.size(); ++i)
      if (p.idle[i]->size() == n) {
        team = p.idle[i];
        p.idle.erase(p.idle.begin() + static_cast<long>(i));
        break;
      }
  }
  if (!team) team = new PooledTeam(n);
  bool ok = team->run(body);
  std::lock_guard<std::mutex> lock(p.mu);
  p.idle.push_back(team);
  return ok;
}

}  // namespace coll::exec::dev
