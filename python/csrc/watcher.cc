#include "watcher.h"

namespace coll_torch {

namespace {
// How long a completer thread beyond the first waits for work before it leaves.
constexpr auto kIdleLinger = std::chrono::seconds(2);
// A bound on the threads: only callbacks that all block at once would reach it.
constexpr int kMaxThreads = 256;
}  // namespace

Completer::~Completer() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) {
    // A backend destroyed from one of its own callbacks: that thread cannot join itself.
    if (t.get_id() == std::this_thread::get_id())
      t.detach();
    else
      t.join();
  }
}

void Completer::post(std::function<void()> f) {
  std::lock_guard<std::mutex> lk(mu_);
  tasks_.push_back(std::move(f));
  if (idle_ > static_cast<int>(tasks_.size()) - 1 || live_ >= kMaxThreads) {
    cv_.notify_one();
    return;
  }
  // Every thread is busy (perhaps blocked in a callback): one more. Threads that left are joined
  // here, so the vector holds the live ones only.
  for (auto id : left_) {
    for (auto it = threads_.begin(); it != threads_.end(); ++it) {
      if (it->get_id() != id) continue;
      it->join();  // it has released mu_ for good
      threads_.erase(it);
      break;
    }
  }
  left_.clear();
  ++live_;
  threads_.emplace_back([this] { loop(); });
}

void Completer::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    ++idle_;
    bool woke = cv_.wait_for(lk, kIdleLinger, [&] { return stop_ || !tasks_.empty(); });
    --idle_;
    if (!woke && live_ > 1) break;  // idle long enough, and another thread stays
    if (tasks_.empty()) {
      if (stop_) break;
      continue;
    }
    auto f = std::move(tasks_.front());
    tasks_.pop_front();
    lk.unlock();
    try {
      f();
    } catch (...) {
      // A callback's exception belongs to its future (torch records it there); nothing to do.
    }
    lk.lock();
  }
  --live_;
  left_.push_back(std::this_thread::get_id());
}

Watcher::Watcher() : thread_([this] { loop(); }) {}

Watcher::~Watcher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  completer_.reset();  // runs the callbacks still posted, then joins
}

void Watcher::push(std::shared_ptr<Launch> launch, bool deferred) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    const bool counted = deferred || launch->hasAfter();
    if (counted) ++ordered_;
    queue_.push_back({std::move(launch), deferred, counted});
  }
  cv_.notify_all();
}

bool Watcher::mustDefer(bool staging) {
  std::lock_guard<std::mutex> lk(mu_);
  return ordered_ > 0 || (staging && (busy_ || !queue_.empty()));
}

void Watcher::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void Watcher::expireAt(std::shared_ptr<Launch> batch, std::chrono::steady_clock::time_point when, std::string why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    expiring_ = std::move(batch);
    expiry_ = when;
    expiryWhy_ = std::move(why);
  }
  cv_.notify_all();
}

void Watcher::cancelExpiry() {
  std::lock_guard<std::mutex> lk(mu_);
  expiring_.reset();
}

void Watcher::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    auto ready = [&] { return stop_ || !queue_.empty(); };
    if (expiring_)
      cv_.wait_until(lk, expiry_, ready);
    else  // expireAt wakes it to wait with the deadline
      cv_.wait(lk, [&] { return ready() || expiring_ != nullptr; });
    if (expiring_ && std::chrono::steady_clock::now() >= expiry_) {
      auto batch = std::move(expiring_);
      std::string why = expiryWhy_;
      lk.unlock();
      batch->abandon(why);
      lk.lock();
      continue;
    }
    if (queue_.empty()) {
      if (stop_) return;
      continue;
    }
    Entry e = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    if (e.deferred) e.launch->issueDeferred();
    e.launch->complete(/*offThread=*/true);
    e.launch.reset();
    lk.lock();
    if (e.counted) --ordered_;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace coll_torch
