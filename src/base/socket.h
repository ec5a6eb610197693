// TCP sockets for the bootstrap (and later the TCP transport's control path).
//
// Every blocking operation takes a Deadline and an optional abort flag and waits in short poll
// slices, so that no call can hang past its deadline and collCommAbort can always interrupt it.
// Sockets are non-blocking underneath; errors are Status values whose message names the peer.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace coll::net {

/// A point in time after which a wait fails with collTimeout.
class Deadline {
 public:
  static Deadline afterMs(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  bool expired() const { return Clock::now() >= end_; }
  /// Milliseconds left, at least 0.
  int64_t remainingMs() const;

 private:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(Clock::time_point end) : end_(end) {}
  Clock::time_point end_;
};

/// An IPv4 or IPv6 socket address.
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  /// "1.2.3.4:5678" or "[fe80::1]:5678".
  std::string toString() const;
  /// The IP without port.
  std::string hostString() const;
  /// Resolves a numeric address or host name (getaddrinfo); family 0 accepts either.
  static Result<Address> resolve(const std::string& host, uint16_t port, int family = 0);
  /// The wildcard address of a family.
  static Address any(int family, uint16_t port);
};

/// Fixed 24-byte form of an Address for ids and wire messages (port in network order).
struct PackedAddress {
  uint16_t family = 0;
  uint16_t portBe = 0;
  uint32_t scopeId = 0;
  uint8_t ip[16] = {0};

  static PackedAddress pack(const Address& a);
  /// collInvalidArgument when the family is not AF_INET/AF_INET6 or the port is 0.
  Result<Address> unpack() const;
};
static_assert(sizeof(PackedAddress) == 24, "wire layout");

/// Waits until fd is ready for `events` (POLLIN/POLLOUT); collTimeout or collRemoteError (abort).
Status waitFd(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abort, const std::string& what);

/// An owned, connected, non-blocking TCP socket.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  /// Connects to addr. With retryRefused, a refused connection is retried until the deadline (the
  /// peer may not listen yet); without, it is collRemoteError at once (the peer listened, so it died).
  static Result<Socket> connect(const Address& addr, const Deadline& deadline, const std::atomic<bool>* abort,
                                const std::string& peer, bool retryRefused = true);

  /// Sends exactly n bytes. Blocking up to the deadline; never raises SIGPIPE.
  Status sendAll(const void* data, size_t n, const Deadline& deadline, const std::atomic<bool>* abort,
                 const std::string& peer);
  /// Receives exactly n bytes. A closed connection is collRemoteError naming the peer.
  Status recvAll(void* data, size_t n, const Deadline& deadline, const std::atomic<bool>* abort,
                 const std::string& peer);
  /// Reads what is available without blocking: bytes read, 0 if none yet, -1 on EOF or error.
  ssize_t recvSome(void* data, size_t n);

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

/// A listening TCP socket.
class Listener {
 public:
  /// Binds addr (port 0 picks a free port) and listens. reuseAddr lets a fixed master port be rebound.
  static Result<Listener> listen(const Address& addr, bool reuseAddr);
  /// Accepts one pending connection without blocking; an invalid Socket when none is pending or
  /// accept failed (then *error, when given, holds errno: EAGAIN for none, EMFILE, ...).
  Socket accept(Address* peer, int* error = nullptr);
  /// The bound address, with the actual port.
  const Address& address() const { return address_; }
  int fd() const { return socket_.fd(); }

 private:
  Socket socket_;
  Address address_;
};

}  // namespace coll::net
