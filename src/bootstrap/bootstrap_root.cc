#include "bootstrap/bootstrap_root.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/status_wire.h"
#include "bootstrap/unique_id.h"

namespace coll::bootstrap {
namespace {

// How long the root waits for one reply to drain into a rank's socket.
constexpr int64_t kReplyTimeoutMs = 5000;

// Roots whose communicator is decided stay to refuse stale ids at once; this many per process,
// the oldest closed first (a rank that reaches a closed one waits for its own deadline).
constexpr size_t kMaxRetiredRoots = 8;

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  const size_t kShown = 32;  // at 4096 ranks a full list would drown the message
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kShown) s += fmt::format(" and {} more", ranks.size() - kShown);
  return s;
}

class Root {
 public:
  Root(MessageServer server, uint64_t secret, int64_t timeoutMs)
      : server_(std::move(server)),
        secret_(secret),
        timeoutMs_(timeoutMs),
        wakeFd_(eventfd(0, EFD_CLOEXEC)),
        port_(server_.address().port()) {
    // Before a payload is allocated, its size must be what the message can be: a hello is
    // sizeof(Hello), a tool's status question is empty. Without COLL_BOOTSTRAP_SECRET the secret
    // is derived from public values, so the header's secret alone must not buy an allocation.
    server_.setAdmission(
        [](const MsgHeader& h) -> std::string {
          if (h.tag == kTagHello && h.size == sizeof(Hello)) return "";
          if (h.tag == kTagStatusQuery && h.srcRank == kToolRank && h.size == sizeof(StatusQuestion)) return "";
          return fmt::format("a message that is no hello (tag {:#x}, {} bytes; a hello has {})", h.tag, h.size,
                             sizeof(Hello));
        },
        [](const MsgHeader&) {});
  }
  ~Root() {
    if (wakeFd_ >= 0) ::close(wakeFd_);
  }

  void run();
  void stop() {
    stop_.store(true);
    uint64_t one = 1;
    if (wakeFd_ >= 0) (void)!::write(wakeFd_, &one, sizeof(one));
  }
  /// True once the communicator is decided (formed, or failed and every rank told): the root then
  /// only refuses stale hellos until stop().
  bool finished() const { return finished_.load(); }
  /// True once run() has returned.
  bool exited() const { return exited_.load(); }
  /// True once a rank has arrived: from then on the root ends by its deadline at the latest.
  bool engaged() const { return engaged_.load(); }
  int port() const { return port_; }

 private:
  void onHello(Message&& m, net::Socket&& sock);
  /// Answers hellos that come after the outcome, with the outcome, until stopped.
  void serveRetired();
  void fail(collResult_t code, std::string why);
  void reply(int rank, net::Socket& sock, collResult_t code, const std::string& msg);
  void replyAllSuccess();
  void checkDeparted();
  std::vector<int> missingRanks() const;
  bool allAnswered() const;

  MessageServer server_;
  uint64_t secret_;
  int64_t timeoutMs_;
  int wakeFd_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> exited_{false};
  std::atomic<bool> engaged_{false};
  int port_;
  bool succeeded_ = false;

  int nranks_ = -1;
  std::vector<std::optional<RankInfo>> infos_;
  std::vector<net::Socket> conns_;
  std::vector<bool> answered_;  // ranks that got an answer (success or the failure)
  int arrived_ = 0;
  std::optional<net::Deadline> deadline_;
  std::optional<Status> failure_;
};

std::vector<int> Root::missingRanks() const {
  std::vector<int> missing;
  for (int r = 0; r < nranks_; ++r)
    if (!infos_[r]) missing.push_back(r);
  return missing;
}

bool Root::allAnswered() const {
  return nranks_ > 0 && std::all_of(answered_.begin(), answered_.end(), [](bool b) { return b; });
}

void Root::reply(int rank, net::Socket& sock, collResult_t code, const std::string& msg) {
  if (rank >= 0 && rank < nranks_) answered_[rank] = true;
  std::vector<RankInfo> table;
  if (code == collSuccess)
    for (const auto& info : infos_) table.push_back(*info);
  std::vector<char> payload = encodeRootAnswer(code, msg, table);
  MsgHeader h = makeHeader(secret_, kTagReply, payload.size(), -1);
  Status s = sendMessage(sock, h, payload.data(), net::Deadline::afterMs(kReplyTimeoutMs), nullptr,
                         fmt::format("rank {}", rank));
  if (!s.isOk()) COLL_LOG(INFO, BOOTSTRAP, "root: could not answer rank {}: {}", rank, s.message());
  sock.close();
}

void Root::fail(collResult_t code, std::string why) {
  if (failure_) return;
  COLL_LOG(WARN, BOOTSTRAP, "root: {}", why);
  failure_ = Status(code, std::move(why));
  for (int r = 0; r < nranks_; ++r)
    if (conns_[r].valid()) reply(r, conns_[r], code, failure_->message());
}

void Root::onHello(Message&& m, net::Socket&& sock) {
  std::string from = m.from.toString();
  // A tool (coll-top) asks which ranks there are: where their inboxes are and which share a host,
  // once the job has formed (an empty table before).
  if (m.srcRank == kToolRank && m.tag == kTagStatusQuery) {
    std::vector<char> payload;
    if (succeeded_) {
      payload.resize(infos_.size() * sizeof(TableEntry));
      for (size_t r = 0; r < infos_.size(); ++r) {
        TableEntry e{infos_[r]->listen, infos_[r]->hostHash};
        std::memcpy(payload.data() + r * sizeof(e), &e, sizeof(e));
      }
    }
    (void)sendMessage(sock, makeHeader(secret_, kTagStatusAnswer, payload.size(), -1), payload.data(),
                      net::Deadline::afterMs(kReplyTimeoutMs), nullptr, "a status question");
    return;
  }
  // Out-of-range ranks and counts decode to collInvalidUsage, which that rank is answered; bytes
  // that are no hello at all are dropped.
  Result<Hello> decoded = decodeHello(reinterpret_cast<const uint8_t*>(m.payload.data()), m.payload.size());
  if (m.tag != kTagHello || (!decoded.isOk() && decoded.status().code() != collInvalidUsage)) {
    COLL_LOG(WARN, BOOTSTRAP, "root: dropped a message from {} that is not a hello{}", from,
             m.tag == kTagHello ? ": " + decoded.status().message() : "");
    return;
  }
  int rank = decoded.isOk() ? decoded->info.rank : -1;
  if (failure_) {  // Late arrivals learn why the job already failed instead of timing out.
    reply(rank, sock, failure_->code(), failure_->message());
    return;
  }
  if (succeeded_) {  // A rank started with the id of a job that already formed (a stale id).
    COLL_LOG(WARN, BOOTSTRAP,
             "root: refused rank {} from {}: its unique id belongs to a communicator that already "
             "formed",
             rank, from);
    reply(-1, sock, collInvalidUsage,
          fmt::format("this collUniqueId belongs to a job whose init already completed (all {} ranks arrived at "
                      "{}); every communicator needs a new id (collGetUniqueId) or a new master port",
                      nranks_, server_.address().toString()));
    return;
  }
  if (!deadline_) {
    deadline_ = net::Deadline::afterMs(timeoutMs_);
    engaged_.store(true);
  }
  if (!decoded.isOk()) {
    reply(rank, sock, collInvalidUsage, decoded.status().message());
    return;
  }
  const Hello& h = *decoded;
  if (nranks_ < 0) {
    nranks_ = h.nranks;
    infos_.resize(nranks_);
    conns_.resize(nranks_);
    answered_.assign(nranks_, false);
  }
  if (h.nranks != nranks_) {
    std::string why = fmt::format("rank {} (pid {} on {}) was started with nranks={}, others with nranks={}", rank,
                                  h.info.pid, h.info.hostName, h.nranks, nranks_);
    reply(rank, sock, collInvalidUsage, why);
    return fail(collInvalidUsage, why);
  }
  if (infos_[rank]) {
    std::string why = fmt::format("rank {} arrived twice: pid {} on {} and pid {} on {}", rank, infos_[rank]->pid,
                                  infos_[rank]->hostName, h.info.pid, h.info.hostName);
    reply(rank, sock, collInvalidUsage, why);
    return fail(collInvalidUsage, why);
  }
  infos_[rank] = h.info;
  conns_[rank] = std::move(sock);
  ++arrived_;
  COLL_LOG(TRACE, BOOTSTRAP, "root: rank {} arrived from {} ({}/{})", rank, from, arrived_, nranks_);
}

void Root::checkDeparted() {
  // An arrived rank sends nothing more until our answer, so a readable socket means it closed:
  // the process died or gave up. Failing now beats letting everyone wait for the deadline.
  for (int r = 0; r < nranks_ && !failure_; ++r) {
    if (!conns_[r].valid()) continue;
    char c;
    ssize_t k = ::recv(conns_[r].fd(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      conns_[r].close();
      answered_[r] = true;  // it is gone: nobody is left to tell
      fail(collRemoteError, fmt::format("rank {} (pid {} on {}) left the bootstrap before all ranks arrived: it died "
                                        "or gave up during init",
                                        r, infos_[r]->pid, infos_[r]->hostName));
    }
  }
}

void Root::replyAllSuccess() {
  for (int r = 0; r < nranks_; ++r) reply(r, conns_[r], collSuccess, "");
  COLL_LOG(INFO, BOOTSTRAP, "root: all {} ranks arrived", nranks_);
}

void Root::serveRetired() {
  auto handler = [this](Message&& m, net::Socket&& s) { onHello(std::move(m), std::move(s)); };
  while (!stop_.load()) server_.poll(1000, wakeFd_, handler);
}

void Root::run() {
  auto handler = [this](Message&& m, net::Socket&& s) { onHello(std::move(m), std::move(s)); };
  while (!stop_.load()) {
    server_.poll(100, wakeFd_, handler);
    checkDeparted();
    if (!failure_ && nranks_ > 0 && arrived_ == nranks_) {
      replyAllSuccess();
      succeeded_ = true;
      break;
    }
    // After a failure, stay to tell ranks that arrive late why, until each rank has been told.
    if (failure_ && allAnswered()) break;
    if (deadline_ && deadline_->expired()) {
      if (!failure_) {
        auto missing = missingRanks();
        fail(collTimeout,
             fmt::format("{} of {} ranks never arrived at the bootstrap root within {} ms "
                         "(COLL_BOOTSTRAP_TIMEOUT_MS): rank{} {}",
                         missing.size(), nranks_, timeoutMs_, missing.size() > 1 ? "s" : "", rankList(missing)));
      }
      break;
    }
  }
  finished_.store(true);
  // A rank still to come (a stale id, a straggler of a failed job) is answered at once instead
  // of waiting for its own deadline; a root no rank ever reached has nobody to answer.
  if (engaged_.load()) serveRetired();
  exited_.store(true);
}

struct Entry {
  std::shared_ptr<Root> root;
  std::thread thread;
  uint64_t secret;
};

std::mutex gMutex;
std::list<Entry> gRoots;

// Stops and joins the given roots (outside gMutex).
void stopAndJoin(std::list<Entry>& roots) {
  for (auto& e : roots) {
    e.root->stop();
    if (e.thread.joinable()) e.thread.join();
  }
}

void stopAll() {
  std::list<Entry> roots;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    roots.swap(gRoots);
  }
  stopAndJoin(roots);
}

}  // namespace

void reapRoots() {
  std::list<Entry> done;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    size_t retired = 0;
    for (auto it = gRoots.rbegin(); it != gRoots.rend(); ++it) retired += it->root->finished() ? 1 : 0;
    // Oldest first: the exited ones, then retired ones beyond the limit.
    for (auto it = gRoots.begin(); it != gRoots.end();) {
      auto next = std::next(it);
      bool over = it->root->finished() && retired > kMaxRetiredRoots;
      if (it->root->exited() || over) {
        if (it->root->finished()) --retired;
        done.splice(done.end(), gRoots, it);
      }
      it = next;
    }
  }
  stopAndJoin(done);
}

void waitForRoot(uint64_t secret) {
  std::shared_ptr<Root> root;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    for (auto& e : gRoots)
      if (e.secret == secret) root = e.root;
  }
  // A root no rank has reached has nobody to tell anything (and no deadline running yet).
  if (!root || !root->engaged()) return;
  // Bounded: an engaged root ends by its own deadline at the latest.
  while (!root->finished()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  reapRoots();
}

int runningRoots() {
  reapRoots();
  std::lock_guard<std::mutex> lock(gMutex);
  return static_cast<int>(
      std::count_if(gRoots.begin(), gRoots.end(), [](const Entry& e) { return !e.root->finished(); }));
}

int retiredRoots() {
  reapRoots();
  std::lock_guard<std::mutex> lock(gMutex);
  return static_cast<int>(
      std::count_if(gRoots.begin(), gRoots.end(), [](const Entry& e) { return e.root->finished(); }));
}

Result<collUniqueId> startRoot(const net::Address& bindAddr, const net::Address* advertise, bool reuseAddr,
                               uint64_t secret, int64_t timeoutMs) {
  reapRoots();
  if (bindAddr.port() != 0) {
    // A fixed port (a master port used again in this process) is freed by its retired root.
    std::list<Entry> holders;
    {
      std::lock_guard<std::mutex> lock(gMutex);
      for (auto it = gRoots.begin(); it != gRoots.end();) {
        auto next = std::next(it);
        if (it->root->finished() && it->root->port() == bindAddr.port()) holders.splice(holders.end(), gRoots, it);
        it = next;
      }
    }
    stopAndJoin(holders);
  }
  COLL_ASSIGN_OR_RETURN(net::Listener listener, net::Listener::listen(bindAddr, reuseAddr));
  IdContents c;
  c.secret = secret;
  c.root = listener.address();
  if (advertise) {
    c.root = *advertise;
    c.root.setPort(listener.address().port());
  }
  collUniqueId id;
  encodeUniqueId(c, &id);
  std::string owner = fmt::format("bootstrap root {}", listener.address().toString());
  ServerLimits limits;
  limits.handshakeMs = std::max<int64_t>(1, params::kHandshakeTimeoutMs.get());
  limits.stallMs = timeoutMs;
  auto root = std::make_shared<Root>(MessageServer(std::move(listener), secret, limits, owner), secret, timeoutMs);

  static std::once_flag atExit;
  // Joining at exit keeps a root from running while static objects it uses are destroyed.
  std::call_once(atExit, [] { std::atexit(stopAll); });
  std::lock_guard<std::mutex> lock(gMutex);
  gRoots.push_back(Entry{root, std::thread([root] { root->run(); }), secret});
  COLL_LOG(INFO, BOOTSTRAP, "root listening on {}", c.root.toString());
  return id;
}

}  // namespace coll::bootstrap
