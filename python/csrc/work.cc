#include "work.h"

namespace coll_torch {

CollWork::CollWork(std::shared_ptr<Launch> launch, int rank, c10d::OpType type, const char* title,
                   std::vector<at::Tensor> inputs, int sourceRank)
    : c10d::Work(rank, type, title, std::optional<std::vector<at::Tensor>>(std::move(inputs))),
      launch_(std::move(launch)),
      sourceRank_(sourceRank) {}

bool CollWork::isCompleted() { return launch_->poll(); }

bool CollWork::isSuccess() const { return launch_->succeeded(); }

std::exception_ptr CollWork::exception() const { return launch_->error(); }

int CollWork::sourceRank() const { return sourceRank_; }

std::vector<at::Tensor> CollWork::result() { return launch_->outputs(); }

void CollWork::synchronize() { launch_->blockCurrentStream(); }

bool CollWork::wait(std::chrono::milliseconds timeout) {
  if (launch_->isOpen()) {
    // Its batch runs at end_coalescing, which this thread would never reach while waiting here;
    // after an exception inside torch's coalescing manager it never comes at all. Either way the
    // batch is dropped (the group leaves coalescing) rather than waited for.
    const std::string why =
        "coll: this operation was issued between start_coalescing and end_coalescing, and its batch has not "
        "been ended (an exception inside torch's coalescing manager skips end_coalescing); waiting for it would "
        "never return, so the batch was dropped and did not run";
    launch_->abandon(why);
    throwError(why);
  }
  if (launch_->onDevice()) {
    launch_->blockCurrentStream();
  } else if (timeout == kNoTimeout) {
    launch_->complete();
  } else if (!launch_->completeFor(timeout)) {
    throwError("coll: the operation did not complete within " + std::to_string(timeout.count()) +
               " ms (work.wait(timeout)); it keeps running until it completes or the process group's "
               "timeout ends it");
  }
  if (auto e = launch_->error()) std::rethrow_exception(e);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CollWork::getFuture() { return launch_->future(); }

}  // namespace coll_torch
