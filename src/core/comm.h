// The communicator object behind collComm_t, and the registry of live communicators.
//
// Lifecycle: a comm is registered live when created and unregistered by collCommDestroy or
// collCommAbort, so that a call on a destroyed handle is a clear error rather than a crash (as
// long as the memory has not been reused). Every API call holds a CallGuard while it uses the
// comm; destroy and abort raise abortFlag (which every wait checks) and wait for the guards to
// drop before freeing, so a thread blocked in a call on the comm is woken, not left on freed memory.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/tuner.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "coll/coll.h"
#include "core/call_check.h"
#include "core/connections.h"
#include "core/device_window_path.h"
#include "core/flight_recorder.h"
#include "core/host_queue.h"
#include "core/registration.h"
#include "core/residency.h"
#include "core/signals.h"
#include "core/window_path.h"
#include "exec/cuda/device_executor.h"

namespace coll {

class Mailbox;

/// Options of a communicator after collConfig_t and the environment are resolved.
struct CommOptions {
  bool blocking = true;
  int64_t bootstrapTimeoutMs = 60000;
  int64_t timeoutMs = 300000;           // data transfers without progress (COLL_TIMEOUT_MS or config.timeoutMs)
  int cudaDev = COLL_CONFIG_UNDEF_INT;  // UNDEF: the current device if CUDA is usable, else host-only
  int64_t buffBytes = 0;                // FIFO bytes per connection and direction; 0: COLL_BUFFSIZE (internal use)
  std::string name;
};

/// Reads a user collConfig_t over defaults (or over `inherit`, for split). Validates size and magic.
Result<CommOptions> resolveOptions(const collConfig_t* config, const CommOptions* inherit);

}  // namespace coll

struct collComm {
  static constexpr uint64_t kMagic = 0xc011c0111c0ffee5ull;
  uint64_t magic = kMagic;

  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;  // -1: host-only
  int localRank = -1;
  int localSize = 0;
  int nHosts = 0;
  bool corruptResults = false;  // COLL_FAULT_INJECT=corrupt for this rank, read once at init
  coll::CallChecks checkCalls = coll::CallChecks::kInBand;  // COLL_CHECK_CALLS (core/call_check.h)
  uint64_t collectivesCalled = 0;                           // collectives run, numbering the fingerprints
  // Host sends to and receives from each peer (count > 0), numbering their fingerprints.
  std::vector<uint64_t> sendsTo, recvsFrom;
  coll::algorithms::AlgoFilter algoFilter;  // COLL_ALGO
  coll::algorithms::CostModel costModel;    // the tuner's constants for this comm's transports and host
  coll::algorithms::ProtoSet proto;         // COLL_PROTO
  std::vector<int> ringOrder;               // position -> rank along rings (COLL_RING_ORDER); empty: rank order
  // The last decision per collective: loops call one size over and over, and the model costs
  // about as much as a small all-reduce's data movement. Used by the thread running the comm's ops.
  struct {
    size_t bytes = ~size_t(0);
    coll::algorithms::Plan plan;
  } lastChoice[coll::algorithms::kNumCollectives];
  // The host path's last schedule per collective, reused while the call repeats (same count,
  // element size and root): an 8-byte all-reduce spent a tenth of its time building its schedule
  // (a vector grown step by step) and checking its connections. linksGeneration: the links the
  // schedule's connections were checked against.
  struct {
    size_t count = ~size_t(0);
    size_t elem = 0;
    int root = -2;
    uint64_t linksGeneration = ~uint64_t(0);
    coll::algorithms::Plan plan;
    coll::algorithms::Schedule schedule;
    size_t scratchElems = 0;
    // Whether the windows path may serve the call (coll::preferWindows), asked again when windows
    // come or go (windowGeneration: Registrations::generation() when asked): a call the FIFOs
    // serve better pays one load and a compare for it.
    uint64_t windowGeneration = ~uint64_t(0);
    bool windowPath = false;
  } hostSchedule[coll::algorithms::kNumCollectives];
  coll::CommOptions options;
  std::vector<coll::PreMulSumOp> redOps;  // collRedOpCreatePreMulSum's ops; freed with the comm

  // Whom this rank's operation waits for (peers ask on a timeout) and its last operations (dumped
  // on a failure): before bootstrap, whose inbox thread reads waitState until it is destroyed.
  std::shared_ptr<coll::WaitState> waitState = std::make_shared<coll::WaitState>();
  // Counts this communicator among the process's live ones (a live view shows the count).
  struct LiveCount {
    LiveCount() { coll::liveCommunicators().fetch_add(1, std::memory_order_relaxed); }
    ~LiveCount() { coll::liveCommunicators().fetch_sub(1, std::memory_order_relaxed); }
    LiveCount(const LiveCount&) = delete;
    LiveCount& operator=(const LiveCount&) = delete;
  } liveCount;
  std::unique_ptr<coll::FlightRecorder> flight;
  std::unique_ptr<coll::bootstrap::Bootstrap> bootstrap;
  std::unique_ptr<coll::Connections> conns;
  /// Tagged messages (collCommTaggedInit): the receive engine and its internal communicator.
  std::unique_ptr<coll::Mailbox> mailbox;
  std::unique_ptr<coll::exec::Executor> executor;  // runs the work of host-memory calls
  std::unique_ptr<coll::HostQueue> hostQueue;      // non-blocking work on host streams (worker started on use)
  // The device path (core/device_enqueue.h), made on the first device call: connections whose
  // FIFOs are device memory, and the executor that launches on the caller's stream. Declared in
  // this order so that the executor (which waits for its launches) goes first.
  std::unique_ptr<coll::Connections> deviceConns;
  std::unique_ptr<coll::exec::DeviceExecutor> deviceExecutor;
  // Largest device operation (bytes) that uses LL: COLL_DEVICE_LL_MAX where COLL_PROTO allows LL
  // and every pair of ranks has a device transport with an LL region, else 0. Set with the above.
  size_t deviceLLMax = 0;
  // How device operations split across channels (COLL_DEVICE_NCHANNELS, COLL_DEVICE_CHANNEL_MIN_BYTES).
  // At most the CTA budget (core/residency.h), the same on every rank.
  int deviceMaxChannels = 1;
  coll::CtaBudget deviceCtaBudget;
  size_t deviceChannelMinBytes = 0;
  std::vector<char> scratch;  // reused by schedules that need one (grown, never shrunk)  // after bootstrap: destroyed
                              // first, it uses the peer table
  std::thread initThread;     // non-blocking init only
  std::atomic<bool> abortFlag{false};
  /// collCommShrink calls so far: every survivor counts alike, which keeps their messages apart.
  uint32_t shrinks = 0;
  std::atomic<int> asyncError{collSuccess};  // collInProgress during non-blocking init
  /// The data-path deadline (ms) of the calls made from now on: options.timeoutMs, changed by
  /// collCommSetTimeout; each call takes it when made (OpArgs::timeoutMs).
  std::atomic<int64_t> timeoutMs{300000};
  std::atomic<int> activeCalls{0};
  std::atomic<bool> finalized{false};
  std::atomic<bool> finalizing{false};  // a non-blocking collCommFinalize runs on initThread
  std::atomic<bool> suspended{false};   // collCommSuspend .. collCommResume: no data calls
  std::atomic<bool> revoked{false};     // collCommRevoke: only split, shrink and destroy remain
  coll::Registrations registrations;    // collCommRegister, collCommWindowRegister
  /// One-sided operations' signal areas: made with the first window (collective as it is).
  std::unique_ptr<coll::Signals> signals;
  /// The arrival words of the collectives on windows: made with the first window, as the signals.
  std::unique_ptr<coll::WindowArrivals> windowArrivals;
  /// Their twin in device memory (core/device_window_path.h): made with the first device window.
  std::unique_ptr<coll::DeviceWindowArrivals> deviceWindowArrivals;
  /// Windows registered so far (their serials: WindowPeers::serial).
  uint64_t windowsRegistered = 0;

  mutable std::mutex errorMutex;
  std::string lastError;   // guarded by errorMutex
  std::string firstError;  // guarded by errorMutex: the failure that broke the communicator
};

namespace coll {

/// Runs the rendezvous for comm (rank/nranks/options already set) and fills the rest of it.
Status initComm(collComm* comm, const IdContents& id);

/// Allocates a comm and registers it live. Never fails except on memory exhaustion (which throws,
/// caught at the C boundary).
collComm* newComm(int rank, int nranks, const CommOptions& options);

enum class Release {
  kDestroy,  // calls in flight finish on their own deadlines; a non-blocking init is stopped
  kAbort,    // every wait on the comm ends now
};

/// Unregisters, stops waits as `how` says, waits for in-flight calls and frees. Exactly one caller
/// wins when several release one comm; the others (and a destroyed handle) get collInvalidArgument.
Status releaseComm(collComm* comm, Release how);

/// How comm reaches its peers, counted per transport: "; shm to 3 peers, tcp to 4 peers", and
/// "; device buffers: ..." for a communicator with a CUDA device; "" for one rank. What
/// collCommGetTransports and a live view (coll-top) print after the host count.
std::string transportsText(const collComm* comm);

/// collSuccess when comm is initialized, healthy, not finalized (or finalizing), suspended or revoked;
/// otherwise why not. allowRevoked: a revoked communicator (which its in-flight failures may have
/// broken) is ready for what may follow a revoke (split). queued: the call was accepted before a
/// non-blocking finalize began (its host queue runs it; the finalize waits for it).
Status checkReady(const collComm* comm, bool allowRevoked = false, bool queued = false);

/// Creates the communicator for `rank` of `nranks` on id: blocking (returns when ready or failed)
/// or, with options.blocking false, returning collInProgress at once with *comm set. The C-API
/// result; fn names the API function for error messages. Shared by init, init-from-env and split.
collResult_t initRankWithOptions(const char* fn, collComm_t* comm, int nranks, const IdContents& id, int rank,
                                 const CommOptions& options);

/// The end of a non-blocking init, split or shrink, on comm's init thread: when `before` (what
/// found the id: nothing for an init, the exchange over the parent for a split or shrink) is ok,
/// runs initComm; a failure becomes comm's error (fn names the call). comm's async state is set
/// last.
void finishNonBlockingInit(collComm* comm, const IdContents& id, Status before, const char* fn);

/// Keeps s (a failure) as comm's: its sentence as the first error if none is kept yet and as the
/// last error, its code as the async state unless an earlier failure set one. For failures found off the caller's
/// thread (a non-blocking communicator's call or finalize), which collCommGetAsyncError then reports.
void keepFailure(collComm* comm, const Status& s);

/// Holds a comm in use for the duration of an API call. ok() is false for NULL, never-created or
/// destroyed handles, with an explanatory status.
class CallGuard {
 public:
  explicit CallGuard(collComm* comm);
  ~CallGuard();
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
  const Status& status() const { return status_; }
  bool ok() const { return status_.isOk(); }

 private:
  collComm* comm_;
  Status status_;
};

}  // namespace coll
