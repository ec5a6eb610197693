#include "transport/proxy.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/cpu_load.h"
#include "base/log.h"
#include "base/params.h"
#include "transport/transport.h"

namespace coll::transport::proxy {
namespace {

using Clock = std::chrono::steady_clock;

// A posted call and its result; lives on the poster's stack until done.
struct Command {
  const std::function<Status()>* fn;
  Status result;
  bool done = false;
};

class Proxy {
 public:
  Proxy() {
    std::string mode = params::kNetProxy.get();
    forced_ = mode == "thread" ? 0 : mode == "waiters" ? 1 : -1;
    crowded_.store(forced_ == 1, std::memory_order_relaxed);
  }

  Status run(const std::function<Status()>& fn) {
    if (onThread()) return fn();
    Command cmd{&fn, Status::ok(), false};
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) start();
    commands_.push_back(&cmd);
    posted_.store(true, std::memory_order_seq_cst);
    cv_.notify_one();
    doneCv_.wait(lock, [&] { return cmd.done; });
    return std::move(cmd.result);
  }

  void attach(Connection* c, bool first) {
    if (std::find(conns_.begin(), conns_.end(), c) != conns_.end()) return;
    if (first)
      conns_.insert(conns_.begin() + static_cast<std::ptrdiff_t>(firsts_++), c);
    else
      conns_.push_back(c);
  }
  void detach(Connection* c) {
    auto at = std::find(conns_.begin(), conns_.end(), c);
    if (at == conns_.end()) return;
    if (static_cast<size_t>(at - conns_.begin()) < firsts_) --firsts_;
    conns_.erase(at);
  }

  void demand() {
    if (crowded_.load(std::memory_order_relaxed)) {
      // More threads than cores: the waiter runs the round itself rather than wait for a proxy
      // thread that competes with it for a core (one caller at a time still: the token).
      if (token_.try_lock()) {
        (void)round();
        token_.unlock();
      }
      return;
    }
    if (!wanted_.load(std::memory_order_relaxed)) wanted_.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_one();
    }
  }

  void setCrowded(bool crowded) {
    if (forced_ >= 0) {
      crowded_.store(forced_ == 1, std::memory_order_relaxed);
      return;
    }
    if (!crowded) return;
    if (!crowdedByRanks_.exchange(true, std::memory_order_relaxed))
      COLL_LOG(INFO, NET,
               "network proxy: the waiting threads run the rounds from now on (a communicator has more threads "
               "than cores on this host: its ranks and their proxy)");
    crowded_.store(true, std::memory_order_relaxed);
  }

  bool onThread() const { return std::this_thread::get_id() == id_.load(std::memory_order_relaxed); }
  uint64_t roundNumber() const { return round_; }

 private:
  void start() {
    spinUs_ = std::max<int64_t>(0, params::kProxySpinUs.get());
    COLL_LOG(INFO, NET, "network proxy: thread started; the data path's rounds run {}",
             forced_ == 0   ? "on it (COLL_NET_PROXY=thread)"
             : forced_ == 1 ? "on the waiting threads (COLL_NET_PROXY=waiters)"
                            : "on it, or on the waiting threads where this host is crowded (COLL_NET_PROXY=auto)");
    thread_ = std::thread([this] { loop(); });
    // The thread knows itself before it runs a command: id_ is set here, under mu_, which the
    // loop takes before its first command.
    id_.store(thread_.get_id(), std::memory_order_relaxed);
  }

  // Runs the posted commands, in order, outside mu_ (under the token).
  void runCommands() {
    std::deque<Command*> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(commands_);
      posted_.store(false, std::memory_order_relaxed);
    }
    for (Command* c : batch) {
      Status s = (*c->fn)();
      std::lock_guard<std::mutex> lock(mu_);
      c->result = std::move(s);
      c->done = true;
    }
    if (!batch.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      doneCv_.notify_all();
    }
  }

  // One round over every attached connection (under the token); returns the highest urgency any
  // of them has.
  int round() {
    ++round_;
    int urgency = 0;
    for (size_t i = 0; i < conns_.size(); ++i) {
      Connection* c = conns_[i];
      if (c->proxyFailed()) continue;
      Status s = c->progress();
      if (!s.isOk()) {
        COLL_LOG(INFO, NET, "proxy: the {} connection with rank {} failed: {}", c->transportName(), c->peer(),
                 s.message());
        c->setProxyFailure(std::move(s));
        continue;
      }
      urgency = std::max(urgency, c->proxyUrgency());
    }
    return urgency;
  }

  void loop() {
    {  // wait for start() to have published id_
      std::lock_guard<std::mutex> lock(mu_);
    }
    auto lastWanted = Clock::now();
    const auto spin = std::chrono::microseconds(spinUs_);
    for (uint64_t n = 1;; ++n) {
      int urgency = 0;
      {
        std::lock_guard<std::mutex> token(token_);
        if (posted_.load(std::memory_order_acquire)) runCommands();
        urgency = round();
      }
      if (urgency >= 2) {
        lastWanted = Clock::now();  // data on its way: stay hot as if demanded
      } else if (n % 64 == 0 || urgency == 1 || crowded_.load(std::memory_order_relaxed)) {
        auto now = Clock::now();
        // Ranks that fit their host's cores can still share a machine that is overloaded (other
        // jobs, or simulated hosts on one machine): while it is, waiters run the rounds.
        if (forced_ < 0 && !crowded_.load(std::memory_order_relaxed) && cpuLoad(now).oversubscribed) {
          loadedUntil_ = now + kLoadHold;
          crowded_.store(true, std::memory_order_relaxed);
        }
        bool crowded = crowded_.load(std::memory_order_relaxed);
        if (!crowded && wanted_.load(std::memory_order_relaxed)) {
          wanted_.store(false, std::memory_order_relaxed);
          lastWanted = now;
        } else if (crowded || now - lastWanted > spin) {
          if (urgency == 1) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));  // setups: UCX wire-up, connect retries
          } else {
            sleepUntilWanted();
            lastWanted = Clock::now();
          }
        }
      }
      // Spinning: let the waiters and the peers run where there are fewer cores than threads.
      sched_yield();
    }
  }

  // Sleeps until a post, or a demand (not where waiters run the rounds themselves).
  void sleepUntilWanted() {
    std::unique_lock<std::mutex> lock(mu_);
    sleeping_.store(true, std::memory_order_seq_cst);
    for (;;) {
      if (posted_.load(std::memory_order_seq_cst)) break;
      if (!crowded_.load(std::memory_order_relaxed) && wanted_.load(std::memory_order_seq_cst)) break;
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      // Crowded by the machine's load only: after the hold, the proxy thread tries again (and
      // goes back to the waiters if the machine is still overloaded with it spinning).
      if (loadedUntil_ != Clock::time_point() && Clock::now() > loadedUntil_) {
        loadedUntil_ = Clock::time_point();
        if (!crowdedByRanks_.load(std::memory_order_relaxed)) crowded_.store(false, std::memory_order_relaxed);
      }
    }
    sleeping_.store(false, std::memory_order_relaxed);
    wanted_.store(false, std::memory_order_relaxed);
  }

  std::mutex mu_;                    // commands_, the sleep
  std::condition_variable cv_;       // the proxy waits here for posts and demands
  std::condition_variable doneCv_;   // run()'s callers wait here for their command
  std::deque<Command*> commands_;    // posted, not run yet
  std::atomic<bool> posted_{false};  // commands_ is not empty
  std::atomic<bool> wanted_{false};  // a waiter demanded work since the proxy last looked
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> crowded_{false};         // waiters run the rounds: by ranks, by load, or forced
  std::atomic<bool> crowdedByRanks_{false};  // a communicator had more threads than cores (setCrowded)
  Clock::time_point loadedUntil_{};          // crowded by the machine's load until then (proxy thread)
  static constexpr std::chrono::seconds kLoadHold{2};
  int forced_ = -1;  // COLL_NET_PROXY: 0 thread, 1 waiters, -1 auto
  std::atomic<std::thread::id> id_{};
  std::thread thread_;
  int64_t spinUs_ = 0;
  // The token: held by whoever runs a round or the commands (the proxy thread, or a waiter where
  // the host is crowded). What follows is only touched under it.
  std::mutex token_;
  uint64_t round_ = 0;
  std::vector<Connection*> conns_;  // the sending ends first (attach)
  size_t firsts_ = 0;               // how many of conns_ are sending ends
};

// The process's proxy, never destroyed: its thread may still sleep while static destructors run
// at exit. A forked child gets a new one (the parent's thread does not exist there).
Proxy* gProxy = nullptr;
std::once_flag gOnce;

Proxy& get() {
  std::call_once(gOnce, [] {
    gProxy = new Proxy();
    pthread_atfork(nullptr, nullptr, [] { gProxy = new Proxy(); });
  });
  return *gProxy;
}

}  // namespace

Status run(const std::function<Status()>& fn) { return get().run(fn); }
void attach(Connection* c, bool first) { get().attach(c, first); }
void detach(Connection* c) { get().detach(c); }
void demand() { get().demand(); }
bool onProxyThread() { return get().onThread(); }
uint64_t roundNumber() { return get().roundNumber(); }
void setCrowded(bool crowded) { get().setCrowded(crowded); }

}  // namespace coll::transport::proxy
