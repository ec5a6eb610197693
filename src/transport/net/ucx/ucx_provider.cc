// The UCX provider: coll's own network over UCP (ucp_*), the library Open MPI and UCC use for
// InfiniBand and RoCE (rc/dc with UCX's defaults) and that also runs over TCP (UCX_TLS=tcp).
//
// One UCP context per process (UCX_* variables configure it), one worker per communicator,
// progressed by whoever drives the provider (the communicator's Progress). A connection:
//   receiver: listen() opens the worker's listener once (the communicator's interface, port 0)
//             and a random 64-bit connection id; the handle carries address, port, id and rank.
//   sender:   connect() creates a client endpoint to that address and streams a hello (secret,
//             connection id, rank); the connection is up once the hello went out.
//   receiver: each connection request becomes an endpoint that must stream a valid hello within
//             COLL_HANDSHAKE_TIMEOUT_MS, or it is closed (the socket provider's rule); a valid
//             hello hands it to the listen comm with that id.
// Data: tagged messages (ucp_tag_send_nbx / ucp_tag_recv_nbx) with the connection id as the tag,
// matched in order per sender, straight into the FIFO slots, registered with ucp_mem_map.
// Flow control: the receiver streams the number of receives it has posted back over its
// endpoint, and the sender never sends beyond it, so no message arrives unexpected and UCX never
// buffers more than the receiver asked for (its FIFO's free slots).
// Setup progress: UCX moves a connection request and a hello only while the workers on both
// sides are progressed, and coll's setup has each side wait for the other over the bootstrap in
// between; so while any connection is being set up, a helper thread progresses the worker every
// 100 us (every call holds the provider's lock), and it sleeps once all are up.
// Failures: an endpoint error (peer died, reset) ends the connection; a sender's call fails with
// collRemoteError naming the peer, a receiver's connection counts as closed with UCX's reason
// (only an error for a caller still waiting for that peer, as with sockets).
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "transport/net/net.h"

namespace coll::transport {
namespace net {
namespace {

constexpr uint32_t kHandleMagic = 0xc011cc11u;
constexpr uint64_t kHelloMagic = 0xc011'0c11'4e11'0000ull;
constexpr uint64_t kCreditBatch = 4;
constexpr uint64_t kCreditLow = 2;

struct UcxHandle {
  uint32_t magic;
  int32_t rank;
  uint64_t connId;
  sockaddr_storage addr;
};
static_assert(sizeof(UcxHandle) <= kHandleBytes, "a UCX handle fits a Handle");

struct HelloMsg {
  uint64_t magic;
  uint64_t secret;
  uint64_t connId;
  int32_t rank;
  int32_t reserved;
};

std::string statusText(ucs_status_t s) { return ucs_status_string(s); }

// The process's UCP context, created on first use; an error is kept and reported each time.
struct Context {
  ucp_context_h h = nullptr;
  std::string error;
};
const Context& ucpContext() {
  static Context ctx;
  static std::once_flag once;
  std::call_once(once, [] {
    // UCX's tcp transport sends messages above its 8 KiB segment by rendezvous, which made an
    // 8 KiB all-reduce 4x slower than with 64 KiB segments (45 us against 11 us, 2 ranks on
    // loopback) and changed nothing above. Transport settings are read from the environment
    // only (ucp_config_modify does not reach them), so they are set there, where the user set
    // neither; the process's other UCX users see them too (README: Networks).
    setenv("UCX_TCP_TX_SEG_SIZE", "64k", 0);
    setenv("UCX_TCP_RX_SEG_SIZE", "64k", 0);
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) {
      ctx.error = "ucp_config_read: " + statusText(s);
      return;
    }
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM;
    p.mt_workers_shared = 1;  // one worker per communicator, communicators on several threads
    s = ucp_init(&p, config, &ctx.h);
    ucp_config_release(config);
    if (s != UCS_OK) ctx.error = "ucp_init: " + statusText(s);
  });
  return ctx;
}

// One operation in flight: UCX's callbacks write here (user_data).
struct Op {
  bool done = false;
  ucs_status_t status = UCS_OK;
  size_t length = 0;
  void* handle = nullptr;             // UCX's request while pending
  bool tagRecv = false;               // a tag receive (the only kind UCX can cancel)
  std::vector<unsigned char> buffer;  // for small control messages (hello, credits)
};

void onSend(void*, ucs_status_t status, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->done = true;
}
void onTagRecv(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->length = info ? info->length : 0;
  op->done = true;
}
void onStreamRecv(void*, ucs_status_t status, size_t length, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->length = length;
  op->done = true;
}

// Folds an nbx call's return into op: done at once, pending, or failed.
void started(Op* op, ucs_status_ptr_t ptr) {
  if (ptr == nullptr) {
    op->done = true;
    op->status = UCS_OK;
  } else if (UCS_PTR_IS_ERR(ptr)) {
    op->done = true;
    op->status = UCS_PTR_STATUS(ptr);
  } else {
    op->handle = ptr;
  }
}
// Frees UCX's request once op completed.
void release(Op* op) {
  if (op->handle) {
    ucp_request_free(op->handle);
    op->handle = nullptr;
  }
}
// Gives up a request still in flight (a connection being closed): a tag receive is cancelled
// (UCX cancels only those); any request is then freed, which UCX allows in any state (it finishes
// internally and calls nothing back). Never waits.
void cancel(ucp_worker_h worker, Op* op) {
  if (!op->handle) return;
  if (!op->done && op->tagRecv) ucp_request_cancel(worker, op->handle);
  ucp_request_free(op->handle);
  op->handle = nullptr;
}

struct Endpoint;  // an endpoint's error state, shared with its error callback
void onEpError(void* arg, ucp_ep_h, ucs_status_t status);

struct Endpoint {
  ucp_ep_h ep = nullptr;
  ucs_status_t error = UCS_OK;
};

void onEpError(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<Endpoint*>(arg)->error = status; }

struct URecv;

// A send or receive the caller tests; kept in its comm's pool (no allocation per message): at most
// kMaxSlots are in flight per connection, one per FIFO slot.
struct URequest : Request {
  Op op;
  int peer = -1;
  URecv* owner = nullptr;  // the receiving comm; null for a send
  bool inUse = false;
};

struct RequestPool {
  std::array<URequest, kMaxSlots> slots;
  /// A free request, reset; null when all are in flight (the caller posts again later).
  URequest* take(int peer, URecv* owner) {
    for (URequest& r : slots)
      if (!r.inUse) {
        r.op = Op{};
        r.peer = peer;
        r.owner = owner;
        r.inUse = true;
        return &r;
      }
    return nullptr;
  }
};

struct UListen : ListenComm {
  uint64_t connId = 0;
  bool open = true;  // not accepted yet: counts as a setup in progress
};

struct USend : SendComm {
  std::unique_ptr<Endpoint> ep;
  int peer = -1;
  uint64_t tag = 0;
  Op hello;
  Op credit;  // the stream receive of the receiver's posted count
  uint64_t creditBuf = 0;
  uint64_t allowed = 0;  // receives the peer has posted
  uint64_t sent = 0;     // messages posted
  RequestPool requests;  // in flight until test() reports them done; cancelled at close
};

struct URecv : RecvComm {
  std::unique_ptr<Endpoint> ep;
  int peer = -1;
  uint64_t tag = 0;
  uint64_t posted = 0;     // receives posted
  uint64_t told = 0;       // ... of which the sender has been told
  uint64_t completed = 0;  // ... of which are done
  Op creditOut;
  uint64_t creditBuf = 0;
  std::string closed;    // why it is closed ("" while open)
  RequestPool requests;  // in flight until test() reports them done; cancelled at close
};

struct UMr : MrHandle {
  ucp_mem_h memh = nullptr;
};

// A connection request turned endpoint, waiting for its hello.
struct Incoming {
  std::unique_ptr<Endpoint> ep;
  Op hello;
  std::chrono::steady_clock::time_point since;
};

class UcxProvider final : public Provider {
 public:
  explicit UcxProvider(const Config& config) : config_(config) {
    const Context& ctx = ucpContext();
    if (!ctx.h) {
      initError_ = Status(collSystemError, "UCX failed to initialise: " + ctx.error);
      return;
    }
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // one thread at a time drives a provider (net.h)
    ucs_status_t s = ucp_worker_create(ctx.h, &wp, &worker_);
    if (s != UCS_OK) initError_ = Status(collSystemError, "UCX ucp_worker_create: " + statusText(s));
  }
  ~UcxProvider() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (helper_.joinable()) helper_.join();
    // Every endpoint goes before the worker (UCX aborts on a worker destroyed under live ones).
    for (auto& in : incoming_) closeEndpoint(in->ep.get(), &in->hello, true);
    for (auto& [id, c] : ready_)
      if (c) closeEndpoint(c->ep.get(), &c->creditOut, true);
    for (auto& [id, c] : connecting_)
      if (c) closeEndpoint(c->ep.get(), &c->hello, true);
    if (listener_) ucp_listener_destroy(listener_);
    if (worker_) ucp_worker_destroy(worker_);
  }

  const char* name() const override { return "ucx"; }
  int devices() const override { return 1; }
  Result<Properties> properties(int) const override {
    Properties p;
    p.name = "ucx";
    p.maxMessageBytes = size_t(1) << 30;
    return p;
  }

  Status listen(int, Handle* handle, ListenComm** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    COLL_TRY(initError_);
    COLL_TRY(ensureListener());
    auto l = std::make_unique<UListen>();
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    do l->connId = rng();
    while (l->connId == 0 || ready_.count(l->connId));
    UcxHandle h{};
    h.magic = kHandleMagic;
    h.rank = config_.rank;
    h.connId = l->connId;
    h.addr = listenAddr_;
    std::memset(handle->bytes, 0, kHandleBytes);
    std::memcpy(handle->bytes, &h, sizeof(h));
    ready_[l->connId];  // reserved: a hello for this id is accepted
    setupStarted();
    *out = l.release();
    return Status::ok();
  }

  Status connect(int, const Handle& handle, SendComm** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = nullptr;
    COLL_TRY(initError_);
    UcxHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kHandleMagic) return Status(collInternalError, "ucx: a malformed connection handle");
    auto& s = connecting_[h.connId];
    if (!s) {
      s = std::make_unique<USend>();
      s->peer = h.rank;
      s->tag = h.connId;
      s->ep = std::make_unique<Endpoint>();
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
      ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
      ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&h.addr);
      ep.sockaddr.addrlen = h.addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &onEpError;
      ep.err_handler.arg = s->ep.get();
      ucs_status_t st = ucp_ep_create(worker_, &ep, &s->ep->ep);
      if (st != UCS_OK) {
        connecting_.erase(h.connId);
        return COLL_ERROR(collRemoteError, FMT_STRING("ucx: connecting to rank {} failed: {}"), h.rank, statusText(st));
      }
      HelloMsg hello{kHelloMagic, config_.secret, h.connId, config_.rank, 0};
      s->hello.buffer.assign(reinterpret_cast<unsigned char*>(&hello),
                             reinterpret_cast<unsigned char*>(&hello) + sizeof(hello));
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.send = &onSend;
      p.user_data = &s->hello;
      started(&s->hello, ucp_stream_send_nbx(s->ep->ep, s->hello.buffer.data(), sizeof(hello), &p));
    }
    // Up once the endpoint exists: UCX queues the hello until the receiver takes the request, which
    // it does only in accept(), after this rank reports connected (no waiting for each other).
    ucp_worker_progress(worker_);
    USend* c = s.get();
    postCreditRecv(c);
    if (!c->hello.done) {
      hellos_.push_back(c);
      setupStarted();
    }
    *out = s.release();
    connecting_.erase(h.connId);
    return Status::ok();
  }

  Status accept(ListenComm* base, RecvComm** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = nullptr;
    auto* l = static_cast<UListen*>(base);
    ucp_worker_progress(worker_);
    COLL_TRY(serveIncoming());
    auto it = ready_.find(l->connId);
    if (it == ready_.end() || !it->second) return Status::ok();
    *out = it->second.release();
    ready_.erase(it);
    l->open = false;
    --setups_;
    return Status::ok();
  }

  Status regMr(Comm*, void* data, size_t size, MrHandle** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto mr = std::make_unique<UMr>();
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = data;
    p.length = size;
    ucs_status_t s = ucp_mem_map(ucpContext().h, &p, &mr->memh);
    if (s != UCS_OK) return Status(collSystemError, "ucx: ucp_mem_map failed: " + statusText(s));
    *out = mr.release();
    return Status::ok();
  }
  Status deregMr(Comm*, MrHandle* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<UMr> mr(static_cast<UMr*>(base));
    ucs_status_t s = ucp_mem_unmap(ucpContext().h, mr->memh);
    return s == UCS_OK ? Status::ok() : Status(collSystemError, "ucx: ucp_mem_unmap failed: " + statusText(s));
  }

  Status isend(SendComm* base, const void* data, size_t size, int, MrHandle* mr, Request** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = nullptr;
    auto* s = static_cast<USend*>(base);
    COLL_TRY(sendHealth(s));
    COLL_TRY(takeCredits(s));
    if (s->sent >= s->allowed) return Status::ok();  // the receiver has no free slot yet
    URequest* r = s->requests.take(s->peer, nullptr);
    if (!r) return Status::ok();
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
    p.cb.send = &onSend;
    p.user_data = &r->op;
    p.memh = static_cast<UMr*>(mr)->memh;
    started(&r->op, ucp_tag_send_nbx(s->ep->ep, data, size, s->tag, &p));
    ++s->sent;
    *out = r;
    return Status::ok();
  }

  Status irecv(RecvComm* base, void* data, size_t maxSize, int, MrHandle* mr, Request** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = nullptr;
    auto* c = static_cast<URecv*>(base);
    if (!c->closed.empty()) return Status::ok();
    URequest* r = c->requests.take(c->peer, c);
    if (!r) return Status::ok();
    ucp_tag_recv_info_t info{};
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FIELD_RECV_INFO;
    p.cb.recv = &onTagRecv;
    p.user_data = &r->op;
    p.memh = static_cast<UMr*>(mr)->memh;
    p.recv_info.tag_info = &info;
    r->op.tagRecv = true;
    started(&r->op, ucp_tag_recv_nbx(worker_, data, maxSize, c->tag, ~uint64_t(0), &p));
    if (r->op.done && !r->op.handle) r->op.length = info.length;
    ++c->posted;
    COLL_TRY(tellCredits(c));
    *out = r;
    return Status::ok();
  }

  Status poll() override {
    std::lock_guard<std::mutex> lock(mu_);
    polled_ = true;
    if (worker_)
      for (int i = 0; i < 16 && ucp_worker_progress(worker_); ++i) {
      }
    return Status::ok();
  }

  Status test(Request* base, int* done, size_t* size) override {
    std::lock_guard<std::mutex> lock(mu_);
    *done = 0;
    auto* r = static_cast<URequest*>(base);
    // One progress per round of tests when the caller polls (the transport does), not one per
    // request: each is an epoll_wait over UCX's sockets.
    if (!r->op.done && !polled_) ucp_worker_progress(worker_);
    if (URecv* c = r->owner) {
      checkClosed(c);
      (void)tellCredits(c);
      if (!r->op.done) return Status::ok();
      if (r->op.status != UCS_OK) {
        if (r->op.status == UCS_ERR_MESSAGE_TRUNCATED)
          return COLL_ERROR(collRemoteError, FMT_STRING("rank {} sent garbage over ucx (a message larger than {})"),
                            r->peer, "the receive's slot");
        if (c->closed.empty())
          c->closed = "ucx: a receive from rank " + std::to_string(r->peer) + " failed: " + statusText(r->op.status);
        return Status::ok();  // never completes: peerClosed() says why
      }
      ++c->completed;
    } else if (!r->op.done) {
      return Status::ok();
    } else if (r->op.status != UCS_OK) {
      Status s = COLL_ERROR(collRemoteError, FMT_STRING("ucx: a send to rank {} failed: {}"), r->peer,
                            statusText(r->op.status));
      release(&r->op);
      r->inUse = false;
      return s;
    }
    *done = 1;
    if (size) *size = r->op.length;
    release(&r->op);
    r->inUse = false;
    return Status::ok();
  }

  bool peerClosed(const RecvComm* base) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto* c = const_cast<URecv*>(static_cast<const URecv*>(base));
    const_cast<UcxProvider*>(this)->checkClosed(c);
    return !c->closed.empty();
  }
  std::string closedReason(const RecvComm* base) const override { return static_cast<const URecv*>(base)->closed; }

  Status closeSend(SendComm* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<USend> s(static_cast<USend*>(base));
    auto pending = std::find(hellos_.begin(), hellos_.end(), s.get());
    if (pending != hellos_.end()) {
      hellos_.erase(pending);
      --setups_;
    }
    dropInFlight(&s->requests);
    cancel(worker_, &s->hello);
    closeEndpoint(s->ep.get(), &s->credit, false);
    return Status::ok();
  }
  Status closeRecv(RecvComm* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<URecv> c(static_cast<URecv*>(base));
    dropInFlight(&c->requests);
    closeEndpoint(c->ep.get(), &c->creditOut, false);
    return Status::ok();
  }
  Status closeListen(ListenComm* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<UListen> l(static_cast<UListen*>(base));
    if (l->open) --setups_;
    auto it = ready_.find(l->connId);
    if (it != ready_.end() && it->second) closeEndpoint(it->second->ep.get(), &it->second->creditOut, true);
    ready_.erase(l->connId);
    return Status::ok();
  }

 private:
  // A connection setup began: the helper progresses the worker until every setup is done.
  void setupStarted() {
    ++setups_;
    if (!helper_.joinable()) helper_ = std::thread([this] { helperLoop(); });
    cv_.notify_all();
  }
  void helperLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (setups_ <= 0) {
        cv_.wait(lock);
        continue;
      }
      ucp_worker_progress(worker_);
      for (auto it = hellos_.begin(); it != hellos_.end();) {
        if ((*it)->hello.done) {
          it = hellos_.erase(it);
          --setups_;
        } else {
          ++it;
        }
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      lock.lock();
    }
  }

  Status ensureListener() {
    if (listener_) return Status::ok();
    coll::net::Address bind = config_.bindAddress;
    bind.setPort(0);
    sockaddr_storage addr = bind.storage;
    socklen_t len = addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    ucp_listener_params_t p{};
    p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    p.sockaddr.addrlen = len;
    p.conn_handler.cb = &UcxProvider::onConnRequest;
    p.conn_handler.arg = this;
    ucs_status_t s = ucp_listener_create(worker_, &p, &listener_);
    if (s != UCS_OK)
      return COLL_ERROR(collSystemError, FMT_STRING("ucx: cannot listen on {}: {}"), config_.bindAddress.toString(),
                        statusText(s));
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(listener_, &attr);
    if (s != UCS_OK) return Status(collSystemError, "ucx: ucp_listener_query failed: " + statusText(s));
    listenAddr_ = attr.sockaddr;
    return Status::ok();
  }

  static void onConnRequest(ucp_conn_request_h request, void* arg) {
    static_cast<UcxProvider*>(arg)->requests_.push_back(request);
  }

  // Turns connection requests into endpoints that must say hello; hands the good ones over.
  Status serveIncoming() {
    for (ucp_conn_request_h req : requests_) {
      auto in = std::make_unique<Incoming>();
      in->ep = std::make_unique<Endpoint>();
      in->since = std::chrono::steady_clock::now();
      ucp_ep_params_t ep{};
      ep.field_mask =
          UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
      ep.conn_request = req;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &onEpError;
      ep.err_handler.arg = in->ep.get();
      ucs_status_t s = ucp_ep_create(worker_, &ep, &in->ep->ep);
      if (s != UCS_OK) {
        COLL_LOG(WARN, NET, "ucx: rank {} could not take a connection request: {}", config_.rank, statusText(s));
        continue;
      }
      in->hello.buffer.resize(sizeof(HelloMsg));
      streamRecv(in->ep->ep, in->hello.buffer.data(), sizeof(HelloMsg), &in->hello);
      incoming_.push_back(std::move(in));
    }
    requests_.clear();
    auto now = std::chrono::steady_clock::now();
    for (auto it = incoming_.begin(); it != incoming_.end();) {
      Incoming& in = **it;
      std::string refuse;
      HelloMsg hello{};
      if (in.ep->error != UCS_OK) {
        refuse = "its endpoint failed: " + statusText(in.ep->error);
      } else if (!in.hello.done) {
        if (now - in.since > std::chrono::milliseconds(config_.handshakeMs))
          refuse = fmt::format("no hello within {} ms (COLL_HANDSHAKE_TIMEOUT_MS)", config_.handshakeMs);
        else {
          ++it;
          continue;
        }
      } else {
        std::memcpy(&hello, in.hello.buffer.data(), sizeof(hello));
        auto slot = ready_.find(hello.connId);
        if (in.hello.status != UCS_OK || in.hello.length != sizeof(HelloMsg) || hello.magic != kHelloMagic ||
            hello.secret != config_.secret)
          refuse = "it did not present this communicator's secret";
        else if (slot == ready_.end() || slot->second)
          refuse = "it named no connection this rank listens for";
      }
      if (!refuse.empty()) {
        COLL_LOG(WARN, NET, "ucx: rank {} refused a connection: {}", config_.rank, refuse);
        closeEndpoint(in.ep.get(), &in.hello, true);
        it = incoming_.erase(it);
        continue;
      }
      release(&in.hello);
      auto c = std::make_unique<URecv>();
      c->ep = std::move(in.ep);
      c->peer = hello.rank;
      c->tag = hello.connId;
      ready_[hello.connId] = std::move(c);
      it = incoming_.erase(it);
    }
    return Status::ok();
  }

  // Sender: the receiver's posted count arrives as a stream of 8-byte totals.
  void postCreditRecv(USend* s) {
    s->credit = Op{};
    streamRecv(s->ep->ep, &s->creditBuf, sizeof(s->creditBuf), &s->credit);
  }
  // Receives exactly bytes from ep's stream into buf; op says when.
  static void streamRecv(ucp_ep_h ep, void* buf, size_t bytes, Op* op) {
    size_t length = 0;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.recv_stream = &onStreamRecv;
    p.user_data = op;
    p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    started(op, ucp_stream_recv_nbx(ep, buf, bytes, &length, &p));
    if (op->done && !op->handle) op->length = length;
  }
  Status takeCredits(USend* s) {
    for (int i = 0; i < 64; ++i) {
      if (!s->credit.done) {
        if (!polled_) ucp_worker_progress(worker_);
        if (!s->credit.done) return Status::ok();
      }
      if (s->credit.status != UCS_OK)
        return COLL_ERROR(collRemoteError, FMT_STRING("ucx: rank {}'s connection failed: {}"), s->peer,
                          statusText(s->credit.status));
      release(&s->credit);
      s->allowed = std::max(s->allowed, s->creditBuf);
      postCreditRecv(s);
    }
    return Status::ok();
  }
  // Receiver: tells the sender how many receives are posted, one message at a time, in batches
  // of kCreditBatch unless the sender is about to run out (kCreditLow credits left unused).
  Status tellCredits(URecv* c) {
    if (c->told == c->posted || !c->closed.empty()) return Status::ok();
    if (c->posted - c->told < kCreditBatch && c->told - c->completed > kCreditLow) return Status::ok();
    if (c->creditOut.handle && !c->creditOut.done) return Status::ok();  // the previous total is on its way
    release(&c->creditOut);
    c->creditOut = Op{};
    c->creditBuf = c->posted;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &onSend;
    p.user_data = &c->creditOut;
    started(&c->creditOut, ucp_stream_send_nbx(c->ep->ep, &c->creditBuf, sizeof(c->creditBuf), &p));
    c->told = c->posted;
    return Status::ok();
  }

  Status sendHealth(USend* s) {
    ucs_status_t st = s->ep->error != UCS_OK ? s->ep->error : s->hello.done ? s->hello.status : UCS_OK;
    if (st != UCS_OK)
      return COLL_ERROR(collRemoteError, FMT_STRING("ucx: the connection to rank {} failed: {}"), s->peer,
                        statusText(st));
    if (s->hello.done) release(&s->hello);
    return Status::ok();
  }
  void checkClosed(URecv* c) {
    if (c->closed.empty() && c->ep->error != UCS_OK)
      c->closed = "ucx: the connection from rank " + std::to_string(c->peer) + " ended: " + statusText(c->ep->error);
  }

  // Requests the caller never saw complete: cancelled, then freed (net.h: dropped with the comm).
  void dropInFlight(RequestPool* pool) {
    for (URequest& r : pool->slots)
      if (r.inUse) {
        cancel(worker_, &r.op);
        r.inUse = false;
      }
  }

  // Closes an endpoint (flushing it unless force) after cancelling op; progresses until done.
  void closeEndpoint(Endpoint* e, Op* op, bool force) {
    if (!e || !e->ep) return;
    cancel(worker_, op);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force || e->error != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(e->ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) {
      // A flush waits for the peer's acknowledgement: bounded, so a dead peer cannot hold us.
      auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.handshakeMs);
      while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < end)
        ucp_worker_progress(worker_);
      if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(worker_, r);
      ucp_request_free(r);
    }
    e->ep = nullptr;
  }

  Config config_;
  Status initError_;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  sockaddr_storage listenAddr_{};
  std::vector<ucp_conn_request_h> requests_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
  std::map<uint64_t, std::unique_ptr<URecv>> ready_;  // by connection id: listened for, and accepted
  std::map<uint64_t, std::unique_ptr<USend>> connecting_;
  // The setup helper (see the top of this file).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread helper_;
  bool stop_ = false;
  int setups_ = 0;
  bool polled_ = false;         // the caller progresses the worker through poll() before its tests
  std::vector<USend*> hellos_;  // senders whose hello is still on its way
};

std::string ucxDetail() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const char* tls = std::getenv("UCX_TLS");
  return fmt::format("UCX {}.{}.{}, UCX_TLS={}", major, minor, release, tls && *tls ? tls : "all");
}

}  // namespace

std::shared_ptr<Provider> openUcxProvider(const Config& config) { return std::make_shared<UcxProvider>(config); }

}  // namespace net

const Transport* ucxTransport() {
  static const Transport* t =
      net::newNetTransport("ucx", Caps{10.0, 3.0, size_t(64) << 20}, &net::openUcxProvider, &net::ucxDetail).release();
  return t;
}

}  // namespace coll::transport
