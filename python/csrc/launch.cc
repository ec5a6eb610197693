#include "launch.h"

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
  return state_ == State::kDone && !error_;
}

std::exception_ptr Launch::error() {
  std::lock_guard<std::mutex> lk(mu_);
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
