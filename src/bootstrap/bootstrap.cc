#include "bootstrap/bootstrap.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/fault.h"
#include "base/ifaddr.h"
#include "base/log.h"
#include "base/process.h"
#include "base/random.h"
#include "topo/host_system.h"

namespace coll::bootstrap {
namespace {

// Added to a rank's wait for the root's answer, so that the root's own deadline (which produces a
// message naming the missing ranks) fires first.
int64_t rootGraceMs(int64_t timeoutMs) { return std::max<int64_t>(1000, timeoutMs / 10); }

// How long a rank that failed on a refused connection waits for a peer's abort notice.
constexpr int kNoticeGraceMs = 300;

// How long a wait for a queued message sleeps before re-checking the abort flag.
constexpr auto kWaitSlice = std::chrono::milliseconds(50);

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, uint64_t secret, const Options& options)
    : rank_(rank), nranks_(nranks), secret_(secret), options_(options), heldBytes_(static_cast<size_t>(nranks), 0) {}

Bootstrap::~Bootstrap() {
  stopInbox_.store(true);
  uint64_t one = 1;
  if (wakeFd_ >= 0) (void)!::write(wakeFd_, &one, sizeof(one));
  if (inboxThread_.joinable()) inboxThread_.join();
  status_.reset();  // its worker reads this object's state: stopped before the members go
  // The server hands back the inbox bytes of messages it admitted and never delivered (release ->
  // heldBytes_, mutex_), which are declared after it and so would be gone by its own turn.
  server_.reset();
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

std::string Bootstrap::describe(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size())) return fmt::format("rank {}", peer);
  const RankInfo& p = peers_[peer];
  return fmt::format("rank {} (pid {} on {})", peer, p.pid, p.hostName);
}

Status Bootstrap::startInbox(const net::Address& bindAddr) {
  COLL_ASSIGN_OR_RETURN(net::Listener listener, net::Listener::listen(bindAddr, false));
  COLL_LOG(INFO, BOOTSTRAP, "rank {} bootstrap inbox listening on {}", rank_, listener.address().toString());
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) return COLL_ERROR(collSystemError, FMT_STRING("eventfd failed: {}"), std::strerror(errno));
  ServerLimits limits;
  limits.handshakeMs = options_.handshakeMs;
  limits.stallMs = options_.timeoutMs;
  server_ = std::make_unique<MessageServer>(std::move(listener), secret_, limits,
                                            fmt::format("rank {} bootstrap inbox", rank_));
  server_->setAdmission([this](const MsgHeader& h) { return admit(h); },
                        [this](const MsgHeader& h) { release(h.srcRank, h.size); });
  inboxThread_ = std::thread([this] { inboxLoop(); });
  return Status::ok();
}

std::string Bootstrap::admit(const MsgHeader& h) {
  // A tool (coll-top) may ask this rank's state, and nothing else; it holds no inbox bytes.
  if (h.srcRank == kToolRank)
    return h.tag == kTagStatusQuery && (h.size == 0 || h.size == sizeof(StatusQuestion))
               ? ""
               : "a tool's message that is not a status question";
  if (h.srcRank < 0 || h.srcRank >= nranks_)
    return fmt::format("a message that claims to come from rank {} of a {}-rank communicator", h.srcRank, nranks_);
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& peer = heldBytes_[static_cast<size_t>(h.srcRank)];
  uint64_t cost = heldCost(h.size);
  std::string over;
  if (peer + cost > options_.inboxPeerBytes)
    over = fmt::format(
        "{} bytes of such messages from it alone (each counts {} bytes beyond its payload), above the limit of {} "
        "(COLL_BOOTSTRAP_INBOX_PEER_BYTES)",
        peer + cost, kHeldMessageBytes, options_.inboxPeerBytes);
  else if (heldTotal_ + cost > options_.inboxBytes)
    over = fmt::format(
        "{} bytes of such messages from all peers (each counts {} bytes beyond its payload), above the limit of {} "
        "(COLL_BOOTSTRAP_INBOX_BYTES)",
        heldTotal_ + cost, kHeldMessageBytes, options_.inboxBytes);
  if (!over.empty()) {
    // Dropping the message silently would leave its receiver waiting for it: fail loudly instead.
    std::string why = fmt::format(
        "rank {} sent a {}-byte bootstrap message that nobody on rank {} has asked for "
        "yet: rank {} would hold {}",
        h.srcRank, h.size, rank_, rank_, over);
    if (peerFailure_.empty()) peerFailure_ = why;
    failureNoticed_.store(true, std::memory_order_relaxed);
    arrived_.notify_all();
    return why;
  }
  peer += cost;
  heldTotal_ += cost;
  return "";
}

void Bootstrap::release(int src, uint64_t payloadBytes) {
  if (src < 0 || src >= nranks_) return;  // a tool's question: nothing was held
  std::lock_guard<std::mutex> lock(mutex_);
  releaseLocked(src, payloadBytes);
}

void Bootstrap::releaseLocked(int src, uint64_t payloadBytes) {
  heldBytes_[static_cast<size_t>(src)] -= heldCost(payloadBytes);
  heldTotal_ -= heldCost(payloadBytes);
}

WaitAnswer Bootstrap::waitSnapshot() const {
  WaitAnswer a{};
  a.waitingFor = -1;
  a.waitStep = -1;
  if (const WaitState* w = options_.wait.get()) {
    a.opSeq = w->opSeq.load(std::memory_order_relaxed);
    a.inOp = w->inOp.load(std::memory_order_relaxed) ? 1 : 0;
    a.waitingFor = w->waitingFor.load(std::memory_order_acquire);
    a.waitStep = w->waitStep.load(std::memory_order_relaxed);
    int64_t now = WaitState::toMs(std::chrono::steady_clock::now());
    a.waitedMs = a.waitingFor >= 0 ? now - w->sinceMs.load(std::memory_order_relaxed) : 0;
    std::snprintf(a.opName, sizeof(a.opName), "%s", w->opName.load(std::memory_order_relaxed));
  }
  return a;
}

void Bootstrap::answerWaitQuery(int peer, const std::vector<char>& question) {
  uint32_t number = 0;
  if (question.size() != sizeof(number) || !formed_.load(std::memory_order_acquire)) return;
  std::memcpy(&number, question.data(), sizeof(number));
  WaitAnswer a = waitSnapshot();
  // Short: the asker gives up after about a second, and this thread serves the inbox meanwhile.
  (void)sendRaw(peer, kTagWaitAnswer | number, &a, sizeof(a), 1000);
}

JobStatus Bootstrap::statusSnapshot() const {
  JobStatus st{};
  st.rank = rank_;
  st.nranks = nranks_;
  st.pid = static_cast<int32_t>(getpid());
  st.wait = waitSnapshot();
  st.communicators = liveCommunicators().load(std::memory_order_relaxed);
  std::snprintf(st.host, sizeof(st.host), "%s", peers_[static_cast<size_t>(rank_)].hostName);
  if (const WaitState* w = options_.wait.get()) {
    st.bytes = w->totalBytes();
    std::snprintf(st.detail, sizeof(st.detail), "%s", w->detail().c_str());
  }
  return st;
}

Result<WaitAnswer> Bootstrap::askWhatPeerWaitsFor(int peer, int64_t timeoutMs) {
  if (peer < 0 || peer >= nranks_) return COLL_ERROR(collInvalidArgument, FMT_STRING("no rank {} to ask"), peer);
  uint32_t number = questions_.fetch_add(1) + 1;
  COLL_TRY(sendRaw(peer, kTagWaitQuery, &number, sizeof(number), timeoutMs));
  COLL_ASSIGN_OR_RETURN(std::vector<char> m, recvRaw(peer, kTagWaitAnswer | number, timeoutMs));
  WaitAnswer a;
  if (m.size() != sizeof(a))
    return COLL_ERROR(collRemoteError, FMT_STRING("{} answered with {} bytes"), describe(peer), m.size());
  std::memcpy(&a, m.data(), sizeof(a));
  a.opName[sizeof(a.opName) - 1] = '\0';
  return a;
}

std::string Bootstrap::peerFailure(int graceMs) {
  std::unique_lock<std::mutex> lock(mutex_);
  arrived_.wait_for(lock, std::chrono::milliseconds(graceMs), [this] { return !peerFailure_.empty(); });
  return peerFailure_;
}

void Bootstrap::inboxLoop() {
  auto handler = [this](Message&& m, net::Socket&& sock) {
    if (m.srcRank == kToolRank) {
      // Handed to the status worker: composing an answer (a leader's gathers its host's) must not
      // hold up this thread, which the job's own messages need.
      StatusQuestion q{kAskSelf, 0};
      if (m.payload.size() == sizeof(q)) std::memcpy(&q, m.payload.data(), sizeof(q));
      if (formed_.load(std::memory_order_acquire)) status_->take(std::move(sock), q);
      return;
    }
    if (m.tag == kTagWaitQuery) {
      release(m.srcRank, m.payload.size());  // answered, not kept
      answerWaitQuery(m.srcRank, m.payload);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (m.tag == kTagAbortNotice) {
      releaseLocked(m.srcRank, m.payload.size());  // not kept: admitted only to be read
      if (peerFailure_.empty())
        peerFailure_ =
            fmt::format("{} failed: {}", describe(m.srcRank), std::string(m.payload.begin(), m.payload.end()));
      failureNoticed_.store(true, std::memory_order_relaxed);
      arrived_.notify_all();
      return;
    }
    inbox_[{m.srcRank, m.tag}].push_back(std::move(m.payload));
    arrived_.notify_all();
  };
  while (!stopInbox_.load()) server_->poll(200, wakeFd_, handler);
}

Status Bootstrap::rendezvous(const IdContents& id, RankInfo mine) {
  auto deadline = net::Deadline::afterMs(options_.timeoutMs + rootGraceMs(options_.timeoutMs));
  // Named so that a lost connection points at the likely cause: the root lives in the process of
  // the rank that created the id (rank 0 for collCommInitFromEnv).
  std::string rootName =
      fmt::format("the bootstrap root at {} (hosted by the process that made the id)", id.root.toString());
  faultPoint("init-before-hello", rank_);
  COLL_ASSIGN_OR_RETURN(net::Socket sock, net::Socket::connect(id.root, deadline, options_.abort, rootName));
  Hello hello{};
  hello.nranks = nranks_;
  hello.libVersion = COLL_VERSION_CODE;
  hello.info = mine;
  COLL_TRY(sendMessage(sock, makeHeader(secret_, kTagHello, sizeof(hello), rank_), &hello, deadline, options_.abort,
                       rootName));
  faultPoint("init-after-hello", rank_);

  COLL_ASSIGN_OR_RETURN(Message reply, recvMessage(sock, secret_, kTagReply, deadline, options_.abort, rootName));
  Result<RootAnswer> answer =
      decodeRootAnswer(reinterpret_cast<const uint8_t*>(reply.payload.data()), reply.payload.size(), nranks_);
  if (!answer.isOk()) return answer.takeStatus().prefix(rootName + " sent ");
  if (answer->code != collSuccess) return Status(answer->code, std::move(answer->message));
  peers_ = std::move(answer->table);
  for (const RankInfo& peer : peers_) peerAddrs_.push_back(*peer.listen.unpack());  // decodeRootAnswer checked them
  status_ = std::make_unique<StatusService>(rank_, secret_, peers_, [this] { return statusSnapshot(); });
  formed_.store(true, std::memory_order_release);
  return Status::ok();
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const IdContents& id, int rank, int nranks, RankInfo mine,
                                                     const Options& options) {
  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks, id.secret, options));
  // Without COLL_SOCKET_IFNAME, the interface closest to the rank's NUMA node when there are several.
  bool byLocality = false;
  COLL_ASSIGN_OR_RETURN(net::Interface iface, socketInterface(mine.numa, &byLocality));
  COLL_LOG(INFO, NET, "rank {} uses interface {} ({}) for bootstrap and TCP{}", rank, iface.name,
           iface.address.toString(), byLocality ? ", the closest to its NUMA node" : "");
  b->iface_ = iface;
  mine.netMbps = net::linkSpeedMbps(iface.name);
  net::Address bind = iface.address;
  bind.setPort(0);
  COLL_TRY(b->startInbox(bind));
  mine.listen = net::PackedAddress::pack(b->server_->address());
  COLL_TRY(b->rendezvous(id, mine));

  // Prove that every inbox is reachable (interface and firewall problems show here, at init, with
  // the peer named) and that all ranks hold the same table.
  std::vector<uint64_t> digests(nranks);
  digests[rank] = fnv1a(b->peers_.data(), sizeof(RankInfo) * nranks);
  COLL_TRY(b->allGather(digests.data(), sizeof(uint64_t)));
  for (int r = 0; r < nranks; ++r)
    if (digests[r] != digests[rank])
      return COLL_ERROR(collInternalError, FMT_STRING("{} received a different rank table from the root"),
                        b->describe(r));
  return b;
}

Status Bootstrap::sendRaw(int peer, uint64_t tag, const void* data, size_t size, int64_t timeoutMs) {
  auto deadline = net::Deadline::afterMs(timeoutMs < 0 ? options_.timeoutMs : timeoutMs);
  std::string who = describe(peer);
  // The peer's inbox was listening before the rendezvous finished: a refusal means it is gone.
  COLL_ASSIGN_OR_RETURN(net::Socket sock, net::Socket::connect(peerAddrs_[peer], deadline, options_.abort, who, false));
  return sendMessage(sock, makeHeader(secret_, tag, size, rank_), data, deadline, options_.abort, who);
}

Result<std::vector<char>> Bootstrap::recvBytesWatching(
    int peer, uint64_t tag, uint64_t watchTag, const std::function<std::string(const std::vector<char>&)>& watch) {
  if (peer < 0 || peer >= nranks_ || (tag & kTagInternal) || (watchTag & kTagInternal))
    return COLL_ERROR(collInternalError, FMT_STRING("bootstrap recv from {} with tag {:#x}"), peer, tag);
  return recvRaw(peer, tag, -1, false, watchTag, &watch);
}

Result<std::vector<char>> Bootstrap::recvRaw(int peer, uint64_t tag, int64_t timeoutMs, bool despiteFailures,
                                             uint64_t watchTag,
                                             const std::function<std::string(const std::vector<char>&)>* watch) {
  if (timeoutMs < 0) timeoutMs = options_.timeoutMs;
  auto deadline = net::Deadline::afterMs(timeoutMs);
  int slices = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = inbox_.find({peer, tag});
    if (it != inbox_.end() && !it->second.empty()) {
      std::vector<char> m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) inbox_.erase(it);
      releaseLocked(peer, m.size());
      return m;
    }
    if (!peerFailure_.empty() && !despiteFailures) return Status(collRemoteError, peerFailure_);
    if (watch) {
      auto w = inbox_.find({peer, watchTag});
      if (w != inbox_.end())
        for (const std::vector<char>& m : w->second) {
          std::string why = (*watch)(m);
          if (!why.empty()) return Status(collInvalidUsage, why);
        }
    }
    if (options_.abort && options_.abort->load())
      return COLL_ERROR(collRemoteError, FMT_STRING("aborted while waiting for a bootstrap message from {}"),
                        describe(peer));
    if (++slices % 4 == 0 && peerProcessGone(peer))
      return COLL_ERROR(collRemoteError, FMT_STRING("{} died (its process is gone)"), describe(peer));
    if (deadline.expired())
      return COLL_ERROR(collTimeout,
                        FMT_STRING("timed out after {} ms waiting for a bootstrap message from {} (it, or a rank it "
                                   "waits for, may have died or stalled)"),
                        timeoutMs, describe(peer));
    arrived_.wait_for(lock, kWaitSlice);
  }
}

void Bootstrap::notifyPeersOfFailure(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!peerFailure_.empty()) return;  // we failed because of a notice: everyone has had it
  }
  if (options_.abort && options_.abort->load()) return;  // a local abort is not a peer's business
  const std::string& text = why.message();
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    auto deadline = net::Deadline::afterMs(500);
    auto sock = net::Socket::connect(peerAddrs_[r], deadline, nullptr, describe(r), false);
    if (!sock.isOk()) continue;
    (void)sendMessage(*sock, makeHeader(secret_, kTagAbortNotice, text.size(), rank_), text.data(), deadline, nullptr,
                      describe(r));
  }
}

bool Bootstrap::peerProcessGone(int peer) const {
  // Only a process on this host can be checked, and our own pid (ranks as threads) never is gone.
  if (peer < 0 || peer >= static_cast<int>(peers_.size())) return false;
  const RankInfo& p = peers_[peer];
  if (p.hostHash != peers_[rank_].hostHash || p.pid == getpid()) return false;
  return processGone(p.pid);
}

Status Bootstrap::send(int peer, uint64_t tag, const void* data, size_t size) {
  if (peer < 0 || peer >= nranks_ || (tag & kTagInternal))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("bootstrap send to rank {} tag {:#x}: invalid"), peer, tag);
  return sendRaw(peer, tag, data, size);
}

Status Bootstrap::recv(int peer, uint64_t tag, void* data, size_t size) {
  if (peer < 0 || peer >= nranks_ || (tag & kTagInternal))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("bootstrap recv from rank {} tag {:#x}: invalid"), peer, tag);
  COLL_ASSIGN_OR_RETURN(std::vector<char> m, recvRaw(peer, tag));
  if (m.size() != size)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("{} sent {} bytes under tag {:#x}, {} were expected"),
                      describe(peer), m.size(), tag, size);
  std::memcpy(data, m.data(), size);
  return Status::ok();
}

Status Bootstrap::recvDespiteFailures(int peer, uint64_t tag, void* data, size_t size) {
  if (peer < 0 || peer >= nranks_ || (tag & kTagInternal))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("bootstrap recv from rank {} tag {:#x}: invalid"), peer, tag);
  COLL_ASSIGN_OR_RETURN(std::vector<char> m, recvRaw(peer, tag, -1, true));
  if (m.size() != size)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("{} sent {} bytes under tag {:#x}, {} were expected"),
                      describe(peer), m.size(), tag, size);
  std::memcpy(data, m.data(), size);
  return Status::ok();
}

Result<std::vector<char>> Bootstrap::recvBytes(int peer, uint64_t tag) {
  if (peer < 0 || peer >= nranks_ || (tag & kTagInternal))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("bootstrap recv from rank {} tag {:#x}: invalid"), peer, tag);
  return recvRaw(peer, tag);
}

Status Bootstrap::allGather(void* data, size_t bytesPerRank) {
  Status s = ringAllGather(data, bytesPerRank);
  return s.isOk() ? s : shareFailure(std::move(s));
}

Status Bootstrap::shareFailure(Status local) {
  Status s = preferPeerFailure(std::move(local));
  notifyPeersOfFailure(s);
  return s;
}

Status Bootstrap::preferPeerFailure(Status local) {
  if (options_.abort && options_.abort->load()) return local;
  // Only a refused or reset connection is likely a consequence of another rank's failure.
  if (local.code() != collRemoteError) return local;
  std::unique_lock<std::mutex> lock(mutex_);
  arrived_.wait_for(lock, std::chrono::milliseconds(kNoticeGraceMs), [this] { return !peerFailure_.empty(); });
  if (peerFailure_.empty() || local.message() == peerFailure_) return local;
  return Status(collRemoteError, fmt::format("{} (here: {})", peerFailure_, local.message()));
}

Status Bootstrap::ringAllGather(void* data, size_t bytesPerRank) {
  // Ring: at step s, pass on the slot received at step s-1 (our own at s = 0). Tags carry the
  // collective's sequence number and the step, so that nothing from an earlier call can match.
  uint64_t seq = collectiveSeq_++;
  char* base = static_cast<char*>(data);
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  for (int step = 0; step < nranks_ - 1; ++step) {
    uint64_t tag = kTagCollective | (seq << 24) | static_cast<uint64_t>(step);
    int sendSlot = (rank_ - step + nranks_) % nranks_;
    int recvSlot = (rank_ - step - 1 + nranks_) % nranks_;
    COLL_TRY(sendRaw(next, tag, base + sendSlot * bytesPerRank, bytesPerRank));
    COLL_ASSIGN_OR_RETURN(std::vector<char> m, recvRaw(prev, tag));
    if (m.size() != bytesPerRank)
      return COLL_ERROR(collInvalidUsage, FMT_STRING("bootstrap all-gather: {} contributed {} bytes, this rank {}"),
                        describe(prev), m.size(), bytesPerRank);
    std::memcpy(base + recvSlot * bytesPerRank, m.data(), bytesPerRank);
  }
  return Status::ok();
}

Status Bootstrap::barrier() {
  std::vector<char> dummy(nranks_);
  return allGather(dummy.data(), 1);
}

}  // namespace coll::bootstrap
