// The CPU executor: runs a schedule (or a group's point-to-point operations) over connections.
//
// Each step moves through the connection FIFOs in pieces of one slot: wait until the receive slot
// is filled and/or a send slot is free, reduce or copy, publish, release. Waits spin briefly, then
// yield, so that more ranks than cores still progress; they call progress() on the connections
// involved (TCP moves bytes there), and end with an error naming the peer when it died (same
// host: its pid is gone), when its connection failed, when the communicator is aborted, or when
// nothing moved for COLL_TIMEOUT_MS.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "coll/coll.h"
#include "transport/transport.h"

namespace coll::kernels {

struct ExecArgs {
  const void* input = nullptr;
  void* output = nullptr;
  collDataType_t type = collFloat32;
  collRedOp_t op = collSum;
  int nranks = 1;
  void* scratch = nullptr;  // for schedules that use Buf::kScratch
  bool direct = true;       // the tuner lets large pieces go by reference (Links::refMinBytes)
};

/// The connections and failure policy of one communicator, for one operation.
struct Links {
  std::vector<transport::Connection*> sendTo;    // by peer rank; nullptr where unused
  std::vector<transport::Connection*> recvFrom;  // by peer rank
  std::vector<transport::Connection*> senders;   // the non-null entries of sendTo
  std::vector<int> localPids;                    // by peer rank: pid on this host to watch, or 0
  std::vector<std::string> hosts;                // by peer rank: its host name, for errors
  int64_t timeoutMs = 300000;
  size_t refMinBytes = 0;  // pieces of at least this size go by reference where accepted; 0: never
  const std::atomic<bool>* abort = nullptr;
};

/// Runs a schedule. Blocking until done or failed. opName names the operation in errors.
Status execute(const algorithms::Schedule& schedule, const ExecArgs& args, const Links& links, const char* opName);

struct P2POp {
  bool isSend = false;
  int peer = -1;
  char* buffer = nullptr;  // const for sends
  size_t bytes = 0;
};

/// Runs point-to-point operations concurrently, piece by piece, so that any pattern of matching
/// sends and receives completes. Operations on the same peer and direction run in order.
Status executeP2P(const std::vector<P2POp>& ops, const Links& links, const char* opName);

}  // namespace coll::kernels
