// The process's budget of descriptors for connections that have not proved they belong to the
// job yet (no secret seen), across every listener of every communicator: bootstrap roots and
// inboxes, TCP data listeners. A flood of silent connections then holds at most this many
// descriptors, and the rest of RLIMIT_NOFILE stays for what the process needs itself (its data
// sockets, shared-memory segments, files). The budget is a quarter of the soft limit, at least 16.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace coll::net {

// The policy every listener applies beyond its share (bootstrap MessageServer, the socket
// provider's data listener): each may hold this many silent connections outside the budget, so
// that floods on the others cannot starve it; and a new connection replaces the oldest silent one
// once that one had this long to speak (an honest sender's first bytes follow its connection
// within a millisecond or so).
constexpr size_t kListenerFloor = 16;
constexpr auto kReplaceSilentAfter = std::chrono::milliseconds(2);

/// Descriptors the budget allows in all (a quarter of RLIMIT_NOFILE's soft limit, at least 16).
int64_t unauthBudgetLimit();
/// Descriptors held now by unauthenticated connections, process-wide.
int64_t unauthBudgetInUse();

/// One unauthenticated connection's share of the budget: taken by tryTake(), given back when the
/// connection authenticates, is dropped, or the slot is destroyed. Move-only.
class UnauthSlot {
 public:
  UnauthSlot() = default;
  ~UnauthSlot() { release(); }
  UnauthSlot(UnauthSlot&& o) noexcept : held_(std::exchange(o.held_, false)) {}
  UnauthSlot& operator=(UnauthSlot&& o) noexcept {
    if (this != &o) {
      release();
      held_ = std::exchange(o.held_, false);
    }
    return *this;
  }
  UnauthSlot(const UnauthSlot&) = delete;
  UnauthSlot& operator=(const UnauthSlot&) = delete;

  /// Takes one descriptor of the budget; false when it is spent.
  bool tryTake();
  /// Gives it back (no-op when none is held).
  void release();
  bool held() const { return held_; }

 private:
  bool held_ = false;
};

}  // namespace coll::net
