#include "launch.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <thread>

#include "watcher.h"

namespace coll_torch {

void throwError(const std::string& what) { C10_THROW_ERROR(DistBackendError, what); }

std::exception_ptr makeError(const std::string& what) {
  try {
    throwError(what);
  } catch (...) {
    return std::current_exception();
  }
}

namespace {

// The sentence for a failed coll call: coll's own (it names the call, the rank and the peer).
std::string failure(collResult_t r, const std::string& what) {
  const char* text = collGetLastError(nullptr);
  std::string s = "coll: " + what + " failed: ";
  s += (text && *text) ? text : collGetErrorString(r);
  return s;
}

std::string gone(const std::string& what) { return "coll: " + what + ": the process group was aborted or shut down"; }

const c10::TypePtr& listType() {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

}  // namespace

void Plan::append(Plan&& o) {
  auto move = [](auto& to, auto& from) {
    for (auto& x : from) to.push_back(std::move(x));
  };
  move(before, o.before);
  move(calls, o.calls);
  move(after, o.after);
  move(keep, o.keep);
  move(outputs, o.outputs);
  move(ops, o.ops);
  timeoutMs = std::max(timeoutMs, o.timeoutMs);
  groupTimeoutMs = std::max(groupTimeoutMs, o.groupTimeoutMs);
}

c10::Device deviceOf(const Plan& plan, const std::string& what) {
  c10::Device device(c10::kCPU);
  bool seen = false;
  for (const at::Tensor& t : plan.keep) {
    if (!t.defined()) continue;
    if (seen && t.device() != device)
      throwError("coll: " + what + ": tensors on " + device.str() + " and on " + t.device().str() +
                 " in one operation (all of an operation's tensors must be on one device)");
    device = t.device();
    seen = true;
  }
  return device;
}

Launch::Launch(std::string what, std::shared_ptr<CommHandle> comm, std::shared_ptr<Completer> completer)
    : what_(std::move(what)), comm_(std::move(comm)), completer_(std::move(completer)) {}

Launch::~Launch() {
  // A launch is destroyed only once complete (the watcher holds it until then); a stream left
  // here would mean a launch that was never synchronized.
  if (stream_) collHostStreamDestroy(stream_);
}

collResult_t Launch::issueCalls(Plan& plan, collComm_t comm, collStream_t stream) {
  collResult_t r = collSuccess;
  // coll takes the deadline when a call is made: set for these calls, then the group's again.
  const bool ownDeadline = comm && plan.timeoutMs > 0;
  if (ownDeadline) r = collCommSetTimeout(comm, plan.timeoutMs);
  if (r != collSuccess) {
  } else if (plan.calls.size() == 1) {
    r = plan.calls[0](stream);
  } else if (!plan.calls.empty()) {
    r = collGroupStart();
    if (r == collSuccess) {
      collResult_t first = collSuccess;
      for (auto& call : plan.calls) {
        collResult_t c = call(stream);
        if (c != collSuccess && first == collSuccess) first = c;
        if (c != collSuccess) break;  // the rest would be dropped with the group anyway
      }
      // The group must be closed even after a refused call: collGroupEnd then drops every call
      // the group queued and returns the refusal, so that no peer sees a part of the operation.
      collResult_t e = collGroupEnd();
      r = first != collSuccess ? first : e;
    }
  }
  if (ownDeadline) collCommSetTimeout(comm, plan.groupTimeoutMs);
  if (comm)
    for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
  plan.ops.clear();
  return r;
}

void Launch::keepPlan(Plan& plan) {
  hasAfter_ = !plan.after.empty();
  after_ = std::move(plan.after);
  keep_ = std::move(plan.keep);
  outputs_ = std::move(plan.outputs);
}

void Launch::issue(Plan plan) {
  collComm_t comm = comm_->get();
  std::string message;
  collStream_t s = nullptr;
  if (!comm) {
    message = gone(what_);
  } else {
    try {
      for (auto& f : plan.before) f();
    } catch (const std::exception& e) {
      message = "coll: " + what_ + ": staging a copy of a tensor failed: " + e.what();
    }
  }
  if (message.empty()) {
    collResult_t r = collHostStreamCreate(&s);
    if (r == collSuccess) r = issueCalls(plan, comm, s);
    if (r != collSuccess) message = failure(r, what_);
  }
  if (!message.empty()) {
    if (s) collHostStreamDestroy(s);
    if (comm)
      for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
    fail(message, false);
    throwError(message);
  }
  std::lock_guard<std::mutex> lk(mu_);
  stream_ = s;
  keepPlan(plan);
  state_ = State::kIssued;
}

void Launch::defer(Plan plan) {
  std::lock_guard<std::mutex> lk(mu_);
  hasAfter_ = !plan.after.empty();
  pending_ = std::move(plan);
  state_ = State::kPending;
}

void Launch::issueDeferred() noexcept {
  Plan plan;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != State::kPending) return;
    plan = std::move(pending_);
    pending_ = Plan();
    state_ = State::kIdle;
  }
  try {
    issue(std::move(plan));
  } catch (...) {
    // issue() failed the launch: its waiters and future see the sentence.
  }
}

void Launch::runBlocking(Plan plan) {
  collComm_t comm = comm_->get();
  if (!comm && !plan.calls.empty()) throwError(gone(what_));
  try {
    for (auto& f : plan.before) f();
  } catch (...) {
    for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
    throw;
  }
  collResult_t r = issueCalls(plan, comm, nullptr);
  if (r != collSuccess) throwError(failure(r, what_));
  {
    std::lock_guard<std::mutex> lk(mu_);
    keepPlan(plan);
    state_ = State::kSyncing;
  }
  finish(collSuccess, "", false);
  if (auto e = error()) std::rethrow_exception(e);
}

void Launch::issueOnStream(Plan plan, c10::Device device, c10::Stream stream) {
  c10::impl::VirtualGuardImpl guard(device.type());
  collComm_t comm = comm_->get();
  if (!comm) throwError(gone(what_));
  // torch's copies go to the current stream: make it the launch's stream while they are enqueued.
  const c10::Stream previous = guard.exchangeStream(stream);
  collResult_t r;
  try {
    for (auto& f : plan.before) f();
    r = issueCalls(plan, comm, static_cast<collStream_t>(stream.native_handle()));
    if (r == collSuccess)
      for (auto& f : plan.after) f();  // ordered after the calls on the same stream
  } catch (...) {
    guard.exchangeStream(previous);
    for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
    throw;
  }
  guard.exchangeStream(previous);
  if (r != collSuccess) throwError(failure(r, what_));
  c10::Event event(device.type());
  event.record(stream);
  // torch's device-aware future: completed now, it records the current streams, and whoever
  // waits on it (or chains a callback) waits for them.
  auto f = c10::make_intrusive<c10::ivalue::Future>(listType(), std::vector<c10::Device>{device});
  {
    std::lock_guard<std::mutex> lk(mu_);
    event_.emplace(std::move(event));
    device_ = device;
    keep_ = std::move(plan.keep);
    outputs_ = std::move(plan.outputs);
    future_ = f;
    state_ = State::kDone;
  }
  cv_.notify_all();
  // Marked with the launch's stream current, so that the future waits for it.
  const c10::Stream current = guard.exchangeStream(stream);
  f->markCompleted(c10::IValue(outputs_));
  guard.exchangeStream(current);
}

void Launch::blockCurrentStream() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!event_) return;
  c10::impl::VirtualGuardImpl guard(device_.type());
  event_->block(guard.getStream(device_));
}

void Launch::open() {
  std::lock_guard<std::mutex> lk(mu_);
  state_ = State::kOpen;
}

bool Launch::isOpen() {
  std::lock_guard<std::mutex> lk(mu_);
  return state_ == State::kOpen;
}

bool Launch::abandon(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != State::kOpen) return false;
    state_ = State::kSyncing;
  }
  fail(why, true);
  return true;
}

void Launch::checkAsyncError() {
  if (!event_ || error_) return;
  std::lock_guard<std::mutex> lk(comm_->mu);
  if (!comm_->comm) {
    // Aborted or shut down since: what the launch did is unknown, so it reports the abort (as
    // NCCL's works do after ncclCommAbort) unless its stream has already passed it.
    if (!event_->query()) error_ = makeError(gone(what_));
    return;
  }
  collResult_t async = collSuccess;
  if (collCommGetAsyncError(comm_->comm, &async) != collSuccess) return;
  if (async != collSuccess && async != collInProgress) {
    const char* text = collGetLastError(comm_->comm);
    error_ = makeError("coll: " + what_ + " failed: " + ((text && *text) ? text : collGetErrorString(async)));
  }
}

void Launch::fail(const std::string& message, bool offThread) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    state_ = State::kSyncing;
  }
  finish(collInternalError, message, offThread);
}

void Launch::finish(collResult_t result, const std::string& message, bool offThread) {
  std::exception_ptr err;
  if (result != collSuccess) {
    err = makeError(message);
  } else {
    try {
      for (auto& f : after_) f();
    } catch (const std::exception& e) {
      err = makeError("coll: " + what_ + ": copying the result back failed: " + e.what());
    }
  }
  after_.clear();
  keep_.clear();
  c10::intrusive_ptr<c10::ivalue::Future> f;
  {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = err;
    state_ = State::kDone;
    f = future_;  // null when nobody asked yet: future() then marks it
  }
  cv_.notify_all();
  if (!f) return;
  // After kDone, so that a callback of the future may wait() on its own work. The Watcher hands
  // the callbacks to the completer: one that waits for a later operation of this group would
  // otherwise wait for the very thread that has to complete it.
  if (offThread && completer_) {
    auto self = shared_from_this();
    completer_->post([self, f] { self->markFuture(f); });
  } else {
    markFuture(f);
  }
}

void Launch::markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& f) {
  if (error_)
    f->setError(error_);
  else
    f->markCompleted(c10::IValue(outputs_));
}

c10::intrusive_ptr<c10::ivalue::Future> Launch::future() {
  c10::intrusive_ptr<c10::ivalue::Future> f;
  bool done;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (future_) return future_;
    future_ = f = c10::make_intrusive<c10::ivalue::Future>(listType());
    done = state_ == State::kDone;
  }
  if (done) markFuture(f);
  return f;
}

void Launch::complete(bool offThread) {
  std::unique_lock<std::mutex> lk(mu_);
  if (state_ == State::kDone) return;
  if (state_ != State::kIssued) {
    cv_.wait(lk, [&] { return state_ == State::kDone; });
    return;
  }
  state_ = State::kSyncing;
  collStream_t s = stream_;
  stream_ = nullptr;
  lk.unlock();
  collResult_t r = collStreamSynchronize(s);
  std::string message = r == collSuccess ? "" : failure(r, what_);
  collHostStreamDestroy(s);
  finish(r, message, offThread);
}

bool Launch::completeFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto slice = std::chrono::microseconds(50);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (state_ == State::kDone) return true;
    if (state_ == State::kIssued) {
      // Ask the stream itself: the Watcher may be busy with an earlier launch.
      if (collStreamQuery(stream_) != collInProgress) {
        lk.unlock();
        complete();  // finished: this does not wait
        return true;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    cv_.wait_until(lk, std::min(deadline, now + slice));
    slice = std::min<std::chrono::microseconds>(slice * 2, std::chrono::milliseconds(2));
  }
}

bool Launch::poll() {
  std::unique_lock<std::mutex> lk(mu_);
  if (event_) {
    // Done once the stream has passed it, or once the communicator failed (NCCL's isCompleted).
    checkAsyncError();
    return error_ || event_->query();
  }
  if (state_ == State::kDone) return true;
  if (state_ != State::kIssued) return false;
  collResult_t q = collStreamQuery(stream_);
  if (q == collInProgress) return false;
  lk.unlock();
  complete();  // finished: this does not wait
  return true;
}

bool Launch::succeeded() {
  std::lock_guard<std::mutex> lk(mu_);
  if (event_) {
    checkAsyncError();
    return !error_ && event_->query();
  }
  return state_ == State::kDone && !error_;
}

std::exception_ptr Launch::error() {
  std::lock_guard<std::mutex> lk(mu_);
  if (event_) checkAsyncError();
  return error_;
}

}  // namespace coll_torch
