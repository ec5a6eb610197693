// The transport interface and registry.
//
// A transport moves slots between two ranks. It answers canConnect(me, peer) and reports caps
// (latency, bandwidth, limits); the registry lists transports in priority order and picks the
// first that can connect a pair (shm on one host, tcp otherwise). A connection is directional: the receiver creates its
// end first and produces a descriptor, the sender connects to that descriptor, and the receiver then completes its end.
// The caller (src/core/connections.cc) carries descriptors over the bootstrap, in an order that
// cannot deadlock: every receiving end of a batch is created and published before any sender
// waits for a descriptor.
//
// Threading: a connection is used by the one thread that runs the communicator's operations.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "bootstrap/bootstrap_wire.h"
#include "transport/fifo.h"

namespace coll::transport {

struct Caps {
  double latencyUs = 0;     // one small message, one way
  double bandwidthGBs = 0;  // one connection, large messages
  size_t maxSlotBytes = 0;  // largest slot the transport accepts
};

/// What a transport needs to know about the communicator building a connection.
struct Context {
  int rank = -1;
  const std::vector<bootstrap::RankInfo>* peers = nullptr;
  uint64_t secret = 0;  // proves data connections belong to this communicator
  int nslots = 8;
  size_t slotBytes = 512 << 10;
  int nsocks = 1;
  net::Address bindAddress;  // this rank's interface (port 0)
  int64_t timeoutMs = 60000;
  const std::atomic<bool>* abort = nullptr;
};

/// One direction between two ranks.
class Connection {
 public:
  virtual ~Connection() = default;
  /// The FIFO the executor fills (send end) or drains (recv end).
  Fifo& fifo() { return fifo_; }
  /// Moves data for transports with a network in between; shm has nothing to do. Never blocks.
  /// An error names the peer (closed connection, garbage).
  virtual Status progress() { return Status::ok(); }
  /// True while published slots still wait for progress() to hand them to the network. The
  /// executor flushes before an operation returns, since nothing calls progress() in between.
  virtual bool hasUnsentData() const { return false; }
  /// True when the peer closed the connection cleanly between slots (it finished and left). Only
  /// an error for whoever still waits for data from it.
  virtual bool peerClosed() const { return false; }
  int peer() const { return peer_; }
  const char* transportName() const { return transportName_; }

  /// The executor's position: slots it has filled (send end) or drained (recv end). It persists
  /// across operations because the FIFO counters do.
  uint64_t cursor = 0;
  /// Send end: the consumer's tail as last read. Reading the real tail pulls a cache line from the
  /// other core, so it is re-read only when this value says the FIFO is full.
  uint64_t tailSeen = 0;
  /// Send end: the cursor just past the last slot published as a reference (fifo.h); the memory
  /// it points to must stay unchanged until the consumer's tail reaches it.
  uint64_t refsUntil = 0;
  /// Receive end: the pid whose memory references point into (set by the transport when it
  /// accepts them; getpid() when the producer is a thread of this process).
  int refPid = 0;
  bool refSameProcess = false;  // receive end: refPid is this process (ranks as threads)

 protected:
  Connection(int peer, const char* transportName) : peer_(peer), transportName_(transportName) {}
  Fifo fifo_;

 private:
  int peer_;
  const char* transportName_;
};

/// Per-communicator state a transport keeps across connections (e.g. the TCP data listener).
class TransportState {
 public:
  virtual ~TransportState() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) const = 0;
  virtual Caps caps() const = 0;
  /// Per-communicator state; created once, on first use.
  virtual std::unique_ptr<TransportState> newState(const Context& ctx) const = 0;

  /// Receiver, step 1: create the receiving end from peer; write what the sender needs into
  /// *descriptor. Must not wait for the peer.
  virtual Result<std::unique_ptr<Connection>> createRecv(const Context& ctx, TransportState& state, int peer,
                                                         std::vector<char>* descriptor) const = 0;
  /// Sender, step 2: connect to a receiver's descriptor. May wait for the receiver's end to exist.
  virtual Result<std::unique_ptr<Connection>> connectSend(const Context& ctx, TransportState& state, int peer,
                                                          const std::vector<char>& descriptor) const = 0;
  /// Receiver, step 3, after the sender has connected: finish the receiving end (shm: unlink the
  /// segment; tcp: accept the sender's sockets). Blocking up to the context's deadline.
  virtual Status completeRecv(const Context& ctx, TransportState& state, Connection& conn) const = 0;
};

/// Transports in priority order (shm, tcp). COLL_SHM_DISABLE=1 removes shm.
std::vector<const Transport*> registeredTransports();
/// The transport called name (whether or not COLL_SHM_DISABLE lists it), or nullptr.
const Transport* transportByName(const std::string& name);
/// The first registered transport that can connect me to peer.
const Transport* selectTransport(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer);

/// The transports, each defined in its own folder.
const Transport& shmTransport();
const Transport& tcpTransport();

}  // namespace coll::transport
