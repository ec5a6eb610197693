// A Launch is what one torch operation (or one coalesced batch of them) turns into: a few coll
// calls queued together on a host stream of their own, the tensors they use (kept alive until
// they complete), the staging copies that run right before the calls and the copies back into the
// caller's tensors that run once they have completed, and the future torch hands to DDP hooks and
// FSDP.
//
// Order: every copy runs in queue order. A launch's staging copies read tensors that earlier,
// still running operations may write, and its copies back write tensors that later operations may
// read. So a plan with staging copies is issued at once only when nothing is in flight, and while
// a launch with copies back (or a deferred one) is in flight every new launch is deferred: the
// Watcher issues it when it reaches it, after everything before it has completed (watcher.h).
//
// Completion: the Watcher completes launches in issue order; the futures' callbacks then run on a
// pool of their own threads, never on the Watcher, so that a callback may issue an operation of
// the same group and wait for it (DDP's PowerSGD hook does). A thread calling wait() may get
// there first; whichever arrives first synchronizes the stream, the other waits for it.
//
// CUDA tensors take coll's device path instead (issueOnStream), with NCCL's stream semantics: the
// copies, the calls and the copies back are enqueued on one CUDA stream, the launch is complete
// once they are, and an event marks where that stream passes them. wait() makes the then-current
// stream wait for the event (the CPU does not block); the future is torch's stream-aware one,
// completed at once. A failure inside a launch is the communicator's asynchronous error
// (collCommGetAsyncError), which poll() and error() look for.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coll/coll.h"

namespace coll_torch {

class Completer;

/// The coll calls of one torch operation, before they are issued.
struct Plan {
  /// Staging copies (a non-contiguous input made contiguous, a rank's own block of an
  /// all-to-all): run in queue order, right before the calls are issued.
  std::vector<std::function<void()>> before;
  /// Each issues one coll call on the given stream (NULL: blocking) and returns its result.
  std::vector<std::function<collResult_t(collStream_t)>> calls;
  /// Run in order once every call has completed without failure (copies into the user's tensors).
  std::vector<std::function<void()>> after;
  /// Tensors the calls read or write: alive until the calls complete.
  std::vector<at::Tensor> keep;
  /// The value of the future (torch's convention: the operation's output tensors).
  std::vector<at::Tensor> outputs;
  /// Reduction operators created for this plan (PreMulSum), destroyed once the calls are issued.
  std::vector<collRedOp_t> ops;
  /// The data-path deadline of these calls (ms): an operation's own timeout (opts.timeout), set
  /// on the communicator (collCommSetTimeout) for them alone; 0: the group's.
  int timeoutMs = 0;
  /// The group's deadline, set back after the calls are issued when timeoutMs was used.
  int groupTimeoutMs = 0;

  /// Appends other's parts to this plan (a coalesced batch: the longest deadline of its parts).
  void append(Plan&& other);
};

/// A communicator as launches see it: cleared (under mu) when the backend aborts, shuts down or
/// is destroyed, so that a work outliving it never touches a freed communicator.
struct CommHandle {
  std::mutex mu;
  collComm_t comm = nullptr;
  /// The communicator, or null once it is gone.
  collComm_t get() {
    std::lock_guard<std::mutex> lk(mu);
    return comm;
  }
};

/// The device the tensors of plan are on: the CPU or one CUDA device. Throws, naming the
/// operation, when they are on different devices.
c10::Device deviceOf(const Plan& plan, const std::string& what);

/// Raises c10::DistBackendError with `what` (a sentence; coll's own sentence where there is one).
[[noreturn]] void throwError(const std::string& what);
/// The same error as an exception_ptr, for futures and works.
std::exception_ptr makeError(const std::string& what);

class Launch : public std::enable_shared_from_this<Launch> {
 public:
  /// `what` names the operation in errors; comm is the communicator its calls use; completer runs
  /// the future's callbacks when the Watcher completes the launch.
  Launch(std::string what, std::shared_ptr<CommHandle> comm, std::shared_ptr<Completer> completer);
  ~Launch();

  /// Runs plan's staging copies, then issues its calls on a new host stream, inside one coll
  /// group when there are several. Throws (nothing queued, the launch failed) when coll refuses.
  void issue(Plan plan);
  /// Keeps plan to be issued later by issueDeferred (the Watcher, in queue order).
  void defer(Plan plan);
  /// issue() for a deferred launch; a refusal fails the launch instead of throwing.
  void issueDeferred() noexcept;
  /// Runs plan blocking in this thread (staging copies, calls, copies back); the launch is then
  /// complete. Throws when coll refuses or fails.
  void runBlocking(Plan plan);
  /// Enqueues plan on stream (a CUDA stream of device): the staging copies, the calls (inside one
  /// coll group when there are several), then the copies back; the launch is then complete.
  /// Throws (nothing enqueued by coll) when coll refuses them.
  void issueOnStream(Plan plan, c10::Device device, c10::Stream stream);
  /// issueOnStream's launches: makes the device's current stream wait until its stream has passed
  /// the launch (host launches: nothing).
  void blockCurrentStream();
  /// Whether the launch went to a device stream.
  bool onDevice() const { return event_.has_value(); }

  /// A coalesced batch between start_coalescing and end_coalescing: open until issued or deferred.
  void open();
  bool isOpen();
  /// Fails an open batch with why (end_coalescing never came); false if it was not open.
  bool abandon(const std::string& why);

  /// Blocks until the launch has completed (the copies back included); never throws. With
  /// offThread (the Watcher), the future's callbacks run on the completer's threads.
  void complete(bool offThread = false);
  /// complete() with a deadline, polling the stream itself (it does not rely on the Watcher);
  /// false if it is not done by then.
  bool completeFor(std::chrono::milliseconds timeout);
  /// Non-blocking: completes the launch if its stream has finished; true when complete.
  bool poll();

  bool succeeded();
  std::exception_ptr error();
  /// Whether the launch has copies back that have not run yet (later launches must wait for them).
  bool hasAfter() const { return hasAfter_; }
  const std::vector<at::Tensor>& outputs() const { return outputs_; }
  /// The launch's future, made on first request (a blocking call that nobody asks it of makes none).
  c10::intrusive_ptr<c10::ivalue::Future> future();

 private:
  enum class State { kOpen, kIdle, kPending, kIssued, kSyncing, kDone };
  collResult_t issueCalls(Plan& plan, collComm_t comm, collStream_t stream);
  void keepPlan(Plan& plan);  // mu_ held
  void finish(collResult_t result, const std::string& message, bool offThread);
  void fail(const std::string& message, bool offThread);
  void checkAsyncError();  // device launches: the communicator's asynchronous error, if any
  void markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& f);

  const std::string what_;
  std::shared_ptr<CommHandle> comm_;
  std::shared_ptr<Completer> completer_;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kIdle;
  collStream_t stream_ = nullptr;
  Plan pending_;  // a deferred launch's plan
  bool hasAfter_ = false;
  std::vector<std::function<void()>> after_;
  std::vector<at::Tensor> keep_;
  std::vector<at::Tensor> outputs_;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // Device launches: where the stream passes the launch, on which device.
  std::optional<c10::Event> event_;
  c10::Device device_{c10::kCPU};
};

}  // namespace coll_torch
