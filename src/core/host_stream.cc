#include "core/host_stream.h"

#include <set>

namespace coll {
namespace {
std::mutex gStreamsMutex;
std::set<HostStream*> gStreams;  // live host streams: a handle is looked up, never trusted
}  // namespace

HostStream* HostStream::create() {
  auto* s = new HostStream();
  std::lock_guard<std::mutex> lock(gStreamsMutex);
  gStreams.insert(s);
  return s;
}

HostStream* HostStream::find(collStream_t handle) {
  if (!handle) return nullptr;
  auto* s = reinterpret_cast<HostStream*>(handle);
  std::lock_guard<std::mutex> lock(gStreamsMutex);
  return gStreams.count(s) ? s : nullptr;
}

Status HostStream::destroy(HostStream* s) {
  {
    std::lock_guard<std::mutex> lock(gStreamsMutex);
    if (!gStreams.erase(s)) return Status(collInvalidArgument, "the stream is not a live coll host stream");
  }
  Status unreported = s->synchronize();  // items hold the pointer until they complete
  s->magic_ = 0;
  delete s;
  return unreported;
}

uint64_t HostStream::issue(int parts) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t seq = ++issued_;
  pending_[seq] = parts;
  return seq;
}

bool HostStream::waitPredecessors(uint64_t seq, const std::atomic<bool>& abort) {
  std::unique_lock<std::mutex> lock(mu_);
  while (completed_ + 1 < seq) {
    if (abort.load()) return false;
    ++orderWaiters_;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
    --orderWaiters_;
  }
  return true;
}

void HostStream::finishPart(uint64_t seq, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.isOk() && failure_.isOk()) failure_ = status;
  if (--pending_[seq] > 0) return;
  // Items complete in order: a cancelled item may finish before an earlier one that still runs.
  while (!pending_.empty() && pending_.begin()->first == completed_ + 1 && pending_.begin()->second == 0) {
    pending_.erase(pending_.begin());
    ++completed_;
  }
  // Wake only who can go on: a waiter per item would cost two context switches per operation
  // on busy cores (measured: 64 KiB all-reduces on a stream ran at half speed).
  if (orderWaiters_ > 0 || (syncWaiters_ > 0 && completed_ == issued_)) cv_.notify_all();
}

Status HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  ++syncWaiters_;
  cv_.wait(lock, [&] { return completed_ == issued_; });
  --syncWaiters_;
  Status s = std::move(failure_);
  failure_ = Status::ok();
  return s;
}

Status HostStream::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.isOk()) return failure_;
  if (completed_ < issued_) return Status(collInProgress, "operations are still queued or running on the stream");
  return Status::ok();
}

}  // namespace coll
