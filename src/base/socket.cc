#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace coll::net {
namespace {

// Poll slice: how quickly an abort flag is noticed by a blocked wait.
constexpr int kSliceMs = 50;

Status setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return COLL_ERROR(collSystemError, FMT_STRING("fcntl(O_NONBLOCK) failed: {}"), std::strerror(errno));
  return Status::ok();
}

void setNoDelay(int fd) {
  int one = 1;
  // Bootstrap messages are small request/response pairs: Nagle would only add latency.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int64_t Deadline::remainingMs() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
  return std::max<int64_t>(0, left);
}

uint16_t Address::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void Address::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string Address::hostString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  else if (family() == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf, sizeof(buf));
  else
    return "<no address>";
  return buf;
}

std::string Address::toString() const {
  if (family() == AF_INET6) return fmt::format("[{}]:{}", hostString(), port());
  return fmt::format("{}:{}", hostString(), port());
}

Result<Address> Address::resolve(const std::string& host, uint16_t port, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("cannot resolve address '{}': {}"), host, gai_strerror(rc));
  Address a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.length = res->ai_addrlen;
  freeaddrinfo(res);
  a.setPort(port);
  return a;
}

Address Address::any(int family, uint16_t port) {
  Address a;
  if (family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    s->sin6_addr = in6addr_any;
    a.length = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = htonl(INADDR_ANY);
    a.length = sizeof(sockaddr_in);
  }
  a.setPort(port);
  return a;
}

PackedAddress PackedAddress::pack(const Address& a) {
  PackedAddress p;
  p.family = static_cast<uint16_t>(a.family());
  if (a.family() == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&a.storage);
    p.portBe = s->sin_port;
    std::memcpy(p.ip, &s->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    p.portBe = s->sin6_port;
    p.scopeId = s->sin6_scope_id;
    std::memcpy(p.ip, &s->sin6_addr, 16);
  }
  return p;
}

Result<Address> PackedAddress::unpack() const {
  Address a;
  if (family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    s->sin_port = portBe;
    std::memcpy(&s->sin_addr, ip, 4);
    a.length = sizeof(sockaddr_in);
  } else if (family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    s->sin6_port = portBe;
    s->sin6_scope_id = scopeId;
    std::memcpy(&s->sin6_addr, ip, 16);
    a.length = sizeof(sockaddr_in6);
  } else {
    return COLL_ERROR(collInvalidArgument, FMT_STRING("unknown address family {}"), family);
  }
  if (a.port() == 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("address {} has port 0"), a.hostString());
  return a;
}

Status waitFd(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what) {
  for (;;) {
    if (abort && abort->load(std::memory_order_relaxed))
      return COLL_ERROR(collRemoteError, FMT_STRING("aborted while waiting for {}"), what);
    int64_t left = deadline.remainingMs();
    if (left == 0) return COLL_ERROR(collTimeout, FMT_STRING("timed out waiting for {}"), what);
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, kSliceMs)));
    if (rc > 0) return Status::ok();  // errors and hang-ups surface in the following read/write
    if (rc < 0 && errno != EINTR)
      return COLL_ERROR(collSystemError, FMT_STRING("poll failed waiting for {}: {}"), what, std::strerror(errno));
  }
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> Socket::connect(const Address& addr, const Deadline& deadline, const std::atomic<bool>* abort,
                               const std::string& peer, bool retryRefused) {
  std::string lastError = "no attempt made";
  int backoffMs = 5;
  while (!deadline.expired()) {
    if (abort && abort->load(std::memory_order_relaxed))
      return COLL_ERROR(collRemoteError, FMT_STRING("aborted while connecting to {}"), peer);
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid())
      return COLL_ERROR(collSystemError, FMT_STRING("socket() for {} failed: {}"), peer, std::strerror(errno));
    COLL_TRY(setNonBlocking(s.fd()));
    setNoDelay(s.fd());
    int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length);
    if (rc != 0 && errno == EINPROGRESS) {
      Status w = waitFd(s.fd(), POLLOUT, deadline, abort, fmt::format("connection to {}", peer));
      if (!w.isOk()) return w;
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) return s;
    lastError = std::strerror(errno);
    if (!retryRefused && errno == ECONNREFUSED)
      return COLL_ERROR(collRemoteError, FMT_STRING("{} at {} refused the connection: it is no longer running"), peer,
                        addr.toString());
    // Refused/unreachable: the peer may not listen yet (it starts later than us). Retry with backoff.
    if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != ENETUNREACH && errno != EHOSTUNREACH &&
        errno != ECONNRESET && errno != EAGAIN)
      return COLL_ERROR(collSystemError, FMT_STRING("cannot connect to {} at {}: {}"), peer, addr.toString(),
                        lastError);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(backoffMs, deadline.remainingMs())));
    backoffMs = std::min(backoffMs * 2, 200);
  }
  return COLL_ERROR(collTimeout, FMT_STRING("timed out connecting to {} at {} (last error: {})"), peer, addr.toString(),
                    lastError);
}

Status Socket::sendAll(const void* data, size_t n, const Deadline& deadline, const std::atomic<bool>* abort,
                       const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      COLL_TRY(waitFd(fd_, POLLOUT, deadline, abort, fmt::format("{} to accept data", peer)));
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    return COLL_ERROR(collRemoteError, FMT_STRING("sending to {} failed: {}"), peer,
                      k < 0 ? std::strerror(errno) : "connection closed");
  }
  return Status::ok();
}

Status Socket::recvAll(void* data, size_t n, const Deadline& deadline, const std::atomic<bool>* abort,
                       const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd_, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0)
      return COLL_ERROR(collRemoteError, FMT_STRING("{} closed the connection ({} bytes still expected)"), peer, n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      COLL_TRY(waitFd(fd_, POLLIN, deadline, abort, fmt::format("data from {}", peer)));
      continue;
    }
    if (errno == EINTR) continue;
    return COLL_ERROR(collRemoteError, FMT_STRING("receiving from {} failed: {}"), peer, std::strerror(errno));
  }
  return Status::ok();
}

ssize_t Socket::recvSome(void* data, size_t n) {
  for (;;) {
    ssize_t k = ::recv(fd_, data, n, 0);
    if (k > 0) return k;
    if (k == 0) return -1;
    if (errno == EINTR) continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
  }
}

Result<Listener> Listener::listen(const Address& addr, bool reuseAddr) {
  Listener l;
  l.socket_ = Socket(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.socket_.valid()) return COLL_ERROR(collSystemError, FMT_STRING("socket() failed: {}"), std::strerror(errno));
  int one = 1;
  if (reuseAddr) (void)setsockopt(l.socket_.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(l.socket_.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0)
    return COLL_ERROR(collSystemError, FMT_STRING("cannot bind {}: {}"), addr.toString(), std::strerror(errno));
  // A deep backlog: at init every rank connects to the root at about the same moment.
  if (::listen(l.socket_.fd(), 16384) != 0)
    return COLL_ERROR(collSystemError, FMT_STRING("listen on {} failed: {}"), addr.toString(), std::strerror(errno));
  COLL_TRY(setNonBlocking(l.socket_.fd()));
  l.address_ = addr;
  socklen_t len = sizeof(l.address_.storage);
  getsockname(l.socket_.fd(), reinterpret_cast<sockaddr*>(&l.address_.storage), &len);
  l.address_.length = len;
  return l;
}

Socket Listener::accept(Address* peer, int* error) {
  Address a;
  a.length = sizeof(a.storage);
  int fd = ::accept4(socket_.fd(), reinterpret_cast<sockaddr*>(&a.storage), &a.length, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (error) *error = fd < 0 ? errno : 0;
  if (fd < 0) return Socket();
  setNoDelay(fd);
  if (peer) *peer = a;
  return Socket(fd);
}

}  // namespace coll::net
