// The socket provider of the network interface (src/transport/net/net.h) on its own, over
// loopback and from one thread (every call is non-blocking): the connection handshake, messages
// of every size in order over one and several sockets, request limits, wrong secrets, clean and
// unclean closes, garbage; then the network transport's FIFO logic over it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "transport/net/net.h"
#include "transport/net/socket/socket_provider.h"
#include "transport/progress.h"
#include "transport/transport.h"

namespace tn = coll::transport::net;
using coll::Status;

namespace {

constexpr uint64_t kSecret = 0x5ec7e75ec7e7ull;

tn::Config config(int rank, int nsocks, uint64_t secret = kSecret) {
  tn::Config c;
  c.rank = rank;
  c.secret = secret;
  c.nsocks = nsocks;
  auto a = coll::net::Address::resolve("127.0.0.1", 0, AF_INET);
  REQUIRE(a.isOk());
  c.bindAddress = *a;
  c.timeoutMs = 5000;
  return c;
}

// Calls step until it returns true; fails after 10 s.
void until(const std::function<bool()>& step) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!step()) REQUIRE(std::chrono::steady_clock::now() < end);
}

// Like until(), but for a step that may fail: returns the first error, or ok once step says done.
Status untilError(const std::function<Status(bool*)>& step) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    bool done = false;
    Status s = step(&done);
    if (!s.isOk() || done) return s;
    REQUIRE(std::chrono::steady_clock::now() < end);
  }
}

struct Pair {
  std::shared_ptr<tn::Provider> receiver, sender;
  tn::ListenComm* listen = nullptr;
  tn::Handle handle{};
  tn::SendComm* send = nullptr;
  tn::RecvComm* recv = nullptr;
  tn::MrHandle *sendMr = nullptr, *recvMr = nullptr;

  // rank 0 receives from rank 1; nsocks is the receiver's (the handle carries it).
  explicit Pair(int nsocks)
      : receiver(tn::openSocketProvider(config(0, nsocks))), sender(tn::openSocketProvider(config(1, 1))) {
    REQUIRE(receiver->listen(0, &handle, &listen).isOk());
    REQUIRE(listen != nullptr);
  }
  void connect() {
    // Nothing has connected yet: accept returns at once, with no comm.
    REQUIRE(receiver->accept(listen, &recv).isOk());
    REQUIRE(recv == nullptr);
    until([&] {
      if (!send) REQUIRE(sender->connect(0, handle, &send).isOk());
      if (!recv) REQUIRE(receiver->accept(listen, &recv).isOk());
      return send && recv;
    });
    REQUIRE(receiver->closeListen(listen).isOk());
    listen = nullptr;
    REQUIRE(sender->regMr(send, nullptr, 0, &sendMr).isOk());
    REQUIRE(receiver->regMr(recv, nullptr, 0, &recvMr).isOk());
  }
  ~Pair() {
    if (sendMr) (void)sender->deregMr(send, sendMr);
    if (recvMr) (void)receiver->deregMr(recv, recvMr);
    if (send) (void)sender->closeSend(send);
    if (recv) (void)receiver->closeRecv(recv);
    if (listen) (void)receiver->closeListen(listen);
  }
};

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(i * 131 + seed * 7 + (i >> 12));
  return v;
}

// Sends the messages (all posted up front, as far as the provider takes them) and receives them
// into buffers of maxBytes, testing both sides from this thread; checks sizes, contents, order.
void transfer(Pair& p, const std::vector<size_t>& sizes, size_t maxBytes) {
  std::vector<std::vector<char>> out, in(sizes.size(), std::vector<char>(maxBytes + 1, 0));
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(pattern(sizes[i], static_cast<int>(i)));
  std::vector<tn::Request*> sends(sizes.size(), nullptr), recvs(sizes.size(), nullptr);
  size_t sendPosted = 0, recvPosted = 0, sendDone = 0, recvDone = 0;
  std::vector<bool> sent(sizes.size(), false), got(sizes.size(), false);
  until([&] {
    while (sendPosted < sizes.size()) {
      tn::Request* r = nullptr;
      REQUIRE(p.sender->isend(p.send, out[sendPosted].data(), sizes[sendPosted], 1, p.sendMr, &r).isOk());
      if (!r) break;
      sends[sendPosted++] = r;
    }
    while (recvPosted < sizes.size()) {
      tn::Request* r = nullptr;
      REQUIRE(p.receiver->irecv(p.recv, in[recvPosted].data(), maxBytes, 1, p.recvMr, &r).isOk());
      if (!r) break;
      recvs[recvPosted++] = r;
    }
    for (size_t i = 0; i < sendPosted; ++i) {
      if (sent[i]) continue;
      int done = 0;
      size_t size = 12345;
      REQUIRE(p.sender->test(sends[i], &done, &size).isOk());
      if (done) {
        CHECK(size == sizes[i]);
        sent[i] = true;
        ++sendDone;
      }
    }
    for (size_t i = 0; i < recvPosted; ++i) {
      if (got[i]) continue;
      int done = 0;
      size_t size = 12345;
      REQUIRE(p.receiver->test(recvs[i], &done, &size).isOk());
      if (done) {
        REQUIRE(size == sizes[i]);
        REQUIRE((sizes[i] == 0 || std::memcmp(in[i].data(), out[i].data(), sizes[i]) == 0));
        CHECK(in[i][sizes[i]] == 0);  // nothing beyond the message
        got[i] = true;
        ++recvDone;
      }
    }
    return sendDone == sizes.size() && recvDone == sizes.size();
  });
  CHECK_FALSE(p.receiver->peerClosed(p.recv));
}

// A hand-made sender: a TCP socket to the handle's listener that says hello with `secret` as
// srcRank (socket 0), for the provider to judge what it sends next.
coll::net::Socket rawSender(const tn::Handle& handle, uint64_t secret, int srcRank) {
  tn::SocketHandle h;
  std::memcpy(&h, handle.bytes, sizeof(h));
  auto addr = h.listen.unpack();
  REQUIRE(addr.isOk());
  auto deadline = coll::net::Deadline::afterMs(5000);
  auto s = coll::net::Socket::connect(*addr, deadline, nullptr, "the test's listener");
  REQUIRE(s.isOk());
  tn::SocketHello hello{tn::kSocketHelloMagic, secret, h.connId, srcRank, 0};
  REQUIRE(s->sendAll(&hello, sizeof(hello), deadline, nullptr, "the listener").isOk());
  return std::move(*s);
}

void sendRaw(coll::net::Socket& s, const void* data, size_t n) {
  REQUIRE(s.sendAll(data, n, coll::net::Deadline::afterMs(5000), nullptr, "the receiver").isOk());
}

// Accepts the raw sender's connection (nsocks 1), then tests one receive until it fails.
Status receiveUntilError(Pair& p, size_t maxBytes) {
  until([&] {
    REQUIRE(p.receiver->accept(p.listen, &p.recv).isOk());
    return p.recv != nullptr;
  });
  std::vector<char> buf(maxBytes);
  tn::Request* r = nullptr;
  REQUIRE(p.receiver->irecv(p.recv, buf.data(), maxBytes, 7, nullptr, &r).isOk());
  REQUIRE(r != nullptr);
  return untilError([&](bool* done) {
    int d = 0;
    Status s = p.receiver->test(r, &d, nullptr);
    *done = d != 0;
    return s;
  });
}

}  // namespace

TEST_CASE("socket provider: one device, with properties", "[net]") {
  auto p = tn::openSocketProvider(config(0, 1));
  CHECK(std::string(p->name()) == "socket");
  REQUIRE(p->devices() == 1);
  auto props = p->properties(0);
  REQUIRE(props.isOk());
  CHECK(props->name.find("127.0.0.1") != std::string::npos);
  CHECK(props->maxMessageBytes >= (size_t(64) << 20));
  CHECK(props->maxRequests == tn::kSocketMaxRequests);
  CHECK_FALSE(p->properties(1).isOk());
}

TEST_CASE("socket provider: non-blocking handshake, then messages of every size in order", "[net]") {
  for (int nsocks : {1, 3}) {
    INFO("nsocks " << nsocks);
    Pair p(nsocks);
    p.connect();
    // 0 B, 1 B, odd sizes, and several MiB (more than the sockets' buffers), twice around the lanes.
    std::vector<size_t> sizes = {0, 1, 13, 4093, 0, (size_t(5) << 20) + 3, 1, 65536, (size_t(3) << 20) + 1, 7, 0};
    transfer(p, sizes, size_t(6) << 20);
    // The same connection keeps going, with many small messages at once.
    transfer(p, std::vector<size_t>(100, 24), 64);
    // Around the receiver's 4 KiB read-ahead (a frame is 24 bytes): a message that ends exactly
    // at it, one byte short and past it, two of them, and small ones behind (read ahead with it).
    transfer(p, {4072, 4071, 4073, 4096, 4097, 0, 8144, 8145, 3, 2, 4072, 1}, 8192);
  }
}

TEST_CASE("socket provider: requests in flight are bounded; a full comm posts none", "[net]") {
  Pair p(1);
  p.connect();
  char byte = 0;
  std::vector<tn::Request*> posted;
  for (int i = 0; i < tn::kSocketMaxRequests; ++i) {
    tn::Request* r = nullptr;
    REQUIRE(p.sender->isend(p.send, &byte, 1, 0, p.sendMr, &r).isOk());
    REQUIRE(r != nullptr);
    posted.push_back(r);
  }
  tn::Request* r = nullptr;
  REQUIRE(p.sender->isend(p.send, &byte, 1, 0, p.sendMr, &r).isOk());
  CHECK(r == nullptr);
  // Completing the oldest frees room for one more.
  until([&] {
    int done = 0;
    REQUIRE(p.sender->test(posted[0], &done, nullptr).isOk());
    return done != 0;
  });
  REQUIRE(p.sender->isend(p.send, &byte, 1, 0, p.sendMr, &r).isOk());
  CHECK(r != nullptr);
}

TEST_CASE("socket provider: a connection without the communicator's secret is dropped", "[net]") {
  Pair p(1);
  // Another communicator's rank (another secret) connects to this handle: its side completes...
  auto stranger = tn::openSocketProvider(config(5, 1, kSecret + 1));
  tn::SendComm* bad = nullptr;
  until([&] {
    REQUIRE(stranger->connect(0, p.handle, &bad).isOk());
    return bad != nullptr;
  });
  // ...but the receiver never accepts it (it logs a WARN and closes it).
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < end) {
    REQUIRE(p.receiver->accept(p.listen, &p.recv).isOk());
    REQUIRE(p.recv == nullptr);
  }
  // A raw socket with a wrong secret, and one that sends nothing like a hello, are dropped too.
  coll::net::Socket raw = rawSender(p.handle, kSecret ^ 1, 1);
  REQUIRE(p.receiver->accept(p.listen, &p.recv).isOk());
  CHECK(p.recv == nullptr);
  // The right sender is still accepted, and the stranger's messages go nowhere.
  p.connect();
  transfer(p, {5, 0, 100}, 128);
  REQUIRE(stranger->closeSend(bad).isOk());
}

TEST_CASE("socket provider: a peer that closes between messages is reported as closed", "[net]") {
  for (int nsocks : {1, 3}) {
    INFO("nsocks " << nsocks);
    Pair p(nsocks);
    p.connect();
    transfer(p, {10, 20}, 64);
    REQUIRE(p.sender->deregMr(p.send, p.sendMr).isOk());
    p.sendMr = nullptr;
    REQUIRE(p.sender->closeSend(p.send).isOk());
    p.send = nullptr;
    char buf[64];
    tn::Request* r = nullptr;
    REQUIRE(p.receiver->irecv(p.recv, buf, sizeof(buf), 1, p.recvMr, &r).isOk());
    REQUIRE(r != nullptr);
    until([&] {
      int done = 0;
      REQUIRE(p.receiver->test(r, &done, nullptr).isOk());  // not an error: nothing was cut short
      REQUIRE(done == 0);
      return p.receiver->peerClosed(p.recv);
    });
  }
}

TEST_CASE("socket provider: a close in the middle of a message is an error naming the peer", "[net]") {
  Pair p(1);
  coll::net::Socket raw = rawSender(p.handle, kSecret, 7);
  tn::SocketFrame frame{tn::kSocketFrameMagic, 100, 0, 7, 0};
  sendRaw(raw, &frame, sizeof(frame));
  sendRaw(raw, "0123456789", 10);
  raw.close();
  Status s = receiveUntilError(p, 128);
  REQUIRE_FALSE(s.isOk());
  CHECK(s.code() == collRemoteError);
  CHECK(s.message() == "rank 7 closed its tcp connection in the middle of a transfer");
}

TEST_CASE("socket provider: garbage is an error naming the peer", "[net]") {
  SECTION("bytes that are not a frame") {
    Pair p(1);
    coll::net::Socket raw = rawSender(p.handle, kSecret, 7);
    std::string garbage(sizeof(tn::SocketFrame), 'x');
    sendRaw(raw, garbage.data(), garbage.size());
    Status s = receiveUntilError(p, 128);
    REQUIRE_FALSE(s.isOk());
    CHECK(s.message().rfind("rank 7 sent garbage over tcp (slot header magic 0x78787878", 0) == 0);
  }
  SECTION("a frame out of sequence") {
    Pair p(1);
    coll::net::Socket raw = rawSender(p.handle, kSecret, 7);
    tn::SocketFrame frame{tn::kSocketFrameMagic, 4, 5, 7, 0};
    sendRaw(raw, &frame, sizeof(frame));
    Status s = receiveUntilError(p, 128);
    CHECK(s.message() ==
          "rank 7 sent garbage over tcp (slot header magic 0xc011da7a, sequence 5 where 0 was expected, 4 bytes)");
  }
  SECTION("a message larger than the receive") {
    Pair p(1);
    coll::net::Socket raw = rawSender(p.handle, kSecret, 7);
    tn::SocketFrame frame{tn::kSocketFrameMagic, 129, 0, 7, 0};
    sendRaw(raw, &frame, sizeof(frame));
    Status s = receiveUntilError(p, 128);
    CHECK(s.message() ==
          "rank 7 sent garbage over tcp (slot header magic 0xc011da7a, sequence 0 where 0 was expected, 129 bytes)");
  }
  SECTION("another tag") {
    Pair p(1);
    coll::net::Socket raw = rawSender(p.handle, kSecret, 7);
    tn::SocketFrame frame{tn::kSocketFrameMagic, 4, 0, 8, 0};
    sendRaw(raw, &frame, sizeof(frame));
    Status s = receiveUntilError(p, 128);
    CHECK(s.message() == "rank 7 sent garbage over tcp (message 0 has tag 8 where 7 was expected)");
  }
}

TEST_CASE("socket provider: a sender whose receiver is gone is refused", "[net]") {
  tn::Handle handle{};
  {
    auto receiver = tn::openSocketProvider(config(0, 1));
    tn::ListenComm* listen = nullptr;
    REQUIRE(receiver->listen(0, &handle, &listen).isOk());
    REQUIRE(receiver->closeListen(listen).isOk());
  }  // the listener closes with its provider
  auto sender = tn::openSocketProvider(config(1, 1));
  tn::SendComm* send = nullptr;
  Status s = untilError([&](bool* done) {
    Status st = sender->connect(0, handle, &send);
    *done = send != nullptr;
    return st;
  });
  REQUIRE_FALSE(s.isOk());
  CHECK(s.message().find("rank 0's tcp data listener at 127.0.0.1:") == 0);
  CHECK(s.message().find("refused the connection: it is no longer running") != std::string::npos);
}

TEST_CASE("network transport: FIFO slots over the socket provider", "[net]") {
  for (int nsocks : {1, 3}) {
    INFO("nsocks " << nsocks);
    using namespace coll::transport;
    const Transport& tcp = tcpTransport();
    REQUIRE(std::string(tcp.name()) == "tcp");
    std::atomic<bool> abort{false};
    Context rctx, sctx;
    for (Context* c : {&rctx, &sctx}) {
      c->secret = kSecret;
      c->nslots = 4;
      c->slotBytes = 4096;
      c->nsocks = nsocks;
      c->bindAddress = config(0, 1).bindAddress;
      c->timeoutMs = 5000;
      c->abort = &abort;
    }
    rctx.rank = 0;
    sctx.rank = 1;
    auto rstate = tcp.newState(rctx), sstate = tcp.newState(sctx);
    std::vector<char> desc;
    auto recv = tcp.createRecv(rctx, *rstate, 1, &desc);
    REQUIRE(recv.isOk());
    auto send = tcp.connectSend(sctx, *sstate, 0, desc);  // the kernel completes it: no accept needed yet
    REQUIRE(send.isOk());
    REQUIRE(tcp.completeRecv(rctx, *rstate, **recv).isOk());
    Connection& s = **send;
    Connection& r = **recv;
    REQUIRE(s.info().proxied);
    REQUIRE(r.info().proxied);
    CHECK(std::string(s.transportName()) == "tcp");
    const Fifo& sf = s.fifo();
    const Fifo& rf = r.fifo();
    REQUIRE(sf.nslots == 4);
    REQUIRE(rf.slotBytes == 4096);
    // 40 pieces through a 4-slot FIFO: the sender fills what the tail allows, the receiver
    // drains in order; sizes travel with the slots.
    // The network proxy (transport/proxy.h) moves the slots; this thread waits as an executor does.
    Progress waits;
    waits.add(&s, true);
    waits.add(&r, false);
    const uint64_t n = 40;
    uint64_t produced = 0, consumed = 0;
    until([&] {
      while (produced < n && produced < sf.header->tail.load() + sf.nslots) {
        size_t bytes = produced * 97 % 4097;
        std::memset(sf.slot(produced), static_cast<int>(produced), bytes);
        sf.publish(produced, bytes);
        ++produced;
      }
      REQUIRE(waits.poll(&s, &r).isOk());
      while (consumed < produced && rf.ready(consumed)) {
        size_t bytes = consumed * 97 % 4097;
        REQUIRE(rf.bytesIn(consumed) == bytes);
        const char* in = rf.recvBuffer(consumed);
        for (size_t i = 0; i < bytes; ++i) REQUIRE(in[i] == static_cast<char>(consumed));
        rf.release(consumed);
        ++consumed;
      }
      return consumed == n;
    });
    CHECK_FALSE(s.hasUnsentData());
    CHECK_FALSE(r.peerClosed());
    send.value().reset();  // the sender leaves between slots
    until([&] {
      REQUIRE(waits.pollOne(&r).isOk());
      return r.peerClosed();
    });
    CHECK_FALSE(rf.ready(consumed));
  }
}

TEST_CASE("network transport: a proxy thread drives the communicator's Progress; this thread only fills and drains",
          "[net][proxy]") {
  // What a GPU executor needs: its kernel only touches the FIFOs (counters and slots, through
  // ConnInfo), and a host thread waits on the network side with Progress::pollAll() (the
  // process's network proxy moves it).
  using namespace coll::transport;
  const Transport& tcp = tcpTransport();
  std::atomic<bool> abort{false};
  Context rctx, sctx;
  for (Context* c : {&rctx, &sctx}) {
    c->secret = kSecret;
    c->nslots = 4;
    c->slotBytes = 8192;
    c->nsocks = 2;
    c->bindAddress = config(0, 1).bindAddress;
    c->timeoutMs = 5000;
    c->abort = &abort;
  }
  rctx.rank = 0;
  sctx.rank = 1;
  auto rstate = tcp.newState(rctx), sstate = tcp.newState(sctx);
  std::vector<char> desc;
  auto recv = tcp.createRecv(rctx, *rstate, 1, &desc);
  REQUIRE(recv.isOk());
  auto send = tcp.connectSend(sctx, *sstate, 0, desc);
  REQUIRE(send.isOk());
  REQUIRE(tcp.completeRecv(rctx, *rstate, **recv).isOk());
  Progress progress;
  progress.add(send.value().get(), true);
  progress.add(recv.value().get(), false);
  REQUIRE_FALSE(progress.empty());
  std::atomic<bool> stop{false};
  Status proxyStatus;
  std::thread proxy([&] {
    while (!stop.load() && proxyStatus.isOk()) {
      proxyStatus = progress.pollAll();
      std::this_thread::yield();
    }
  });
  const ConnInfo& si = send.value()->info();
  const ConnInfo& ri = recv.value()->info();
  const uint64_t n = 300;
  uint64_t produced = 0, consumed = 0;
  bool ok = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (consumed < n && ok && std::chrono::steady_clock::now() < deadline) {
    while (produced < n && produced < si.fifo.header->tail.load(std::memory_order_acquire) + si.fifo.nslots) {
      size_t bytes = produced * 131 % 8193;
      std::memset(si.fifo.slot(produced), static_cast<int>(produced * 7), bytes);
      si.fifo.publish(produced, bytes);
      ++produced;
    }
    while (consumed < produced && ri.fifo.ready(consumed)) {
      size_t bytes = consumed * 131 % 8193;
      ok &= ri.fifo.bytesIn(consumed) == bytes;
      const char* in = ri.fifo.recvBuffer(consumed);
      for (size_t i = 0; i < bytes && ok; ++i) ok &= in[i] == static_cast<char>(consumed * 7);
      ri.fifo.release(consumed);
      ++consumed;
    }
    std::this_thread::yield();
  }
  stop.store(true);
  proxy.join();
  INFO(proxyStatus.message());
  CHECK(proxyStatus.isOk());
  CHECK(ok);
  CHECK(consumed == n);
  CHECK_FALSE(progress.hasUnsentData());
}
