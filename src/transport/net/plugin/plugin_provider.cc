// A network provider (net.h) over the process's NCCL net plugin (plugin_net.h): the network
// transport's FIFO logic runs unchanged over any fabric a plugin reaches (EFA through
// aws-ofi-nccl, IB and RoCE through nccl-rdma-sharp-plugins, Google's gIB).
//
// What coll adds around the plugin's calls:
//   - the secret: a plugin's connections carry no coll secret, so each sender's first message
//     is a hello with the communicator's secret and its rank; the receiver's accept() completes
//     only once that hello checks out, and drops the connection otherwise (like the socket
//     provider's handshake);
//   - the receiver's rank in the handle after the plugin's bytes, so that errors name the peer;
//   - a failed receive (the peer died or reset) is not thrown at whoever happens to poll: the
//     connection is marked closed with the plugin's reason, and only a caller still waiting
//     for that peer's data fails, naming it (the transport's peerClosed());
//   - a per-device budget of maxComms connections, maxP2pBytes per message, and the plugin's
//     own request limit (a null request means "post again later");
//   - irecvConsumed once a completed receive's slot is consumed, and iflush after receives on
//     devices that ask for it (forceFlush), as NCCL does.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/log.h"
#include "transport/net/net.h"
#include "transport/net/nic_locality.h"
#include "transport/net/plugin/nccl_net_abi.h"
#include "transport/net/plugin/plugin_net.h"

namespace coll::transport::net {
namespace {

using plugin::resultName;

constexpr uint32_t kHandleMagic = 0xc011e7a1u;
constexpr uint64_t kHelloMagic = 0xc011'4e11'0c0d'e5a1ull;
constexpr int kHelloTag = 0x7c011;  // plugins match tags between isend and irecv: both sides use it

// Our handle: the plugin's bytes, then who listens.
struct PluginHandle {
  unsigned char plugin[abi::kHandleMaxBytes];
  uint32_t magic;
  int32_t rank;
};
static_assert(sizeof(PluginHandle) <= kHandleBytes, "a plugin handle fits a Handle");

struct HelloMsg {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t reserved;
};

struct PListen : ListenComm {
  void* comm = nullptr;
  const plugin::Device* dev = nullptr;  // the NIC it listens on
  // A connection accepted from the plugin whose hello is not in yet.
  void* pending = nullptr;
  void* pendingMr = nullptr;
  void* pendingReq = nullptr;
  std::chrono::steady_clock::time_point pendingSince;
  HelloMsg hello{};
};

struct PRecv;

// A send or receive the caller tests, kept in its comm's pool (no allocation per message): at most
// kMaxSlots are in flight per connection, one per FIFO slot.
struct PRequest : Request {
  void* req = nullptr;
  PRecv* recv = nullptr;  // null for a send
  int peer = -1;
  // forceFlush devices: the flush posted after the receive completed, and the receive's size.
  void* flush = nullptr;
  size_t size = 0;
  void* data = nullptr;
  void* mh = nullptr;
  bool inUse = false;
};

struct PRequestPool {
  std::array<PRequest, kMaxSlots> slots;
  /// A free request, reset; null when all are in flight.
  PRequest* take() {
    for (PRequest& r : slots)
      if (!r.inUse) {
        r = PRequest{};
        r.inUse = true;
        return &r;
      }
    return nullptr;
  }
};

struct PSend : SendComm {
  void* comm = nullptr;
  const plugin::Device* dev = nullptr;
  int peer = -1;
  PRequestPool requests;
};

struct PRecv : RecvComm {
  void* comm = nullptr;
  const plugin::Device* dev = nullptr;
  int peer = -1;
  std::string failed;  // why the connection is closed ("" while it works)
  PRequestPool requests;
  // Plugin requests done and not yet consumed (irecvConsumed), oldest first: a ring, since at
  // most one per FIFO slot waits.
  std::array<void*, kMaxSlots> completed{};
  size_t completedHead = 0, completedCount = 0;
};

struct PMr : MrHandle {
  void* mh = nullptr;
};

class PluginProvider final : public Provider {
 public:
  PluginProvider(plugin::Net* net, const Config& config) : net_(net), config_(config) {
    const auto& devs = net_->devices();
    std::vector<DeviceSpot> spots;
    for (const plugin::Device& d : devs) spots.push_back({d.name, d.pciPath});
    std::string why;
    for (int i : nearestDevices(spots, config, &why)) near_.push_back(&devs[static_cast<size_t>(i)]);
    if (devs.size() > 1) COLL_LOG(INFO, NET, "net plugin: rank {} uses {}", config.rank, why);
    next_ = static_cast<size_t>(std::max(0, config.localRank));
    who_ = fmt::format("net plugin '{}' v{}", net_->name(), net_->version());
    // NCCL passes its communicator's hash; ours is derived from the secret, never the secret.
    uint64_t commId = config.secret * 0x9e3779b97f4a7c15ull ^ 0xc011c011c011c011ull;
    int r = net_->initComm(commId, abi::kTrafficClassUndef, &ctx_);
    if (r != abi::kSuccess) initError_ = fail(collSystemError, "init", -1, r);
  }
  ~PluginProvider() override {
    int r = net_->finalize(ctx_);
    if (r != abi::kSuccess) COLL_LOG(WARN, NET, "{}: finalize failed with {}", who_, resultName(r));
  }

  const char* name() const override { return "ncclnet"; }
  int devices() const override { return 1; }
  Result<Properties> properties(int) const override {
    Properties p;
    p.name = near_[0]->name;
    for (const plugin::Device* d : near_) {
      if (d != near_[0]) p.name += "," + d->name;
      p.speedMbps = p.speedMbps ? std::min(p.speedMbps, d->speedMbps) : d->speedMbps;
    }
    p.maxMessageBytes = maxMessage();
    p.maxRequests = 0;  // the plugin's: a null request says so
    return p;
  }

  Status listen(int, Handle* handle, ListenComm** out) override {
    COLL_TRY(initError_);
    auto l = std::make_unique<PListen>();
    l->dev = pickDevice();
    PluginHandle h{};
    int r = net_->listen(ctx_, l->dev->index, h.plugin, &l->comm);
    if (r != abi::kSuccess) return fail(collSystemError, "listen", -1, r);
    h.magic = kHandleMagic;
    h.rank = config_.rank;
    std::memset(handle->bytes, 0, kHandleBytes);
    std::memcpy(handle->bytes, &h, sizeof(h));
    *out = l.release();
    return Status::ok();
  }

  Status connect(int, const Handle& handle, SendComm** out) override {
    *out = nullptr;
    COLL_TRY(initError_);
    PluginHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kHandleMagic)
      return COLL_ERROR(collInternalError, FMT_STRING("{}: a malformed connection handle"), who_);
    std::string key(reinterpret_cast<const char*>(handle.bytes), sizeof(h));
    Pending& p = pending_[key];
    if (!p.comm) {
      if (!p.reserved) {
        p.dev = pickDevice();
        COLL_TRY(reserveComm(p.dev));
        p.reserved = true;
        // Plugins keep their connect state in the handle (NCCL's socket and IB plugins do): every
        // retry must pass the same buffer, so it lives here and not in the caller's copy.
        std::memcpy(p.handle, h.plugin, sizeof(p.handle));
      }
      int r = net_->connect(ctx_, p.dev->index, abi::kTrafficClassUndef, p.handle, &p.comm);
      if (r != abi::kSuccess) {
        releaseComm(p.dev);
        pending_.erase(key);
        return fail(collRemoteError, "connect", h.rank, r);
      }
      if (!p.comm) return Status::ok();  // not up yet: called again
      p.hello = HelloMsg{kHelloMagic, config_.secret, config_.rank, 0};
      r = net_->regMr(p.comm, &p.hello, sizeof(p.hello), abi::kPtrHost, &p.mr);
      if (r != abi::kSuccess) return dropPending(key, fail(collSystemError, "regMr", h.rank, r));
    }
    if (!p.req) {
      int r = net_->isend(p.comm, &p.hello, sizeof(p.hello), kHelloTag, p.mr, &p.req);
      if (r != abi::kSuccess) return dropPending(key, fail(collRemoteError, "isend", h.rank, r));
      if (!p.req) return Status::ok();
    }
    int done = 0;
    int r = net_->test(p.req, &done, nullptr);
    if (r != abi::kSuccess) return dropPending(key, fail(collRemoteError, "test", h.rank, r));
    if (!done) return Status::ok();
    (void)net_->deregMr(p.comm, p.mr);
    auto s = std::make_unique<PSend>();
    s->comm = p.comm;
    s->dev = p.dev;
    s->peer = h.rank;
    pending_.erase(key);
    *out = s.release();
    return Status::ok();
  }

  Status accept(ListenComm* base, RecvComm** out) override {
    *out = nullptr;
    auto* l = static_cast<PListen*>(base);
    if (!l->pending) {
      int r = net_->accept(l->comm, &l->pending);
      if (r != abi::kSuccess) return fail(collRemoteError, "accept", -1, r);
      if (!l->pending) return Status::ok();
      l->pendingSince = std::chrono::steady_clock::now();
      r = net_->regMr(l->pending, &l->hello, sizeof(l->hello), abi::kPtrHost, &l->pendingMr);
      if (r != abi::kSuccess) return fail(collSystemError, "regMr", -1, r);
    }
    if (!l->pendingReq) {
      int r = net_->irecv(l->pending, &l->hello, sizeof(l->hello), kHelloTag, l->pendingMr, &l->pendingReq);
      if (r != abi::kSuccess) return refuse(l, fmt::format("irecv failed with {}", resultName(r)));
      if (!l->pendingReq) return Status::ok();
    }
    int done = 0;
    size_t size = 0;
    int r = net_->test(l->pendingReq, &done, &size);
    if (r != abi::kSuccess) return refuse(l, fmt::format("its hello failed with {}", resultName(r)));
    if (!done) {
      auto waited = std::chrono::steady_clock::now() - l->pendingSince;
      // The sender's hello moves only while the sender calls the plugin, which it may not do
      // until its own setup steps are through: the communicator's deadline applies, not the
      // socket handshake's (a plugin's listen comm serves one connection, so a stranger that
      // holds it cannot be replaced by waiting less).
      if (waited > std::chrono::milliseconds(config_.timeoutMs))
        return refuse(l, fmt::format("no hello within {} ms (COLL_TIMEOUT_MS)", config_.timeoutMs));
      return Status::ok();
    }
    l->pendingReq = nullptr;  // test freed it
    if (size != sizeof(HelloMsg) || l->hello.magic != kHelloMagic || l->hello.secret != config_.secret)
      return refuse(l, "it did not present this communicator's secret");
    (void)net_->deregMr(l->pending, l->pendingMr);
    l->pendingMr = nullptr;
    Status budget = reserveComm(l->dev);
    if (!budget.isOk()) {
      (void)net_->closeRecv(l->pending);
      l->pending = nullptr;
      return budget;
    }
    auto c = std::make_unique<PRecv>();
    c->comm = l->pending;
    c->dev = l->dev;
    c->peer = l->hello.rank;
    l->pending = l->pendingMr = nullptr;
    *out = c.release();
    return Status::ok();
  }

  Status regMr(Comm* comm, void* data, size_t size, MrHandle** out) override {
    auto mr = std::make_unique<PMr>();
    int r = net_->regMr(pluginComm(comm), data, size, abi::kPtrHost, &mr->mh);
    if (r != abi::kSuccess) return fail(collSystemError, "regMr", peerOf(comm), r);
    *out = mr.release();
    return Status::ok();
  }
  Status deregMr(Comm* comm, MrHandle* base) override {
    std::unique_ptr<PMr> mr(static_cast<PMr*>(base));
    int r = net_->deregMr(pluginComm(comm), mr->mh);
    return r == abi::kSuccess ? Status::ok() : fail(collSystemError, "deregMr", peerOf(comm), r);
  }

  Status isend(SendComm* base, const void* data, size_t size, int tag, MrHandle* mr, Request** out) override {
    *out = nullptr;
    auto* s = static_cast<PSend*>(base);
    if (size > maxMessage())
      return COLL_ERROR(collInternalError, FMT_STRING("{}: a message of {} bytes to rank {} exceeds maxP2pBytes {}"),
                        who_, size, s->peer, maxMessage());
    void* req = nullptr;
    int r = net_->isend(s->comm, const_cast<void*>(data), size, tag, static_cast<PMr*>(mr)->mh, &req);
    if (r != abi::kSuccess) return fail(collRemoteError, "isend", s->peer, r);
    if (!req) return Status::ok();  // the plugin's request limit: posted again later
    PRequest* q = s->requests.take();
    if (!q) return COLL_ERROR(collInternalError, FMT_STRING("{}: more than {} sends in flight"), who_, kMaxSlots);
    q->req = req;
    q->peer = s->peer;
    *out = q;
    return Status::ok();
  }

  Status irecv(RecvComm* base, void* data, size_t maxSize, int tag, MrHandle* mr, Request** out) override {
    *out = nullptr;
    auto* c = static_cast<PRecv*>(base);
    if (!c->failed.empty()) return Status::ok();  // closed: nothing more arrives
    void* req = nullptr;
    void* mh = static_cast<PMr*>(mr)->mh;
    int r = net_->irecv(c->comm, data, std::min(maxSize, maxMessage()), tag, mh, &req);
    if (r != abi::kSuccess) {
      markFailed(c, "irecv", r);
      return Status::ok();
    }
    if (!req) return Status::ok();
    PRequest* q = c->requests.take();
    if (!q) return COLL_ERROR(collInternalError, FMT_STRING("{}: more than {} receives in flight"), who_, kMaxSlots);
    q->req = req;
    q->recv = c;
    q->peer = c->peer;
    q->data = data;
    q->mh = mh;
    *out = q;
    return Status::ok();
  }

  Status test(Request* base, int* done, size_t* size) override {
    *done = 0;
    auto* q = static_cast<PRequest*>(base);
    if (q->recv && !q->recv->failed.empty()) return Status::ok();  // never completes: peerClosed() says why
    if (q->flush) return testFlush(q, done, size);
    size_t got = 0;
    int r = net_->test(q->req, done, &got);
    if (r != abi::kSuccess) {
      *done = 0;
      if (!q->recv) return fail(collRemoteError, "test of a send", q->peer, r);
      markFailed(q->recv, "test of a receive", r);
      return Status::ok();
    }
    if (!*done) return Status::ok();
    if (!q->recv) {
      q->inUse = false;
      return Status::ok();
    }
    PRecv* c = q->recv;
    if (c->completedCount < c->completed.size())
      c->completed[(c->completedHead + c->completedCount++) % c->completed.size()] = q->req;
    if (c->dev->forceFlush && got > 0) {
      // The data is visible to the CPU only after the flush completes (NCCL does the same).
      q->size = got;
      r = net_->iflush(q->recv->comm, q->data, got, q->mh, &q->flush);
      if (r != abi::kSuccess) {
        *done = 0;
        markFailed(q->recv, "iflush", r);
        return Status::ok();
      }
      if (q->flush) {
        *done = 0;
        return Status::ok();
      }
    }
    if (size) *size = got;
    q->inUse = false;
    return Status::ok();
  }

  bool peerClosed(const RecvComm* c) const override { return !static_cast<const PRecv*>(c)->failed.empty(); }
  std::string closedReason(const RecvComm* c) const override { return static_cast<const PRecv*>(c)->failed; }

  Status consumed(RecvComm* base, int count) override {
    auto* c = static_cast<PRecv*>(base);
    for (; count > 0 && c->completedCount > 0; --count) {
      void* req = c->completed[c->completedHead];
      c->completedHead = (c->completedHead + 1) % c->completed.size();
      --c->completedCount;
      int r = net_->irecvConsumed(c->comm, req);
      if (r != abi::kSuccess) return fail(collSystemError, "irecvConsumed", c->peer, r);
    }
    return Status::ok();
  }

  Status closeSend(SendComm* base) override {
    std::unique_ptr<PSend> s(static_cast<PSend*>(base));
    int r = net_->closeSend(s->comm);
    releaseComm(s->dev);
    return r == abi::kSuccess ? Status::ok() : fail(collSystemError, "closeSend", s->peer, r);
  }
  Status closeRecv(RecvComm* base) override {
    std::unique_ptr<PRecv> c(static_cast<PRecv*>(base));
    int r = net_->closeRecv(c->comm);
    releaseComm(c->dev);
    return r == abi::kSuccess ? Status::ok() : fail(collSystemError, "closeRecv", c->peer, r);
  }
  Status closeListen(ListenComm* base) override {
    std::unique_ptr<PListen> l(static_cast<PListen*>(base));
    if (l->pending) {
      if (l->pendingMr) (void)net_->deregMr(l->pending, l->pendingMr);
      (void)net_->closeRecv(l->pending);
    }
    int r = net_->closeListen(l->comm);
    return r == abi::kSuccess ? Status::ok() : fail(collSystemError, "closeListen", -1, r);
  }

 private:
  struct Pending {
    void* comm = nullptr;
    void* mr = nullptr;
    void* req = nullptr;
    bool reserved = false;
    const plugin::Device* dev = nullptr;
    HelloMsg hello{};
    unsigned char handle[abi::kHandleMaxBytes];
  };

  size_t maxMessage() const {
    // v6-v8 have no maxP2pBytes and int sizes: 1 GiB, as NCCL assumes for older plugins. The
    // smallest of the devices a connection may use.
    size_t limit = size_t(1) << 30, out = limit * 1024;
    for (const plugin::Device* d : near_) out = std::min(out, d->maxP2pBytes ? d->maxP2pBytes : limit);
    return out;
  }
  // The device of the next connection: the nearest ones in turn, starting at this rank's place
  // among its host's ranks, so that ranks and connections spread over NICs at equal distance.
  const plugin::Device* pickDevice() { return near_[next_++ % near_.size()]; }
  static void* pluginComm(Comm* comm) {
    if (auto* s = dynamic_cast<PSend*>(comm)) return s->comm;
    return static_cast<PRecv*>(comm)->comm;
  }
  static int peerOf(Comm* comm) {
    if (auto* s = dynamic_cast<PSend*>(comm)) return s->peer;
    return static_cast<PRecv*>(comm)->peer;
  }

  // collRemoteError or collSystemError naming the plugin, the call and the peer.
  Status fail(collResult_t code, const char* call, int peer, int r) const {
    std::string whom = peer >= 0 ? fmt::format(" (rank {})", peer) : std::string();
    return Status(code, fmt::format("{}: {}{} failed with {} ({})", who_, call, whom, resultName(r), r));
  }
  void markFailed(PRecv* c, const char* call, int r) {
    if (!c->failed.empty()) return;
    c->failed = fmt::format("{}: {} from rank {} failed with {}", who_, call, c->peer, resultName(r));
    COLL_LOG(INFO, NET, "{}; the connection counts as closed", c->failed);
  }
  Status dropPending(const std::string& key, Status s) {
    Pending& p = pending_[key];
    if (p.mr) (void)net_->deregMr(p.comm, p.mr);
    if (p.comm) (void)net_->closeSend(p.comm);
    if (p.reserved) releaseComm(p.dev);
    pending_.erase(key);
    return s;
  }
  // A connection that never proved itself: logged and dropped; the listener keeps accepting.
  Status refuse(PListen* l, const std::string& why) {
    COLL_LOG(WARN, NET, "{}: refused a connection on rank {}'s listener: {}", who_, config_.rank, why);
    if (l->pendingMr) (void)net_->deregMr(l->pending, l->pendingMr);
    (void)net_->closeRecv(l->pending);
    l->pending = l->pendingMr = l->pendingReq = nullptr;
    return Status::ok();
  }

  // maxComms is per device, across the process's communicators: send and receive comms count.
  Status reserveComm(const plugin::Device* dev) {
    std::lock_guard<std::mutex> lock(commsMu());
    int& n = commsOpen()[dev->index];
    if (dev->maxComms > 0 && n >= dev->maxComms)
      return COLL_ERROR(collSystemError,
                        FMT_STRING("{}: device {} allows {} connections (maxComms) and this process has them all"),
                        who_, dev->name, dev->maxComms);
    ++n;
    return Status::ok();
  }
  void releaseComm(const plugin::Device* dev) {
    std::lock_guard<std::mutex> lock(commsMu());
    --commsOpen()[dev->index];
  }
  static std::mutex& commsMu() {
    static std::mutex m;
    return m;
  }
  static std::map<int, int>& commsOpen() {
    static std::map<int, int> m;
    return m;
  }

  Status testFlush(PRequest* q, int* done, size_t* size) {
    int r = net_->test(q->flush, done, nullptr);
    if (r != abi::kSuccess) {
      *done = 0;
      markFailed(q->recv, "test of a flush", r);
      return Status::ok();
    }
    if (!*done) return Status::ok();
    if (size) *size = q->size;
    q->inUse = false;
    return Status::ok();
  }

  plugin::Net* net_;
  Config config_;
  std::vector<const plugin::Device*> near_;  // the devices nearest this rank (never empty)
  size_t next_ = 0;                          // pickDevice()'s turn
  std::string who_;
  void* ctx_ = nullptr;
  Status initError_;
  std::map<std::string, Pending> pending_;  // connect() attempts by handle
};

}  // namespace

std::shared_ptr<Provider> openPluginProvider(const Config& config) {
  auto loaded = plugin::loadedPlugin();
  return std::make_shared<PluginProvider>(*loaded, config);
}

}  // namespace coll::transport::net
