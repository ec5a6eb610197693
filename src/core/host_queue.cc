#include "core/host_queue.h"

#include <exception>
#include <new>
#include <system_error>

#include "base/log.h"
#include "core/comm.h"

namespace coll {

HostQueue::~HostQueue() { shutdown("the communicator was released"); }

Status HostQueue::enqueue(std::vector<OpArgs> ops, HostStream* stream, uint64_t seq) {
  return push(Item{std::move(ops), stream, seq, nullptr, nullptr});
}

Status HostQueue::enqueueTask(const char* name, std::function<Status()> task, HostStream* stream, uint64_t seq) {
  return push(Item{{}, stream, seq, std::move(task), name});
}

Status HostQueue::push(Item item) {
  HostStream* stream = item.stream;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return Status(collInvalidUsage, "the communicator is being destroyed");
  if (!worker_.joinable()) {
    try {
      worker_ = std::thread([this] { work(); });
    } catch (const std::system_error& e) {
      return COLL_ERROR(collSystemError, FMT_STRING("could not start the communicator's host-stream thread: {}"),
                        e.what());
    }
  }
  queue_.push_back(std::move(item));
  pending_.fetch_add(1, std::memory_order_relaxed);
  if (!stream) nonBlocking_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_all();
  return Status::ok();
}

bool HostQueue::busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || !queue_.empty();
}

void HostQueue::drain() {
  // Every blocking call drains first; without host-stream work that is one load, no lock. An
  // item's completion is published with release (work()), so what it wrote is seen after this.
  if (pending_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (!running_ && queue_.empty()) return;
  ++drainWaiters_;
  cv_.wait(lock, [&] { return !running_ && queue_.empty(); });
  --drainWaiters_;
}

void HostQueue::cancel(const char* why) {
  std::deque<Item> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    stopReason_ = why;
    cancelled.swap(queue_);
    pending_.fetch_sub(static_cast<int>(cancelled.size()), std::memory_order_release);
    cv_.notify_all();
  }
  for (const Item& item : cancelled)
    finish(item, COLL_ERROR(collInvalidUsage, FMT_STRING("{} (rank {} of {}): not run: {} while it was queued"),
                            item.name(), comm_->rank, comm_->nranks, why));
}

void HostQueue::shutdown(const char* why) {
  cancel(why);
  if (worker_.joinable()) worker_.join();
}

void HostQueue::finish(const Item& item, const Status& s) {
  if (!s.isOk()) {
    COLL_LOG(WARN, COLL, "{} [{}]", s.message(), resultName(s.code()));
    {
      std::lock_guard<std::mutex> lock(comm_->errorMutex);
      comm_->lastError = s.message();
    }
    // A non-blocking communicator's call has no stream to report to: its failure is the
    // communicator's, which collCommGetAsyncError returns (runOps has already set it when the
    // operation itself failed; this covers a call cancelled or refused before it ran).
    if (!item.stream) keepFailure(comm_, s);
  }
  if (item.stream)
    item.stream->finishPart(item.seq, s);
  else
    nonBlocking_.fetch_sub(1, std::memory_order_release);  // after the results and any error
}

void HostQueue::work() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    // Stream order: what came before on this stream (maybe on another communicator) first.
    bool ordered = !item.stream || item.stream->waitPredecessors(item.seq, comm_->abortFlag);
    Status s;
    try {
      s = ordered ? checkReady(comm_, /*allowRevoked=*/false, /*queued=*/true)
                  : Status(collRemoteError, "the communicator was aborted");
      if (s.isOk() && comm_->abortFlag.load()) s = Status(collRemoteError, "the communicator was aborted");
      if (s.isOk()) s = item.task ? item.task() : runOps(comm_, item.ops);
    } catch (const std::bad_alloc&) {
      s = Status(collSystemError, "out of host memory");
    } catch (const std::exception& e) {
      s = Status(collInternalError, std::string("unexpected exception: ") + e.what());
    }
    if (!s.isOk()) {
      // An item that a destroy or abort cut short says so, whatever its executor noticed.
      std::string cut;
      if (comm_->abortFlag.load()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) cut = fmt::format(": {} while it ran", stopReason_);
      }
      s = Status(s.code(),
                 fmt::format("{} (rank {} of {}): {}{}", item.name(), comm_->rank, comm_->nranks, s.message(), cut));
    }
    finish(item, s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
      pending_.fetch_sub(1, std::memory_order_release);
      if (drainWaiters_ > 0 && queue_.empty()) cv_.notify_all();
    }
  }
}

}  // namespace coll
