// The network transport: FIFO slots over a network provider (net.h), written once for every
// provider (sockets as "tcp" today, verbs as "ib" next).
//
// Each side keeps a private FIFO of the same shape as shm's; the connection is proxied
// (ConnInfo::proxied): the process's network proxy thread (transport/proxy.h) makes every call
// into the provider, and moves the slots in each of its rounds through progress(), which never
// blocks:
//   sending end:   every slot the executor publishes (head) is posted as an isend, up to nslots
//                  in flight; requests are tested, and the tail passes each slot, in order, once
//                  its send is complete, which frees the slot for the executor.
//   receiving end: every free slot (below tail + nslots) gets an irecv straight into it; requests
//                  are tested, and head (with the slots' sizes) passes each slot, in order, once
//                  its message is in.
// The descriptor the receiver publishes is the provider's handle plus the FIFO's shape (the
// receiver's nslots and slot size are used on both sides). Setup posts each provider call to the
// proxy, and drives the provider's non-blocking accept until done, under the context's deadline
// and abort flag. A connect may need the receiver's accept to run before it completes (NCCL
// plugins such as aws-ofi-nccl handshake both ways), while the receiver accepts only after the
// sender reported its connect over the bootstrap: so connectSend returns a connection still
// connecting, and its connect is retried by every accept loop of the communicator and by each
// proxy round until it is up. Everything a connection keeps about the provider (comms, requests,
// the list of connections still connecting) is the proxy thread's alone; the executor sees only
// the FIFO, the proxy's error (Connection::proxyFailure) and peerClosed(), which the proxy
// publishes.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "base/log.h"
#include "base/params.h"
#include "transport/net/net.h"
#include "transport/proxy.h"

namespace coll::transport::net {
namespace {

// The receiver's descriptor: this head, then the handle's address bytes (Handle::address).
struct DescriptorHead {
  unsigned char handle[kHandleBytes];
  int32_t nslots;
  uint32_t addressBytes;
  uint64_t slotBytes;
};
// The most address bytes a descriptor may carry (UCX's worker addresses are hundreds).
constexpr size_t kMaxDescriptorAddress = 64 << 10;
// How long a failed operation's sends from the caller's buffer may take to complete before they
// are ended (NetConnection::withdrawRefs): a 512 KiB piece over loopback TCP takes well under 1 ms.
constexpr int64_t kWithdrawGraceMs = 100;

class NetConnection;

// Sending ends of a communicator whose connect is not complete yet (proxy thread only).
struct Connecting {
  std::vector<NetConnection*> conns;
};

// Per-communicator: the provider instance, shared with the connections (they may outlive this
// state, which the communicator destroys first).
class NetState : public TransportState {
 public:
  ~NetState() override {
    // The provider goes on the proxy thread when this is its last holder (its destructor calls it).
    (void)proxy::run([this] {
      provider.reset();
      connecting.reset();
      return Status::ok();
    });
  }
  void abandon() override {
    (void)proxy::run([this] {
      if (provider) provider->abandon();
      return Status::ok();
    });
  }
  std::shared_ptr<Provider> provider;
  std::shared_ptr<Connecting> connecting = std::make_shared<Connecting>();
};

class NetConnection : public Connection {
 public:
  NetConnection(const char* transportName, int peer, bool sending, int nslots, size_t slotBytes,
                std::shared_ptr<Provider> provider)
      : Connection(peer, transportName), provider_(std::move(provider)), sending_(sending) {
    size_t bytes = Fifo::bytesFor(nslots, slotBytes);
    memory_ = std::aligned_alloc(4096, bytes);
    if (!memory_) throw std::bad_alloc();
    info_.fifo = Fifo::over(memory_, nslots, slotBytes, true);
    info_.proxied = true;
    // Sender's messages carry its rank: the receiver checks it on every message.
    tag_ = sending ? -1 : peer;
    // The proxy, this FIFO's consumer, can send large pieces from the executor's buffers.
    if (sending && provider_->sendsUnregistered())
      info_.fifo.header->refsAccepted.store(provider_->sendsTrailers() ? kRefsPlainPrinted : kRefsPlain,
                                            std::memory_order_release);
  }
  ~NetConnection() override {
    // Closed on the proxy thread, which stops moving it first.
    (void)proxy::run([this] {
      proxy::detach(this);
      if (refSends_ > 0)
        COLL_LOG(INFO, NET, "{} connection to rank {}: {} of {} pieces sent from the caller's buffers", transportName(),
                 peer(), refSends_, posted_);
      closeAll();
      provider_.reset();  // when it is the last holder, the provider goes here, on the proxy
      return Status::ok();
    });
    if (!inUse_) std::free(memory_);
  }

  Provider& provider() { return *provider_; }
  ListenComm* listen_ = nullptr;  // receiving end, until completeRecv

  /// Sender (proxy thread): starts connecting to the receiver's handle as `rank` (the messages'
  /// tag); one try now, the rest through tryConnect() until it is up. The proxy moves it from now on.
  Status startConnect(const Handle& handle, int rank, std::shared_ptr<Connecting> registry) {
    handle_ = handle;
    tag_ = rank;
    connecting_ = std::move(registry);
    COLL_TRY(tryConnect());
    if (!up_) {
      connecting_->conns.push_back(this);
      listed_ = true;
    }
    proxy::attach(this, true);
    return Status::ok();
  }
  /// Sender (proxy thread): one more connect try while not up; a connection that came up
  /// registers its slots.
  Status tryConnect() {
    if (send_) return Status::ok();
    SendComm* c = nullptr;
    COLL_TRY(provider_->connect(0, handle_, &c));
    if (!c) return Status::ok();
    send_ = c;
    COLL_TRY(registerSlots());
    up_ = true;
    unlist();
    return Status::ok();
  }
  /// Receiver (proxy thread), once accepted.
  Status setRecv(RecvComm* c) {
    recv_ = c;
    COLL_TRY(provider_->closeListen(listen_));
    listen_ = nullptr;
    return registerSlots();
  }

  bool peerClosed() const override { return closed_.load(std::memory_order_acquire); }
  std::string closedReason() const override { return peerClosed() ? closedWhy_ : std::string(); }

  bool hasUnsentData() const override {
    return sending_ && !withdrawn_.load(std::memory_order_acquire) &&
           info_.fifo.header->tail.load(std::memory_order_acquire) <
               info_.fifo.header->head.load(std::memory_order_relaxed);
  }

  // The references still unposted are never posted (nor is anything after them). Those the
  // provider has get kWithdrawGraceMs to complete (a live receiver posted their receives before
  // the credits let them go: they take a moment); any still under way then (a stopped receiver)
  // is ended by the provider's abortSends.
  void withdrawRefs() override {
    if (!sending_) return;
    (void)proxy::run([this] {
      withdrawn_.store(true, std::memory_order_release);
      auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWithdrawGraceMs);
      bool failed = proxyFailed();
      while (!failed && refsInFlight() && std::chrono::steady_clock::now() < end) {
        Status s = provider_->pollOnce(proxy::roundNumber());
        if (s.isOk()) s = testSends();
        failed = !s.isOk();  // a failed send ended its own request; the others end with the abort
      }
      if (!failed && !refsInFlight()) return Status::ok();
      Status s = provider_->abortSends(send_);
      if (s.isOk())
        COLL_LOG(INFO, NET, "{} connection to rank {}: ended the sends of a failed operation still under way",
                 transportName(), peer());
      else
        COLL_LOG(WARN, NET, "{} connection to rank {}: a failed operation's buffers may still be read: {}",
                 transportName(), peer(), s.message());
      return Status::ok();
    });
  }

  Status progress() override {
    if (withdrawn_.load(std::memory_order_relaxed)) return Status::ok();
    if (sending_) {
      // Published slots go out before the provider's poll (one system call or more): a small
      // message then leaves a round earlier. What credits held back goes after the poll.
      COLL_TRY(postSends());
      COLL_TRY(provider_->pollOnce(proxy::roundNumber()));
      COLL_TRY(postSends());
      return testSends();
    }
    if (!recv_) return Status::ok();  // not accepted yet: completeRecv drives it
    COLL_TRY(provider_->pollOnce(proxy::roundNumber()));
    COLL_TRY(progressRecv());
    if (!closed_.load(std::memory_order_relaxed) && provider_->peerClosed(recv_)) {
      closedWhy_ = provider_->closedReason(recv_);
      closed_.store(true, std::memory_order_release);
    }
    return Status::ok();
  }

  int proxyUrgency() const override {
    if (withdrawn_.load(std::memory_order_relaxed)) return 0;
    if (sending_ && !up_) return 1;
    if (sending_ && (posted_ > info_.fifo.header->tail.load(std::memory_order_relaxed) ||
                     info_.fifo.header->head.load(std::memory_order_relaxed) > posted_))
      return 2;
    return provider_->setupUnderWay() ? 1 : 0;
  }

 private:
  Comm* comm() const { return send_ ? static_cast<Comm*>(send_) : static_cast<Comm*>(recv_); }
  void unlist() {
    if (!listed_) return;
    auto& v = connecting_->conns;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
    listed_ = false;
  }
  // Proxy thread: frees what the provider holds. A provider that could not stop its transfers
  // into or out of the slots says so; the slots' memory is then left allocated rather than freed
  // under it.
  void closeAll() {
    unlist();
    auto keep = [&](Status s) {
      if (s.code() != collInProgress) return;
      COLL_LOG(WARN, NET, "{}", s.message());
      inUse_ = true;
    };
    if (mr_) keep(provider_->deregMr(comm(), mr_));
    if (send_) keep(provider_->closeSend(send_));
    if (recv_) keep(provider_->closeRecv(recv_));
    if (listen_) (void)provider_->closeListen(listen_);
    mr_ = nullptr;
    send_ = nullptr;
    recv_ = nullptr;
    listen_ = nullptr;
  }
  Status registerSlots() {
    return provider_->regMr(comm(), info_.fifo.slots, static_cast<size_t>(info_.fifo.nslots) * info_.fifo.slotBytes,
                            &mr_);
  }
  Request*& request(uint64_t slot) { return requests_[info_.fifo.pos(slot)]; }
  // Sender: whether the provider still has a send from the executor's buffers.
  bool refsInFlight() {
    if (!send_) return false;
    for (uint64_t s = info_.fifo.header->tail.load(std::memory_order_relaxed); s < posted_; ++s)
      if (request(s) && info_.fifo.isRef(s)) return true;
    return false;
  }

  // Sender: post the slots the executor has published (connecting first while not up).
  Status postSends() {
    if (!up_) {
      COLL_TRY(tryConnect());
      if (!up_) return Status::ok();
    }
    const Fifo& f = info_.fifo;
    FifoHeader* h = f.header;
    uint64_t head = h->head.load(std::memory_order_acquire);
    for (; posted_ < head; ++posted_) {  // head <= tail + nslots: never more than nslots in flight
      Request* r = nullptr;
      if (f.isRef(posted_)) {  // the executor's own buffer, unchanged until the send completes
        const void* data = reinterpret_cast<const void*>(static_cast<uintptr_t>(f.refAddress(posted_)));
        if (const void* print = f.refPrint(posted_))  // stays in the tag line until the slot is released
          COLL_TRY(provider_->isendTrailer(send_, data, f.bytesIn(posted_), print, kPrintBytes, tag_, &r));
        else
          COLL_TRY(provider_->isend(send_, data, f.bytesIn(posted_), tag_, nullptr, &r));
        refSends_ += r != nullptr;
      } else {
        COLL_TRY(provider_->isend(send_, f.slot(posted_), h->sizes[f.pos(posted_)], tag_, mr_, &r));
      }
      if (!r) break;
      request(posted_) = r;
    }
    return Status::ok();
  }
  // Sender: test the sends in flight, pass the tail over the completed ones in order.
  Status testSends() {
    if (!up_) return Status::ok();
    const Fifo& f = info_.fifo;
    FifoHeader* h = f.header;
    uint64_t tail = h->tail.load(std::memory_order_relaxed);  // this side writes it
    for (uint64_t s = tail; s < posted_; ++s) {
      Request*& r = request(s);
      if (!r) continue;
      int done = 0;
      COLL_TRY(provider_->test(r, &done, nullptr));
      if (!done && !testsEvery_) break;  // the rest wait behind it (net.h)
      if (done) r = nullptr;
    }
    uint64_t newTail = tail;
    while (newTail < posted_ && !request(newTail)) ++newTail;
    if (newTail != tail) h->tail.store(newTail, std::memory_order_release);
    return Status::ok();
  }

  // Receiver: post receives into the free slots, test those in flight, pass head over the
  // completed ones in order (their sizes first).
  Status progressRecv() {
    const Fifo& f = info_.fifo;
    FifoHeader* h = f.header;
    uint64_t tail = h->tail.load(std::memory_order_acquire);
    if (tail != consumed_) {  // the executor freed slots: their receives' data is consumed
      COLL_TRY(provider_->consumed(recv_, static_cast<int>(tail - consumed_)));
      consumed_ = tail;
    }
    for (; posted_ < tail + static_cast<uint64_t>(f.nslots); ++posted_) {
      Request* r = nullptr;
      COLL_TRY(provider_->irecv(recv_, f.slot(posted_), f.slotBytes, tag_, mr_, &r));
      if (!r) break;
      request(posted_) = r;
    }
    uint64_t head = h->head.load(std::memory_order_relaxed);  // this side writes it
    for (uint64_t s = head; s < posted_; ++s) {
      Request*& r = request(s);
      if (!r) continue;
      int done = 0;
      size_t size = 0;
      COLL_TRY(provider_->test(r, &done, &size));
      if (!done && !testsEvery_) break;
      if (!done) continue;
      h->sizes[f.pos(s)] = static_cast<uint32_t>(size);
      r = nullptr;
    }
    uint64_t newHead = head;
    while (newHead < posted_ && !request(newHead)) ++newHead;
    if (newHead != head) h->head.store(newHead, std::memory_order_release);
    return Status::ok();
  }

  std::shared_ptr<Provider> provider_;
  bool testsEvery_ = provider_->testsEveryRequest();
  bool sending_;
  int tag_ = 0;
  void* memory_ = nullptr;
  SendComm* send_ = nullptr;
  RecvComm* recv_ = nullptr;
  MrHandle* mr_ = nullptr;
  Handle handle_{};                         // sender: the receiver's handle, kept for connect retries
  bool up_ = false;                         // sender: connected and its slots registered
  std::shared_ptr<Connecting> connecting_;  // sender: the communicator's connections still connecting
  bool listed_ = false;                     // sender: in connecting_->conns
  bool inUse_ = false;                      // the provider could not stop a transfer: memory_ stays
  std::atomic<bool> closed_{false};         // receiver: the peer closed (published by the proxy)
  std::atomic<bool> withdrawn_{false};      // sender: a failed operation's end; nothing moves any more
  std::string closedWhy_;                   // ... and why; written before closed_
  uint64_t posted_ = 0;                     // slots handed to the provider (isend or irecv)
  uint64_t consumed_ = 0;                   // receiving end: slots reported to provider->consumed()
  uint64_t refSends_ = 0;                   // sending end: pieces sent from the executor's buffers
  Request* requests_[kMaxSlots] = {};       // per slot in flight: its request; null once complete
};

// Calls step() until it reports done, under the context's deadline and abort flag. step() never
// blocks; between calls this yields, then sleeps up to a millisecond.
template <typename Step>
Status driveSetup(const Context& ctx, Step step, const std::string& abortMessage, const std::string& timeoutMessage) {
  auto deadline = coll::net::Deadline::afterMs(ctx.timeoutMs);
  int64_t sleepUs = 0;
  for (int i = 0;; ++i) {
    bool done = false;
    COLL_TRY(step(&done));
    if (done) return Status::ok();
    if (ctx.abort && ctx.abort->load(std::memory_order_relaxed)) return Status(collRemoteError, abortMessage);
    if (deadline.expired()) return Status(collTimeout, timeoutMessage);
    if (i < 64) {
      sched_yield();
      continue;
    }
    sleepUs = std::min<int64_t>(sleepUs ? sleepUs * 2 : 20, 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
  }
}

class NetTransport : public Transport {
 public:
  NetTransport(const char* name, const Caps& caps, ProviderFactory open, std::string (*detail)())
      : name_(name), caps_(caps), open_(open), detail_(detail) {}
  const char* name() const override { return name_; }
  std::string detail() const override { return detail_ ? detail_() : std::string(); }
  bool canConnect(const bootstrap::RankInfo&, const bootstrap::RankInfo&) const override { return true; }
  Caps caps() const override { return caps_; }
  std::unique_ptr<TransportState> newState(const Context& ctx) const override {
    Config config;
    config.rank = ctx.rank;
    config.secret = ctx.secret;
    config.nsocks = ctx.nsocks;
    config.bindAddress = ctx.bindAddress;
    config.timeoutMs = ctx.timeoutMs;
    config.handshakeMs = std::max<int64_t>(1, params::kHandshakeTimeoutMs.get());
    config.cudaDev = ctx.cudaDev;
    if (ctx.peers && ctx.rank >= 0 && ctx.rank < static_cast<int>(ctx.peers->size())) {
      uint64_t host = (*ctx.peers)[ctx.rank].hostHash;
      for (int r = 0; r < ctx.rank; ++r) config.localRank += (*ctx.peers)[r].hostHash == host;
      config.numa = (*ctx.peers)[ctx.rank].numa;
    }
    auto state = std::make_unique<NetState>();
    (void)proxy::run([&] {
      state->provider = open_(config);
      return Status::ok();
    });
    return state;
  }

  Result<std::unique_ptr<Connection>> createRecv(const Context& ctx, TransportState& base, int peer,
                                                 std::vector<char>* descriptor) const override {
    auto& state = static_cast<NetState&>(base);
    DescriptorHead d{};
    d.nslots = ctx.nslots;
    d.slotBytes = ctx.slotBytes;
    auto conn = std::make_unique<NetConnection>(name_, peer, false, d.nslots, d.slotBytes, state.provider);
    Handle handle{};
    NetConnection* c = conn.get();
    COLL_TRY(proxy::run([&] {
      COLL_TRY(c->provider().listen(0, &handle, &c->listen_));
      proxy::attach(c, false);
      return Status::ok();
    }));
    if (handle.address.size() > kMaxDescriptorAddress)
      return COLL_ERROR(collInternalError, FMT_STRING("{}: a connection address of {} bytes"), name_,
                        handle.address.size());
    std::memcpy(d.handle, handle.bytes, kHandleBytes);
    d.addressBytes = static_cast<uint32_t>(handle.address.size());
    descriptor->assign(reinterpret_cast<char*>(&d), reinterpret_cast<char*>(&d) + sizeof(d));
    descriptor->insert(descriptor->end(), handle.address.begin(), handle.address.end());
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Result<std::unique_ptr<Connection>> connectSend(const Context& ctx, TransportState& base, int peer,
                                                  const std::vector<char>& descriptor) const override {
    auto& state = static_cast<NetState&>(base);
    DescriptorHead d;
    if (descriptor.size() < sizeof(DescriptorHead) ||
        (std::memcpy(&d, descriptor.data(), sizeof(d)), d.nslots < 1 || d.nslots > kMaxSlots || d.slotBytes == 0 ||
                                                            d.addressBytes > kMaxDescriptorAddress ||
                                                            descriptor.size() != sizeof(d) + d.addressBytes))
      return COLL_ERROR(collInternalError, FMT_STRING("rank {} sent a malformed {} descriptor"), peer, name_);
    Handle handle{};
    std::memcpy(handle.bytes, d.handle, kHandleBytes);
    handle.address.assign(descriptor.data() + sizeof(d), d.addressBytes);
    auto conn = std::make_unique<NetConnection>(name_, peer, true, d.nslots, d.slotBytes, state.provider);
    NetConnection* c = conn.get();
    Status s = proxy::run([&] { return c->startConnect(handle, ctx.rank, state.connecting); });
    if (!s.isOk())
      return Status(s.code(), fmt::format("connecting to rank {}'s {} data listener: {}", peer, name_, s.message()));
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Status completeRecv(const Context& ctx, TransportState& base, Connection& c) const override {
    auto& state = static_cast<NetState&>(base);
    auto& conn = static_cast<NetConnection&>(c);
    RecvComm* comm = nullptr;
    std::string what = fmt::format("rank {} to open its {} data connection", conn.peer(), name_);
    COLL_TRY(driveSetup(
        ctx,
        [&](bool* done) {
          return proxy::run([&] {
            // This rank's own connects may wait for their receivers' accepts, which wait for ours.
            std::vector<NetConnection*> pending = state.connecting->conns;
            for (NetConnection* p : pending) COLL_TRY(p->tryConnect());
            COLL_TRY(conn.provider().accept(conn.listen_, &comm));
            if (comm) COLL_TRY(conn.setRecv(comm));
            *done = comm != nullptr;
            return Status::ok();
          });
        },
        "aborted while waiting for " + what, "timed out waiting for " + what));
    return Status::ok();
  }

 private:
  const char* name_;
  Caps caps_;
  ProviderFactory open_;
  std::string (*detail_)();
};

}  // namespace

std::unique_ptr<Transport> newNetTransport(const char* transportName, const Caps& caps, ProviderFactory open,
                                           std::string (*detail)()) {
  return std::make_unique<NetTransport>(transportName, caps, open, detail);
}

}  // namespace coll::transport::net
