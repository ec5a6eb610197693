// A Launch is what one torch operation (or one coalesced batch of them) turns into: a few coll
// calls queued together on a host stream of their own, the tensors they use (kept alive until
// they complete), the copies back into the caller's tensors that run once they have completed,
// and the future torch hands to DDP hooks and FSDP.
//
// Completion: the backend's Watcher thread completes launches in issue order (a communicator runs
// its queued work in that order, so the oldest launch is always the next to finish), which is what
// makes futures complete when nobody calls wait(). A thread calling wait() may get there first;
// whichever arrives first synchronizes the stream, the other waits for it.
//
// CUDA tensors take coll's device path instead (issueOnStream), with NCCL's stream semantics: the
// calls and the copies back are enqueued on the current stream of the tensors' device, the launch
// is complete once they are, and an event marks where that stream passes them. wait() makes the
// then-current stream wait for the event (the CPU does not block); the future is torch's
// stream-aware one, completed at once. A failure inside a launch is the communicator's
// asynchronous error (collCommGetAsyncError), which poll() and error() look for.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"

namespace coll_torch {

/// The coll calls of one torch operation, before they are issued.
struct Plan {
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
};

/// A backend's communicator as its launches see it: cleared (under mu) when the backend aborts,
/// shuts down or is destroyed, so that a work outliving it never touches a freed communicator.
struct CommHandle {
  std::mutex mu;
  collComm_t comm = nullptr;
};

/// The device the tensors of plan are on: the CPU or one CUDA device. Throws, naming the
/// operation, when they are on different devices.
c10::Device deviceOf(const Plan& plan, const std::string& what);

/// Raises c10::DistBackendError with `what` (a sentence; coll's own sentence where there is one).
[[noreturn]] void throwError(const std::string& what);
/// The same error as an exception_ptr, for futures and works.
std::exception_ptr makeError(const std::string& what);

class Launch {
 public:
  Launch();
  ~Launch();

  /// Issues plan's calls on a new host stream, inside one coll group when there are several.
  /// Throws (nothing queued) when coll refuses them. `what` names the operation in errors.
  void issue(collComm_t comm, Plan plan, const std::string& what);
  /// Runs plan's calls blocking in this thread, then completes the launch.
  void runBlocking(collComm_t comm, Plan plan, const std::string& what);
  /// Enqueues plan's calls, then its copies back, on the current stream of device (a CUDA
  /// device), inside one coll group when there are several; the launch is then complete. Throws
  /// (nothing enqueued by coll) when coll refuses them.
  void issueOnStream(std::shared_ptr<CommHandle> comm, Plan plan, const std::string& what, c10::Device device);
  /// issueOnStream's launches: makes the device's current stream wait until its stream has passed
  /// the launch (host launches: nothing).
  void blockCurrentStream();
  /// Whether the launch went to a device stream.
  bool onDevice() const { return event_.has_value(); }

  /// Blocks until the launch has completed (the after-copies included); never throws.
  void complete();
  /// complete() with a deadline; false if it is not done by then.
  bool completeFor(std::chrono::milliseconds timeout);
  /// Non-blocking: completes the launch if its stream has finished; true when complete.
  bool poll();

  bool succeeded();
  std::exception_ptr error();
  const std::vector<at::Tensor>& outputs() const { return outputs_; }
  /// The launch's future, made on first request (a blocking call that nobody asks it of makes none).
  c10::intrusive_ptr<c10::ivalue::Future> future();

 private:
  enum class State { kIdle, kIssued, kSyncing, kDone };
  void finish(collResult_t result, const std::string& message);
  void checkAsyncError();  // device launches: the communicator's asynchronous error, if any
  void markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& f);

  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kIdle;
  collStream_t stream_ = nullptr;
  std::string what_;
  std::vector<std::function<void()>> after_;
  std::vector<at::Tensor> keep_;
  std::vector<at::Tensor> outputs_;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // Device launches: where the stream passes the launch, on which device, for which communicator.
  std::optional<c10::Event> event_;
  c10::Device device_{c10::kCPU};
  std::shared_ptr<CommHandle> comm_;
};

/// The thread that completes a backend's launches in issue order (see the top of this file).
class Watcher {
 public:
  Watcher();
  ~Watcher();  // completes what is queued, then joins
  void push(std::shared_ptr<Launch> launch);
  /// Blocks until every launch pushed so far has completed.
  void drain();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Launch>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace coll_torch
