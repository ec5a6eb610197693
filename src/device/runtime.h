// The device runtime: device memory, streams, events and copies, as the device data path needs
// them, behind one interface with two implementations:
//  - cuda: the CUDA runtime (linked statically; only where a driver reports devices);
//  - emulated (COLL_DEVICE_EMULATION=N, testing only): N devices whose memory is host memory and
//    whose streams are CPU threads running their work in order. The device executor launches the
//    interpreter's host build on it (exec/cuda), so that CI runs the device path end to end (stream
//    semantics, groups, abort, connections in device memory) where there is no GPU. Nothing run
//    on it says anything about a GPU.
// The transports and executors above see only this interface; which one a process uses is
// decided once (runtime()).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "base/status.h"

namespace coll::device {

/// A stream (cudaStream_t, or an emulated stream; nullptr: the default stream) and an event.
using Stream = void*;
using Event = void*;
/// An instantiated graph of captured work (cudaGraphExec_t and its cudaGraph_t; the emulation's
/// list of items).
using Graph = void*;
/// A private pool of stream-ordered device memory (cudaMemPool_t; the emulation's device number).
using Pool = void*;

/// What another process on this host needs to reach device memory of this one: a CUDA IPC
/// handle (cudaIpcMemHandle_t, 64 bytes), or the emulation's (its pid and memory descriptor).
struct IpcHandle {
  unsigned char bytes[64];
};

/// What another process of this host needs to map a whole allocation of this one (share()):
/// ipcExport's handle, or, for memory from allocShareable on CUDA (virtual memory management, which
/// CUDA IPC cannot export), the allocation's file descriptor in the exporting process, which the
/// opener borrows (pidfd_getfd).
struct ShareHandle {
  IpcHandle ipc;
  uint64_t bytes = 0;  // the allocation's
  int32_t pid = 0;
  int32_t fd = -1;  // >= 0: a VMM allocation exported as this descriptor of pid
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  /// "cuda" or "emulated".
  virtual const char* name() const = 0;
  /// Whether kernels are CPU threads (the emulation): the executor then launches the
  /// interpreter's host build through hostTask() instead of the CUDA kernel.
  virtual bool emulated() const = 0;
  virtual int deviceCount() = 0;

  /// Device memory of `bytes` on device dev, zeroed, addressable by every rank of this process.
  virtual Status alloc(int dev, size_t bytes, void** out) = 0;
  virtual void free(void* p) = 0;
  /// Device memory for users (collMemAlloc, NCCL's ncclMemAlloc): on CUDA, from virtual memory
  /// management with a handle exportable as a file descriptor, mapped for the device and its peers,
  /// where the device and driver support it; otherwise (and on the emulation) alloc()'s memory,
  /// not necessarily zeroed. Freed with freeShareable.
  virtual Status allocShareable(int dev, size_t bytes, void** out) { return alloc(dev, bytes, out); }
  virtual void freeShareable(void* p) { free(p); }
  /// A pool of stream-ordered memory on device dev that belongs to one caller (a rank's executor).
  /// Ranks that are threads on one GPU must not share the device's default pool: with internal
  /// dependencies allowed (CUDA's default), an allocation on rank q's stream may take a block that
  /// rank r freed on its stream by making q's stream wait for r's kernel, which spins until q's
  /// kernel runs. A private pool has that reuse off and keeps what it holds (no release threshold),
  /// so allocations after warm-up neither wait nor call into the driver's allocator.
  virtual Status newPool(int dev, Pool* out) = 0;
  /// Destroys a pool once everything allocated from it is freed (set-up and teardown only).
  virtual void destroyPool(Pool p) = 0;
  /// Hands what pool holds but nothing uses back to the device (cudaMemPoolTrimTo 0): the pool
  /// keeps freed memory otherwise. Blocking; for collCommSuspend, not the data path.
  virtual void trimPool(Pool p) = 0;
  /// Stream-ordered device memory (cudaMallocFromPoolAsync) of `bytes` from pool, usable by work
  /// enqueued on s after this call; not zeroed. It never waits for other work on the device, so it
  /// is safe while peers' kernels spin (cudaMalloc and cudaFree are not: see blockingCalls). Not
  /// for a capturing stream.
  virtual Status allocAsync(Pool pool, size_t bytes, Stream s, void** out) = 0;
  /// Frees memory from allocAsync once the work enqueued on s so far has completed.
  virtual Status freeAsync(void* p, Stream s) = 0;
  /// How many calls so far could wait for other work on the device: alloc (cudaMalloc), free
  /// (cudaFree), allocHost (cudaHostAlloc), freeHost (cudaFreeHost). On one GPU shared by ranks as threads, such a call
  /// made while a peer's kernel spins for this rank's next launch waits forever (NCCL's known hang); tests check that
  /// none happen on the data path after warm-up.
  virtual uint64_t blockingCalls() const = 0;
  /// Host memory the device reads and writes at the same address (pinned and mapped).
  virtual Status allocHost(size_t bytes, void** out) = 0;
  virtual void freeHost(void* p) = 0;
  /// Makes host memory that is not the runtime's own (a shared-memory segment, a network FIFO)
  /// addressable by the device at the same address, until unregisterHost(p).
  virtual Status registerHost(void* p, size_t bytes) = 0;
  virtual void unregisterHost(void* p) = 0;
  /// Makes kernels on device dev able to load and store device memory of device peer (the p2p
  /// transport's sender writes into its receiver's FIFO). Nothing to do when dev == peer.
  virtual Status enablePeerAccess(int dev, int peer) = 0;
  /// CUDA IPC: a handle for `p`, the start of an allocation of `bytes` from alloc(), that a process
  /// of this host opens with ipcOpen.
  virtual Status ipcExport(void* p, size_t bytes, IpcHandle* out) = 0;
  /// Opens another process's handle on device dev: *out then addresses that memory here, until
  /// ipcClose(*out). The memory stays valid while the exporting process lives.
  virtual Status ipcOpen(const IpcHandle& h, size_t bytes, int dev, void** out) = 0;
  virtual void ipcClose(void* p) = 0;
  /// Windows over device memory (collCommWindowRegister): the allocation of this process's device
  /// memory (alloc, allocShareable) holding [p, p + bytes), its start and size; false when none
  /// does.
  virtual bool allocationOf(const void* p, size_t bytes, void** base, size_t* size) = 0;
  /// A handle for the allocation at base (allocationOf's), valid until unshare(*out): a process
  /// of this host maps the whole allocation with openShared.
  virtual Status share(void* base, size_t bytes, ShareHandle* out) {
    out->bytes = bytes;
    return ipcExport(base, bytes, &out->ipc);
  }
  virtual void unshare(const ShareHandle&) {}
  /// Maps the allocation of h for device dev: *out addresses its start here until closeShared.
  virtual Status openShared(const ShareHandle& h, int dev, void** out) { return ipcOpen(h.ipc, h.bytes, dev, out); }
  virtual void closeShared(void* p) { ipcClose(p); }

  /// The calling thread's current device (cudaGetDevice; -1 where it cannot tell), and making dev
  /// current (cudaSetDevice). A kernel launch and an event record go to the current device, and
  /// CUDA refuses them on a stream or event of another one (the emulation too): the executor makes
  /// its communicator's device current around them (DeviceGuard), so that one thread may drive
  /// ranks on several GPUs (collCommInitAll over a device list, coll-perf -g).
  virtual int currentDevice() = 0;
  virtual Status setDevice(int dev) = 0;
  /// Multiprocessors (SMs) of device dev (COLL_DEVICE_EMULATION_SMS on the emulation).
  virtual int multiprocessors(int dev) = 0;
  /// SM clock cycles per nanosecond of device dev (its maximum clock; the emulation's "cycles" are
  /// nanoseconds: 1), to turn the kernels' cycle counts (DevTiming) into time.
  virtual double cyclesPerNs(int dev) = 0;
  /// Whether p points into device memory (not pinned host memory), and on which device.
  virtual bool isDeviceMemory(const void* p, int* dev) = 0;
  /// Whether s can take work: NULL (the default stream), or a live stream of this runtime.
  virtual bool isStream(Stream s) = 0;

  /// Enqueues a copy of `bytes` (any memory to any memory) on s; returns at once.
  virtual Status copyAsync(void* dst, const void* src, size_t bytes, Stream s) = 0;
  /// Emulated only: enqueues fn on s (it runs after the work before it, before the work after).
  virtual Status hostTask(Stream s, std::function<void()> fn) = 0;

  virtual Status newEvent(Event* out) = 0;
  virtual void destroyEvent(Event e) = 0;
  /// Marks e done once the work enqueued on s so far has completed.
  virtual Status record(Event e, Stream s) = 0;
  /// Work enqueued on s from now on waits for e.
  virtual Status waitEvent(Stream s, Event e) = 0;
  /// Whether the work e was recorded after has completed (true for an event never recorded).
  virtual bool done(Event e) = 0;
  /// Waits for the work e was recorded after.
  virtual Status waitFor(Event e) = 0;

  /// Graph capture (NCCL's contract: work enqueued on a capturing stream runs each time the
  /// graph is launched, not now). Whether s is capturing (cudaStreamIsCapturing).
  virtual bool capturing(Stream s) = 0;
  /// While s captures: release runs once the graph being captured is destroyed (a CUDA user
  /// object), so that what its work reads can live exactly as long. release must not call the
  /// runtime (CUDA forbids it there): it only hands things back.
  virtual Status retainWhileGraphLives(Stream s, std::function<void()> release) = 0;
  /// Tests and tools: capture what s gets into a graph, instantiate it, launch it, destroy it.
  virtual Status beginCapture(Stream s) = 0;
  virtual Status endCapture(Stream s, Graph* out) = 0;
  virtual Status launchGraph(Graph g, Stream s) = 0;
  virtual void destroyGraph(Graph g) = 0;

  /// Streams (tests and tools; users bring their own CUDA streams).
  virtual Status newStream(Stream* out) = 0;
  virtual Status destroyStream(Stream s) = 0;
  /// Waits for every item enqueued on s.
  virtual Status synchronize(Stream s) = 0;
};

/// Makes dev the current device for a scope, and the caller's current again when it ends (only
/// where they differ: no call at all when dev is current already).
class DeviceGuard {
 public:
  DeviceGuard(Runtime& rt, int dev) : rt_(rt), was_(rt.currentDevice()) {
    if (dev >= 0 && was_ != dev) {
      status_ = rt.setDevice(dev);
      set_ = status_.isOk();
    }
  }
  ~DeviceGuard() {
    if (set_ && was_ >= 0) (void)rt_.setDevice(was_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  /// Whether dev could be made current.
  const Status& status() const { return status_; }

 private:
  Runtime& rt_;
  int was_;
  bool set_ = false;
  Status status_;
};

/// The runtime this process uses: the emulation when COLL_DEVICE_EMULATION is set, else CUDA when
/// this build has it and a driver reports devices, else nullptr (no device path). Decided once.
Runtime* runtime();

/// The CUDA runtime, or nullptr in builds without CUDA or where no device is usable (why says
/// which).
Runtime* cudaRuntime(std::string* why);

/// The emulated runtime with `devices` devices (made on first call; later calls return it).
Runtime& emulatedRuntime(int devices);

}  // namespace coll::device
