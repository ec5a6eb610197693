// The device executor: runs a communicator's operations on device memory by launching the
// interpreter (interpreter.h) on the caller's stream, NCCL's stream semantics: enqueue() returns
// as soon as the work is on the stream, and the operation completes in stream order.
//
// One launch per call (per run of collectives of one element type and op within a group: there
// is one kernel per pair), one CTA per channel: a collective split across channels (core decides,
// algorithms/channels.h) has a share on each, with connections of its own, and a group's
// collectives run in order on every channel they use; a group's sends and receives get one CTA
// per (peer, direction, channel), so that any matching pattern completes. Everything a
// launch reads (its channels, works and steps) is in pinned host memory from a pool, recycled once
// the launch's event has passed; the FIFO positions (DevPort) are pinned too, written by the
// kernels and read by the next launch. Launches of one communicator never overlap, even on
// different streams: each waits for the event of the one before (they share FIFOs).
//
// A proxy thread (NCCL's proxy) runs while launches are in flight or network data is unsent, and
// every 100 ms while graphs hold captured launches: it keeps the network proxy moving the connections'
// slots (Progress::pollAll), watches the peers' processes, and reaps launches that completed. Failures are found there
// and when launches are reaped (poll(), every enqueue()): the first failed channel's DevResult, a dead peer or a
// network error becomes the status, and the abort word every kernel polls is raised, so kernels waiting for a peer that
// will never come end within a poll slice. abort() raises it too.
//
// On the emulated runtime (device/runtime.h) a launch is a stream item that runs each channel on
// a CPU thread with the interpreter's host build; on CUDA it is the interpreter kernel.
//
// Graph capture: a launch enqueued on a capturing stream runs at each launch of the graph. Its
// pinned block (and any staged copy) then lives as long as the graph (the runtime's
// retainWhileGraphLives), it waits for no earlier launch's event (nothing outside a capture may be
// waited for), and it is not reaped: poll() reads its channels' results instead, so a failed
// replay still breaks the communicator. The kernels read the FIFO positions from the pinned
// ports at run time, so replays and eager launches continue each other's positions, provided they
// run one after another (NCCL's rule too: a graph's launches must not overlap the communicator's
// other work). Capture needs every connection in place (p2p, shm): the proxy thread cannot follow
// a graph's replays to move network slots.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "device/runtime.h"
#include "exec/cuda/dev_work.h"
#include "exec/cuda/host_threads.h"
#include "exec/executor.h"

namespace coll::exec {

/// Which user operations a call's launches carry, handed back when its last launch is reaped
/// (DeviceExecutor::setLaunchDone): the flight recorder's sequence numbers and the bytes the
/// operations move. first 0: nothing to report.
struct LaunchTag {
  uint64_t first = 0;
  size_t n = 0;
  uint64_t bytes = 0;
};

class DeviceExecutor {
 public:
  /// Told when the last launch of a tagged call completed (ok) or failed, on whichever thread
  /// reaps it (the proxy, or a caller of poll/enqueue/drain), with the executor's lock held: it
  /// must be quick and must not call back into the executor. A call nothing was launched for is
  /// told at its enqueue; a captured one (a CUDA graph) when captured, its replays never.
  using LaunchDone = std::function<void(const LaunchTag&, bool ok)>;

  DeviceExecutor(device::Runtime& rt, int nranks, int cudaDev);
  /// Waits for every launch (call abort() first to end them early).
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  /// Set-up, before the first enqueue: the private pool of stream-ordered memory (runtime.h's
  /// newPool), the abort word, and kInitialBlocks pinned descriptor blocks, so that the data path
  /// after warm-up makes no call that can wait for the device (cudaHostAlloc can).
  Status init();
  /// Pinned descriptor blocks made by init(): one per launch in flight or held by a graph; more
  /// are made (a blocking call) only when a communicator has more launches outstanding.
  static constexpr int kInitialBlocks = 8;

  /// Enqueues one launch on stream: the collectives (each a schedule with its arguments, run in
  /// order) or, when collectives is empty, the sends and receives of p2p. Returns once it is on
  /// the stream, or with the first failure of an earlier launch (which breaks the communicator).
  /// timeoutMs: the launch's data-path deadline (Work::timeoutMs; 0: the links').
  /// tag: what to tell setLaunchDone's callback once this call's last launch is done.
  Status enqueue(const std::vector<Work>& collectives, const std::vector<P2POp>* p2p, const Links& links,
                 device::Stream stream, const char* opName, int64_t timeoutMs = 0, LaunchTag tag = {});
  /// Installs the callback of tagged calls (before the first enqueue).
  void setLaunchDone(LaunchDone done) { launchDone_ = std::move(done); }
  /// This rank and the sentence of an in-band call mismatch (CallCheck::describe), for a kernel
  /// that saw a peer's print differ from its own (before the first enqueue).
  void setCallCheck(int rank, decltype(CallCheck::describe) describe) {
    rank_ = rank;
    describe_ = describe;
  }
  /// Device scratch of at least `bytes` for channel's works of the next launch on stream
  /// (schedules with Buf::kScratch): works of one channel run in order and may share it, channels
  /// may not. Grows with stream-ordered memory (no call that waits for the device), except while
  /// graphs hold captured launches.
  Result<void*> scratch(size_t bytes, int channel, device::Stream stream);
  /// A device copy of src (bytes), enqueued on stream, alive until the next launch has completed
  /// (stream-ordered memory, freed on the stream after it; in a capture, as long as the graph).
  Result<void*> stage(const void* src, size_t bytes, device::Stream stream);
  /// Reaps launches that completed; returns the first failure seen (every later call too).
  /// Thread-safe against the other calls (abort() needs no lock at all).
  Status poll();
  /// Raises the abort word: running and later launches end at their next wait.
  void abort();
  /// Waits for every launch, then reports as poll() does.
  Status drain();
  /// collCommSuspend: waits for every launch, frees the scratch and the staged copies, and hands
  /// the pool's reserve back to the device; what a later launch needs is made again. Refused while
  /// CUDA graphs hold launches (they may replay and read the scratch).
  Status releaseMemory();
  /// Device bytes releaseMemory() would free (the channels' scratch).
  size_t scratchBytes();
  /// To be held while the communicator's device links change (Connections::setLinksGuard): the
  /// proxy thread reads them under it.
  std::mutex& linksMutex() { return proxyMu_; }
  /// Launches enqueued so far (tests check that a group is one launch; a graph's replays are not
  /// enqueues).
  uint64_t launches() const { return launches_; }
  /// Captured launches whose graphs still live.
  size_t capturedLaunches();

  /// What the kernels measured (DevTiming) over the launches reaped since the last call, summed
  /// (coll.h's collDeviceTimings_t); the call reaps first and starts a new count. Captured
  /// launches (graph replays) are not in it.
  collDeviceTimings_t takeTimings();

 private:
  struct Block {
    void* p = nullptr;
    size_t bytes = 0;
  };
  // The kernel of a launch: element type and kernel op (launch.h).
  struct KernelKey {
    int type = 0;
    int op = 0;
    int kind = 0;  // dev::KernelKind: the interpreter's, the window or the one-sided kernel
    bool operator==(const KernelKey& o) const { return type == o.type && op == o.op && kind == o.kind; }
  };
  struct Launch {
    KernelKey key;
    Block block;
    device::Event event = nullptr;
    int nchannels = 0;
    dev::DevResult* results = nullptr;
    std::vector<void*> frees;  // device memory freed once the launch has completed
    std::string opName;
    LaunchTag tag;  // on the last launch of a tagged call
  };

  // Graph releases come from a CUDA thread, and may come after the executor is gone: they only
  // queue the captured launch's id here, which the executor drains (reapCaptured).
  struct Released {
    std::mutex mu;
    std::vector<uint64_t> ids;
  };

  Status adoptPorts(const Links& links, const char* opName);
  Status ensurePorts(int channel);  // mu_ held
  void reapCaptured();              // mu_ held
  static KernelKey keyOf(const Work& w);
  // last: the call's final launch, which frees what the call staged.
  Status launchChannels(std::vector<dev::ChannelWorks>& chans, KernelKey key, const Links& links, device::Stream stream,
                        const char* opName, bool last);  // mu_ held
  Status launchOn(const dev::DevChannel* channels, int n, KernelKey key, device::Stream stream, const char* opName);
  void freeStaged(device::Stream stream);                   // mu_ held
  void startProxy(const Links& links);                      // mu_ held
  void reportFailure(const Launch& l, const char* suffix);  // mu_ held
  Status enqueueCaptured(Launch l, const dev::DevChannel* channels, const Links& links, device::Stream stream,
                         const char* opName, bool last);  // mu_ held
  void proxyLoop();
  void failWith(Status s);  // mu_ held
  Result<Block> takeBlock(size_t bytes);
  Status reap();  // mu_ held
  Status enqueueLocked(const std::vector<Work>& collectives, const std::vector<P2POp>* p2p, const Links& links,
                       device::Stream stream, const char* opName, int64_t timeoutMs);  // mu_ held

  std::mutex mu_;  // poll() may come from another thread (a framework's watchdog) than enqueue()
  device::Runtime& rt_;
  int nranks_;
  int cudaDev_;
  int ctaThreads_;               // COLL_DEVICE_THREADS
  device::Pool pool_ = nullptr;  // stream-ordered scratch and staged copies (init())
  // Pinned, by channel: nranks ports each way, allocated when the channel first has connections.
  std::vector<dev::DevPort*> send_, recv_;
  uint32_t* abortWord_ = nullptr;                            // pinned
  std::vector<transport::Connection*> sendConn_, recvConn_;  // as Links: channel x nranks + peer
  std::vector<std::string> hosts_;                           // by peer, for failures' sentences
  uint64_t generation_ = ~uint64_t(0);
  std::vector<Block> freeBlocks_;
  std::vector<device::Event> freeEvents_;
  std::deque<Launch> inFlight_;
  std::vector<void*> pendingFrees_;       // captured staged copies, for the next launch
  std::vector<void*> pendingAsyncFrees_;  // stream-ordered staged copies, freed after the next launch
  struct Scratch {
    void* p = nullptr;
    size_t bytes = 0;
    bool async = false;  // from allocAsync (freed with freeAsync), or from alloc
  };
  std::vector<Scratch> scratch_;  // by channel: the channels of one launch run side by side
  Status failure_;
  uint64_t launches_ = 0;
  collDeviceTimings_t timings_{};  // since the last takeTimings() (reap adds each launch's)
  double cyclesPerNs_ = 1.0;
  void addTimings(const Launch& l);  // mu_ held
  bool waitsFor(int peer) const;     // mu_ held: a channel in flight waits for peer (DevResult)
  template <typename F>
  bool anyRunningChannel(F f) const;       // mu_ held: f(result) of a channel in flight or captured
  void announceWait();                     // mu_ held: whom the launches wait for, to links_->wait
  void tellDone(LaunchTag& tag, bool ok);  // mu_ held: launchDone_, once
  LaunchDone launchDone_;
  int rank_ = -1;
  decltype(CallCheck::describe) describe_ = nullptr;
  LaunchTag pendingTag_;                 // the call being enqueued: moved to its last launch
  bool announced_ = false;               // announceWait told wait_ of a wait (mu_ held)
  WaitState* wait_ = nullptr;            // the links' WaitState (mu_ held), copied by startProxy
  std::map<uint64_t, Launch> captured_;  // by id: launches that live in graphs
  uint64_t nextCaptureId_ = 0;
  std::shared_ptr<Released> released_ = std::make_shared<Released>();
  std::vector<void*> retiredScratch_;  // scratches a captured launch may read: freed at destruction
  const Links* links_ = nullptr;       // the communicator's device links (stable address), for the proxy
  std::mutex proxyMu_;
  std::condition_variable proxyCv_;  // with mu_: a launch was enqueued, or stop
  bool proxyStop_ = false;
  std::thread proxy_;
};

}  // namespace coll::exec
