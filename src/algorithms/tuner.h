// The tuner: an alpha-beta-gamma cost model over the algorithms of catalog.h, and the choice of
// algorithm per (collective, bytes, nranks) under COLL_ALGO's restrictions.
//
// Model (time of one call, in microseconds, on the critical path of one rank):
//   steps x alpha            each step waits for a peer: a hop of a small message, wake-up included
//   + bytes sent / beta      copies through the transport, per rank
//   + bytes reduced / gamma  reduction kernels, per rank
// and, when more ranks than cores share the machine (CPU ranks), every step also pays for the
// peer to be scheduled (switchUs x (ranks / cores - 1)) and the copies and reductions take
// ranks / cores times longer, since the ranks share the cores. Constants are per transport; the defaults for shm were
// measured on the 2-core CI machine (perf/calibrate_tuner.py writes them; the method is in its header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/catalog.h"

namespace coll::algorithms {

struct CostModel {
  double alphaUs = 0.25;        // one step (hop) with both ranks running
  double betaGBs = 9.0;         // copy bandwidth per rank (GB/s = bytes/ns)
  double gammaGBs = 9.0;        // reduction bandwidth per rank
  double switchUs = 1.0;        // handing a core to another rank, when ranks > cores
  double oversubscription = 1;  // ranks on one host / its cores, when above 1
  double contention = 1;        // exponent of oversubscription on the copy and reduce terms
  // How many scheduling turns a step of each algorithm waits for when oversubscribed (catalog
  // order): a ring's steps overlap along the ring, an exchange waits for a partner that has just
  // yielded. Measured (perf/tune_allreduce.py).
  double stepWeight[kNumAlgorithms] = {1, 1, 1, 1, 1, 1, 1, 1};
  // How far each algorithm's implementation is from the beta/gamma bounds (catalog order): copies
  // per byte differ (a ring's out-of-place pieces are read once from the sender's buffer,
  // halving-doubling copies through the slots and keeps a working copy). Measured, as above.
  double bwWeight[kNumAlgorithms] = {1, 1, 1, 1, 1, 1, 1, 1};
  // Several hosts: the ranks are numbered host by host, ranksPerHost on each (0: not uniform, no
  // hierarchical algorithm), and links between hosts have their own constants.
  int hosts = 1;
  int ranksPerHost = 0;
  double netAlphaUs = 20;
  double netBetaGBs = 1.5;
  // Hosts that share one machine's cores (network namespaces, COLL_HOSTID on one machine): then
  // oversubscription is the machine's ranks over its cores, not one host's.
  int hostsPerMachine = 1;
  size_t chunkBytes = 2 << 20;    // ring/tree chunk (half the FIFO)
  size_t pieceBytes = 512 << 10;  // slot size: what a pipeline stage moves
  // The hierarchical algorithm's chunk, when below chunkBytes: its three phases wait on each other
  // once per round, and smaller rounds let the hosts' phases overlap. Measured with 4 network
  // namespace hosts x 2 ranks, 8 to 64 MiB: 512 KiB ran 1.3-1.5x faster than 2 MiB (the FIFO
  // half), 256 KiB 1.1x slower than 512 KiB; the flat ring did not gain from smaller chunks.
  size_t hierChunkBytes = 512 << 10;
  // Operations whose output is larger than this copy every piece instead of sending large ones by
  // reference (Direct): there memory bandwidth, not the number of copies, bounds them, and
  // process_vm_readv adds its page pinning (measured: 64 MiB all-reduce 20% slower by reference).
  size_t directMaxBytes = 16 << 20;
  // The one-copy path over windows (core/window_path.h): every rank reads and writes the others'
  // buffers directly, between two arrivals. Its time is two arrivals of windowAlphaUs (plus
  // switchUs x windowStepWeight each when oversubscribed: an arrival waits for every rank to
  // run), plus the bytes it copies and reduces per rank at beta and gamma, times windowBwWeight
  // of the collective (catalog order; below 1: nothing goes through a FIFO). Fitted by
  // perf/fit_windows.py (tuner.cc says from what).
  double windowAlphaUs = 0.3;
  double windowStepWeight = 1;
  double windowBwWeight[kNumCollectives] = {1, 1, 1, 1, 1, 1};
};

/// The measured constants for ranks on one host over shm (tuner.cc says where they come from).
CostModel shmModel();
/// Constants for TCP between hosts: the transport's caps, not calibrated yet.
CostModel tcpModel();

/// The bit of the windows path in AlgoFilter's masks (after the schedule algorithms'); COLL_ALGO
/// calls it "window". It is not an Algorithm: it runs no schedule, only over buffers that lie in
/// windows (core/window_path.h).
constexpr int kWindowBit = kNumAlgorithms;

/// Which algorithms each collective may use (COLL_ALGO). Default: all, the windows path included.
struct AlgoFilter {
  uint32_t allowed[kNumCollectives] = {~0u, ~0u, ~0u, ~0u, ~0u, ~0u};
  /// COLL_ALGO named the windows path alone for the collective: taken whenever the buffers allow,
  /// the schedule algorithms (all of them unless restricted) for other buffers.
  bool windowForced[kNumCollectives] = {};
  bool permits(Collective c, Algorithm a) const { return (allowed[static_cast<int>(c)] >> static_cast<int>(a)) & 1u; }
  bool permitsWindow(Collective c) const { return (allowed[static_cast<int>(c)] >> kWindowBit) & 1u; }
  bool forcesWindow(Collective c) const { return windowForced[static_cast<int>(c)]; }
};

/// Parses COLL_ALGO in NCCL's syntax: "ring,tree" (only these, every collective), "^ring" (all
/// but these), or per collective "allreduce:tree,ring;broadcast:^tree". Names are
/// case-insensitive. "window" is the windows path: in a list with algorithms it is one more
/// choice, alone it forces the path where the buffers allow (AlgoFilter::windowForced), "^window"
/// turns it off. A list for every collective applies where it can, as NCCL_ALGO does: a
/// collective with none of its algorithms keeps its own, and *notes (when given) says so; NCCL's
/// algorithms that coll lacks (NVLS, CollNet, PAT, ...) are skipped with a note. An unknown name,
/// or a collective named explicitly and left with no algorithm, is an error (*error says which).
bool parseAlgoSpec(const std::string& spec, AlgoFilter* out, std::string* error, std::string* notes = nullptr);

/// The host-memory protocols COLL_PROTO can turn off (Simple, the slots, is always on).
struct ProtoSet {
  bool ll = true;      // pieces of up to 56 bytes inside the flag's cache line
  bool direct = true;  // large pieces read from the sender's buffer
};

/// Parses COLL_PROTO in NCCL's list syntax over LL, Simple and Direct: "LL,Simple" (only these),
/// "^Direct" (all but these); case-insensitive; NCCL's LL128 is taken as LL. Simple, which
/// carries what the others cannot, stays on even when left out ("LL": LL where a piece fits,
/// Simple beyond), and *notes (when given) says so. An unknown name is an error.
bool parseProtoSpec(const std::string& spec, ProtoSet* out, std::string* error, std::string* notes = nullptr);

/// What the tuner decides for one call; every rank computes the same from the same inputs.
struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  size_t chunkBytes = 0;  // ring, tree and hier: bytes per rank and step of a round
  bool ll = false;        // its pieces fit the flag's line (LL): at most kLLBytes per step
  bool direct = false;    // large out-of-place pieces may go by reference (the executor checks
                          // per step that the memory stays unchanged)
};
constexpr size_t kLLBytes = 56;  // data bytes beside the flag in one cache line (transport/fifo.h)

/// The permitted algorithm with the lowest predicted time (as chooseAlgorithm), its chunk, and
/// the protocols COLL_PROTO allows that pay at this size. Returns false when the filter permits
/// no algorithm for c.
bool choosePlan(Collective c, int nranks, size_t bytes, const CostModel& m, const AlgoFilter& f, const ProtoSet& p,
                Plan* out);

/// "LL", "Simple" or "Simple+Direct": the protocols a plan uses.
const char* protocolName(const Plan& p);

/// Predicted time in microseconds of algorithm a for collective c of `bytes` (NCCL's count x type
/// size) on nranks ranks.
double predictUs(Algorithm a, Collective c, int nranks, size_t bytes, const CostModel& m);

/// Predicted time in microseconds of collective c on windows (the one-copy path), as predictUs.
double predictWindowUs(Collective c, int nranks, size_t bytes, const CostModel& m);

/// The permitted algorithm with the lowest predicted time; ties go to the earlier in catalog
/// order. Returns false when the filter permits none for c.
bool chooseAlgorithm(Collective c, int nranks, size_t bytes, const CostModel& m, const AlgoFilter& f, Algorithm* out);

}  // namespace coll::algorithms
