// A communicator's connections: built on first use for each (peer, direction), kept until destroy.
//
// ensure() is collective between the ranks it connects: a rank that needs to send to p calls it
// at the same point of its sequence of operations as p calls it needing to receive from this
// rank. It builds every new connection of a batch in three phases over the bootstrap: (1) create
// every receiving end and send its descriptor to its sender; (2) for every sending end, receive
// the descriptor, connect, and confirm; (3) for every receiving end, wait for the confirmation
// and complete it. Nothing in phase 1 waits, so no order of batches among ranks can deadlock.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "exec/executor.h"
#include "transport/progress.h"
#include "transport/transport.h"

struct collComm;

namespace coll {

/// The call a connection is made for, told to the peer while connecting (core/call_check.h's
/// in-band print; null: none, as for sends and receives and the device path), so that ranks whose
/// calls differ end at connection setup instead of waiting for each other's descriptors until
/// the bootstrap timeout (two ranks that both think they are a broadcast's root both only connect
/// to send).
struct ConnectFor {
  const void* print = nullptr;  // transport::kPrintBytes
  const char* opName = "";
};

class Connections {
 public:
  /// device: connect through the device transports (FIFOs in device memory, for the device
  /// executor) instead of the host ones; the two sets are kept apart, with bootstrap tags of their own.
  explicit Connections(collComm* comm, bool device = false);
  ~Connections();

  /// Connects to every peer in sendPeers (this rank sends) and from every peer in recvPeers, on
  /// `channel` (each channel has connections of its own: links() by channel x nranks + peer).
  /// call: what the connections are for, compared with the peers' (a mismatch is collInvalidUsage
  /// naming both calls).
  Status ensure(const std::vector<int>& sendPeers, const std::vector<int>& recvPeers, int channel = 0,
                const ConnectFor& call = {});
  /// ensure() for the peers a schedule uses; nothing allocated when all are connected already.
  Status ensureFor(const algorithms::Schedule& schedule, int channel = 0, const ConnectFor& call = {});
  /// Bytes of one connection's FIFO (all connections of a communicator have the same shape).
  size_t fifoBytes() const { return ctx_.slotBytes * static_cast<size_t>(ctx_.nslots); }
  /// Slots per FIFO (every connection's).
  int nslots() const { return ctx_.nslots; }
  /// The most data one piece of a collective carries: a slot less the room its call print takes
  /// (transport/fifo.h's pieceBytes; ll: a device LL slot's data less its print lines, which hold
  /// kPrintBytes, exec/cuda/dev_work.h). Device schedules cut chunks into whole pieces of it.
  size_t pieceBytes(bool ll = false) const {
    size_t slot = ll ? ctx_.llLines * 8 : ctx_.slotBytes;
    return slot > transport::kPrintBytes ? slot - transport::kPrintBytes : 0;
  }
  /// Device memory the connections hold (their Connection::deviceBytes, summed).
  size_t deviceBytes() const;
  /// A mutex held while links() changes, for a thread that reads them meanwhile (the device
  /// executor's proxy). Only the update is guarded, not the (blocking) connection setup.
  void setLinksGuard(std::mutex* m) { linksGuard_ = m; }
  /// The connections and failure policy (kept up to date as connections are added).
  const exec::Links& links() const { return links_; }

 private:
  transport::TransportState& stateFor(const transport::Transport* t);
  Status registerForDevice(transport::Connection& c);
  void rebuildLinks();

  collComm* comm_;
  bool device_;
  transport::Context ctx_;
  std::map<int, std::unique_ptr<transport::Connection>> send_, recv_;  // by channel x nranks + peer
  std::map<const transport::Transport*, std::unique_ptr<transport::TransportState>> states_;
  transport::Progress progress_;   // the network connections' proxy work
  std::vector<void*> registered_;  // device_: host FIFOs registered with the device runtime
  std::mutex* linksGuard_ = nullptr;
  exec::Links links_;
};

/// Reads COLL_BUFFSIZE / COLL_NSLOTS / COLL_NSOCKS / COLL_TIMEOUT_MS; an impossible combination is
/// collInvalidArgument naming the parameter.
Status checkDataPathParams();

}  // namespace coll
