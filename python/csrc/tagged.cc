#include "tagged.h"

#include <algorithm>
#include <thread>

#include "launch.h"

namespace coll_torch {

// ---------------------------------------------------------------------------------------------
// TaggedRequest

TaggedRequest::TaggedRequest(collRequest_t request, collComm_t comm, at::Tensor tensor)
    : request_(request), comm_(comm), tensor_(std::move(tensor)) {}

TaggedRequest::~TaggedRequest() {
  if (request_) collRequestFree(&request_);
}

void TaggedRequest::end(collResult_t rc) {
  done_ = true;
  if (rc != collSuccess) {
    const char* text = collGetLastError(comm_);
    error_ = makeError(std::string("coll: ") + ((text && *text) ? text : collGetErrorString(rc)));
  }
}

bool TaggedRequest::wait(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lk(mu_);
  if (done_) return true;
  if (timeout == ::kNoTimeout) {
    end(collWait(&request_, &status_));
    return true;
  }
  // coll's own deadline ends the request in any case; this one only bounds the caller's wait.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int done = 0;
    collResult_t rc = collTest(&request_, &done, &status_);
    if (done || rc != collSuccess) {
      end(rc);
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool TaggedRequest::poll() {
  std::lock_guard<std::mutex> lk(mu_);
  if (done_) return true;
  int done = 0;
  collResult_t rc = collTest(&request_, &done, &status_);
  if (done || rc != collSuccess) end(rc);
  return done_;
}

std::exception_ptr TaggedRequest::error() {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

int TaggedRequest::source() {
  std::lock_guard<std::mutex> lk(mu_);
  return done_ && !error_ ? status_.source : -1;
}

// ---------------------------------------------------------------------------------------------
// TaggedWork

TaggedWork::TaggedWork(std::vector<std::shared_ptr<TaggedRequest>> requests, int rank, c10d::OpType type,
                       const char* title, std::vector<at::Tensor> tensors, c10::intrusive_ptr<c10d::Work> also)
    : c10d::Work(rank, type, title, std::optional<std::vector<at::Tensor>>(tensors)),
      requests_(std::move(requests)),
      tensors_(std::move(tensors)),
      also_(std::move(also)) {}

bool TaggedWork::isCompleted() {
  if (also_ && !also_->isCompleted()) return false;
  for (auto& r : requests_)
    if (!r->poll()) return false;
  return true;
}

bool TaggedWork::isSuccess() const { return exception() == nullptr; }

std::exception_ptr TaggedWork::exception() const {
  if (also_ && also_->exception()) return also_->exception();
  for (auto& r : requests_)
    if (r->poll())
      if (auto e = r->error()) return e;
  return nullptr;
}

int TaggedWork::sourceRank() const { return requests_.size() == 1 ? requests_[0]->source() : -1; }

bool TaggedWork::wait(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  auto left = [&]() -> std::chrono::milliseconds {
    if (timeout == ::kNoTimeout) return ::kNoTimeout;
    auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    return std::max(std::chrono::milliseconds(1), timeout - spent);  // 0 would mean no limit
  };
  if (also_) also_->wait(left());
  for (auto& r : requests_)
    if (!r->wait(left()))
      throwError("coll: the operation did not complete within " + std::to_string(timeout.count()) +
                 " ms (work.wait(timeout)); it keeps running until it completes or the process group's timeout "
                 "ends it");
  for (auto& r : requests_)
    if (auto e = r->error()) std::rethrow_exception(e);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TaggedWork::getFuture() {
  std::lock_guard<std::mutex> lk(futureMu_);
  if (future_) return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  // A thread that waits for the requests: nothing else would complete the future of a work
  // nobody waits on. It holds the requests and the future, not the work.
  auto requests = requests_;
  auto tensors = tensors_;
  auto also = also_;
  auto f = future_;
  std::thread([requests, tensors, also, f] {
    std::exception_ptr error;
    try {
      if (also) also->wait();
    } catch (...) {
      error = std::current_exception();
    }
    for (auto& r : requests) {
      r->wait(::kNoTimeout);
      if (!error) error = r->error();
    }
    if (!error && also) error = also->exception();
    if (error)
      f->setError(error);
    else
      f->markCompleted(c10::IValue(tensors));
  }).detach();
  return future_;
}

}  // namespace coll_torch
