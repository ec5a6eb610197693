// The one-copy collectives over windows (exec/window/window.h), from a collective call: whether a
// call takes them, and running it there.
//
// A call takes the path when the buffers the peers reach (all-reduce: both; reduce-scatter: the
// input; all-gather and all-to-all: the output; broadcast: every output (a root whose input lies
// outside the windows copies it into its output first, so every rank decides from its output);
// reduce: every input and the root's output) lie in windows that every rank reaches by pointer
// (threads of one process, or memory from collMemAlloc mapped at registration), COLL_ALGO allows
// it, and the tuner predicts it faster than the schedule it would run otherwise. Every rank
// decides from the same facts (the call, the windows' agreed reachability, the tuner's constants),
// provided that every rank's buffers lie in windows or none's do, as NCCL's symmetric windows
// require; the arrival then checks that the ranks made the same call. Not taken: PreMulSum ops
// (the peers would read unscaled input), an in-place all-to-all, buffers that overlap otherwise
// than in place, and one rank.
// Across hosts (every host holding the same number of ranks, two or more), windows reach only the
// ranks of a host, and all-reduce alone takes the path, composed with the hierarchical
// algorithm: the host's L ranks each sum block l of their inputs through the windows into their
// own output, the ranks with local index l ring-all-reduce that block between the hosts over the
// network, and the host's ranks then copy every finished block into every output (three
// arrivals among the host's ranks). The other collectives keep the schedules across hosts.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "algorithms/catalog.h"
#include "algorithms/schedule.h"
#include "algorithms/tuner.h"
#include "base/status.h"
#include "core/enqueue.h"
#include "core/registration.h"
#include "core/windows.h"
#include "exec/window/window.h"

struct collComm;

namespace coll {

/// Every rank's arrival word (exec/window/window.h), one cache line each, in memory from
/// memAllocHost that the ranks of the host map; made with the communicator's first window
/// (collective, as registration is).
class WindowArrivals {
 public:
  static Result<std::unique_ptr<WindowArrivals>> create(collComm* comm);
  ~WindowArrivals();
  WindowArrivals(const WindowArrivals&) = delete;
  WindowArrivals& operator=(const WindowArrivals&) = delete;

  /// Every rank reaches every rank's word by pointer (agreed): else no call takes the path.
  bool usable() const { return areas_->allPointers; }
  /// Several hosts with the same number (two or more) of ranks each, and every rank reaches its
  /// host's words by pointer (agreed): all-reduce may take the path across hosts.
  bool acrossHosts() const { return !areas_->allPointers && areas_->hostPointers && !cross_.empty(); }
  /// The ranks of this host in rank order, this rank's place among them, and the rank with that
  /// place on every host (the hosts in the order of their first ranks).
  const std::vector<int>& hostRanks() const { return local_; }
  int localIndex() const { return localIndex_; }
  const std::vector<int>& crossRanks() const { return cross_; }
  int hostIndex() const { return hostIndex_; }
  /// all() with nullptr for the ranks of other hosts: the arrivals a call across hosts waits for.
  const std::vector<const exec::window::Arrival*>& hostAll() const { return hostAll_; }
  exec::window::Arrival* own() { return own_; }
  /// By rank, as this rank maps them.
  const std::vector<const exec::window::Arrival*>& all() const { return all_; }

  /// Calls that took the path and completed (collStatWindowCollectives); read from any thread.
  std::atomic<uint64_t> calls{0};
  /// Arrives once more: publishes this rank's next epoch (release: after what it published with
  /// it) and waits until every rank of `waited` (all(), or hostAll() across hosts) has arrived as
  /// often; print as waitArrivals takes it (0: no comparison).
  Status arrive(const std::vector<const exec::window::Arrival*>& waited, int rank, uint64_t print,
                const exec::Links& links, const char* opName, int64_t timeoutMs);
  exec::window::Args args;   // the last call's, kept to reuse its vectors
  exec::window::Args local;  // across hosts: the host's part of the call, by local index

  /// Across hosts: the last call's ring between the hosts, kept while count and type repeat.
  struct CrossRing {
    size_t count = ~size_t(0), elem = 0;
    algorithms::Schedule schedule;
    uint64_t linksGeneration = ~uint64_t(0);
  } crossRing;

  /// The last window lookups (input and output), good while Registrations::generation() holds.
  struct Lookup {
    const void* p = nullptr;
    size_t bytes = 0;
    uint64_t generation = ~uint64_t(0);
    const Registration* window = nullptr;
    size_t offset = 0;
  } lastIn, lastOut;

 private:
  WindowArrivals() = default;
  exec::window::Arrival* own_ = nullptr;
  std::shared_ptr<WindowPeers> areas_;
  std::vector<const exec::window::Arrival*> all_, hostAll_;
  std::vector<int> local_, cross_;
  int localIndex_ = 0, hostIndex_ = 0;
  uint64_t epoch_ = 0;  // this rank's arrivals so far (every rank of a host counts alike)
};

/// Which of a call's buffers the peers reach (and must thus lie in windows), for rank.
struct WindowReach {
  bool in = false, out = false;
};
WindowReach windowReach(algorithms::Collective c, int rank, int root);

/// The call's fingerprint, compared at the first arrival: collective, type, op, root, count (up
/// to 2^24 - 1; larger counts all read 2^24 - 1: their buffers' extents are bounded by the windows
/// anyway, and the check is for calls that differ, which they rarely do only above 16 M elements).
uint64_t windowPrint(algorithms::Collective c, const OpArgs& a);

/// Whether the buffers overlap only in a way every collective on windows handles: not at all, or
/// in place (the same start for all-reduce, broadcast and reduce; NCCL's in-place block for
/// reduce-scatter and all-gather). An in-place all-to-all would overwrite input a peer has yet to
/// read. inBytes, outBytes: the buffers' extents; blockBytes: one rank's block.
bool windowSafeOverlap(algorithms::Collective c, const OpArgs& a, int rank, size_t inBytes, size_t outBytes,
                       size_t blockBytes);

/// Whether a call of collective c of `bytes` (count x type size) goes to the windows path when its
/// buffers allow: the communicator has usable arrival words, COLL_ALGO permits the path, and it
/// forces it or the tuner predicts it faster than plan (what the call runs otherwise). The same
/// on every rank.
bool preferWindows(const collComm* comm, algorithms::Collective c, size_t bytes, const algorithms::Plan& plan);

/// Runs collective call a (validated, host memory; preferWindows said yes) over windows when its
/// buffers take the path (see above) and sets *ran; leaves *ran false and does nothing otherwise.
Status runOnWindows(collComm* comm, const OpArgs& a, algorithms::Collective c, bool* ran);

}  // namespace coll
