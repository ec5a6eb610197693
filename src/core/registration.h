// Registered buffers and windows of a communicator (collCommRegister, collCommWindowRegister),
// and the memory collMemAlloc hands out. Registration records the buffer: collectives on it are
// exact because they run as on any buffer; the one-copy path over windows builds on these records.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"

namespace coll {

struct WindowPeers;  // core/windows.h

/// One registered range of a communicator.
struct Registration {
  void* buff = nullptr;
  size_t size = 0;
  bool window = false;  // from collCommWindowRegister (collective), else collCommRegister
  int flags = 0;        // the window's COLL_WIN_* flags
  /// A window's ranges on every rank, as this rank reaches them (set at registration).
  std::shared_ptr<const WindowPeers> peers;
};

/// A communicator's registrations. The handle given to the user is the record's address, so a
/// handle of another communicator, a freed one or garbage is found missing, not dereferenced.
class Registrations {
 public:
  /// Records [buff, buff + size) and returns its handle.
  void* add(void* buff, size_t size, bool window, int flags, std::shared_ptr<const WindowPeers> peers = nullptr);
  /// Removes the record of handle; collInvalidArgument when this communicator has none such
  /// (of the kind `window` says).
  Status remove(void* handle, bool window, const char* what);
  /// The record of handle, copied, or collInvalidArgument as remove().
  Result<Registration> find(void* handle, bool window, const char* what);
  /// Bytes registered, windows included.
  uint64_t bytes() const;

  /// Windows registered now (a relaxed read: a collective asks it before looking any further).
  int windows() const { return windows_.load(std::memory_order_relaxed); }
  /// Changes whenever a window is added or removed: a cached windowHolding answer is good while
  /// it stays the same.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  /// The window holding [p, p + bytes) and the offset of p in it, or nullptr. The record stays
  /// valid until its window is deregistered, which is collective and drains the host queue, so
  /// no collective of the communicator runs then.
  const Registration* windowHolding(const void* p, size_t bytes, size_t* offset) const;
  /// The window registered with `serial` (WindowPeers::serial), or nullptr; valid as above.
  const Registration* windowBySerial(uint64_t serial) const;

 private:
  using Map = std::map<void*, std::unique_ptr<Registration>>;
  /// The record of handle of the kind `window` says, or the refusal naming `what` (mu_ held).
  Result<Map::iterator> locate(void* handle, bool window, const char* what);

  mutable std::mutex mu_;
  Map records_;
  std::vector<const Registration*> windowList_;  // the windows of records_ (mu_)
  std::atomic<int> windows_{0};
  std::atomic<uint64_t> generation_{0};
};

/// collMemAlloc: device memory on the calling thread's current device where a device runtime
/// (CUDA, or the emulated device) has one; otherwise page-aligned host memory from a memfd
/// mapping (MAP_SHARED), which the host's other processes can map through the descriptor.
Status memAlloc(size_t size, void** out);
/// memAlloc's host kind whatever the calling thread's device: for coll's own shareable areas.
Status memAllocHost(size_t size, void** out);
/// collMemFree: memory from memAlloc; anything else is collInvalidArgument.
Status memFree(void* p);

/// Whether [p, p + size) lies in one host allocation of memAlloc; if so, its memfd (owned by the
/// allocation: valid until memFree) and the offset of p in it.
bool hostAllocationOf(const void* p, size_t size, int* fd, size_t* offset);

}  // namespace coll
