// The communication ledger: what the client layer's calls move, per rank, by collective kind. The
// layers record every call they make; tests compare the totals with the formulas of the seeds
// (e.g. data parallel: 2 Psi (N-1)/N elements per step).
#pragma once

#include <chrono>

#include <cstddef>
#include <string>

namespace coll::parallel {

enum class CommKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecv };
constexpr int kCommKinds = 5;

/// Name of a kind ("all_reduce", ...).
const char* commKindName(CommKind k);

struct CommLedger {
  /// Elements each rank sends, by kind, under the bandwidth-optimal volume of each collective
  /// over n ranks (what ring algorithms move): all-reduce of `count` elements 2 count (n-1)/n;
  /// all-gather or reduce-scatter of `count` elements in all (n shards) count (n-1)/n; broadcast
  /// count; send count. A one-rank group moves nothing.
  double elements[kCommKinds] = {};
  double bytes[kCommKinds] = {};
  long calls[kCommKinds] = {};

  /// Seconds this rank spent blocked on communication: in blocking calls, and waiting for
  /// non-blocking ones to finish (what overlap did not hide).
  double waitSeconds = 0;
  /// Records one call of `kind` over `count` elements of `elemBytes` each in a group of n ranks.
  void record(CommKind kind, size_t count, size_t elemBytes, int n);
  /// Sum of elements over every kind.
  double totalElements() const;
  /// Sum of bytes over every kind.
  double totalBytes() const;
  /// Forgets everything (for per-step figures).
  void reset() { *this = CommLedger(); }
};

/// Adds the time from its construction to its destruction to ledger->waitSeconds (nothing when
/// ledger is null): put one around a blocking call or a wait.
class WaitTimer {
 public:
  explicit WaitTimer(CommLedger* ledger) : ledger_(ledger), start_(std::chrono::steady_clock::now()) {}
  ~WaitTimer() {
    if (ledger_)
      ledger_->waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;

 private:
  CommLedger* ledger_;
  std::chrono::steady_clock::time_point start_;
};

/// Bytes a layer holds per rank for parameters (the working copy), gradients and optimizer state:
/// now, and the most at any moment (each kind's own peak, and the peak of their sum).
struct MemoryLedger {
  enum Kind { kParams, kGrads, kOptimizer };
  size_t now[3] = {};
  size_t peak[3] = {};
  size_t peakTotal = 0;

  void add(Kind k, size_t bytes);
  void sub(Kind k, size_t bytes);
};

}  // namespace coll::parallel
