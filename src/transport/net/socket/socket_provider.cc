// The socket provider: net/net.h over non-blocking TCP sockets (wire format: socket_provider.h).
//
// One instance per communicator holds the communicator's data listener (opened on the first
// listen()), the sockets accepted but not yet claimed, and the sender's connection attempts in
// progress. A comm is nsocks lanes; a lane moves its messages strictly in order, so test() moves
// bytes only for the request at the front of its lane (the others wait behind it for free), and
// only up to that request's end: a progress pass that tests requests in posting order makes one
// system call per lane that has nothing to move, as many as it completes otherwise.
#include "transport/net/socket/socket_provider.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "base/conn_budget.h"
#include "base/ifaddr.h"
#include "base/log.h"
#include "base/random.h"

namespace coll::transport::net {
namespace {

using Clock = std::chrono::steady_clock;

void tuneSocket(int fd) {
  int b = kSocketBufferBytes;
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
}

bool wouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

struct Stream;
struct Lane;

struct SocketRequest final : Request {
  Stream* stream = nullptr;
  Lane* lane = nullptr;  // the socket it travels on
  bool inUse = false;
  bool complete = false;
  char* data = nullptr;
  size_t size = 0;  // send: the bytes; receive: at most this many, then the bytes received
  int tag = 0;
  uint64_t seq = 0;
  SocketFrame frame{};
  size_t moved = 0;  // bytes of frame + payload moved so far
};

// Bytes a receiving lane reads ahead in one recv(): a frame and a small payload arrive in one
// system call instead of two (an 8-byte all-reduce at 2 ranks made 2 reads per message, and 2
// more that found nothing); what belongs to the lane's next message waits here for it. Payload
// beyond what is staged is read straight into the slot, never past the message's end.
constexpr size_t kStageBytes = 4096;

// One socket's position in the message stream: it moves message `next`, then next + nsocks, ...
struct Lane {
  coll::net::Socket sock;
  uint64_t next = 0;
  std::vector<char> stage;  // receiving lanes: bytes read ahead, [stageAt, stageEnd) not consumed
  size_t stageAt = 0, stageEnd = 0;
};

// One direction of a connection: its lanes and requests.
struct Stream {
  Stream(int peer, bool sending, int nsocks) : peer(peer), sending(sending), lanes(nsocks) {
    for (int i = 0; i < nsocks; ++i) lanes[i].next = static_cast<uint64_t>(i);
  }
  int peer;
  bool sending;
  bool closed = false;  // the peer closed cleanly between messages
  std::vector<Lane> lanes;
  uint64_t posted = 0;  // messages posted so far: the next one's sequence number
  std::array<SocketRequest, kSocketMaxRequests> requests;

  // Posts the next message: the request for sequence `posted`, unless its storage is still in use.
  SocketRequest* post(char* data, size_t size, int tag) {
    SocketRequest& r = requests[posted % kSocketMaxRequests];
    if (r.inUse) return nullptr;
    r.stream = this;
    r.lane = &lanes[posted % lanes.size()];
    r.inUse = true;
    r.complete = false;
    r.data = data;
    r.size = size;
    r.tag = tag;
    r.seq = posted++;
    r.moved = 0;
    r.frame = SocketFrame{kSocketFrameMagic, static_cast<uint32_t>(size), r.seq, tag, 0};
    return &r;
  }

  void finish(SocketRequest& r, Lane& lane) {
    r.complete = true;
    lane.next += lanes.size();
  }

  // Sender: writes r (the front of its lane) as far as the socket takes it, one sendmsg.
  Status push(SocketRequest& r, Lane& lane) {
    iovec iov[2];
    int n = 0;
    if (r.moved < sizeof(SocketFrame))
      iov[n++] = {reinterpret_cast<char*>(&r.frame) + r.moved, sizeof(SocketFrame) - r.moved};
    size_t payloadDone = r.moved > sizeof(SocketFrame) ? r.moved - sizeof(SocketFrame) : 0;
    iov[n++] = {r.data + payloadDone, r.size - payloadDone};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t k = ::sendmsg(lane.sock.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (wouldBlock(errno)) return Status::ok();
      return COLL_ERROR(collRemoteError, FMT_STRING("sending to rank {} over tcp failed: {}"), peer,
                        std::strerror(errno));
    }
    r.moved += static_cast<size_t>(k);
    if (r.moved == sizeof(SocketFrame) + r.size) finish(r, lane);
    return Status::ok();
  }

  // Receiver: reads r (the front of its lane): its frame, then its payload into r.data, until it
  // is complete or the socket has nothing more. The frame and payloads that fit are read through
  // the lane's stage (several at a time when they are there); the rest of a larger payload goes
  // straight into r.data.
  Status pull(SocketRequest& r, Lane& lane) {
    for (;;) {
      // Where r ends as far as is known: its frame's end until the frame is whole.
      size_t total = sizeof(SocketFrame) + (r.moved >= sizeof(SocketFrame) ? r.frame.bytes : 0);
      if (lane.stageAt < lane.stageEnd) {  // staged bytes first: they come before anything unread
        size_t take = std::min(lane.stageEnd - lane.stageAt, total - r.moved);
        COLL_TRY(consume(r, lane.stage.data() + lane.stageAt, take));
        lane.stageAt += take;
      } else {
        if (!lane.sock.valid()) return Status::ok();  // closed cleanly earlier
        bool staged = r.moved < sizeof(SocketFrame) || total - r.moved <= kStageBytes;
        if (staged && lane.stage.empty()) lane.stage.resize(kStageBytes);
        char* dst = staged ? lane.stage.data() : r.data + (r.moved - sizeof(SocketFrame));
        size_t want = staged ? kStageBytes : total - r.moved;
        ssize_t k = ::recv(lane.sock.fd(), dst, want, MSG_DONTWAIT);
        if (k == 0 && r.moved == 0) {
          // Between messages: the peer finished and closed. An error only if more data is awaited.
          lane.sock.close();
          closed = true;
          return Status::ok();
        }
        if (k == 0)
          return COLL_ERROR(collRemoteError,
                            FMT_STRING("rank {} closed its tcp connection in the middle of a transfer"), peer);
        if (k < 0) {
          if (wouldBlock(errno)) return Status::ok();
          return COLL_ERROR(collRemoteError, FMT_STRING("receiving from rank {} over tcp failed: {}"), peer,
                            std::strerror(errno));
        }
        if (staged) {
          lane.stageAt = 0;
          lane.stageEnd = static_cast<size_t>(k);
          continue;
        }
        r.moved += static_cast<size_t>(k);
      }
      if (r.moved < sizeof(SocketFrame) || r.moved < sizeof(SocketFrame) + r.frame.bytes) continue;
      r.size = r.frame.bytes;
      finish(r, lane);
      return Status::ok();
    }
  }

  // Receiver: n bytes of r's frame or payload, in stream order (never past its end); checks the
  // frame once it is whole.
  Status consume(SocketRequest& r, const char* from, size_t n) {
    if (r.moved < sizeof(SocketFrame)) {
      std::memcpy(reinterpret_cast<char*>(&r.frame) + r.moved, from, n);
      r.moved += n;
      if (r.moved < sizeof(SocketFrame)) return Status::ok();
      const SocketFrame& f = r.frame;
      if (f.magic != kSocketFrameMagic || f.seq != r.seq || f.bytes > r.size)
        return COLL_ERROR(collRemoteError,
                          FMT_STRING("rank {} sent garbage over tcp (slot header magic {:#x}, sequence {} where {} "
                                     "was expected, {} bytes)"),
                          peer, f.magic, f.seq, r.seq, f.bytes);
      if (f.tag != r.tag)
        return COLL_ERROR(collRemoteError,
                          FMT_STRING("rank {} sent garbage over tcp (message {} has tag {} where {} was expected)"),
                          peer, r.seq, f.tag, r.tag);
      return Status::ok();
    }
    std::memcpy(r.data + (r.moved - sizeof(SocketFrame)), from, n);
    r.moved += n;
    return Status::ok();
  }
};

struct SocketListenComm final : ListenComm {
  uint64_t connId = 0;
  int nsocks = 1;
};
struct SocketSendComm final : SendComm {
  SocketSendComm(int peer, int nsocks) : stream(peer, true, nsocks) {}
  Stream stream;
};
struct SocketRecvComm final : RecvComm {
  SocketRecvComm(int peer, int nsocks) : stream(peer, false, nsocks) {}
  Stream stream;
};
struct SocketMr final : MrHandle {};

// Accepted sockets whose hello has not arrived, at most, per listener; beyond it, or beyond the
// process's budget for unauthenticated connections (base/conn_budget.h), a new socket replaces
// the oldest silent one, so that a flood of any size cannot keep an honest connection waiting.
constexpr size_t kMaxPendingHellos = 1024;
// New sockets one listener pass accepts: from the data path (Provider::poll), and from the setup's
// accept() loop.
constexpr int kAcceptsPerDataPass = 8;
constexpr int kAcceptsPerSetupPass = 256;
// How often the data-path progress drains the listener (Provider::poll).
constexpr auto kServeEveryTicks = std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(1)).count();

// A socket accepted whose hello has not fully arrived.
struct PendingHello {
  coll::net::Socket sock;
  coll::net::Address from;
  Clock::time_point deadline;
  Clock::time_point start;
  SocketHello hello{};
  size_t got = 0;
  coll::net::UnauthSlot slot;  // its share of the process's budget until the hello checks out
};

// An authenticated socket waiting for its connection's accept().
struct Accepted {
  coll::net::Socket sock;
  int srcRank = -1;
};

// One socket of a connection attempt.
struct Dialing {
  enum class State { kStart, kConnecting, kHello, kDone } state = State::kStart;
  coll::net::Socket sock;
  Clock::time_point retryAt{};
  int backoffMs = 5;
  SocketHello hello{};
  size_t sent = 0;
};

struct PendingConnect {
  SocketHandle handle{};
  coll::net::Address addr;
  std::vector<Dialing> socks;
};

class SocketProvider final : public Provider {
 public:
  explicit SocketProvider(const Config& config) : config_(config) {}
  ~SocketProvider() override {
    if (epoll_ >= 0) ::close(epoll_);
  }

  const char* name() const override { return "socket"; }
  int devices() const override { return 1; }

  Result<Properties> properties(int dev) const override {
    if (dev != 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("socket provider: no device {}"), dev);
    Properties p;
    std::string host = config_.bindAddress.hostString();
    p.name = host;
    for (const coll::net::Interface& i : coll::net::listInterfaces())
      if (i.address.hostString() == host) {
        p.name = i.name + " " + host;
        p.speedMbps = coll::net::linkSpeedMbps(i.name);
        break;
      }
    p.maxMessageBytes = std::numeric_limits<uint32_t>::max();
    p.maxRequests = kSocketMaxRequests;
    return p;
  }

  Status listen(int dev, Handle* handle, ListenComm** comm) override {
    *comm = nullptr;
    if (dev != 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("socket provider: no device {}"), dev);
    if (!listening_) {
      COLL_ASSIGN_OR_RETURN(listener_, coll::net::Listener::listen(config_.bindAddress, false));
      COLL_LOG(INFO, NET, "rank {} tcp data listener on {}", config_.rank, listener_.address().toString());
      epoll_ = epoll_create1(EPOLL_CLOEXEC);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenerKey;
      if (epoll_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, listener_.fd(), &ev) != 0)
        return COLL_ERROR(collSystemError, FMT_STRING("socket provider: epoll for the data listener: {}"),
                          std::strerror(errno));
      listening_ = true;
    }
    auto l = std::make_unique<SocketListenComm>();
    l->connId = randomU64();
    l->nsocks = config_.nsocks;
    SocketHandle h{};
    h.magic = kSocketHandleMagic;
    h.listen = coll::net::PackedAddress::pack(listener_.address());
    h.connId = l->connId;
    h.rank = config_.rank;
    h.nsocks = l->nsocks;
    std::memset(handle->bytes, 0, kHandleBytes);
    std::memcpy(handle->bytes, &h, sizeof(h));
    *comm = l.release();
    return Status::ok();
  }

  Status connect(int dev, const Handle& handle, SendComm** comm) override {
    *comm = nullptr;
    SocketHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (dev != 0 || h.magic != kSocketHandleMagic || h.nsocks < 1 || h.nsocks > kSocketMaxSocks)
      return COLL_ERROR(collInternalError, FMT_STRING("rank {} sent a malformed tcp handle"), h.rank);
    auto it = connects_.find(h.connId);
    if (it == connects_.end()) {
      PendingConnect pc;
      pc.handle = h;
      COLL_ASSIGN_OR_RETURN(pc.addr, h.listen.unpack());
      pc.socks.resize(static_cast<size_t>(h.nsocks));
      it = connects_.emplace(h.connId, std::move(pc)).first;
    }
    PendingConnect& pc = it->second;
    bool all = true;
    for (size_t i = 0; i < pc.socks.size(); ++i) {
      Status s = dial(pc, static_cast<int>(i));
      if (!s.isOk()) {
        connects_.erase(it);
        return s;
      }
      all &= pc.socks[i].state == Dialing::State::kDone;
    }
    if (!all) return Status::ok();
    auto c = std::make_unique<SocketSendComm>(h.rank, h.nsocks);
    for (size_t i = 0; i < pc.socks.size(); ++i) c->stream.lanes[i].sock = std::move(pc.socks[i].sock);
    connects_.erase(it);
    *comm = c.release();
    return Status::ok();
  }

  // The proxy drains the listener too, every millisecond at most, for the communicator's
  // whole life: silent sockets are closed after their handshake window even when no setup is
  // running, and the kernel's queue never fills with them (the proxy calls it in its rounds).
  Status poll() override {
    if (!listening_) return Status::ok();
    auto now = Clock::now().time_since_epoch().count();
    if (now - lastServe_ < kServeEveryTicks) return Status::ok();
    serveListener(kAcceptsPerDataPass, false);
    return Status::ok();
  }

  Status accept(ListenComm* listen, RecvComm** comm) override {
    *comm = nullptr;
    auto* l = static_cast<SocketListenComm*>(listen);
    serveListener(kAcceptsPerSetupPass, true);
    for (int i = 0; i < l->nsocks; ++i)
      if (!stash_.count({l->connId, i})) return Status::ok();
    auto c = std::make_unique<SocketRecvComm>(stash_[{l->connId, 0}].srcRank, l->nsocks);
    for (int i = 0; i < l->nsocks; ++i) {
      c->stream.lanes[i].sock = std::move(stash_[{l->connId, i}].sock);
      stash_.erase({l->connId, i});
    }
    *comm = c.release();
    return Status::ok();
  }

  Status regMr(Comm*, void*, size_t, MrHandle** mr) override {
    *mr = new SocketMr();  // sockets read and write any memory: nothing to register
    return Status::ok();
  }
  Status deregMr(Comm*, MrHandle* mr) override {
    delete mr;
    return Status::ok();
  }

  Status isend(SendComm* comm, const void* data, size_t size, int tag, MrHandle*, Request** request) override {
    if (size > std::numeric_limits<uint32_t>::max())
      return COLL_ERROR(collInternalError, FMT_STRING("a tcp message of {} bytes is too large"), size);
    *request = static_cast<SocketSendComm*>(comm)->stream.post(static_cast<char*>(const_cast<void*>(data)), size, tag);
    return Status::ok();
  }

  bool testsEveryRequest() const override { return true; }  // lanes move only what is tested
  Status irecv(RecvComm* comm, void* data, size_t maxSize, int tag, MrHandle*, Request** request) override {
    maxSize = std::min<size_t>(maxSize, std::numeric_limits<uint32_t>::max());
    *request = static_cast<SocketRecvComm*>(comm)->stream.post(static_cast<char*>(data), maxSize, tag);
    return Status::ok();
  }

  Status test(Request* request, int* done, size_t* size) override {
    auto& r = static_cast<SocketRequest&>(*request);
    *done = 0;
    if (!r.complete) {
      if (r.lane->next != r.seq) return Status::ok();  // behind an earlier message of its lane
      Stream& st = *r.stream;
      COLL_TRY(st.sending ? st.push(r, *r.lane) : st.pull(r, *r.lane));
      if (!r.complete) return Status::ok();
    }
    *done = 1;
    if (size) *size = r.size;
    r.inUse = false;
    return Status::ok();
  }

  bool peerClosed(const RecvComm* comm) const override {
    return static_cast<const SocketRecvComm*>(comm)->stream.closed;
  }

  Status closeSend(SendComm* comm) override {
    delete static_cast<SocketSendComm*>(comm);
    return Status::ok();
  }
  Status closeRecv(RecvComm* comm) override {
    delete static_cast<SocketRecvComm*>(comm);
    return Status::ok();
  }
  Status closeListen(ListenComm* comm) override {
    delete static_cast<SocketListenComm*>(comm);  // the listener itself serves the communicator
    return Status::ok();
  }

 private:
  // Moves socket i of a connection attempt one step: connect, wait for it, send the hello.
  Status dial(PendingConnect& pc, int i) {
    Dialing& d = pc.socks[static_cast<size_t>(i)];
    std::string who = fmt::format("rank {}'s tcp data listener", pc.handle.rank);
    if (d.state == Dialing::State::kStart) {
      if (Clock::now() < d.retryAt) return Status::ok();
      d.sock = coll::net::Socket(::socket(pc.addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!d.sock.valid())
        return COLL_ERROR(collSystemError, FMT_STRING("socket() for {} failed: {}"), who, std::strerror(errno));
      int one = 1;
      (void)setsockopt(d.sock.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      int rc = ::connect(d.sock.fd(), reinterpret_cast<const sockaddr*>(&pc.addr.storage), pc.addr.length);
      if (rc == 0) {
        d.state = Dialing::State::kHello;
      } else if (errno == EINPROGRESS) {
        d.state = Dialing::State::kConnecting;
      } else {
        return connectFailed(pc, d, errno, who);
      }
    }
    if (d.state == Dialing::State::kConnecting) {
      pollfd p{d.sock.fd(), POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return Status::ok();
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(d.sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return connectFailed(pc, d, err, who);
      d.state = Dialing::State::kHello;
    }
    if (d.state == Dialing::State::kHello) {
      if (d.sent == 0) {
        tuneSocket(d.sock.fd());
        d.hello = SocketHello{kSocketHelloMagic, config_.secret, pc.handle.connId, config_.rank, i};
      }
      ssize_t k = ::send(d.sock.fd(), reinterpret_cast<char*>(&d.hello) + d.sent, sizeof(d.hello) - d.sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && wouldBlock(errno)) return Status::ok();
      if (k <= 0)
        return COLL_ERROR(collRemoteError, FMT_STRING("sending to {} failed: {}"), who,
                          k < 0 ? std::strerror(errno) : "connection closed");
      d.sent += static_cast<size_t>(k);
      if (d.sent == sizeof(d.hello)) d.state = Dialing::State::kDone;
    }
    return Status::ok();
  }

  // A connect that failed with errno err: refused is final (the receiver listened, so it is gone);
  // unreachable and the like are retried with backoff until the caller's deadline.
  Status connectFailed(PendingConnect& pc, Dialing& d, int err, const std::string& who) {
    d.sock.close();
    d.state = Dialing::State::kStart;
    if (err == ECONNREFUSED)
      return COLL_ERROR(collRemoteError, FMT_STRING("{} at {} refused the connection: it is no longer running"), who,
                        pc.addr.toString());
    if (err != ETIMEDOUT && err != ENETUNREACH && err != EHOSTUNREACH && err != ECONNRESET && err != EAGAIN)
      return COLL_ERROR(collSystemError, FMT_STRING("cannot connect to {} at {}: {}"), who, pc.addr.toString(),
                        std::strerror(err));
    COLL_LOG(TRACE, NET, "rank {}: connecting to {} at {}: {}; retrying in {} ms", config_.rank, who,
             pc.addr.toString(), std::strerror(err), d.backoffMs);
    d.retryAt = Clock::now() + std::chrono::milliseconds(d.backoffMs);
    d.backoffMs = std::min(d.backoffMs * 2, 200);
    return Status::ok();
  }

  // Sockets arrive in any order and may belong to other connections: each authenticated one is
  // stashed until its connection's accept() asks. Unauthenticated sockets are bounded in number
  // (kMaxPendingHellos here, the process's budget in all, a new one replacing the oldest) and in
  // time (closed after handshakeMs). One epoll set holds the listener and every pending socket, so
  // a pass costs one epoll_wait plus a recv() per socket that sent something: a thousand silent
  // connections cost the data path nothing (they used to cost a recv() each, every millisecond).
  // At most maxAccepts new sockets per pass. Only the setup's accept() replaces silent sockets
  // when the budget is spent (replace): it is what waits for an honest connection. The data path
  // takes few new sockets and replaces none, so that an attacker who reconnects as fast as
  // sockets are dropped costs it at most the sockets whose handshake window ended.
  void serveListener(int maxAccepts, bool replace) {
    lastServe_ = Clock::now().time_since_epoch().count();
    bool listenerReady = false;
    epoll_event events[64];
    for (int round = 0; round < 16; ++round) {
      int n = epoll_wait(epoll_, events, 64, 0);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kListenerKey) {
          listenerReady = true;
          continue;
        }
        auto it = hellos_.find(events[i].data.u64);
        if (it != hellos_.end() && readHello(it->second)) hellos_.erase(it);
      }
      if (n < 64) break;
    }
    // Silent sockets past their handshake window; the oldest first (every window is equally long).
    auto now = Clock::now();
    while (!hellos_.empty() && hellos_.begin()->second.deadline <= now) {
      PendingHello& p = hellos_.begin()->second;
      dropHello(p, fmt::format("timed out waiting for data from a tcp data connection from {}", p.from.toString()));
      hellos_.erase(hellos_.begin());
    }
    if (!listenerReady) return;
    for (int accepted = 0; accepted < maxAccepts; ++accepted) {
      PendingHello p;
      bool room = hellos_.size() < kMaxPendingHellos && p.slot.tryTake();
      if (!room && replace && !hellos_.empty() &&
          hellos_.begin()->second.start < Clock::now() - coll::net::kReplaceSilentAfter) {
        // Replace the oldest silent socket (hellos_ is in arrival order), once it had time to
        // speak: an honest hello follows its connection within a millisecond or so.
        dropHello(hellos_.begin()->second, "replaced by a newer connection (too many silent ones)");
        hellos_.erase(hellos_.begin());
        room = p.slot.tryTake();
      }
      if (!room) room = hellos_.size() < coll::net::kListenerFloor;
      if (!room) break;
      p.sock = listener_.accept(&p.from);
      if (!p.sock.valid()) break;
      p.start = Clock::now();
      p.deadline = p.start + std::chrono::milliseconds(std::min(config_.timeoutMs, config_.handshakeMs));
      // An honest sender's hello is usually there by the time its socket leaves the queue: read it
      // now, before newer sockets of a flood could replace this one.
      if (readHello(p)) continue;
      uint64_t key = nextKey_++;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = key;
      if (epoll_ctl(epoll_, EPOLL_CTL_ADD, p.sock.fd(), &ev) != 0) {
        dropHello(p, fmt::format("epoll_ctl failed: {}", std::strerror(errno)));
        continue;
      }
      hellos_.emplace(key, std::move(p));
    }
  }

  void dropHello(PendingHello& p, const std::string& why) {
    uint64_t held = 0;
    if (warnLimit_.allow(&held))
      COLL_LOG(WARN, NET, "rank {}: dropped a data connection from {}: {}{}", config_.rank, p.from.toString(), why,
               held ? fmt::format(" ({} similar line(s) held back in the last second)", held) : "");
    p.sock.close();
    p.slot.release();
  }

  // Reads what has arrived of an accepted socket's hello; true when the socket is dealt with
  // (stashed, or dropped with a WARN line), false while the hello is incomplete.
  bool readHello(PendingHello& p) {
    std::string why;
    while (p.got < sizeof(p.hello)) {
      ssize_t k = ::recv(p.sock.fd(), reinterpret_cast<char*>(&p.hello) + p.got, sizeof(p.hello) - p.got, 0);
      if (k > 0) {
        p.got += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return false;  // the rest comes later (epoll says when), or the deadline ends it
      } else if (k == 0) {
        why = fmt::format("a tcp data connection from {} closed the connection ({} bytes still expected)",
                          p.from.toString(), sizeof(p.hello) - p.got);
      } else {
        why = fmt::format("receiving from a tcp data connection from {} failed: {}", p.from.toString(),
                          std::strerror(errno));
      }
      break;
    }
    if (why.empty() && (p.hello.magic != kSocketHelloMagic || p.hello.secret != config_.secret))
      why = "not this communicator's (bad magic or secret)";
    if (!why.empty()) {
      dropHello(p, why);
      return true;
    }
    p.slot.release();
    if (epoll_ >= 0) (void)epoll_ctl(epoll_, EPOLL_CTL_DEL, p.sock.fd(), nullptr);  // stays open: stashed
    tuneSocket(p.sock.fd());
    stash_[{p.hello.connId, p.hello.sockIndex}] = Accepted{std::move(p.sock), p.hello.srcRank};
    return true;
  }

  Config config_;
  coll::net::Listener listener_;
  bool listening_ = false;  // set once by listen()
  // Accepted sockets whose hello is incomplete, by their key in the epoll set (keys grow, so the
  // map is in arrival order, and so in deadline order).
  std::map<uint64_t, PendingHello> hellos_;
  static constexpr uint64_t kListenerKey = 0;
  uint64_t nextKey_ = 1;
  int epoll_ = -1;            // the listener and the sockets in hellos_
  Clock::rep lastServe_ = 0;  // when serveListener last ran
  coll::log::RateLimit warnLimit_;
  std::map<std::pair<uint64_t, int>, Accepted> stash_;  // (connId, sockIndex)
  std::map<uint64_t, PendingConnect> connects_;         // by connId
};

}  // namespace

std::shared_ptr<Provider> openSocketProvider(const Config& config) { return std::make_shared<SocketProvider>(config); }

}  // namespace coll::transport::net
