// The UCX provider: coll's own network over UCP (ucp_*), the library Open MPI and UCC use for
// InfiniBand and RoCE (rc/dc with UCX's defaults) and that also runs over TCP (UCX_TLS=tcp).
// UCX is loaded with dlopen when a communicator first chooses it (ucx_api.h).
//
// One UCP context per process (UCX_* variables configure it), one worker per communicator,
// progressed by whoever drives the provider (the communicator's Progress). No UCX listener is
// opened: a stranger on the network never reaches UCX's connection-request parser. Endpoints are
// created from worker addresses, and those travel only over the communicator's bootstrap, which
// checks the secret. A connection:
//   receiver: listen() draws a random 64-bit connection id and posts the receive of the hello
//             (tag id|kTagHello); the handle carries magic, rank and id, and Handle::address this
//             worker's address.
//   sender:   connect() creates an endpoint to that address and sends the hello: secret, id,
//             rank and its own worker address. It is up at once (UCX queues behind its wire-up).
//   receiver: accept() takes the hello once it is in. A hello without the communicator's secret
//             is refused with a WARN line and the receive posted again; a good one gives the
//             receiver an endpoint back to the sender's worker, for flow control.
// Data: tagged messages (ucp_tag_send_nbx / ucp_tag_recv_nbx) with tag id|kTagData, matched in
// order per sender, straight into the FIFO slots, registered with ucp_mem_map. Flow control: the
// receiver tells the sender the number of receives it has posted (tag id|kTagCredit). A message
// above kSmallBytes is never sent beyond that count, so it never arrives unexpected. Small ones
// may run up to kBeyondMessages past it, so that UCX holds at most 512 KiB per connection that
// the receiver did not ask for; in exchange, a stream of small messages needs one credit message
// per kBeyondMessages / 2 instead of one per kCreditBatch (a credit cost 1.2 us of 8 in an 8-byte
// all-reduce at 2 ranks over TCP). The receiver tells on its own when large messages flow, or when
// half of the small allowance is used; a sender held back by a large message asks (tag id|kTagAsk).
// Setup progress: UCX's wire-up moves only while the workers on both sides are progressed, and
// coll's setup has each side wait for the other over the bootstrap in between; so while any
// connection is being set up, setupUnderWay() asks the network proxy (the only thread that calls
// this provider, net.h) for a round every 50 us, whose poll() progresses the worker.
// Failures: an endpoint error (peer died, reset) ends the connection; a sender's call fails with
// collRemoteError naming the peer, a receiver's connection counts as closed with UCX's reason
// (only an error for a caller still waiting for that peer, as with sockets).
// Close follows UCX's request rules: requests the caller dropped are freed (UCX lets a request
// go in any state and then calls nothing back), receives are cancelled first, and each endpoint
// is closed with ucp_ep_close_nbx, by flush when it is healthy and nothing was dropped, by force
// otherwise. Close requests are progressed to completion and freed, never cancelled; the worker
// is destroyed once every close has completed, within a bound (COLL_HANDSHAKE_TIMEOUT_MS), and
// left to the process's exit with a WARN line otherwise (UCX aborts on a worker destroyed under an
// endpoint whose close is still running).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "base/log.h"
#include "topo/cpu_place.h"
#include "transport/net/net.h"
#include "transport/net/nic_locality.h"
#include "transport/net/ucx/ucx_api.h"

namespace coll::transport {
namespace net {
namespace {

constexpr uint32_t kHandleMagic = 0xc011cc12u;
constexpr uint64_t kHelloMagic = 0xc011'0c11'4e11'0001ull;
// Flow control (see the top): with large messages under way, the receiver tells its posted count
// after kCreditBatch more postings, or when the sender has kCreditLow credits left.
constexpr uint64_t kCreditBatch = 4;
constexpr uint64_t kCreditLow = 2;
// Messages of at most kSmallBytes may be sent up to kBeyondMessages past the credits.
constexpr uint64_t kBeyondMessages = 64;
constexpr size_t kSmallBytes = 8 << 10;
// A connection's tags: its id (low two bits clear) and the kind of message in those bits.
constexpr uint64_t kTagData = 0, kTagHello = 1, kTagCredit = 2, kTagAsk = 3, kTagKindMask = 3;
// The largest worker address a hello may carry (UCX's are a few hundred bytes with IB).
constexpr size_t kMaxAddressBytes = 16 << 10;
// An aborted communicator's closes wait this long for UCX at most (UcxProvider::abandon): enough
// for a forced close to complete locally, not for a stopped peer.
constexpr int64_t kAbandonWaitMs = 50;

struct UcxHandle {  // in Handle::bytes; the worker address is in Handle::address
  uint32_t magic;
  int32_t rank;
  uint64_t connId;
};
static_assert(sizeof(UcxHandle) <= kHandleBytes, "a UCX handle fits a Handle");

struct HelloHeader {  // followed by the sender's worker address
  uint64_t magic;
  uint64_t secret;
  uint64_t connId;
  int32_t rank;
  uint32_t addressBytes;
};

// The loaded library (ucx_api.h); set once with the context, before any provider exists.
const ucx::Api* gU = nullptr;
const ucx::Api& U() { return *gU; }

std::string statusText(ucs_status_t s) { return U().ucs_status_string(s); }

// Whether a UCX_TLS value names transports without RDMA only (tcp, shared memory, self): unset
// or "all" may pick RDMA, and so does any name not known here.
bool withoutRdma(const char* tls) {
  if (!tls || !*tls) return false;
  std::string list(tls);
  if (list[0] == '^') return false;  // an exclusion list keeps every other transport
  static const char* const kPlain[] = {"tcp", "sm", "shm", "self", "posix", "sysv", "cma", "knem", "xpmem"};
  size_t at = 0;
  while (at <= list.size()) {
    size_t end = list.find(',', at);
    std::string name = list.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!name.empty() && std::find(std::begin(kPlain), std::end(kPlain), name) == std::end(kPlain)) return false;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return true;
}

// UCX_NET_DEVICES for a rank placed by config (null: this process's NUMA node), when RDMA
// transports may be used and the user set none; empty otherwise (ucxNetDevices says when).
std::string netDevicesFor(const Config* config, std::string* why) {
  if (std::getenv("UCX_NET_DEVICES") || withoutRdma(std::getenv("UCX_TLS"))) return "";
  Config here;
  if (config) here = *config;
  if (!config) here.numa = topo::cpuPlace().numa;
  return ucxNetDevices(topo::ibInfo().ports, here, &sysfsPciPath, why);
}

// The process's UCP context, created on first use; an error is kept and reported each time.
// `first`, the provider's configuration that creates it (null: coll-info's description), places
// the rank for the choice of RDMA ports.
struct Context {
  ucp_context_h h = nullptr;
  std::string error;  // a sentence
};
const Context& ucpContext(const Config* first = nullptr) {
  static Context ctx;
  static std::once_flag once;
  std::call_once(once, [first] {
    std::string why;
    gU = ucx::api(&why);
    if (!gU) {
      ctx.error = why;
      return;
    }
    ucp_config_t* config = nullptr;
    ucs_status_t s = U().ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) {
      ctx.error = "UCX could not read its configuration (ucp_config_read: " + statusText(s) + ")";
      return;
    }
    // Sets UCX's setting `var` (its environment name, UCX_...) on this context's configuration
    // only, unless the user set it; logs where UCX refused it. A tcp transport setting goes by its
    // bare name first (UCX 1.13 takes MAX_POLL and passes it on), then prefixed (UCX 1.22 refuses
    // the bare name, "Invalid parameter", and takes TCP_MAX_POLL).
    auto setDefault = [config](const char* var, const char* value) {
      if (std::getenv(var)) return;
      const char* name = var + 4;  // without "UCX_"
      bool tcp = std::strncmp(name, "TCP_", 4) == 0;
      ucs_status_t st = U().ucp_config_modify(config, tcp ? name + 4 : name, value);
      if (tcp && st == UCS_ERR_INVALID_PARAM) st = U().ucp_config_modify(config, name, value);
      if (st != UCS_OK) COLL_LOG(INFO, NET, "ucx: {} left at UCX's default: {}", var, statusText(st));
    };
    bool plain = withoutRdma(std::getenv("UCX_TLS"));
    // UCX's tcp transport sends messages above its 8 KiB segment by rendezvous, which made an
    // 8 KiB all-reduce 4x slower than with 64 KiB segments (45 us against 11 us, 2 ranks on
    // loopback) and changed nothing above.
    setDefault("UCX_TCP_TX_SEG_SIZE", "64k");
    setDefault("UCX_TCP_RX_SEG_SIZE", "64k");
    // UCX 1.13's tcp transport takes up to UCX_TCP_MAX_POLL (16) socket events from one
    // epoll_wait and handles them in turn; when handling one closes another endpoint (two ranks
    // that connected to each other at once keep one of the two sockets), the later event meets a
    // closed endpoint and UCX aborts the process ("tcp_iface.c:307 Assertion `ep->conn_state !=
    // UCT_TCP_EP_CONN_STATE_CLOSED'"): 1 run in 40-300 of a 2-rank job that creates two
    // communicators, 0 in 900 with one event per wait, which measured no slower (8 B and 1 MiB
    // all-reduces, 2 ranks on loopback).
    setDefault("UCX_TCP_MAX_POLL", "1");
    // With adaptive progress (UCX's default) an interface whose last endpoint closes is
    // deactivated, and its active-message handlers are set again, which queries the interface;
    // the tcp transport's query opens a socket. When strangers' connections to UCX's own tcp
    // listener have used every descriptor, that socket fails and UCX aborts the process
    // ("ucp_worker.c:208 failed to set active message handler id 1: Input/output error", while
    // a closing endpoint is progressed): 8 runs in 200 of 1,500 half-open connections under
    // ulimit -n 1024. Kept active from the start, the interfaces are never queried again: 0 in
    // 200; 8 B no slower, 1 MiB about 4% slower (every interface is progressed on each call; 2
    // ranks on loopback). Only where UCX_TLS names plain transports alone: where RDMA may be
    // used, adaptive progress saves polling the many unused interfaces (UCX's default transports
    // include tcp, so the attack stays possible there: README).
    if (plain) setDefault("UCX_ADAPTIVE_PROGRESS", "n");
    // Without RDMA (UCX_TLS naming only tcp and shared-memory transports), UCX's rendezvous
    // moves a large message by active messages after a handshake, and gains nothing here: coll's
    // receives of large messages are always posted before their sends (credits), so a large
    // eager message never lands unexpected. Eager only made a 1 MiB all-reduce 1.6x faster (490
    // us against 305, 2 ranks, UCX_TLS=tcp on loopback). With RDMA transports rendezvous is
    // zero-copy and stays.
    if (plain) setDefault("UCX_RNDV_THRESH", "inf");
    // The RDMA ports nearest this rank's GPU or NUMA node, as NCCL picks a NIC per GPU: UCX alone
    // would use the ports it finds best from the CPU's side. One context serves the process, so
    // the communicator that creates it decides.
    std::string where;
    std::string devices = netDevicesFor(first, &where);
    if (!devices.empty()) {
      s = U().ucp_config_modify(config, "NET_DEVICES", devices.c_str());
      if (s == UCS_OK)
        COLL_LOG(INFO, NET, "ucx: UCX_NET_DEVICES={} for this process: {}", devices, where);
      else
        COLL_LOG(INFO, NET, "ucx: UCX_NET_DEVICES left to UCX ({}): {}", devices, statusText(s));
    }
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG;
    p.mt_workers_shared = 1;  // one worker per communicator, communicators on several threads
    s = U().ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, config, &ctx.h);
    U().ucp_config_release(config);
    if (s != UCS_OK) ctx.error = "UCX failed to initialise (ucp_init: " + statusText(s) + ")";
  });
  return ctx;
}

// One operation in flight: UCX's callbacks write here (user_data).
struct Op {
  bool done = false;
  ucs_status_t status = UCS_OK;
  size_t length = 0;
  void* handle = nullptr;  // UCX's request while pending
  bool tagRecv = false;    // a tag receive (the only kind UCX can cancel)
};

// Requests completed on this thread (UCX calls back on the thread that progresses it): poll()
// stops progressing at the first.
thread_local uint64_t tCompletions = 0;

void onSend(void*, ucs_status_t status, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->done = true;
  ++tCompletions;
}
void onTagRecv(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->length = info ? info->length : 0;
  op->done = true;
  ++tCompletions;
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
// Posts the receive of the message tagged `tag` into [buf, buf + bytes) (registered as memh when
// given); op learns its end and length from the callback. Never completed at once: UCX 1.13 leaves
// recv_info unwritten then (a credit matched as it was posted read as 0 bytes from tag 0).
void postTagRecv(ucp_worker_h worker, void* buf, size_t bytes, uint64_t tag, ucp_mem_h memh, Op* op) {
  *op = Op{};
  op->tagRecv = true;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = &onTagRecv;
  p.user_data = op;
  if (memh) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  started(op, U().ucp_tag_recv_nbx(worker, buf, bytes, tag, ~uint64_t(0), &p));
}

// Sends [buf, buf + bytes) tagged `tag` (from memory registered as memh when given); op learns
// its end from the callback, or at once.
void postTagSend(ucp_ep_h ep, const void* buf, size_t bytes, uint64_t tag, ucp_mem_h memh, Op* op) {
  *op = Op{};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &onSend;
  p.user_data = op;
  if (memh) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  started(op, U().ucp_tag_send_nbx(ep, buf, bytes, tag, &p));
}
// The same for one message gathered from iovcnt pieces (iov stays valid until completion).
void postTagSendIov(ucp_ep_h ep, const ucp_dt_iov_t* iov, size_t iovcnt, uint64_t tag, Op* op) {
  *op = Op{};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  p.cb.send = &onSend;
  p.user_data = op;
  p.datatype = ucp_dt_make_iov();
  started(op, U().ucp_tag_send_nbx(ep, iov, iovcnt, tag, &p));
}

// Frees UCX's request once op completed.
void release(Op* op) {
  if (op->handle) {
    U().ucp_request_free(op->handle);
    op->handle = nullptr;
  }
}
// Gives up a request still in flight (a connection being closed): a tag receive is cancelled
// (UCX cancels only those); any request is then freed, which UCX allows in any state (it finishes
// internally and calls nothing back). Never waits. Returns whether a request was in flight.
bool drop(ucp_worker_h worker, Op* op) {
  if (!op->handle) return false;
  bool inFlight = !op->done;
  if (inFlight && op->tagRecv) U().ucp_request_cancel(worker, op->handle);
  U().ucp_request_free(op->handle);
  op->handle = nullptr;
  return inFlight;
}

// An endpoint and its error state, which UCX's error callback writes (its argument).
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
  ucp_dt_iov_t iov[2];  // a send with a trailer (isendTrailer): UCX reads it until completion
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
  bool open = true;                   // not accepted yet: counts as a setup in progress
  Op hello;                           // the receive of the sender's hello
  std::vector<unsigned char> buffer;  // ... and its bytes
};

struct USend : SendComm {
  std::unique_ptr<Endpoint> ep;
  int peer = -1;
  uint64_t tag = 0;  // the connection id
  Op hello;
  std::vector<unsigned char> helloBytes;
  Op credit;  // the receive of the receiver's posted count
  uint64_t creditBuf = 0;
  uint64_t allowed = 0;  // receives the peer has posted
  uint64_t sent = 0;     // messages posted
  Op askOut;             // the ask for credits, while a large message waits for them
  uint64_t askBuf = 0;
  bool asked = false;    // since allowed last grew
  RequestPool requests;  // in flight until test() reports them done; dropped at close
};

struct URecv : RecvComm {
  std::unique_ptr<Endpoint> ep;  // back to the sender's worker: carries the credits
  int peer = -1;
  uint64_t tag = 0;        // the connection id
  uint64_t posted = 0;     // receives posted
  uint64_t told = 0;       // ... of which the sender has been told
  uint64_t completed = 0;  // ... of which are done
  uint64_t sinceTell = 0;  // receives done since the last tell
  bool large = false;      // ... of which one brought more than kSmallBytes
  Op creditOut;
  uint64_t creditBuf = 0;
  Op ask;  // the receive of the sender's ask for credits
  uint64_t askBuf = 0;
  bool askPending = false;  // an ask came since the last tell
  std::string closed;       // why it is closed ("" while open)
  RequestPool requests;     // in flight until test() reports them done; cancelled at close
};

struct UMr : MrHandle {
  ucp_mem_h memh = nullptr;
};

// An endpoint whose close request is still running; the Endpoint stays alive for its callback.
struct Closing {
  std::unique_ptr<Endpoint> ep;
  void* request = nullptr;
};

class UcxProvider final : public Provider {
 public:
  explicit UcxProvider(const Config& config) : config_(config) {
    const Context& ctx = ucpContext(&config_);
    if (!ctx.h) {
      initError_ = Status(collSystemError, ctx.error);
      return;
    }
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // one thread at a time drives a provider (net.h)
    ucs_status_t s = U().ucp_worker_create(ctx.h, &wp, &worker_);
    if (s != UCS_OK) {
      worker_ = nullptr;
      initError_ = Status(collSystemError, "UCX ucp_worker_create: " + statusText(s));
      return;
    }
    ucp_address_t* address = nullptr;
    size_t bytes = 0;
    s = U().ucp_worker_get_address(worker_, &address, &bytes);
    if (s != UCS_OK || bytes > kMaxAddressBytes) {
      initError_ = Status(collSystemError, s != UCS_OK ? "UCX ucp_worker_get_address: " + statusText(s)
                                                       : fmt::format("UCX's worker address has {} bytes", bytes));
    } else {
      address_.assign(reinterpret_cast<const char*>(address), bytes);
    }
    if (address) U().ucp_worker_release_address(worker_, address);
  }
  ~UcxProvider() override {
    if (!worker_) return;
    // Comms are closed before their provider goes (they hold it); what is left here are close
    // requests still running.
    finishCloses(closeWaitMs());
    if (!closing_.empty()) {
      COLL_LOG(WARN, NET,
               "ucx: rank {}: {} endpoint close{} did not finish within {} ms (a peer that stopped answering); "
               "the UCX worker is left to the process's exit",
               config_.rank, closing_.size(), closing_.size() == 1 ? "" : "s", closeWaitMs());
      return;
    }
    U().ucp_worker_destroy(worker_);
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
    COLL_TRY(initError_);
    auto l = std::make_unique<UListen>();
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    do l->connId = rng() & ~kTagKindMask;
    while (l->connId == 0);
    UcxHandle h{};
    h.magic = kHandleMagic;
    h.rank = config_.rank;
    h.connId = l->connId;
    std::memset(handle->bytes, 0, kHandleBytes);
    std::memcpy(handle->bytes, &h, sizeof(h));
    handle->address = address_;
    l->buffer.resize(sizeof(HelloHeader) + kMaxAddressBytes);
    postHelloRecv(l.get());
    setupStarted();
    *out = l.release();
    return Status::ok();
  }

  Status connect(int, const Handle& handle, SendComm** out) override {
    *out = nullptr;
    COLL_TRY(initError_);
    UcxHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kHandleMagic || handle.address.empty() || handle.address.size() > kMaxAddressBytes ||
        (h.connId & kTagKindMask) != 0)
      return Status(collInternalError, "ucx: a malformed connection handle");
    auto s = std::make_unique<USend>();
    s->peer = h.rank;
    s->tag = h.connId;
    s->ep = std::make_unique<Endpoint>();
    COLL_TRY(createEndpoint(handle.address, s->ep.get(), s->peer));
    HelloHeader hello{kHelloMagic, config_.secret, h.connId, config_.rank, static_cast<uint32_t>(address_.size())};
    s->helloBytes.resize(sizeof(hello) + address_.size());
    std::memcpy(s->helloBytes.data(), &hello, sizeof(hello));
    std::memcpy(s->helloBytes.data() + sizeof(hello), address_.data(), address_.size());
    postTagSend(s->ep->ep, s->helloBytes.data(), s->helloBytes.size(), s->tag | kTagHello, nullptr, &s->hello);
    postCreditRecv(s.get());
    U().ucp_worker_progress(worker_);
    // Up once the endpoint exists: UCX sends the hello after its wire-up, which the proxy
    // progresses while this rank waits for others over the bootstrap.
    if (!s->hello.done) {
      hellos_.push_back(s.get());
      setupStarted();
    }
    *out = s.release();
    return Status::ok();
  }

  Status accept(ListenComm* base, RecvComm** out) override {
    *out = nullptr;
    auto* l = static_cast<UListen*>(base);
    if (!l->hello.done) U().ucp_worker_progress(worker_);
    if (!l->hello.done) return Status::ok();
    HelloHeader hello{};
    if (l->hello.status == UCS_OK && l->hello.length >= sizeof(hello))
      std::memcpy(&hello, l->buffer.data(), sizeof(hello));
    release(&l->hello);
    if (l->hello.status != UCS_OK || l->hello.length < sizeof(hello) || hello.magic != kHelloMagic ||
        hello.secret != config_.secret || hello.connId != l->connId || hello.addressBytes == 0 ||
        hello.addressBytes != l->hello.length - sizeof(hello)) {
      COLL_LOG(WARN, NET, "ucx: rank {} refused a connection: it did not present this communicator's secret",
               config_.rank);
      postHelloRecv(l);  // the right sender's hello may still come
      return Status::ok();
    }
    auto c = std::make_unique<URecv>();
    c->peer = hello.rank;
    c->tag = l->connId;
    c->ep = std::make_unique<Endpoint>();
    std::string address(reinterpret_cast<const char*>(l->buffer.data()) + sizeof(hello), hello.addressBytes);
    COLL_TRY(createEndpoint(address, c->ep.get(), c->peer));
    postAskRecv(c.get());
    l->open = false;
    --setups_;
    *out = c.release();
    return Status::ok();
  }

  Status regMr(Comm*, void* data, size_t size, MrHandle** out) override {
    auto mr = std::make_unique<UMr>();
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = data;
    p.length = size;
    ucs_status_t s = U().ucp_mem_map(ucpContext().h, &p, &mr->memh);
    if (s != UCS_OK) return Status(collSystemError, "ucx: ucp_mem_map failed: " + statusText(s));
    *out = mr.release();
    return Status::ok();
  }
  Status deregMr(Comm* comm, MrHandle* base) override {
    std::unique_ptr<UMr> mr(static_cast<UMr*>(base));
    // The memory may go once this returns: UCX must be done with it first (drain()).
    RequestPool* pool = nullptr;
    if (auto* c = dynamic_cast<URecv*>(comm)) pool = &c->requests;
    if (auto* s = dynamic_cast<USend*>(comm)) pool = &s->requests;
    if (pool && !drain(pool))
      return COLL_ERROR(collInProgress,
                        FMT_STRING("ucx: rank {}: a transfer to or from rank {} was still under way {} ms after its "
                                   "connection was closed; its memory stays allocated"),
                        config_.rank, pool->slots[0].peer, closeWaitMs());
    ucs_status_t s = U().ucp_mem_unmap(ucpContext().h, mr->memh);
    return s == UCS_OK ? Status::ok() : Status(collSystemError, "ucx: ucp_mem_unmap failed: " + statusText(s));
  }

  // A free request for a send of `size` bytes on s, within the credits (flow control above);
  // none (*r null) when the send must wait.
  Status takeSend(USend* s, size_t size, URequest** r) {
    *r = nullptr;
    COLL_TRY(sendHealth(s));
    COLL_TRY(takeCredits(s));
    if (s->sent >= s->allowed && (size > kSmallBytes || s->sent - s->allowed >= kBeyondMessages)) {
      askCredits(s);  // held back: the receiver may not know, when only small messages went before
      return Status::ok();
    }
    *r = s->requests.take(s->peer, nullptr);
    return Status::ok();
  }

  Status isend(SendComm* base, const void* data, size_t size, int, MrHandle* mr, Request** out) override {
    *out = nullptr;
    auto* s = static_cast<USend*>(base);
    URequest* r = nullptr;
    COLL_TRY(takeSend(s, size, &r));
    if (!r) return Status::ok();
    postTagSend(s->ep->ep, data, size, s->tag | kTagData, mr ? static_cast<UMr*>(mr)->memh : nullptr, &r->op);
    ++s->sent;
    *out = r;
    return Status::ok();
  }
  bool sendsTrailers() const override { return true; }
  Status isendTrailer(SendComm* base, const void* data, size_t size, const void* trailer, size_t trailerBytes, int,
                      Request** out) override {
    *out = nullptr;
    auto* s = static_cast<USend*>(base);
    URequest* r = nullptr;
    COLL_TRY(takeSend(s, size + trailerBytes, &r));
    if (!r) return Status::ok();
    r->iov[0] = {const_cast<void*>(data), size};
    r->iov[1] = {const_cast<void*>(trailer), trailerBytes};
    postTagSendIov(s->ep->ep, r->iov, 2, s->tag | kTagData, &r->op);
    ++s->sent;
    *out = r;
    return Status::ok();
  }

  Status irecv(RecvComm* base, void* data, size_t maxSize, int, MrHandle* mr, Request** out) override {
    *out = nullptr;
    auto* c = static_cast<URecv*>(base);
    if (!c->closed.empty()) return Status::ok();
    URequest* r = c->requests.take(c->peer, c);
    if (!r) return Status::ok();
    postTagRecv(worker_, data, maxSize, c->tag | kTagData, static_cast<UMr*>(mr)->memh, &r->op);
    ++c->posted;
    if (c->told) COLL_TRY(tellCredits(c));  // the first tell waits for the first test(): all posted then
    *out = r;
    return Status::ok();
  }

  Status poll() override {
    // UCX is progressed until a request of ours completes, or it has nothing more to do, at most
    // 16 times. Each progress is an epoll_wait on UCX's tcp transport: one more after a small
    // message completed was on the critical path of every small collective (0.3-0.4 us of an
    // 8-byte all-reduce). A large message is many segments, each a progress without a completion,
    // and they go on: with one progress per round, a waiter that napped between rounds moved a
    // 64 KiB segment per nap, and a 1 MiB all-reduce at 2 ranks took 1.4 ms instead of 0.3.
    if (worker_)
      for (int i = 0; i < 16; ++i) {
        uint64_t before = tCompletions;
        if (!U().ucp_worker_progress(worker_) || tCompletions != before) break;
      }
    if (!closing_.empty()) finishCloses(0);
    if (!hellos_.empty()) {  // senders whose hello left: their setup is over
      auto sent = [](USend* s) { return s->hello.done; };
      setups_ -= static_cast<int>(std::count_if(hellos_.begin(), hellos_.end(), sent));
      hellos_.erase(std::remove_if(hellos_.begin(), hellos_.end(), sent), hellos_.end());
    }
    return Status::ok();
  }
  bool setupUnderWay() const override { return setups_ > 0; }
  // UCX sends from any host memory: its eager protocols copy, and its zero-copy and rendezvous
  // ones register through UCX's own registration cache. A failed operation takes its references
  // back before it returns (Connection::withdrawRefs: a forced close ends the sends UCX holds).
  bool sendsUnregistered() const override { return true; }

  Status test(Request* base, int* done, size_t* size) override {
    *done = 0;
    auto* r = static_cast<URequest*>(base);
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
      ++c->sinceTell;
      c->large |= r->op.length > kSmallBytes;
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
    auto* c = const_cast<URecv*>(static_cast<const URecv*>(base));
    const_cast<UcxProvider*>(this)->checkClosed(c);
    return !c->closed.empty();
  }
  std::string closedReason(const RecvComm* base) const override { return static_cast<const URecv*>(base)->closed; }

  Status closeSend(SendComm* base) override {
    std::unique_ptr<USend> s(static_cast<USend*>(base));
    bool dropped = !drain(&s->requests);
    dropped |= dropSendRequests(s.get());
    closeEndpoint(std::move(s->ep), dropped);
    return Status::ok();
  }
  // A forced close completes every request on the endpoint as cancelled, the sends from the
  // caller's buffers among them; its completion is waited for (it needs no answer from the peer).
  Status abortSends(SendComm* base) override {
    auto* s = static_cast<USend*>(base);
    dropSendRequests(s);
    const Endpoint* e = s->ep.get();
    closeEndpoint(std::move(s->ep), true);
    // Only this close is waited for: others (a flush to a stopped peer) may run their whole bound.
    auto ours = [&] {
      return std::any_of(closing_.begin(), closing_.end(), [e](const Closing& c) { return c.ep.get() == e; });
    };
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(closeWaitMs());
    while (e && ours() && std::chrono::steady_clock::now() < end) finishCloses(0);
    if (e && ours())
      return COLL_ERROR(collInProgress,
                        FMT_STRING("ucx: rank {}: the forced close of the connection to rank {} did not finish "
                                   "within {} ms"),
                        config_.rank, s->peer, closeWaitMs());
    return Status::ok();
  }
  void abandon() override { abandoned_ = true; }
  Status closeRecv(RecvComm* base) override {
    std::unique_ptr<URecv> c(static_cast<URecv*>(base));
    bool drained = drain(&c->requests);
    dropInFlight(&c->requests);
    bool dropped = drop(worker_, &c->creditOut);
    drop(worker_, &c->ask);  // a receive: cancelled
    closeEndpoint(std::move(c->ep), dropped || !drained);
    if (!drained)
      return COLL_ERROR(collInProgress,
                        FMT_STRING("ucx: rank {}: a receive from rank {} was still under way {} ms after its "
                                   "connection was closed; its memory stays allocated"),
                        config_.rank, c->peer, closeWaitMs());
    return Status::ok();
  }
  Status closeListen(ListenComm* base) override {
    std::unique_ptr<UListen> l(static_cast<UListen*>(base));
    if (l->open) --setups_;
    drop(worker_, &l->hello);
    return Status::ok();
  }

 private:
  // A connection setup began: the proxy progresses the worker until every setup is done.
  void setupStarted() { ++setups_; }

  // Gives up every request of a send comm (its setup with them). Returns whether one of its own
  // was still in flight; the credit receive is cancelled and puts nothing of ours on the wire.
  bool dropSendRequests(USend* s) {
    auto pending = std::find(hellos_.begin(), hellos_.end(), s);
    if (pending != hellos_.end()) {
      hellos_.erase(pending);
      --setups_;
    }
    bool dropped = dropInFlight(&s->requests);
    dropped |= drop(worker_, &s->hello);
    dropped |= drop(worker_, &s->askOut);
    drop(worker_, &s->credit);
    return dropped;
  }

  // An endpoint to a worker address (a peer's, from the bootstrap or its hello), with UCX's peer
  // failure detection on, so that a dead peer fails it instead of hanging it.
  Status createEndpoint(const std::string& address, Endpoint* e, int peer) {
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &onEpError;
    ep.err_handler.arg = e;
    ucs_status_t st = U().ucp_ep_create(worker_, &ep, &e->ep);
    if (st != UCS_OK) {
      e->ep = nullptr;
      return COLL_ERROR(collRemoteError, FMT_STRING("ucx: connecting to rank {} failed: {}"), peer, statusText(st));
    }
    return Status::ok();
  }

  void postHelloRecv(UListen* l) {
    postTagRecv(worker_, l->buffer.data(), l->buffer.size(), l->connId | kTagHello, nullptr, &l->hello);
  }

  // Sender: the receiver's posted count arrives as 8-byte totals.
  void postCreditRecv(USend* s) {
    postTagRecv(worker_, &s->creditBuf, sizeof(s->creditBuf), s->tag | kTagCredit, nullptr, &s->credit);
  }
  Status takeCredits(USend* s) {
    for (int i = 0; i < 64; ++i) {
      if (!s->credit.done) return Status::ok();  // the proxy's poll() progresses the worker
      if (s->credit.status != UCS_OK || s->credit.length != sizeof(s->creditBuf))
        return COLL_ERROR(collRemoteError, FMT_STRING("ucx: rank {}'s connection failed: {}"), s->peer,
                          s->credit.status != UCS_OK ? statusText(s->credit.status) : "a malformed credit message");
      release(&s->credit);
      if (s->creditBuf > s->allowed) {
        s->allowed = s->creditBuf;
        s->asked = false;
      }
      postCreditRecv(s);
    }
    return Status::ok();
  }
  // Sender, held back by the credits: asks the receiver for them, once until they grow.
  void askCredits(USend* s) {
    if (s->asked || (s->askOut.handle && !s->askOut.done)) return;
    release(&s->askOut);
    s->askBuf = s->sent;
    postTagSend(s->ep->ep, &s->askBuf, sizeof(s->askBuf), s->tag | kTagAsk, nullptr, &s->askOut);
    s->asked = true;
  }
  void postAskRecv(URecv* c) {
    postTagRecv(worker_, &c->askBuf, sizeof(c->askBuf), c->tag | kTagAsk, nullptr, &c->ask);
  }
  // Receiver: tells the sender how many receives are posted, one message at a time: at first;
  // when it asked; when half the small messages' allowance is used; and while large messages flow,
  // in batches of kCreditBatch unless the sender is about to run out (kCreditLow credits left).
  Status tellCredits(URecv* c) {
    if (!c->closed.empty()) return Status::ok();
    if (c->ask.done) {
      bool asked = c->ask.status == UCS_OK && c->ask.length == sizeof(c->askBuf);
      release(&c->ask);
      c->ask = Op{};
      if (asked) {  // otherwise the connection failed: checkClosed says so
        c->askPending = true;
        postAskRecv(c);
      }
    }
    if (c->told == c->posted) return Status::ok();
    bool due = c->told == 0 || c->askPending || c->sinceTell >= kBeyondMessages / 2 ||
               (c->large && (c->posted - c->told >= kCreditBatch || c->completed + kCreditLow >= c->told));
    if (!due) return Status::ok();
    if (c->creditOut.handle && !c->creditOut.done) return Status::ok();  // the previous total is on its way
    release(&c->creditOut);
    c->creditBuf = c->posted;
    postTagSend(c->ep->ep, &c->creditBuf, sizeof(c->creditBuf), c->tag | kTagCredit, nullptr, &c->creditOut);
    c->told = c->posted;
    c->sinceTell = 0;
    c->large = false;
    c->askPending = false;
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

  // Waits up to COLL_HANDSHAKE_TIMEOUT_MS for the pool's requests in flight to end, cancelling
  // the receives UCX has not matched yet. UCX cannot cancel a receive it has matched (a rendezvous
  // under way writes into the slot until it completes) nor a send, and the slots' memory is freed
  // after the close. A dead peer ends them at once (endpoint error). Returns whether all ended.
  bool drain(RequestPool* pool) {
    for (URequest& r : pool->slots)
      if (r.inUse && !r.op.done && r.op.tagRecv && r.op.handle) U().ucp_request_cancel(worker_, r.op.handle);
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(closeWaitMs());
    for (;;) {
      bool busy = false;
      for (URequest& r : pool->slots) busy |= r.inUse && !r.op.done && r.op.handle;
      if (!busy) return true;
      if (std::chrono::steady_clock::now() >= end) return false;
      U().ucp_worker_progress(worker_);
    }
  }

  // Requests the caller never saw complete (net.h: dropped with the comm). Returns whether any
  // was still in flight.
  bool dropInFlight(RequestPool* pool) {
    bool any = false;
    for (URequest& r : pool->slots)
      if (r.inUse) {
        any |= drop(worker_, &r.op);
        r.inUse = false;
      }
    return any;
  }

  // Closes an endpoint: by flush when it is healthy, nothing of ours was dropped in flight (the
  // peer gets what was sent) and the communicator is not aborted; by force otherwise (a flush
  // would wait on a dead peer or on a send nobody receives; force completes UCX's pending
  // requests on it as cancelled). The close request is progressed to completion by poll() and
  // the destructor.
  void closeEndpoint(std::unique_ptr<Endpoint> e, bool droppedInFlight) {
    if (!e || !e->ep) return;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = droppedInFlight || e->error != UCS_OK || abandoned_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = U().ucp_ep_close_nbx(e->ep, &p);
    e->ep = nullptr;
    if (r == nullptr || UCS_PTR_IS_ERR(r)) return;  // closed, or failed: nothing left to wait for
    closing_.push_back({std::move(e), r});
    finishCloses(0);
  }
  // Progresses the worker until every close request completed or waitMs passed; frees the
  // completed ones.
  void finishCloses(int64_t waitMs) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
    for (;;) {
      U().ucp_worker_progress(worker_);
      closing_.erase(std::remove_if(closing_.begin(), closing_.end(),
                                    [](const Closing& c) {
                                      if (U().ucp_request_check_status(c.request) == UCS_INPROGRESS) return false;
                                      U().ucp_request_free(c.request);
                                      return true;
                                    }),
                     closing_.end());
      if (closing_.empty() || std::chrono::steady_clock::now() >= end) return;
    }
  }

  // How long a close waits for UCX: COLL_HANDSHAKE_TIMEOUT_MS, or kAbandonWaitMs once the
  // communicator is aborted (abandon()).
  int64_t closeWaitMs() const { return abandoned_ ? kAbandonWaitMs : config_.handshakeMs; }

  Config config_;
  bool abandoned_ = false;  // abandon(): closes wait kAbandonWaitMs at most
  Status initError_;
  ucp_worker_h worker_ = nullptr;
  std::string address_;           // this worker's address, for the handles and hellos
  std::vector<Closing> closing_;  // endpoints whose close request is still running
  int setups_ = 0;                // listens not accepted and hellos on their way (setupUnderWay)
  std::vector<USend*> hellos_;    // senders whose hello is still on its way
};

std::string ucxDetail() {
  const Context& ctx = ucpContext();
  if (!ctx.h) return ctx.error;
  unsigned major = 0, minor = 0, release = 0;
  U().ucp_get_version(&major, &minor, &release);
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

std::string ucxUnavailable() {
  std::string why;
  return net::ucx::api(&why) ? std::string() : why;
}

}  // namespace coll::transport
