#include "coll/parallel/ledger.h"

namespace coll::parallel {

const char* commKindName(CommKind k) {
  switch (k) {
    case CommKind::kAllReduce:
      return "all_reduce";
    case CommKind::kAllGather:
      return "all_gather";
    case CommKind::kReduceScatter:
      return "reduce_scatter";
    case CommKind::kBroadcast:
      return "broadcast";
    case CommKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

void CommLedger::record(CommKind kind, size_t count, size_t elemBytes, int n) {
  double c = static_cast<double>(count), share = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  double e = 0;
  switch (kind) {
    case CommKind::kAllReduce:
      e = 2 * c * share;
      break;
    case CommKind::kAllGather:
    case CommKind::kReduceScatter:
      e = c * share;
      break;
    case CommKind::kBroadcast:
    case CommKind::kSendRecv:
      e = n > 1 || kind == CommKind::kSendRecv ? c : 0;
      break;
  }
  int k = static_cast<int>(kind);
  elements[k] += e;
  bytes[k] += e * static_cast<double>(elemBytes);
  calls[k] += 1;
}

double CommLedger::totalElements() const {
  double t = 0;
  for (double e : elements) t += e;
  return t;
}

double CommLedger::totalBytes() const {
  double t = 0;
  for (double b : bytes) t += b;
  return t;
}

void MemoryLedger::add(Kind k, size_t bytes) {
  now[k] += bytes;
  peak[k] = now[k] > peak[k] ? now[k] : peak[k];
  size_t total = now[kParams] + now[kGrads] + now[kOptimizer];
  peakTotal = total > peakTotal ? total : peakTotal;
}

void MemoryLedger::sub(Kind k, size_t bytes) { now[k] -= bytes < now[k] ? bytes : now[k]; }

}  // namespace coll::parallel
