// The network provider interface: what the network transport (net_transport.cc) needs from a
// network, shaped like NCCL's net plugin API (ncclNet_v8_t: listen/connect/accept, regMr,
// isend/irecv, test, close). The FIFO-to-network logic (slots, flow control, ordering, progress)
// is written once above it, in net_transport.cc; a provider only moves messages. Providers live
// in net/<name>/: socket (the "tcp" transport), ucx (the "ucx" transport), and plugin, which runs
// an NCCL network plugin (libnccl-net-*.so) as a provider (the "ncclnet" transport).
//
// A connection is one direction between two ranks, set up in three steps that never block:
//   receiver: listen(dev, &handle, &listenComm)    -> handle travels over the bootstrap
//   sender:   connect(dev, handle, &sendComm)      called again until sendComm != nullptr
//   receiver: accept(listenComm, &recvComm)        called again until recvComm != nullptr
// The caller drives those loops under its own deadline and abort flag (a provider never waits).
//
// Messages: the sender posts isend()s and the receiver irecv()s in the same order; message k of
// a connection matches receive k (the tag is checked, not used to reorder). A request is tested
// with test() until it reports done; done frees it. Every call returns a Status; errors name the
// peer by rank ("rank 3 sent garbage over tcp ...").
//
// Threading: a provider instance belongs to one communicator, and only the process's network
// proxy thread (transport/proxy.h) calls it, from its creation to its destruction. A provider
// therefore takes no lock of its own for its calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/socket.h"
#include "base/status.h"
#include "transport/transport.h"

namespace coll::transport::net {

/// Bytes of a connection handle: room for an NCCL plugin's handle (NCCL_NET_HANDLE_MAXSIZE, 128)
/// and the receiver's rank after it.
constexpr size_t kHandleBytes = 144;

/// What listen() writes for the sender: opaque fixed-size bytes, carried to the sender inside the
/// transport's descriptor over the bootstrap and passed to connect() there.
struct Handle {
  unsigned char bytes[kHandleBytes];
  /// Bytes of any length a provider's connect() needs beyond the fixed ones (UCX: the receiver's
  /// worker address, hundreds of bytes with InfiniBand); carried as they are, after the handle.
  std::string address;
};

/// What a provider instance knows about its communicator.
struct Config {
  int rank = -1;                   // this rank: named in the peer's errors, sent in the socket hello
  uint64_t secret = 0;             // the communicator's secret: a connection that does not present it is dropped
  int nsocks = 1;                  // socket provider: sockets per connection (COLL_NSOCKS)
  coll::net::Address bindAddress;  // the interface the bootstrap chose (port 0)
  int64_t timeoutMs = 60000;       // the communicator's data-path deadline
  int64_t handshakeMs = 3000;      // how long an accepted connection may take to say hello with the
                                   // secret (COLL_HANDSHAKE_TIMEOUT_MS)
  int localRank = 0;               // this rank among its host's: spreads ranks over NICs at equal distance
  int numa = -1;                   // this rank's NUMA node (-1: unknown): picks the nearest NICs
  int cudaDev = -1;                // this rank's GPU (-1: host-only): picks the NICs nearest it
};

/// A device's properties (NCCL: ncclNetProperties_t).
struct Properties {
  std::string name;            // for logs: the interface name and address for sockets, the HCA port for ib
  int speedMbps = 0;           // link speed; 0 when unknown (virtual interfaces, loopback)
  size_t maxMessageBytes = 0;  // the largest isend/irecv
  int maxRequests = 0;         // requests in flight per comm; isend/irecv return none beyond
};

// Opaque objects. Each provider derives its own and casts back; callers only pass them around.
struct Comm {
  virtual ~Comm() = default;
};
struct ListenComm : Comm {};
struct SendComm : Comm {};
struct RecvComm : Comm {};
struct MrHandle {
  virtual ~MrHandle() = default;
};
struct Request {
  virtual ~Request() = default;
};

class Provider {
 public:
  virtual ~Provider() = default;

  /// The provider's name, for logs ("socket", "ib").
  virtual const char* name() const = 0;
  /// Number of devices (socket: 1, the communicator's interface).
  virtual int devices() const = 0;
  /// Properties of device dev in [0, devices()).
  virtual Result<Properties> properties(int dev) const = 0;

  /// Receiver: creates a listening object on device dev and writes the handle a sender connects
  /// with. Never waits for the sender.
  virtual Status listen(int dev, Handle* handle, ListenComm** comm) = 0;
  /// Sender: connects to a receiver's handle. NON-BLOCKING: returns ok with *comm == nullptr
  /// while the connection is not up yet, and the caller calls again (with the same handle) until
  /// *comm is set. An error (the receiver refused: it is gone) ends the attempt. An attempt the
  /// caller gives up on (deadline, abort) is released with the provider.
  /// Authentication: the connection presents the communicator's secret (Config::secret).
  virtual Status connect(int dev, const Handle& handle, SendComm** comm) = 0;
  /// Receiver: completes the connection of the sender that connected to listen's handle.
  /// NON-BLOCKING like connect(): ok with *comm == nullptr until the sender's connection is
  /// there and authenticated. Connections that do not present the communicator's secret (or are
  /// not the provider's protocol at all) are dropped with a WARN line, never returned.
  virtual Status accept(ListenComm* listen, RecvComm** comm) = 0;

  /// Registers [data, data + size) for isend/irecv on comm (a SendComm or RecvComm). Socket:
  /// nothing to register, a placeholder handle; ib: ibv_reg_mr.
  virtual Status regMr(Comm* comm, void* data, size_t size, MrHandle** mr) = 0;
  virtual Status deregMr(Comm* comm, MrHandle* mr) = 0;

  /// Posts the send of [data, data + size) (inside memory registered as mr) with tag. Sets
  /// *request, or leaves it nullptr when the send cannot be posted now (maxRequests in flight):
  /// the caller posts it again later. data stays unchanged until test() reports the request done.
  virtual Status isend(SendComm* comm, const void* data, size_t size, int tag, MrHandle* mr, Request** request) = 0;
  /// Posts the receive of the next message, of at most maxSize bytes, into data (inside memory
  /// registered as mr): the bytes land there directly, with no copy in between. *request as for
  /// isend. A message larger than maxSize, with another tag, or out of sequence is an error
  /// naming the peer ("rank N sent garbage over <transport> (...)").
  virtual Status irecv(RecvComm* comm, void* data, size_t maxSize, int tag, MrHandle* mr, Request** request) = 0;
  /// Tests a request: *done = 1 once it is complete, and then *size (if size is not null) is the
  /// message's byte count and the request is freed (do not pass it again). The socket provider
  /// moves bytes here, so the caller keeps testing what it waits for. Never blocks. Errors: the
  /// peer reset the connection, closed it in the middle of a message ("rank N closed its tcp
  /// connection in the middle of a transfer"), sent garbage, or a system error; each names the peer.
  virtual Status test(Request* request, int* done, size_t* size) = 0;
  /// Whether a caller tests every request in flight on a comm in each round (true), or stops at
  /// the first one that is not done, as NCCL's proxy does (false). A plugin's test() progresses
  /// the whole network (aws-ofi-nccl polls its completion queue: 28 poll() calls per 8-byte
  /// message when all 8 slots were tested); the socket provider's lanes move bytes only for the
  /// request tested, so with several sockets each lane's front must be tested.
  virtual bool testsEveryRequest() const { return false; }
  /// Whether isend() takes memory outside any registration (mr == nullptr): the connection then
  /// sends large pieces straight from the caller's buffer instead of copying them into its
  /// registered slots first (fifo.h, kRefsPlain), and abortSends() must work: a failed operation
  /// takes its references back with it (Connection::withdrawRefs). UCX does (a 1 MiB all-reduce
  /// took 0.92x the time). NCCL's plugins need a registered handle. The sockets could, but the
  /// operation then waits until its last piece is written (the caller may reuse the buffer once
  /// it returns), and with that wait a 1 MiB all-reduce over them took 1.10x the time (9 of 9
  /// paired rounds, perf/results/20261130-033955-ab).
  virtual bool sendsUnregistered() const { return false; }
  /// Whether isendTrailer() works: a message of [data, data + size) then the trailer's bytes, in
  /// one message, without copying either. The connection sends a large first piece (which carries
  /// the call print after its bytes) from the caller's buffer that way.
  virtual bool sendsTrailers() const { return false; }
  /// Posts the send of one message: [data, data + size) then [trailer, trailer + trailerBytes),
  /// unregistered memory both (sendsUnregistered()), unchanged until test() reports it done.
  /// *request as for isend. Only where sendsTrailers().
  virtual Status isendTrailer(SendComm*, const void*, size_t, const void*, size_t, int, Request**) {
    return Status(collInternalError, "this network provider sends no trailers");
  }
  /// Receiver: whether the peer closed the connection cleanly between messages (it finished and
  /// left). Its posted receives then never complete; that is only an error for a caller that
  /// still waits for data from it (the transport's peerClosed()).
  virtual bool peerClosed(const RecvComm* comm) const = 0;
  /// Receiver: why the connection is closed, where the provider knows more than "closed" (a
  /// plugin's failed receive: its call and result); "" otherwise.
  virtual std::string closedReason(const RecvComm*) const { return {}; }
  /// Moves the provider's own machinery once (UCX: one worker progress), before the caller tests
  /// its requests; a provider that moves bytes in test() (sockets) has nothing to do. Every caller
  /// (the proxy, once per round) calls it before each round of tests: test() never progresses.
  virtual Status poll() { return Status::ok(); }
  /// poll() once per proxy round (round: transport/proxy.h's roundNumber), however many
  /// connections share the provider.
  Status pollOnce(uint64_t round) {
    if (round == polledRound_) return Status::ok();
    polledRound_ = round;
    return poll();
  }
  /// Whether the provider needs its machinery moved while connections are being set up, even
  /// when nobody waits for data (UCX's wire-up runs only while both workers are progressed).
  virtual bool setupUnderWay() const { return false; }
  /// Receiver: the caller has consumed the data of `count` more completed receives (their slots
  /// are free again). NCCL plugins are told through irecvConsumed; other providers ignore it.
  virtual Status consumed(RecvComm*, int /*count*/) { return Status::ok(); }

  /// Close and free comms; requests still in flight on them are dropped (and freed). deregMr and
  /// closeSend/closeRecv return collInProgress when the provider could not stop a transfer into or
  /// out of the registered memory in time (UCX cannot cancel a matched rendezvous): the caller
  /// then leaves that memory allocated.
  virtual Status closeSend(SendComm* comm) = 0;
  /// Ends every transfer of a send comm now, without waiting for its peer: once it returns, the
  /// provider reads none of the memory those sends came from (a failed operation's pieces sent
  /// from the caller's buffer). The comm sends nothing more; closeSend still frees it. Returns
  /// collInProgress when a transfer could not be ended in time. Only where sendsUnregistered().
  virtual Status abortSends(SendComm*) {
    return Status(collInternalError, "abortSends: this network does not send from unregistered memory");
  }
  virtual Status closeRecv(RecvComm* comm) = 0;
  /// The communicator is being aborted: the closes and the destruction that follow wait for no
  /// peer (a bound of tens of milliseconds instead of COLL_HANDSHAKE_TIMEOUT_MS); transfers that
  /// do not end by then leave their memory allocated (closeSend/closeRecv's collInProgress).
  virtual void abandon() {}
  virtual Status closeListen(ListenComm* comm) = 0;

 private:
  uint64_t polledRound_ = 0;
};

/// Opens a provider instance for one communicator. Never fails: device errors surface in
/// listen() and connect().
using ProviderFactory = std::shared_ptr<Provider> (*)(const Config& config);

/// The network transport (net_transport.cc): FIFO slots over the providers `open` makes, one per
/// communicator, registered under transportName ("tcp" for sockets) with caps.
/// detail, when given, is the transport's Transport::detail().
std::unique_ptr<Transport> newNetTransport(const char* transportName, const Caps& caps, ProviderFactory open,
                                           std::string (*detail)() = nullptr);

/// The socket provider (net/socket/socket_provider.cc).
std::shared_ptr<Provider> openSocketProvider(const Config& config);
/// A provider over the process's NCCL net plugin (net/plugin/plugin_provider.cc); the plugin
/// must have loaded (plugin::loadedPlugin()).
std::shared_ptr<Provider> openPluginProvider(const Config& config);
/// The UCX provider (net/ucx/ucx_provider.cc); built when UCX's headers are found (COLL_HAVE_UCX),
/// and UCX itself is loaded when the first instance is opened.
std::shared_ptr<Provider> openUcxProvider(const Config& config);

}  // namespace coll::transport::net
