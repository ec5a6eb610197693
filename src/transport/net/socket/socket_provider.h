// The socket provider's wire format (net/net.h's interface over TCP sockets).
//
// Connection: the receiver's listen() writes a SocketHandle (its communicator-wide listening
// address, a random connection id, its rank and its socket count). The sender opens nsocks TCP
// sockets to that address and sends a SocketHello on each: the communicator's secret, the
// connection id and the socket's index. The receiver's accept() takes every pending socket from
// the listener, reads its hello without blocking, drops (with a WARN line) sockets whose magic or
// secret is wrong, and stashes the others by (connection id, index) until their connection's
// accept() asks: sockets of several connections arrive in any order.
//
// Messages: message k of a connection travels on socket k % nsocks (both sides post in the same
// order), as a SocketFrame {magic, bytes, sequence k, tag} followed by the bytes. The receiver
// reads the frame, then the bytes straight into the irecv's buffer (a FIFO slot): no copy in
// between. A wrong magic, sequence or tag, or more bytes than the receive allows, is garbage; a
// close before a frame's first byte is a clean close (peerClosed), within a message an error.
// Exposed for the unit tests, which speak it by hand to send garbage and wrong secrets.
#pragma once

#include <cstdint>

#include "base/socket.h"
#include "transport/net/net.h"

namespace coll::transport::net {

constexpr uint32_t kSocketFrameMagic = 0xc011da7au;
constexpr uint64_t kSocketHelloMagic = 0x4f4c4c4548504354ull;   // "TCPHELLO"
constexpr uint64_t kSocketHandleMagic = 0x454c444e484b4f53ull;  // "SOKHNDLE"
constexpr int kSocketMaxSocks = 16;                             // COLL_NSOCKS's upper bound
constexpr int kSocketMaxRequests = 64;                          // in flight per comm (transport::kMaxSlots)
constexpr int kSocketBufferBytes = 4 << 20;                     // SO_SNDBUF and SO_RCVBUF of data sockets

/// What listen() writes into the Handle.
struct SocketHandle {
  uint64_t magic;                   // kSocketHandleMagic
  coll::net::PackedAddress listen;  // the receiver's data listener
  uint64_t connId;                  // random: tells the connections sharing the listener apart
  int32_t rank;                     // the receiver (named in the sender's errors)
  int32_t nsocks;                   // sockets the sender opens
};
static_assert(sizeof(SocketHandle) <= kHandleBytes, "a socket handle fits a Handle");

/// The first bytes on every data socket, from the sender.
struct SocketHello {
  uint64_t magic;  // kSocketHelloMagic
  uint64_t secret;
  uint64_t connId;
  int32_t srcRank;
  int32_t sockIndex;
};

/// In front of every message.
struct SocketFrame {
  uint32_t magic;  // kSocketFrameMagic
  uint32_t bytes;
  uint64_t seq;  // the message's index in its connection
  int32_t tag;
  uint32_t reserved;
};

}  // namespace coll::transport::net
