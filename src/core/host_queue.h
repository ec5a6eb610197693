// A communicator's queue of non-blocking host work (core/host_stream.h says how streams use it):
// one worker thread, started on first use, runs the queued items in issue order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "core/enqueue.h"
#include "core/host_stream.h"

struct collComm;

namespace coll {

class HostQueue {
 public:
  explicit HostQueue(collComm* comm) : comm_(comm) {}
  ~HostQueue();  // shutdown() must have run

  /// Queues ops (this communicator's part of stream item seq) and returns at once; fails only
  /// when the worker cannot be started, with nothing queued. stream nullptr: a call of a
  /// non-blocking communicator (config.blocking = 0) without a stream, as NCCL's: it runs in the
  /// background, nonBlockingBusy() holds until it has ended, and its failure is the communicator's.
  Status enqueue(std::vector<OpArgs> ops, HostStream* stream, uint64_t seq);
  /// enqueue() for work that is not an operation of the collective pipeline (one-sided puts and
  /// signals): task runs on the worker in issue order with the others; name is the C call's.
  Status enqueueTask(const char* name, std::function<Status()> task, HostStream* stream, uint64_t seq);
  /// Whether calls of a non-blocking communicator are queued or running (collCommGetAsyncError
  /// then says collInProgress). Acquire: once false, what the calls wrote is visible.
  bool nonBlockingBusy() const { return nonBlocking_.load(std::memory_order_acquire) > 0; }
  /// Waits until every queued item has completed (blocking calls and finalize keep issue order).
  void drain();
  /// Whether items are queued or running.
  bool busy();
  /// Cancels what is queued (its streams report `why`) and refuses new items; the running item
  /// goes on, and if it then fails on the abort flag its error says `why` too. Idempotent.
  void cancel(const char* why);
  /// cancel(why), then lets the running item end (the caller has raised the abort flag when it
  /// should end at once) and joins the worker. Idempotent.
  void shutdown(const char* why);

 private:
  struct Item {
    std::vector<OpArgs> ops;
    HostStream* stream;
    uint64_t seq;
    std::function<Status()> task;  // set instead of ops for enqueueTask's items
    const char* taskName = nullptr;
    const char* name() const { return task ? taskName : ops.front().name; }
  };
  Status push(Item item);
  void work();
  void finish(const Item& item, const Status& s);

  collComm* comm_;
  std::mutex mu_;
  std::condition_variable cv_;  // the worker waits for items, drain() for completion
  std::deque<Item> queue_;
  bool running_ = false;  // the worker holds an item it took from queue_
  bool stop_ = false;
  int drainWaiters_ = 0;  // threads in drain()
  // Items queued or running, also read without mu_ (drain's fast path); changed under mu_.
  std::atomic<int> pending_{0};
  std::atomic<int> nonBlocking_{0};  // the stream-less items among them
  const char* stopReason_ = "";
  std::thread worker_;
};

}  // namespace coll
