// The two kinds of threads behind a backend's host launches.
//
// The Watcher completes launches in issue order (a communicator runs its queued work in that
// order, so the oldest launch is always the next to finish): it synchronizes each one's stream,
// runs its copies back, and issues deferred launches when it reaches them (launch.h says which
// are deferred). It also ends a coalesced batch that end_coalescing never closed, at its deadline.
//
// The Completer runs the futures' callbacks. It grows a thread whenever work arrives and every
// thread is busy, because a callback may block: PowerSGD's hook waits, inside a callback, for an
// all-reduce whose future another callback thread has to complete. Idle threads beyond one leave
// after a while.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launch.h"

namespace coll_torch {

class Completer {
 public:
  Completer() = default;
  /// Runs what is posted, then joins its threads.
  ~Completer();
  /// Runs f on a completer thread (a new one when all are busy).
  void post(std::function<void()> f);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> left_;  // threads that have left their loop, to be joined
  int idle_ = 0;
  int live_ = 0;
  bool stop_ = false;
};

class Watcher {
 public:
  Watcher();
  ~Watcher();  // completes what is queued, then joins
  /// Queues launch; deferred: the Watcher issues it when it reaches it.
  void push(std::shared_ptr<Launch> launch, bool deferred);
  /// Whether a new launch must be deferred (launch.h): one queued is deferred or has copies back
  /// to run, or the new one has staging copies (staging) and any launch is still in flight.
  bool mustDefer(bool staging);
  /// Blocks until every launch pushed so far has completed.
  void drain();
  /// At `when`, abandons batch with why unless it was closed by then (one batch at a time).
  void expireAt(std::shared_ptr<Launch> batch, std::chrono::steady_clock::time_point when, std::string why);
  /// Forgets the batch set by expireAt.
  void cancelExpiry();
  /// The completer the launches' futures use.
  const std::shared_ptr<Completer>& completer() const { return completer_; }

 private:
  struct Entry {
    std::shared_ptr<Launch> launch;
    bool deferred;
    bool counted;  // counted in ordered_
  };
  void loop();
  std::shared_ptr<Completer> completer_ = std::make_shared<Completer>();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  int ordered_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::shared_ptr<Launch> expiring_;
  std::chrono::steady_clock::time_point expiry_;
  std::string expiryWhy_;
  std::thread thread_;
};

}  // namespace coll_torch
