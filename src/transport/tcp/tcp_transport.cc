// tcp: ranks on different hosts (or any ranks with COLL_SHM_DISABLE=1) over TCP sockets.
//
// Each side keeps a private FIFO of the same shape as shm's. The sender's progress() writes
// filled slots to the socket(s) and frees them once written; the receiver's progress() reads
// slots from the socket(s) into free slots and publishes them. progress() never blocks: the
// executor calls it while it waits, so the sends and receives of a step overlap without a
// proxy thread. With COLL_NSOCKS > 1, slot k travels on socket k % nsocks.
//
// Framing: every slot is preceded by {magic, bytes, sequence}. A wrong magic or sequence
// (garbage, a desynchronized stream), an oversized slot, a short read at EOF or a reset is an
// error naming the peer. Data sockets are authenticated once by a hello carrying the
// communicator's secret and the connection id the receiver published.
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "base/log.h"
#include "base/random.h"
#include "transport/transport.h"

namespace coll::transport {
namespace {

constexpr uint32_t kSlotMagic = 0xc011da7au;
constexpr uint64_t kHelloMagic = 0x4f4c4c4548504354ull;  // "TCPHELLO"
constexpr int kSocketBufferBytes = 4 << 20;

struct SlotHeader {
  uint32_t magic;
  uint32_t bytes;
  uint64_t seq;
};

struct Descriptor {
  net::PackedAddress listen;
  int32_t nslots;
  int32_t nsocks;
  uint64_t slotBytes;
  uint64_t connId;
};

struct Hello {
  uint64_t magic;
  uint64_t secret;
  uint64_t connId;
  int32_t srcRank;
  int32_t sockIndex;
};

// Per-communicator: the data listener and sockets accepted before their connection asked.
class TcpState : public TransportState {
 public:
  net::Listener listener;
  bool listening = false;
  std::map<std::pair<uint64_t, int>, net::Socket> accepted;  // (connId, sockIndex)
};

// One socket's position in the slot stream.
struct Lane {
  net::Socket sock;
  uint64_t slot = 0;  // the slot this lane moves now
  size_t done = 0;    // bytes of header + payload moved for it
  SlotHeader header{};
};

class TcpConnection : public Connection {
 public:
  TcpConnection(int peer, bool sending, int nslots, size_t slotBytes, int nsocks)
      : Connection(peer, "tcp"), sending_(sending), lanes_(nsocks), complete_(nslots, false) {
    size_t bytes = Fifo::bytesFor(nslots, slotBytes);
    memory_ = std::aligned_alloc(4096, bytes);
    if (!memory_) throw std::bad_alloc();
    info_.fifo = Fifo::over(memory_, nslots, slotBytes, true);
    info_.proxied = true;
    for (int i = 0; i < nsocks; ++i) lanes_[i].slot = static_cast<uint64_t>(i);
  }
  ~TcpConnection() override { std::free(memory_); }

  void setSocket(int index, net::Socket s) { lanes_[index].sock = std::move(s); }
  uint64_t connId = 0;  // receiving end: the id its sender's sockets present
  int nsocks() const { return static_cast<int>(lanes_.size()); }

  bool peerClosed() const override { return closed_; }

  bool hasUnsentData() const override {
    return sending_ && info_.fifo.header->tail.load(std::memory_order_acquire) <
                           info_.fifo.header->head.load(std::memory_order_relaxed);
  }

  Status progress() override {
    for (auto& lane : lanes_) COLL_TRY(sending_ ? pushLane(lane) : pullLane(lane));
    return Status::ok();
  }

 private:
  // Sender: write slot lane.slot if the executor has filled it.
  Status pushLane(Lane& lane) {
    FifoHeader* h = info_.fifo.header;
    for (;;) {
      uint64_t head = h->head.load(std::memory_order_acquire);
      if (lane.slot >= head) return Status::ok();
      uint32_t bytes = h->sizes[lane.slot % info_.fifo.nslots];
      if (lane.done == 0) lane.header = SlotHeader{kSlotMagic, bytes, lane.slot};
      iovec iov[2];
      int n = 0;
      if (lane.done < sizeof(SlotHeader))
        iov[n++] = {reinterpret_cast<char*>(&lane.header) + lane.done, sizeof(SlotHeader) - lane.done};
      size_t payloadDone = lane.done > sizeof(SlotHeader) ? lane.done - sizeof(SlotHeader) : 0;
      iov[n++] = {info_.fifo.slot(lane.slot) + payloadDone, bytes - payloadDone};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      ssize_t k = ::sendmsg(lane.sock.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::ok();
        return COLL_ERROR(collRemoteError, FMT_STRING("sending to rank {} over tcp failed: {}"), peer(),
                          std::strerror(errno));
      }
      lane.done += static_cast<size_t>(k);
      if (lane.done < sizeof(SlotHeader) + bytes) return Status::ok();
      complete_[lane.slot % info_.fifo.nslots] = true;
      lane.slot += lanes_.size();
      lane.done = 0;
      // Slots free in order: the tail passes every slot whose lane has finished it.
      uint64_t tail = h->tail.load(std::memory_order_relaxed);
      while (tail < head && complete_[tail % info_.fifo.nslots]) complete_[tail++ % info_.fifo.nslots] = false;
      h->tail.store(tail, std::memory_order_release);
    }
  }

  // Receiver: read slot lane.slot if there is room for it.
  Status pullLane(Lane& lane) {
    FifoHeader* h = info_.fifo.header;
    for (;;) {
      uint64_t tail = h->tail.load(std::memory_order_acquire);
      if (lane.slot >= tail + static_cast<uint64_t>(info_.fifo.nslots)) return Status::ok();
      char* dst;
      size_t want;
      if (lane.done < sizeof(SlotHeader)) {
        dst = reinterpret_cast<char*>(&lane.header) + lane.done;
        want = sizeof(SlotHeader) - lane.done;
      } else {
        size_t payloadDone = lane.done - sizeof(SlotHeader);
        dst = info_.fifo.slot(lane.slot) + payloadDone;
        want = lane.header.bytes - payloadDone;
      }
      if (!lane.sock.valid()) return Status::ok();  // closed cleanly earlier
      ssize_t k = want ? ::recv(lane.sock.fd(), dst, want, MSG_DONTWAIT) : 0;
      if (k == 0 && want && lane.done == 0) {
        // Between slots: the peer finished and closed. An error only if more data is awaited.
        lane.sock.close();
        closed_ = true;
        return Status::ok();
      }
      if (k == 0 && want)
        return COLL_ERROR(collRemoteError, FMT_STRING("rank {} closed its tcp connection in the middle of a transfer"),
                          peer());
      if (k < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::ok();
        return COLL_ERROR(collRemoteError, FMT_STRING("receiving from rank {} over tcp failed: {}"), peer(),
                          std::strerror(errno));
      }
      bool hadHeader = lane.done >= sizeof(SlotHeader);
      lane.done += static_cast<size_t>(k);
      if (!hadHeader && lane.done == sizeof(SlotHeader)) {
        const SlotHeader& sh = lane.header;
        if (sh.magic != kSlotMagic || sh.seq != lane.slot || sh.bytes > info_.fifo.slotBytes)
          return COLL_ERROR(collRemoteError,
                            FMT_STRING("rank {} sent garbage over tcp (slot header magic {:#x}, sequence {} where {} "
                                       "was expected, {} bytes)"),
                            peer(), sh.magic, sh.seq, lane.slot, sh.bytes);
      }
      if (lane.done < sizeof(SlotHeader) || lane.done < sizeof(SlotHeader) + lane.header.bytes) continue;
      h->sizes[lane.slot % info_.fifo.nslots] = lane.header.bytes;
      complete_[lane.slot % info_.fifo.nslots] = true;
      lane.slot += lanes_.size();
      lane.done = 0;
      uint64_t head = h->head.load(std::memory_order_relaxed);
      while (complete_[head % info_.fifo.nslots] && head < tail + info_.fifo.nslots)
        complete_[head++ % info_.fifo.nslots] = false;
      h->head.store(head, std::memory_order_release);
    }
  }

  bool sending_;
  bool closed_ = false;
  void* memory_ = nullptr;
  std::vector<Lane> lanes_;
  std::vector<bool> complete_;  // per slot: moved by its lane, not yet passed by head/tail
};

void tuneSocket(int fd) {
  int b = kSocketBufferBytes;
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
}

class TcpTransport : public Transport {
 public:
  const char* name() const override { return "tcp"; }
  bool canConnect(const bootstrap::RankInfo&, const bootstrap::RankInfo&) const override { return true; }
  Caps caps() const override { return Caps{20.0, 1.5, size_t(64) << 20}; }
  std::unique_ptr<TransportState> newState(const Context&) const override { return std::make_unique<TcpState>(); }

  Result<std::unique_ptr<Connection>> createRecv(const Context& ctx, TransportState& base, int peer,
                                                 std::vector<char>* descriptor) const override {
    auto& state = static_cast<TcpState&>(base);
    if (!state.listening) {
      COLL_ASSIGN_OR_RETURN(state.listener, net::Listener::listen(ctx.bindAddress, false));
      state.listening = true;
    }
    Descriptor d{};
    d.listen = net::PackedAddress::pack(state.listener.address());
    d.nslots = ctx.nslots;
    d.nsocks = ctx.nsocks;
    d.slotBytes = ctx.slotBytes;
    d.connId = randomU64();
    descriptor->assign(reinterpret_cast<char*>(&d), reinterpret_cast<char*>(&d) + sizeof(d));
    auto conn = std::make_unique<TcpConnection>(peer, false, d.nslots, d.slotBytes, d.nsocks);
    conn->connId = d.connId;
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Result<std::unique_ptr<Connection>> connectSend(const Context& ctx, TransportState&, int peer,
                                                  const std::vector<char>& descriptor) const override {
    if (descriptor.size() != sizeof(Descriptor))
      return COLL_ERROR(collInternalError, FMT_STRING("rank {} sent a malformed tcp descriptor"), peer);
    Descriptor d;
    std::memcpy(&d, descriptor.data(), sizeof(d));
    COLL_ASSIGN_OR_RETURN(net::Address addr, d.listen.unpack());
    auto conn = std::make_unique<TcpConnection>(peer, true, d.nslots, d.slotBytes, d.nsocks);
    auto deadline = net::Deadline::afterMs(ctx.timeoutMs);
    std::string who = fmt::format("rank {}'s tcp data listener", peer);
    for (int i = 0; i < d.nsocks; ++i) {
      COLL_ASSIGN_OR_RETURN(net::Socket s, net::Socket::connect(addr, deadline, ctx.abort, who, false));
      tuneSocket(s.fd());
      Hello hello{kHelloMagic, ctx.secret, d.connId, ctx.rank, i};
      COLL_TRY(s.sendAll(&hello, sizeof(hello), deadline, ctx.abort, who));
      conn->setSocket(i, std::move(s));
    }
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Status completeRecv(const Context& ctx, TransportState& base, Connection& c) const override {
    auto& state = static_cast<TcpState&>(base);
    auto& conn = static_cast<TcpConnection&>(c);
    uint64_t connId = conn.connId;
    auto deadline = net::Deadline::afterMs(ctx.timeoutMs);
    for (int i = 0; i < conn.nsocks(); ++i) {
      // Sockets arrive in any order and may belong to other connections: stash until asked for.
      while (!state.accepted.count({connId, i})) {
        COLL_TRY(net::waitFd(state.listener.fd(), POLLIN, deadline, ctx.abort,
                             fmt::format("rank {} to open its tcp data connection", conn.peer())));
        net::Address from;
        net::Socket s = state.listener.accept(&from);
        if (!s.valid()) continue;
        Hello hello{};
        Status got = s.recvAll(&hello, sizeof(hello), net::Deadline::afterMs(std::min<int64_t>(ctx.timeoutMs, 5000)),
                               ctx.abort, "a tcp data connection from " + from.toString());
        if (!got.isOk() || hello.magic != kHelloMagic || hello.secret != ctx.secret) {
          COLL_LOG(WARN, NET, "rank {}: dropped a data connection from {}: {}", ctx.rank, from.toString(),
                   got.isOk() ? "not this communicator's (bad magic or secret)" : got.message());
          continue;
        }
        tuneSocket(s.fd());
        state.accepted[{hello.connId, hello.sockIndex}] = std::move(s);
      }
      conn.setSocket(i, std::move(state.accepted[{connId, i}]));
      state.accepted.erase({connId, i});
    }
    return Status::ok();
  }
};

}  // namespace

const Transport& tcpTransport() {
  static TcpTransport t;
  return t;
}

}  // namespace coll::transport
