// Status and Result: how errors travel inside coll.
//
// Every internal function that can fail returns a [[nodiscard]] Status (or Result<T>). The code is
// the collResult_t that eventually reaches the C boundary; the message is the sentence the user
// reads from collGetLastError, so it is written where the error is first decided, naming the
// peer and the cause. COLL_TRY adds a "file:line" breadcrumb on the way up, which TRACE logging
// prints, so that the path of an error is visible without logging at every level.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "coll/coll.h"

namespace coll {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(collResult_t code, std::string message)
      : code_(code), detail_(code != collSuccess || !message.empty() ? new Detail{std::move(message), {}} : nullptr) {}
  Status(const Status& o) : code_(o.code_), detail_(o.detail_ ? new Detail(*o.detail_) : nullptr) {}
  Status& operator=(const Status& o) {
    if (this != &o) {
      code_ = o.code_;
      detail_.reset(o.detail_ ? new Detail(*o.detail_) : nullptr);
    }
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == collSuccess; }
  collResult_t code() const { return code_; }
  const std::string& message() const { return detail_ ? detail_->message : empty(); }
  const std::string& breadcrumbs() const { return detail_ ? detail_->breadcrumbs : empty(); }

  /// Records that the error passed through `where` (used by COLL_TRY).
  Status& addBreadcrumb(const char* file, int line);
  /// Prefixes the message with context, e.g. "rank 3: " or "collCommSplit: ".
  Status& prefix(const std::string& context);

 private:
  // The sentence and trail live behind a pointer: a success is then a code and a null pointer,
  // made, moved and dropped in a few instructions. Every internal call returns a Status, and with
  // two strings inline each success cost the construction and destruction of both (a small
  // all-reduce passes dozens).
  struct Detail {
    std::string message;
    std::string breadcrumbs;
  };
  static const std::string& empty();
  Detail& detail() {
    if (!detail_) detail_.reset(new Detail{});
    return *detail_;
  }
  collResult_t code_ = collSuccess;
  std::unique_ptr<Detail> detail_;
};

/// "collInvalidArgument" for collInvalidArgument, etc.: the enum's name, for log lines.
const char* resultName(collResult_t code);

/// Builds an error Status with an fmt-formatted message (checked at compile time via FMT_STRING).
#define COLL_ERROR(code, ...) ::coll::Status((code), fmt::format(__VA_ARGS__))

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design, like std::expected
  Result(Status status) : status_(std::move(status)) {}  // NOLINT

  bool isOk() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  Status takeStatus() { return std::move(status_); }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace coll

#define COLL_CONCAT_INNER(a, b) a##b
#define COLL_CONCAT(a, b) COLL_CONCAT_INNER(a, b)

/// Evaluates a Status expression; on error returns it from the enclosing function with a breadcrumb.
#define COLL_TRY(expr)                                    \
  do {                                                    \
    ::coll::Status coll_try_status_ = (expr);             \
    if (!coll_try_status_.isOk()) {                       \
      coll_try_status_.addBreadcrumb(__FILE__, __LINE__); \
      return coll_try_status_;                            \
    }                                                     \
  } while (0)

/// Evaluates a Result<T> expression; on success moves the value into `lhs`, else returns the error.
#define COLL_ASSIGN_OR_RETURN(lhs, expr) COLL_ASSIGN_OR_RETURN_IMPL(COLL_CONCAT(coll_result_, __LINE__), lhs, expr)
#define COLL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.isOk()) {                               \
    ::coll::Status s_ = tmp.takeStatus();          \
    s_.addBreadcrumb(__FILE__, __LINE__);          \
    return s_;                                     \
  }                                                \
  lhs = std::move(tmp.value())
