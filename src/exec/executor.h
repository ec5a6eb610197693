// The executor interface: runs one call's work (a collective's schedule, or a group's sends and
// receives) over a communicator's connections.
//
// An executor sees connections through their plain-data views (transport::ConnInfo: the FIFO's
// memory and shape) and keeps its own positions in every FIFO, so a GPU executor can hand the
// same views to a kernel. Network connections need proxy work beside the executor: the
// process's network proxy (transport/proxy.h) moves their slots, and Links carries the
// communicator's Progress, which the CPU executor and a GPU executor's proxy thread poll while
// they wait (it wakes the network proxy and reports its errors). The CPU executor is exec/cpu; a CUDA one goes in
// exec/cuda.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "base/wait_state.h"
#include "coll/coll.h"
#include "transport/progress.h"
#include "transport/transport.h"

namespace coll::exec {

namespace dev {
struct DevWindow;  // exec/cuda/dev_work.h
}  // namespace dev

/// The buffers and arithmetic of one collective call.
struct ExecArgs {
  const void* input = nullptr;
  void* output = nullptr;
  collDataType_t type = collFloat32;
  collRedOp_t op = collSum;
  int nranks = 1;
  void* scratch = nullptr;  // for schedules that use Buf::kScratch
  bool direct = true;       // the tuner lets large pieces go by reference (Links::refMinBytes)
  // A PreMulSum op for the device executor, which scales inputs as it reads them (op is then
  // collSum); host executors get an input core already scaled instead.
  bool premul = false;
  uint64_t scalar = 0;              // one element of type, in the low bytes
  const void* scalarPtr = nullptr;  // device executor: a scalar in device memory, read by the kernel
  // The device executor: the LL protocol instead of Simple (core decides it the same way on every
  // rank, and only where every connection has an LL region).
  bool ll = false;
};

/// One send or receive of a group.
struct P2POp {
  bool isSend = false;
  int peer = -1;
  char* buffer = nullptr;  // const for sends
  size_t bytes = 0;
  bool ll = false;  // device executor: LL protocol (both ends decide it from the same byte count)
  int channel = 0;  // device executor: the channel (connections and CTA) it goes over
  /// The in-band check (core/call_check.h): the operation's print, which a send's first piece
  /// carries and a receive compares its first piece's with; all zero: none. Both ends of a
  /// send/receive pair compute the same one when their calls match (bytes and ordinal).
  unsigned char print[16] = {};
};

/// The connections and failure policy of one communicator, for the executor. Built by core as
/// connections are added (generation changes each time).
struct Links {
  // By channel x nranks + peer rank; nullptr where unused. Host connections are all channel 0;
  // the device executor's channels (algorithms/channels.h) each have connections of their own.
  std::vector<transport::Connection*> sendTo;
  std::vector<transport::Connection*> recvFrom;
  int channels = 1;                         // sendTo and recvFrom hold this many channels of nranks entries
  transport::Progress* progress = nullptr;  // the network connections' proxy work
  std::vector<int> localPids;               // by peer rank: pid on this host to watch, or 0
  std::vector<std::string> hosts;           // by peer rank: its host name, for errors
  int64_t timeoutMs = 300000;
  /// A wait that saw no progress for this many us starts sleeping between polls; -1: it never
  /// sleeps (COLL_SPIN_US).
  int64_t napAfterUs = -1;
  /// Where napAfterUs >= 0: a wait naps at once while the machine has more runnable threads than
  /// cores and this process has other runnable threads (cpuLoad), instead of spinning for
  /// napAfterUs first (COLL_SPIN_US's default).
  bool napWhenBusy = false;
  /// Pauses a wait spins before it starts yielding the core: a few us where this host's ranks
  /// fit its cores (a peer that is a little late is not worth a system call), 64 where they do
  /// not (the peer may need this core to run at all).
  uint64_t spinsBeforeYield = 64;
  size_t refMinBytes = 0;  // pieces of at least this size go by reference where accepted; 0: never
  const std::atomic<bool>* abort = nullptr;
  uint64_t generation = 0;    // changes whenever a connection is added
  WaitState* wait = nullptr;  // whom a long wait is for, told to peers that ask (wait_state.h)
  /// The first failure a peer has announced (its abort notice), or "" (never blocks). The device
  /// executor's proxy ends its launches on one: a launch waiting for a survivor that gave up
  /// would otherwise wait out the timeout.
  std::function<std::string()> peerNotice;
};

/// One call's work: a collective's schedule with its arguments, or a group's sends and receives.
/// A call's in-band fingerprint (core/call_check.h), which the first piece an operation sends to
/// each peer carries (transport/fifo.h) and every receiver compares with its own before it uses a
/// byte of the piece.
struct CallCheck {
  const void* print = nullptr;  // transport::kPrintBytes; nullptr: the operation sends none
  uint64_t id = 0;              // the operation's number (from 1): which pieces are its first
  int rank = -1;                // this rank, for the sentence
  /// The sentence of a mismatch with peer, from its print; set wherever print is.
  std::string (*describe)(const void* mine, const void* theirs, int rank, int peer, const char* opName) = nullptr;
};

struct Work {
  const algorithms::Schedule* schedule = nullptr;  // a collective, or
  const std::vector<P2POp>* p2p = nullptr;         // point-to-point operations run together
  ExecArgs args;                                   // for a collective
  const char* opName = "";                         // names the operation in errors
  // The device executor: the channel this share of a collective runs on (algorithms/channels.h);
  // a launch runs each channel's works in order, channels side by side.
  int channel = 0;
  /// Data-path deadline of this call in ms (collCommSetTimeout, as it was when the call was
  /// made); 0: the communicator's (Links::timeoutMs).
  int64_t timeoutMs = 0;
  /// The device executor: a collective on symmetric windows (core/device_window_path.h), this
  /// channel's share, run instead of a schedule; copied into the launch.
  const dev::DevWindow* window = nullptr;
  /// The call's fingerprint to send and check (COLL_CHECK_CALLS): every executor carries it (the
  /// device ones in their FIFO slots and LL lines, exec/cuda/dev_work.h).
  CallCheck check;
};

/// " on host NAME" when the peer's host is known, for errors that lose a peer.
inline std::string onHost(const Links& links, int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= links.hosts.size() || links.hosts[peer].empty()) return "";
  return " on host " + links.hosts[peer];
}

/// The deadline a wait of w goes by.
inline int64_t timeoutOf(const Work& w, const Links& links) { return w.timeoutMs > 0 ? w.timeoutMs : links.timeoutMs; }

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  /// Runs w over links: returns when the results are in the output buffers and every buffer may
  /// be reused, or with the error that stopped it (naming the peer). Steps of every channel of a
  /// schedule are run; point-to-point operations on one (peer, direction) run in posting order,
  /// and any matching pattern of sends and receives completes.
  virtual Status run(const Work& w, const Links& links) = 0;
};

/// The executor for host memory: one thread, the caller's, for every channel (nranks: the
/// communicator's size, for its per-peer positions).
std::unique_ptr<Executor> newCpuExecutor(int nranks);

/// The device executor's interpreter (exec/cuda/interpreter.h), the code a CUDA kernel runs,
/// compiled for the CPU and run on host memory: each channel on a thread of its own (a CTA on the
/// GPU), the caller meanwhile acting as the GPU build's proxy thread (network progress, peer
/// liveness, abort). Needs untagged FIFOs (transport::Context::untagged); Simple protocol only.
/// What COLL_EXECUTOR=device-host runs, so that the device code is tested end to end on real
/// connections where there is no GPU.
std::unique_ptr<Executor> newDeviceHostExecutor(int nranks);

}  // namespace coll::exec
