// Windows on host memory (collCommWindowRegister): every rank's registered range, reachable by
// the other ranks of its host without going through a FIFO. At registration the ranks exchange
// where their ranges are, and each rank picks, once per peer, the fastest access the host allows:
//  - a pointer: the peer is a thread of this process (its own address), or its range lies in
//    memory from collMemAlloc (a memfd), which this rank maps (pidfd_getfd, then mmap);
//  - CMA: process_vm_readv/writev at the peer's address, for any other memory;
//  - none: the peer is on another host, or the kernel allows neither (the reason is kept for the
//    sentence of a call that needs the access).
// Device memory (every rank's range must then be device memory): a peer's range is a device
// pointer, its own for a thread of this process, or the peer's whole allocation mapped here
// (device::Runtime::share and openShared: CUDA IPC, or a cuMem allocation's file descriptor) at
// registration and unmapped at deregistration.
// The signal areas of one-sided operations (core/signals.h) are ranges of the same kind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

struct collComm;

namespace coll {

/// How this rank reaches one rank's range.
struct PeerRange {
  enum class Access : uint8_t { kNone, kPointer, kCma };
  Access access = Access::kNone;
  char* base = nullptr;     // kPointer: the range's first byte in this process
  uint64_t remote = 0;      // the range's address in its owner's process (kCma)
  size_t size = 0;          // the range's bytes
  int pid = 0;              // its owner's process (0: on another host)
  bool device = false;      // kPointer to device memory (the device path's; no CPU access)
  void* mapping = nullptr;  // a mapping this rank made for it (unmapped with the WindowPeers)
  void* opened = nullptr;   // a peer's device allocation mapped here (closed with the WindowPeers)
  size_t mappingBytes = 0;
  std::string why;  // kNone: why this rank cannot reach it
};

/// Every rank's range of one window, as this rank reaches them; by rank (this rank's own is a
/// pointer to its buffer). Unmaps what it mapped when the last holder lets it go.
struct WindowPeers {
  std::vector<PeerRange> ranks;
  /// Every rank reaches every rank's range by pointer: agreed by all ranks at registration, so
  /// that all of them choose the same path for a collective over the window.
  bool allPointers = false;
  /// Every rank reaches the ranges of the ranks of its own host by pointer (agreed likewise; true
  /// whenever allPointers is): across hosts, the windows path covers each host's ranks and the
  /// hierarchical all-reduce joins the hosts (core/window_path.h).
  bool hostPointers = false;
  /// Every rank's range is device memory (also agreed): only the device path uses the window.
  bool device = false;
  /// The window's place among the communicator's collective registrations (1, 2, ...), the same
  /// on every rank; 0 for ranges that are not windows (the signal areas).
  uint64_t serial = 0;
  WindowPeers() = default;
  WindowPeers(const WindowPeers&) = delete;
  WindowPeers& operator=(const WindowPeers&) = delete;
  ~WindowPeers();
};

/// Collective over comm's bootstrap (every rank calls it, in the same order as its other
/// collective setup calls): exchanges [buff, buff + size) of every rank and sets up access as the
/// header says, then agrees with the others on allPointers. Fails only on a bootstrap failure; a
/// peer that cannot be reached is kNone.
Result<std::shared_ptr<WindowPeers>> exchangeRanges(collComm* comm, void* buff, size_t size);

/// Copies bytes from src into rank r's range at offset (host memory only) (offset + bytes within r's size, checked
/// by the caller). collInvalidUsage naming the rank when it cannot be reached.
Status writeRange(const PeerRange& r, int rank, size_t offset, const void* src, size_t bytes);

}  // namespace coll
