#include "launch.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

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

// Issues every call of plan on stream, inside a group when there are several.
collResult_t issueCalls(Plan& plan, collStream_t stream) {
  if (plan.calls.size() == 1) return plan.calls[0](stream);
  collResult_t r = collGroupStart();
  if (r != collSuccess) return r;
  collResult_t first = collSuccess;
  for (auto& call : plan.calls) {
    collResult_t c = call(stream);
    if (c != collSuccess && first == collSuccess) first = c;
  }
  // The group must be closed even after a refused call: coll then drops what the group queued.
  collResult_t e = collGroupEnd();
  return first != collSuccess ? first : e;
}

}  // namespace

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

Launch::Launch() = default;

Launch::~Launch() {
  // A launch is destroyed only once complete (the watcher holds it until then); a stream left
  // here would mean a launch that was never issued.
  if (stream_) collHostStreamDestroy(stream_);
}

void Launch::issue(collComm_t comm, Plan plan, const std::string& what) {
  (void)comm;
  what_ = what;
  collStream_t s = nullptr;
  collResult_t r = collHostStreamCreate(&s);
  if (r == collSuccess && !plan.calls.empty()) r = issueCalls(plan, s);
  std::string message = r == collSuccess ? "" : failure(r, what);
  for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
  if (r != collSuccess) {
    if (s) collHostStreamDestroy(s);
    throwError(message);
  }
  std::lock_guard<std::mutex> lk(mu_);
  stream_ = s;
  after_ = std::move(plan.after);
  keep_ = std::move(plan.keep);
  outputs_ = std::move(plan.outputs);
  state_ = State::kIssued;
}

void Launch::runBlocking(collComm_t comm, Plan plan, const std::string& what) {
  what_ = what;
  collResult_t r = plan.calls.empty() ? collSuccess : issueCalls(plan, nullptr);
  std::string message = r == collSuccess ? "" : failure(r, what);
  for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
  if (r != collSuccess) throwError(message);
  {
    std::lock_guard<std::mutex> lk(mu_);
    after_ = std::move(plan.after);
    keep_ = std::move(plan.keep);
    outputs_ = std::move(plan.outputs);
    state_ = State::kSyncing;
  }
  finish(collSuccess, "");
}

void Launch::issueOnStream(std::shared_ptr<CommHandle> handle, Plan plan, const std::string& what, c10::Device device) {
  what_ = what;
  c10::impl::VirtualGuardImpl guard(device.type());
  c10::Stream stream = guard.getStream(device);  // the current stream: torch's ops on it are ordered with ours
  collComm_t comm;
  {
    std::lock_guard<std::mutex> lk(handle->mu);
    comm = handle->comm;
  }
  if (!comm) throwError("coll: " + what + ": the process group was aborted or shut down");
  collResult_t r =
      plan.calls.empty() ? collSuccess : issueCalls(plan, static_cast<collStream_t>(stream.native_handle()));
  std::string message = r == collSuccess ? "" : failure(r, what);
  for (collRedOp_t op : plan.ops) collRedOpDestroy(op, comm);
  if (r != collSuccess) throwError(message);
  // The copies back are torch operations on the same stream: ordered after the calls.
  for (auto& f : plan.after) f();
  c10::Event event(device.type());
  event.record(stream);
  static const auto type = c10::ListType::create(c10::TensorType::get());
  // torch's device-aware future: completed now, it records the current streams, and whoever
  // waits on it (or chains a callback) waits for them.
  auto f = c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{device});
  {
    std::lock_guard<std::mutex> lk(mu_);
    event_.emplace(std::move(event));
    device_ = device;
    comm_ = std::move(handle);
    outputs_ = std::move(plan.outputs);
    future_ = f;
    state_ = State::kDone;
  }
  f->markCompleted(c10::IValue(outputs_));
}

void Launch::blockCurrentStream() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!event_) return;
  c10::impl::VirtualGuardImpl guard(device_.type());
  event_->block(guard.getStream(device_));
}

void Launch::checkAsyncError() {
  if (!comm_ || error_) return;
  std::lock_guard<std::mutex> lk(comm_->mu);
  if (!comm_->comm) return;  // aborted or shut down since: what it said then was its answer
  collResult_t async = collSuccess;
  if (collCommGetAsyncError(comm_->comm, &async) != collSuccess) return;
  if (async != collSuccess && async != collInProgress) {
    const char* text = collGetLastError(comm_->comm);
    error_ = makeError("coll: " + what_ + " failed: " + ((text && *text) ? text : collGetErrorString(async)));
  }
}

void Launch::finish(collResult_t result, const std::string& message) {
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
  // After kDone, so that a callback of the future may wait() on its own work.
  if (f) markFuture(f);
}

void Launch::markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& f) {
  if (error_)
    f->setError(error_);
  else
    f->markCompleted(c10::IValue(outputs_));
}

c10::intrusive_ptr<c10::ivalue::Future> Launch::future() {
  static const auto type = c10::ListType::create(c10::TensorType::get());
  c10::intrusive_ptr<c10::ivalue::Future> f;
  bool done;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (future_) return future_;
    future_ = f = c10::make_intrusive<c10::ivalue::Future>(type);
    done = state_ == State::kDone;
  }
  if (done) markFuture(f);
  return f;
}

void Launch::complete() {
  std::unique_lock<std::mutex> lk(mu_);
  if (state_ == State::kDone) return;
  if (state_ == State::kSyncing || state_ == State::kIdle) {
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
  finish(r, message);
}

bool Launch::completeFor(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (state_ == State::kDone) return true;
    // The watcher is (or will be) synchronizing: wait for it with a deadline rather than
    // synchronizing here, which has none.
    if (cv_.wait_for(lk, timeout, [&] { return state_ == State::kDone; })) return true;
  }
  return false;
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

Watcher::Watcher() : thread_([this] { loop(); }) {}

Watcher::~Watcher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watcher::push(std::shared_ptr<Launch> launch) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(launch));
  }
  cv_.notify_all();
}

void Watcher::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void Watcher::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    auto launch = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    launch->complete();
    launch.reset();
    lk.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace coll_torch
