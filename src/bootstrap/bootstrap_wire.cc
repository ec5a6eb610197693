#include "bootstrap/bootstrap_wire.h"

#include <poll.h>

#include <algorithm>
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
  MsgHeader h{};
  COLL_TRY(sock.recvAll(&h, sizeof(h), deadline, abort, peer));
  if (h.magic != kWireMagic || h.version != kWireVersion || h.secret != secret)
    return COLL_ERROR(collRemoteError, FMT_STRING("{} sent a message that is not coll bootstrap traffic of this job"),
                      peer);
  if (h.tag != expectTag)
    return COLL_ERROR(collInternalError, FMT_STRING("{} sent tag {:#x} where {:#x} was expected"), peer, h.tag,
                      expectTag);
  if (h.size > kMaxPayloadBytes)
    return COLL_ERROR(collRemoteError, FMT_STRING("{} announced a {}-byte message (limit {})"), peer, h.size,
                      kMaxPayloadBytes);
  Message m;
  m.srcRank = h.srcRank;
  m.tag = h.tag;
  m.payload.resize(h.size);
  if (h.size > 0) COLL_TRY(sock.recvAll(m.payload.data(), h.size, deadline, abort, peer));
  return m;
}

MessageServer::MessageServer(net::Listener listener, uint64_t secret, int64_t stallTimeoutMs, std::string owner)
    : listener_(std::move(listener)), secret_(secret), stallTimeoutMs_(stallTimeoutMs), owner_(std::move(owner)) {}

void MessageServer::drop(Pending& p, const std::string& why) {
  COLL_LOG(WARN, BOOTSTRAP, "{}: dropped connection from {}: {}", owner_, p.peer.toString(), why);
  p.sock.close();
}

bool MessageServer::progress(Pending& p, const Handler& handler) {
  while (p.headerGot < sizeof(MsgHeader)) {
    ssize_t k = p.sock.recvSome(reinterpret_cast<char*>(&p.header) + p.headerGot, sizeof(MsgHeader) - p.headerGot);
    if (k < 0) {
      // A peer that connects and leaves without a byte is a port probe; not worth a warning.
      if (p.headerGot > 0) drop(p, "connection closed inside the message header");
      return true;
    }
    if (k == 0) return false;
    p.headerGot += static_cast<size_t>(k);
    if (p.headerGot == sizeof(MsgHeader)) {
      const MsgHeader& h = p.header;
      if (h.magic != kWireMagic) return drop(p, "not coll bootstrap traffic (bad magic)"), true;
      if (h.version != kWireVersion)
        return drop(p, fmt::format("wire version {} (this library speaks {})", h.version, kWireVersion)), true;
      if (h.secret != secret_) return drop(p, "wrong secret (a different job, or a stale collUniqueId)"), true;
      if (h.size > kMaxPayloadBytes) return drop(p, fmt::format("oversized payload of {} bytes", h.size)), true;
      p.payload.resize(h.size);
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
  handler(std::move(m), std::move(p.sock));
  return true;
}

void MessageServer::poll(int waitMs, int wakeFd, const Handler& handler) {
  std::vector<pollfd> fds;
  fds.push_back({listener_.fd(), POLLIN, 0});
  fds.push_back({wakeFd, POLLIN, 0});  // fd -1 is ignored by poll
  for (auto& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});
  int rc = ::poll(fds.data(), fds.size(), waitMs);
  if (rc < 0) return;  // EINTR: the caller loops

  for (size_t i = 0; i < pending_.size(); ++i)
    if (fds[i + 2].revents && progress(pending_[i], handler)) pending_[i].sock.close();

  if (fds[0].revents & POLLIN) {
    for (;;) {
      Pending p;
      p.sock = listener_.accept(&p.peer);
      if (!p.sock.valid()) break;
      p.start = std::chrono::steady_clock::now();
      // Data often arrives with the connection: try at once rather than after another poll.
      if (!progress(p, handler)) pending_.push_back(std::move(p));
    }
  }

  auto now = std::chrono::steady_clock::now();
  for (auto& p : pending_) {
    if (!p.sock.valid()) continue;
    auto ageMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.start).count();
    if (ageMs > stallTimeoutMs_) drop(p, fmt::format("no complete message after {} ms", ageMs));
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return !p.sock.valid(); }),
                 pending_.end());
}

}  // namespace coll::bootstrap
