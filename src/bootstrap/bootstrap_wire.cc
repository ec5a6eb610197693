#include "bootstrap/bootstrap_wire.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace coll::bootstrap {

MsgHeader makeHeader(uint64_t secret, uint64_t tag, uint64_t size, int srcRank) {
  MsgHeader h{};
  h.magic = kWireMagic;
  h.secret = secret;
  h.tag = tag;
  h.size = size;
  h.srcRank = srcRank;
  h.version = kWireVersion;
  return h;
}

Status sendMessage(net::Socket& sock, const MsgHeader& header, const void* payload, const net::Deadline& deadline,
                   const std::atomic<bool>* abort, const std::string& peer) {
  COLL_TRY(sock.sendAll(&header, sizeof(header), deadline, abort, peer));
  if (header.size > 0) COLL_TRY(sock.sendAll(payload, header.size, deadline, abort, peer));
  return Status::ok();
}

Result<Message> recvMessage(net::Socket& sock, uint64_t secret, uint64_t expectTag, const net::Deadline& deadline,
                            const std::atomic<bool>* abort, const std::string& peer) {
  uint8_t bytes[sizeof(MsgHeader)];
  COLL_TRY(sock.recvAll(bytes, sizeof(bytes), deadline, abort, peer));
  Result<MsgHeader> decoded = decodeHeader(bytes, sizeof(bytes), secret);
  if (!decoded.isOk())
    return COLL_ERROR(collRemoteError,
                      FMT_STRING("{} sent a message that is not coll bootstrap traffic of this job: {}"), peer,
                      decoded.status().message());
  const MsgHeader& h = *decoded;
  if (h.tag != expectTag)
    return COLL_ERROR(collInternalError, FMT_STRING("{} sent tag {:#x} where {:#x} was expected"), peer, h.tag,
                      expectTag);
  Message m;
  m.srcRank = h.srcRank;
  m.tag = h.tag;
  m.payload.resize(h.size);
  if (h.size > 0) COLL_TRY(sock.recvAll(m.payload.data(), h.size, deadline, abort, peer));
  return m;
}

namespace {

// Why a RankInfo from the wire cannot be used, or "" when it can.
std::string rankInfoProblem(const RankInfo& info) {
  if (!terminated(info.hostName, sizeof(info.hostName))) return "its host name is not terminated";
  if (!terminated(info.hostId, sizeof(info.hostId))) return "its host id is not terminated";
  if (!terminated(info.busId, sizeof(info.busId))) return "its bus id is not terminated";
  if (info.gpuCtas < 0) return "its GPU's CTA count is negative";
  return "";
}

}  // namespace

Result<MsgHeader> decodeHeader(const uint8_t* data, size_t size, uint64_t secret) {
  MsgHeader h;
  if (size != sizeof(h))
    return COLL_ERROR(collRemoteError, FMT_STRING("a {}-byte header (expected {})"), size, sizeof(h));
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != kWireMagic) return Status(collRemoteError, "not coll bootstrap traffic (bad magic)");
  if (h.version != kWireVersion)
    return COLL_ERROR(collRemoteError, FMT_STRING("wire version {} (this library speaks {})"), h.version, kWireVersion);
  if (h.secret != secret) return Status(collRemoteError, "wrong secret (a different job, or a stale collUniqueId)");
  if (h.size > kMaxPayloadBytes)
    return COLL_ERROR(collRemoteError, FMT_STRING("oversized payload of {} bytes (limit {})"), h.size,
                      kMaxPayloadBytes);
  return h;
}

Result<Hello> decodeHello(const uint8_t* data, size_t size) {
  Hello h;
  if (size != sizeof(h))
    return COLL_ERROR(collRemoteError, FMT_STRING("not a hello ({} bytes, a hello has {})"), size, sizeof(h));
  std::memcpy(&h, data, sizeof(h));
  std::string problem = rankInfoProblem(h.info);
  if (!problem.empty()) return Status(collRemoteError, "a hello whose " + problem.substr(4));
  int rank = h.info.rank;
  if (h.nranks < 1 || rank < 0 || rank >= h.nranks)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("rank {} of {} is out of range"), rank, h.nranks);
  if (h.nranks > kMaxRanks)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("rank {} was started with nranks={}, above the limit of {}"), rank,
                      h.nranks, kMaxRanks);
  return h;
}

Result<RootAnswer> decodeRootAnswer(const uint8_t* data, size_t size, int nranks) {
  if (nranks < 1 || nranks > kMaxRanks)
    return COLL_ERROR(collInternalError, FMT_STRING("an answer for nranks={} (limit {})"), nranks, kMaxRanks);
  int32_t code;
  uint32_t len;
  if (size < 8) return Status(collInternalError, "a truncated answer");
  std::memcpy(&code, data, 4);
  std::memcpy(&len, data + 4, 4);
  if (8 + static_cast<size_t>(len) > size) return Status(collInternalError, "a truncated answer");
  // The code becomes a collResult_t: a value outside the enum would be undefined behaviour.
  if (code < collSuccess || code > collTimeout)
    return COLL_ERROR(collInternalError, FMT_STRING("an answer with unknown result code {}"), code);
  RootAnswer a;
  a.code = static_cast<collResult_t>(code);
  a.message.assign(reinterpret_cast<const char*>(data) + 8, len);
  if (a.code != collSuccess) return a;
  size_t want = 8 + static_cast<size_t>(len) + sizeof(RankInfo) * static_cast<size_t>(nranks);
  if (size != want) return COLL_ERROR(collInternalError, FMT_STRING("{} bytes of rank table, expected {}"), size, want);
  a.table.resize(nranks);
  std::memcpy(a.table.data(), data + 8 + len, sizeof(RankInfo) * static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    const RankInfo& info = a.table[r];
    std::string problem = rankInfoProblem(info);
    if (problem.empty() && info.rank != r) problem = fmt::format("it says it is rank {}", info.rank);
    if (problem.empty()) {
      auto addr = info.listen.unpack();
      if (!addr.isOk()) problem = "its inbox address is invalid: " + addr.status().message();
    }
    if (!problem.empty())
      return COLL_ERROR(collInternalError, FMT_STRING("a rank table whose entry {}: {}"), r, problem);
  }
  return a;
}

std::vector<char> encodeRootAnswer(collResult_t code, const std::string& message, const std::vector<RankInfo>& table) {
  std::vector<char> payload(8 + message.size());
  int32_t c = code;
  uint32_t len = static_cast<uint32_t>(message.size());
  std::memcpy(payload.data(), &c, 4);
  std::memcpy(payload.data() + 4, &len, 4);
  std::memcpy(payload.data() + 8, message.data(), message.size());
  if (code == collSuccess) {
    const char* p = reinterpret_cast<const char*>(table.data());
    payload.insert(payload.end(), p, p + sizeof(RankInfo) * table.size());
  }
  return payload;
}

namespace {

int openReserveFd() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace

MessageServer::MessageServer(net::Listener listener, uint64_t secret, const ServerLimits& limits, std::string owner)
    : listener_(std::move(listener)),
      secret_(secret),
      limits_(limits),
      owner_(std::move(owner)),
      reserveFd_(openReserveFd()) {}

MessageServer::MessageServer(MessageServer&& o) noexcept
    : listener_(std::move(o.listener_)),
      secret_(o.secret_),
      limits_(o.limits_),
      owner_(std::move(o.owner_)),
      pending_(std::move(o.pending_)),
      admit_(std::move(o.admit_)),
      release_(std::move(o.release_)),
      reserveFd_(o.reserveFd_),
      listenerPausedUntil_(o.listenerPausedUntil_),
      warnLimit_(o.warnLimit_),
      dropped_(o.dropped_) {
  o.reserveFd_ = -1;
}

MessageServer::~MessageServer() {
  for (auto& p : pending_)
    if (p.admitted && release_) release_(p.header);
  if (reserveFd_ >= 0) ::close(reserveFd_);
}

void MessageServer::warn(const std::string& line) {
  uint64_t held = 0;
  if (!warnLimit_.allow(&held)) return;
  COLL_LOG(WARN, BOOTSTRAP, "{}: {}{}", owner_, line,
           held ? fmt::format(" ({} similar line(s) held back in the last second)", held) : "");
}

void MessageServer::drop(Pending& p, const std::string& why) {
  ++dropped_;
  warn(fmt::format("dropped connection from {}: {}", p.peer.toString(), why));
  if (p.admitted && release_) release_(p.header);
  p.admitted = false;
  p.sock.close();
  p.slot.release();
}

bool MessageServer::evictOldestUnauthenticated() {
  // Only one that had time to speak: an honest sender's header follows its connection within a
  // millisecond or so, and it must not be replaced by the flood accepted in the same round.
  auto cutoff = std::chrono::steady_clock::now() - net::kReplaceSilentAfter;
  Pending* oldest = nullptr;
  for (auto& p : pending_)
    if (p.sock.valid() && p.headerGot < sizeof(MsgHeader) && p.start < cutoff && (!oldest || p.start < oldest->start))
      oldest = &p;
  if (!oldest) return false;
  ++dropped_;
  warn(
      fmt::format("dropped connection from {}: replaced by a newer one ({} connections pending here, {} of the "
                  "process's {} unauthenticated)",
                  oldest->peer.toString(), pending_.size(), net::unauthBudgetInUse(), net::unauthBudgetLimit()));
  oldest->sock.close();
  oldest->slot.release();
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return !p.sock.valid(); }),
                 pending_.end());
  return true;
}

bool MessageServer::progress(Pending& p, const Handler& handler) {
  while (p.headerGot < sizeof(MsgHeader)) {
    ssize_t k = p.sock.recvSome(p.headerBytes + p.headerGot, sizeof(MsgHeader) - p.headerGot);
    if (k < 0) {
      // A peer that connects and leaves without a byte is a port probe; not worth a warning.
      if (p.headerGot > 0) drop(p, "connection closed inside the message header");
      return true;
    }
    if (k == 0) return false;
    p.headerGot += static_cast<size_t>(k);
    if (p.headerGot == sizeof(MsgHeader)) {
      Result<MsgHeader> h = decodeHeader(p.headerBytes, sizeof(p.headerBytes), secret_);
      if (!h.isOk()) return drop(p, h.status().message()), true;
      p.header = *h;
      p.slot.release();  // it showed the secret: no longer part of a flood's budget
      // Nothing is allocated for a payload before its owner agreed to hold it.
      std::string refused = admit_ ? admit_(p.header) : "";
      if (!refused.empty()) return drop(p, refused), true;
      p.admitted = true;
      p.payload.resize(p.header.size);
    }
  }
  while (p.payloadGot < p.payload.size()) {
    ssize_t k = p.sock.recvSome(p.payload.data() + p.payloadGot, p.payload.size() - p.payloadGot);
    if (k < 0) return drop(p, "connection closed inside the payload"), true;
    if (k == 0) return false;
    p.payloadGot += static_cast<size_t>(k);
  }
  Message m;
  m.srcRank = p.header.srcRank;
  m.tag = p.header.tag;
  m.payload = std::move(p.payload);
  m.from = p.peer;
  p.admitted = false;  // delivered: the handler owns it now
  handler(std::move(m), std::move(p.sock));
  return true;
}

void MessageServer::acceptAll(const Handler& handler) {
  for (int accepted = 0; accepted < 256; ++accepted) {  // then the pending connections get their turn
    Pending p;
    // Room: under this listener's cap and within the process's budget, or made by replacing the
    // oldest connection that has not shown the secret.
    bool room = pending_.size() < limits_.maxPending && p.slot.tryTake();
    if (!room && evictOldestUnauthenticated()) room = pending_.size() < limits_.maxPending && p.slot.tryTake();
    // Every listener keeps a few connections of its own outside the budget, so that floods on
    // the others cannot starve it of the one its honest peer is opening.
    if (!room && pending_.size() < limits_.maxPending) {
      size_t unauth = 0;
      for (const auto& q : pending_) unauth += q.sock.valid() && q.headerGot < sizeof(MsgHeader);
      room = unauth < net::kListenerFloor;
    }
    if (!room) {
      // Every descriptor of the budget is held elsewhere (other listeners) or by authenticated
      // connections: leave newcomers in the backlog a moment instead of spinning on it.
      // Until the newest silent ones may be replaced.
      listenerPausedUntil_ = std::chrono::steady_clock::now() + net::kReplaceSilentAfter;
      return;
    }
    int err = 0;
    p.sock = listener_.accept(&p.peer, &err);
    if (!p.sock.valid()) {
      if (err == EMFILE || err == ENFILE) {
        // Out of descriptors: the connection stays in the backlog and the listener stays readable,
        // so poll would return at once forever. Spend the reserve descriptor to take it and close
        // it (its sender sees a reset rather than a hang), then leave the listener alone a while.
        if (reserveFd_ >= 0) {
          ::close(reserveFd_);
          reserveFd_ = -1;
          net::Socket shed = listener_.accept(nullptr);
          shed.close();
          reserveFd_ = openReserveFd();
        }
        ++dropped_;
        warn(fmt::format("out of file descriptors ({}): refusing new connections for 100 ms", std::strerror(err)));
        listenerPausedUntil_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      } else if (err == ENOBUFS || err == ENOMEM) {
        listenerPausedUntil_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    p.start = std::chrono::steady_clock::now();
    // Data often arrives with the connection: try at once rather than after another poll.
    if (!progress(p, handler)) pending_.push_back(std::move(p));
  }
}

void MessageServer::poll(int waitMs, int wakeFd, const Handler& handler) {
  auto now = std::chrono::steady_clock::now();
  // The listener is watched unless paused (acceptAll makes room or pauses it).
  bool listen = now >= listenerPausedUntil_;
  std::vector<pollfd> fds;
  fds.push_back({listen ? listener_.fd() : -1, POLLIN, 0});
  fds.push_back({wakeFd, POLLIN, 0});  // fd -1 is ignored by poll
  for (auto& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});
  // Wake in time for the first handshake deadline or the end of a pause.
  int wait = waitMs;
  if (!pending_.empty()) wait = std::min(wait, static_cast<int>(std::min<int64_t>(limits_.handshakeMs, 250)));
  // Paused: wake when the pause ends (a flood's connections become replaceable after
  // net::kReplaceSilentAfter), not a fixed 100 ms later, or a flood would drain at a few connections a poll.
  if (!listen)
    wait = std::min<int>(
        wait, 1 + static_cast<int>(
                      std::chrono::duration_cast<std::chrono::milliseconds>(listenerPausedUntil_ - now).count()));
  int rc = ::poll(fds.data(), fds.size(), wait);
  if (rc < 0) return;  // EINTR: the caller loops

  for (size_t i = 0; i < pending_.size(); ++i)
    if (fds[i + 2].revents && progress(pending_[i], handler)) pending_[i].sock.close();

  if (listen && (fds[0].revents & POLLIN)) acceptAll(handler);

  now = std::chrono::steady_clock::now();
  for (auto& p : pending_) {
    if (!p.sock.valid()) continue;
    auto ageMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.start).count();
    // Until its header proves it belongs to this job, a connection has only the handshake window.
    if (p.headerGot < sizeof(MsgHeader) && ageMs > limits_.handshakeMs)
      drop(p, fmt::format("no complete message header after {} ms (COLL_HANDSHAKE_TIMEOUT_MS)", ageMs));
    else if (ageMs > limits_.stallMs)
      drop(p, fmt::format("no complete message after {} ms", ageMs));
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return !p.sock.valid(); }),
                 pending_.end());
}

}  // namespace coll::bootstrap
