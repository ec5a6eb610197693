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
// Threading: a connection's FIFO is filled or drained by the one thread (or kernel) that runs the
// communicator's operations; network connections are moved by the communicator's progress
// function (transport/progress.h), which one thread at a time drives.
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
  /// Shared-memory FIFOs made by this rank publish through head and sizes instead of tag lines
  /// (fifo.h): the device executor's interpreter reads them so (COLL_EXECUTOR=device-host).
  bool untagged = false;
  /// This rank's device (-1: host-only): where device transports place the FIFOs they allocate.
  int cudaDev = -1;
  /// LL lines per slot for the transports whose FIFOs the device reads in place (p2p, shm): the
  /// device executor's LL protocol (fifo.h). 0: none (host connections). Network FIFOs ignore it:
  /// their proxy moves Simple slots only (Transport::carriesLL).
  size_t llLines = 0;
};

/// A connection as plain data: what an executor (a CPU thread today, a GPU kernel next) needs to
/// fill or drain its FIFO, like NCCL's ncclConnInfo. Every field is a pointer or a number; the
/// FIFO's counters (head, tail, tag words) are 8-byte words at fixed offsets of FifoHeader, so
/// device code can poll them with its own atomics. The executor keeps its own positions in the
/// FIFO; nothing here changes after the connection is complete.
struct ConnInfo {
  Fifo fifo;  // header (head, sizes, tail, tag lines) and slots
  int peer = -1;
  /// Receive end: the pid whose memory references point into (fifo.h); 0 when references are
  /// not accepted. refSameProcess: that pid is this process (ranks as threads): plain loads.
  int refPid = 0;
  bool refSameProcess = false;
  /// The slots are moved by the communicator's progress function (transport/progress.h), not by
  /// the peer writing them: a network connection. Its FIFO is private to this process.
  bool proxied = false;
};

/// One direction between two ranks.
class Connection {
 public:
  virtual ~Connection() = default;
  /// The plain-data view an executor works on.
  const ConnInfo& info() const { return info_; }
  /// The FIFO the executor fills (send end) or drains (recv end).
  Fifo& fifo() { return info_.fifo; }
  /// Proxy work of network connections (moves slots between the FIFO and the network); shm has
  /// nothing to do. Never blocks. Called only by the process's network proxy (transport/proxy.h),
  /// in each of its rounds. An error names the peer (closed connection, garbage); the proxy then
  /// keeps it (setProxyFailure) and stops moving the connection.
  virtual Status progress() { return Status::ok(); }
  /// How much the proxy must move this connection while no thread waits on it: 0 not at all, 1 a
  /// setup is under way (a round every 50 us), 2 data is on its way (spin). Proxy thread only.
  virtual int proxyUrgency() const { return 0; }
  /// Whether the proxy met an error moving this connection, and which; any thread.
  bool proxyFailed() const { return failed_.load(std::memory_order_acquire); }
  Status proxyFailure() const { return proxyFailed() ? failure_ : Status::ok(); }
  /// The proxy keeps its error (once; proxy thread only).
  void setProxyFailure(Status s) {
    failure_ = std::move(s);
    failed_.store(true, std::memory_order_release);
  }
  /// True while published slots still wait for progress() to hand them to the network.
  virtual bool hasUnsentData() const { return false; }
  /// Send end, for an executor whose operation published references (fifo.h) here and failed:
  /// the caller may free its buffers as soon as the operation returns, and the communicator
  /// moves no more data on this connection (the ranks' FIFO positions no longer match). Returns
  /// once nothing reads those buffers for this connection any more. Not called for tagged FIFOs
  /// (shm), whose consumer is the peer itself: the executor voids those references in the FIFO's
  /// header (fifo.h, voidRefs).
  virtual void withdrawRefs() {}
  /// True when the peer closed the connection cleanly between slots (it finished and left). Only
  /// an error for whoever still waits for data from it.
  virtual bool peerClosed() const { return false; }
  /// Why, once peerClosed(), when the transport knows more (a network plugin's failed call).
  virtual std::string closedReason() const { return {}; }
  /// Device memory this end allocated and holds until it is destroyed (collCommMemStats).
  virtual size_t deviceBytes() const { return 0; }
  int peer() const { return info_.peer; }
  const char* transportName() const { return transportName_; }

 protected:
  Connection(int peer, const char* transportName) : transportName_(transportName) { info_.peer = peer; }
  ConnInfo info_;

 private:
  const char* transportName_;
  std::atomic<bool> failed_{false};
  Status failure_;  // written before failed_ is set
};

/// Per-communicator state a transport keeps across connections (e.g. the TCP data listener).
class TransportState {
 public:
  virtual ~TransportState() = default;
  /// The communicator is being aborted (collCommAbort): the connections' closes that follow must
  /// not wait for peers, which may be stopped or gone. What cannot be ended at once is left to the
  /// process (its memory stays allocated) rather than waited for.
  virtual void abandon() {}
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) const = 0;
  virtual Caps caps() const = 0;
  /// What the transport runs over, when its name does not say it all (a network plugin's name,
  /// version and device; UCX's version): for coll-perf's "# coll transports" line and coll-info.
  virtual std::string detail() const { return {}; }
  /// Whether this transport's device connections carry the LL region (Context::llLines): the
  /// device executor uses LL on a communicator only where every pair's transport does.
  virtual bool carriesLL() const { return false; }
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

/// Transports in priority order: shm, then the network (tcp, ucx or ncclnet: COLL_NET).
/// COLL_SHM_DISABLE=1 removes shm.
std::vector<const Transport*> registeredTransports();
/// The transport called name (whether or not COLL_SHM_DISABLE lists it), or nullptr.
const Transport* transportByName(const std::string& name);
/// The first registered transport that can connect me to peer.
const Transport* selectTransport(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer);

/// Transports for the device executor, in priority order: p2p (FIFOs in device memory between
/// ranks of one host whose GPUs are within COLL_P2P_LEVEL: a pointer between threads, CUDA IPC
/// between processes; COLL_P2P_DISABLE=1 removes it), shm (host-staged: a shared-memory FIFO the
/// device addresses once registered; COLL_SHM_DISABLE=1 removes it) and the network (proxied: the
/// device fills a registered host FIFO that the proxy thread moves).
std::vector<const Transport*> deviceTransports();
/// The first device transport that can connect me to peer, or nullptr.
const Transport* selectDeviceTransport(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer);
/// Whether every pair of these ranks would be connected by a device transport that carries LL:
/// the same answer on every rank (it reads only the ranks' shared infos and the environment).
bool deviceLLEverywhere(const std::vector<bootstrap::RankInfo>& ranks);

/// The transports: shm (shm/), and tcp, the network transport (net/) over the socket provider
/// (net/socket/), made in registry.cc.
const Transport& shmTransport();
const Transport& tcpTransport();
/// The network transport over the UCX provider (net/ucx/), or nullptr when coll is built
/// without UCX.
const Transport* ucxTransport();
/// Why UCX cannot be used here ("" when it can): no UCX provider in this build, or no UCX library
/// on the loader's path (it is loaded at run time, net/ucx/ucx_api.h).
std::string ucxUnavailable();
/// The network transport over the process's NCCL net plugin ("ncclnet"), or nullptr when no
/// plugin is loaded (net/plugin/plugin_net.h says which is).
const Transport* pluginTransport();
/// Whether the network COLL_NET and COLL_NET_PLUGIN ask for can be used: an unknown name, a
/// plugin named but unloadable, or UCX asked of a build without it is an error naming the
/// reason. Checked at communicator init; the choice is made once per process.
Status checkNetwork();
/// The chosen network as a line ("tcp", "ncclnet ['CollTest' v12 from ..., device ...]"), or
/// checkNetwork()'s error: for coll-info.
Result<std::string> describeNetwork();
/// The chosen network's devices, one line each, for coll-info: a plugin's every device (its PCI
/// path, speed, latency, port) with those this process would use by locality marked; for ucx and
/// tcp, where their devices are listed. Empty when the network is unusable.
std::vector<std::string> describeNetworkDevices();
/// p2p (p2p/): device-memory FIFOs between ranks of one host (threads or processes).
const Transport& p2pTransport();

}  // namespace coll::transport
