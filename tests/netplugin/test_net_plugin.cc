// "CollTest": a small NCCL network plugin over TCP, the test subject for coll's plugin loader.
//
// One source, built once per ABI version with -DCOLLTEST_NET_VERSION=N (6..12) and -fvisibility=hidden, so that
// libnccl-net-colltest-vN.so exports exactly one symbol of its own, ncclNetPlugin_vN. It is a real network (bytes
// move between processes over TCP) that is strict about the contract and deliberately awkward where a loader can
// get it wrong:
//  - devices() reports 2 devices that describe the SAME NIC (name, pciPath, guid), as libfabric does; both work.
//  - connect() never completes on its first call for a handle (the caller must retry until sendComm != NULL); like
//    NCCL's own socket and IB plugins, it keeps its progress in the caller's handle buffer, so the caller must pass
//    the same buffer on every retry. accept() returns NULL until a connection has arrived; a listenComm accepts one.
//  - At most kMaxInFlight requests per comm; beyond that isend/irecv return success with a NULL request.
//  - regMr takes host memory only and ties the handle to its comm (regIsGlobal 0); isend/irecv check that the
//    handle belongs to the comm and covers the buffer.
//  - Frames carry (size, tag); a message larger than the posted receive or with another tag fails test() with
//    ncclRemoteError, as does a peer that closed the connection while a receive is pending.
//  - v10 needs connect's config; v11/v12 need init's ctx and config and check that listen/connect get that ctx.
//  - getDeviceMr is NULL (optional, as in NCCL's socket plugin); irecvConsumed is counted.
//
// Environment:
//  COLLTEST_NET_ADDR   IPv4 address to listen on (default 127.0.0.1).
//  COLLTEST_NET_NAME   the name the table gives (default "CollTest").
//  COLLTEST_NET_DEVICES  "name=pciPath,..." : distinct NICs (default: 2 devices that are the same NIC).
//  COLLTEST_NET_TRACE  file to append one line per event to: "pid <pid> <event>" (see trace() calls), written with
//                      O_APPEND in one write() per line so that several processes can share the file.
//
// Threads: calls on different comms may come from different threads; one comm is used by one thread at a time.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ncclnet_decls.h"

#ifndef COLLTEST_NET_VERSION
#error "build with -DCOLLTEST_NET_VERSION=N, N in 6..12"
#endif
#if COLLTEST_NET_VERSION < 6 || COLLTEST_NET_VERSION > 12
#error "COLLTEST_NET_VERSION must be 6..12"
#endif

namespace colltest {
namespace {

constexpr int kVersion = COLLTEST_NET_VERSION;

#if COLLTEST_NET_VERSION == 6
using Table = NetV6;
using Properties = NetPropertiesV6;
#elif COLLTEST_NET_VERSION == 7
using Table = NetV7;
using Properties = NetPropertiesV7;
#elif COLLTEST_NET_VERSION == 8
using Table = NetV8;
using Properties = NetPropertiesV8;
#elif COLLTEST_NET_VERSION == 9
using Table = NetV9;
using Properties = NetPropertiesV9;
#elif COLLTEST_NET_VERSION == 10
using Table = NetV10;
using Properties = NetPropertiesV10;
#elif COLLTEST_NET_VERSION == 11
using Table = NetV11;
using Properties = NetPropertiesV11;
#else
using Table = NetV12;
using Properties = NetPropertiesV12;
#endif

constexpr int kMaxDevices = 16;
constexpr int kMaxInFlight = 4;
[[maybe_unused]] constexpr size_t kMaxTransferBytes = size_t{256} << 20;  // v9+ properties

constexpr uint64_t kHandleMagic = 0xC011'7E57'4A4E'D1E0ull;
constexpr uint64_t kHelloMagic = 0xC011'7E57'4E11'0000ull;
constexpr uint32_t kFrameMagic = 0xC0117E57u;
constexpr uint64_t kListenMagic = 0xC011'7E57'1157'0000ull;
constexpr uint64_t kStageMagic = 0xC011'7E57'57A6'0000ull;
constexpr uint64_t kCommMagic = 0xC011'7E57'C033'0000ull;
constexpr uint64_t kMrMagic = 0xC011'7E57'3E30'0000ull;
constexpr uint32_t kRequestMagic = 0x5E0E57u;

// Static storage: the loader may keep these pointers for as long as the library is loaded.
// By default 2 devices that are one NIC; COLLTEST_NET_DEVICES="name=pciPath,..." lists distinct NICs instead (each
// one more device of the same TCP network), for the loader's choice by locality.
struct NicDesc {
  char name[64];
  char pciPath[256];
  uint64_t guid;
};
NicDesc gNics[kMaxDevices] = {{"colltest0", "/sys/devices/colltest/nic0", 0xC011755700000001ull},
                              {"colltest0", "/sys/devices/colltest/nic0", 0xC011755700000001ull}};
int gNumDevices = 2;

// Reads COLLTEST_NET_DEVICES once, in the library's constructor (before any call).
__attribute__((constructor)) void readDevices() {
  const char* list = getenv("COLLTEST_NET_DEVICES");
  if (list == nullptr || *list == '\0') return;
  gNumDevices = 0;
  const char* p = list;
  while (*p != '\0' && gNumDevices < kMaxDevices) {
    const char* end = strchr(p, ',');
    size_t len = end ? static_cast<size_t>(end - p) : strlen(p);
    const char* eq = static_cast<const char*>(memchr(p, '=', len));
    if (eq != nullptr) {
      NicDesc& d = gNics[gNumDevices];
      snprintf(d.name, sizeof d.name, "%.*s", static_cast<int>(eq - p), p);
      snprintf(d.pciPath, sizeof d.pciPath, "%.*s", static_cast<int>(len - static_cast<size_t>(eq - p) - 1), eq + 1);
      d.guid = 0xC011755700000100ull + static_cast<uint64_t>(gNumDevices);
      ++gNumDevices;
    }
    p += len + (end ? 1 : 0);
  }
}

NetLogger gLogger = nullptr;  // the last logger init() was given; read and written with __atomic builtins
int gInitialized = 0;

// --- Tracing and logging -----------------------------------------------------------------------------------------

__attribute__((format(printf, 1, 2))) void trace(const char* fmt, ...) {
  const char* path = getenv("COLLTEST_NET_TRACE");
  if (path == nullptr || path[0] == '\0') return;
  char line[512];
  int head = snprintf(line, sizeof(line), "pid %d ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  int body = vsnprintf(line + head, sizeof(line) - head - 1, fmt, ap);
  va_end(ap);
  size_t len = head + (body < 0 ? 0 : static_cast<size_t>(body));
  if (len > sizeof(line) - 2) len = sizeof(line) - 2;
  line[len++] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, len) < 0) {
    // Tracing is best effort; the test that reads the file notices a missing line.
  }
  close(fd);
}

__attribute__((format(printf, 4, 5))) void logAt(NetLogLevel level, const char* file, int line, const char* fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  NetLogger logger = __atomic_load_n(&gLogger, __ATOMIC_ACQUIRE);
  if (logger != nullptr) {
    logger(level, kNetLogSubsysNet, file, line, "CollTest: %s", msg);
  } else if (level == kNetLogWarn) {
    fprintf(stderr, "CollTest WARN %s\n", msg);
  }
  if (level == kNetLogWarn) trace("warn %s", msg);
}

#define CT_WARN(...) logAt(kNetLogWarn, __FILE__, __LINE__, __VA_ARGS__)
#define CT_INFO(...) logAt(kNetLogInfo, __FILE__, __LINE__, __VA_ARGS__)

// net.h's contract, checked in every test that loads this plugin: one thread at a time calls a
// plugin's communication functions (coll's network proxy, or a waiter holding its token). A
// second caller while one is inside aborts the process with the two calls named.
class CallGuard {
 public:
  explicit CallGuard(const char* call) {
    if (depth_++ > 0) return;  // a call made from inside another (regMr through regMrInt)
    const char* other = inside_.exchange(call);
    if (other != nullptr) {
      std::fprintf(stderr, "CollTest: %s was called while another thread was inside %s\n", call, other);
      std::abort();
    }
  }
  ~CallGuard() {
    if (--depth_ == 0) inside_.store(nullptr);
  }

 private:
  static inline std::atomic<const char*> inside_{nullptr};
  static inline thread_local int depth_ = 0;
};

NetResult requireInit(const char* call) {
  if (__atomic_load_n(&gInitialized, __ATOMIC_ACQUIRE)) return kNetSuccess;
  CT_WARN("%s called before init", call);
  return kNetInternalError;
}

NetResult checkDevice(int dev, const char* call) {
  if (dev >= 0 && dev < gNumDevices) return kNetSuccess;
  CT_WARN("%s: device %d out of range [0, %d)", call, dev, gNumDevices);
  return kNetInvalidArgument;
}

// --- Sockets -----------------------------------------------------------------------------------------------------

enum class Io { kDone, kWouldBlock, kClosed, kError };

// Moves bytes until `len` are done or the socket would block. `done` counts the bytes moved so far.
Io sendSome(int fd, const void* buf, size_t len, size_t* done) {
  while (*done < len) {
    ssize_t n = send(fd, static_cast<const char*>(buf) + *done, len - *done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return Io::kWouldBlock;
    } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return Io::kClosed;
    } else {
      return Io::kError;
    }
  }
  return Io::kDone;
}

Io recvSome(int fd, void* buf, size_t len, size_t* done) {
  while (*done < len) {
    ssize_t n = recv(fd, static_cast<char*>(buf) + *done, len - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
    } else if (n == 0) {
      return Io::kClosed;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return Io::kWouldBlock;
    } else if (errno == ECONNRESET) {
      return Io::kClosed;
    } else {
      return Io::kError;
    }
  }
  return Io::kDone;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// --- Objects -----------------------------------------------------------------------------------------------------

// What listen() writes into the caller's handle (<= kNetHandleMaxSize bytes). `connectStage` is 0 as listen writes
// it; connect() keeps its in-progress state there, in the connecting process's copy.
struct WireHandle {
  uint64_t magic;
  uint32_t addr;  // network byte order
  uint16_t port;  // network byte order
  uint16_t dev;
  uint64_t connectStage;
};
static_assert(sizeof(WireHandle) <= kNetHandleMaxSize, "handle too large");

// The first bytes on every connection, connector to acceptor.
struct Hello {
  uint64_t magic;
  uint32_t version;
  uint32_t dev;
};

// Precedes every message.
struct FrameHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
};

struct ListenComm {
  uint64_t magic;
  int fd;
  int dev;
  int acceptedFd;  // the connection being accepted, until its hello has arrived
  bool accepted;   // a listenComm accepts one connection
  Hello hello;
  size_t helloDone;
};

struct ConnectStage {
  uint64_t magic;
  int fd;
  int dev;
  Hello hello;
  size_t helloDone;
};

struct Comm;

enum class ReqState { kFree, kPosted, kDone, kFailed };

struct Request {
  uint32_t magic;  // kRequestMagic while the caller owns the request
  ReqState state;
  Comm* comm;
  char* data;
  size_t size;  // send: message size; receive: posted capacity
  int tag;
  uint64_t seq;  // order of posting: messages are matched in order
  FrameHeader header;
  size_t headerDone;
  bool headerChecked;
  size_t payloadDone;
  size_t transferred;  // bytes of the message (the count test() reports)
  NetResult error;
};

enum class CommKind { kSend, kRecv };

struct Comm {
  uint64_t magic;
  CommKind kind;
  int fd;
  int dev;
  Request requests[kMaxInFlight];
  uint64_t nextSeq;
  uint64_t headSeq;  // the oldest posted request not yet on the wire / off the wire
  NetResult broken;  // once a request failed, the stream is out of step and the comm stays failed
  uint64_t messages;
  uint64_t bytes;
  uint64_t consumed;
  uint64_t busy;  // isend/irecv calls turned away with a NULL request
  int liveMrs;
};

struct MemHandle {
  uint64_t magic;
  const Comm* comm;
  uintptr_t base;
  size_t size;
  int type;
};

const char* kindName(const Comm* c) { return c->kind == CommKind::kSend ? "send" : "recv"; }

Comm* asComm(void* p, const char* call) {
  Comm* c = static_cast<Comm*>(p);
  if (c != nullptr && c->magic == kCommMagic) return c;
  CT_WARN("%s: %p is not a CollTest send or recv comm", call, p);
  return nullptr;
}

Comm* asCommOfKind(void* p, CommKind kind, const char* call) {
  Comm* c = asComm(p, call);
  if (c == nullptr) return nullptr;
  if (c->kind == kind) return c;
  CT_WARN("%s: comm %p is a %s comm", call, p, kindName(c));
  return nullptr;
}

// --- init, devices, properties -----------------------------------------------------------------------------------

void startUsing(NetLogger logger) {
  if (logger != nullptr) __atomic_store_n(&gLogger, logger, __ATOMIC_RELEASE);
  __atomic_store_n(&gInitialized, 1, __ATOMIC_RELEASE);
}

NetResult netDevices(int* ndev) {
  if (NetResult r = requireInit("devices"); r != kNetSuccess) return r;
  if (ndev == nullptr) return kNetInvalidArgument;
  *ndev = gNumDevices;
  return kNetSuccess;
}

void fillProperties(int dev, Properties* props) {
  memset(props, 0, sizeof(*props));
  props->name = gNics[dev].name;
  props->pciPath = gNics[dev].pciPath;
  props->guid = gNics[dev].guid;
  props->ptrSupport = kNetPtrHost;
#if COLLTEST_NET_VERSION >= 8
  props->regIsGlobal = 0;
#endif
  props->speed = 10000;
  props->port = 1;
  props->latency = 5.0f;
  props->maxComms = 1024;
  props->maxRecvs = 1;
#if COLLTEST_NET_VERSION >= 7
  props->netDeviceType = kNetDeviceHost;
  props->netDeviceVersion = 0;
#endif
#if COLLTEST_NET_VERSION >= 9
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = kMaxTransferBytes;
  props->maxCollBytes = kMaxTransferBytes;
#else
  (void)dev;
#endif
#if COLLTEST_NET_VERSION >= 11
  props->maxMultiRequestSize = 1;
#endif
#if COLLTEST_NET_VERSION >= 12
  props->railId = 0;
  props->planeId = 0;
#endif
}

NetResult netGetProperties(int dev, Properties* props) {
  if (NetResult r = requireInit("getProperties"); r != kNetSuccess) return r;
  if (NetResult r = checkDevice(dev, "getProperties"); r != kNetSuccess) return r;
  if (props == nullptr) return kNetInvalidArgument;
  fillProperties(dev, props);
  return kNetSuccess;
}

// --- listen, connect, accept -------------------------------------------------------------------------------------

NetResult listenOn(int dev, void* handle, void** listenComm) {
  CallGuard guard(__func__);
  if (NetResult r = requireInit("listen"); r != kNetSuccess) return r;
  if (NetResult r = checkDevice(dev, "listen"); r != kNetSuccess) return r;
  if (handle == nullptr || listenComm == nullptr) return kNetInvalidArgument;
  const char* addrText = getenv("COLLTEST_NET_ADDR");
  if (addrText == nullptr || addrText[0] == '\0') addrText = "127.0.0.1";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, addrText, &sa.sin_addr) != 1) {
    CT_WARN("COLLTEST_NET_ADDR='%s' is not an IPv4 address", addrText);
    return kNetInvalidArgument;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    CT_WARN("listen: socket: %s", strerror(errno));
    return kNetSystemError;
  }
  socklen_t len = sizeof(sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    CT_WARN("listen on %s: %s", addrText, strerror(errno));
    close(fd);
    return kNetSystemError;
  }
  ListenComm* l = new (std::nothrow) ListenComm{kListenMagic, fd, dev, -1, false, {}, 0};
  if (l == nullptr) {
    close(fd);
    return kNetSystemError;
  }
  WireHandle h{kHandleMagic, sa.sin_addr.s_addr, sa.sin_port, static_cast<uint16_t>(dev), 0};
  memcpy(handle, &h, sizeof(h));
  trace("listen dev=%d port=%d", dev, ntohs(sa.sin_port));
  *listenComm = l;
  return kNetSuccess;
}

void dropStage(ConnectStage* s, void* handle, WireHandle* h) {
  if (s->fd >= 0) close(s->fd);
  s->magic = 0;
  delete s;
  h->connectStage = 0;
  memcpy(handle, h, sizeof(*h));
}

// The first call for a handle starts a non-blocking TCP connect and returns with *sendComm == NULL whatever the
// socket says, so that every caller's retry loop runs at least once. Later calls finish the connect and send the
// hello; the comm is returned once the hello is on the wire.
// `trafficClass` is NULL in versions without a comm config (v8, v9).
NetResult connectTo(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm, const int* trafficClass) {
  CallGuard guard(__func__);
  if (NetResult r = requireInit("connect"); r != kNetSuccess) return r;
  if (NetResult r = checkDevice(dev, "connect"); r != kNetSuccess) return r;
  if (handle == nullptr || sendComm == nullptr) return kNetInvalidArgument;
  *sendComm = nullptr;
  if (sendDevComm != nullptr) *sendDevComm = nullptr;
  WireHandle h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != kHandleMagic) {
    CT_WARN("connect: the handle is not one CollTest's listen wrote (magic 0x%" PRIx64 ")", h.magic);
    return kNetInvalidArgument;
  }

  ConnectStage* s = reinterpret_cast<ConnectStage*>(static_cast<uintptr_t>(h.connectStage));
  if (s == nullptr) {
    if (trafficClass == nullptr) {
      trace("connect dev=%d", dev);
    } else {
      trace("connect config trafficClass=%d dev=%d", *trafficClass, dev);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      CT_WARN("connect: socket: %s", strerror(errno));
      return kNetSystemError;
    }
    setNoDelay(fd);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = h.addr;
    sa.sin_port = h.port;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
      char text[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &sa.sin_addr, text, sizeof(text));
      CT_WARN("connect to %s:%d: %s", text, ntohs(sa.sin_port), strerror(errno));
      close(fd);
      return kNetSystemError;
    }
    s = new (std::nothrow) ConnectStage{kStageMagic, fd, dev, {kHelloMagic, kVersion, static_cast<uint32_t>(dev)}, 0};
    if (s == nullptr) {
      close(fd);
      return kNetSystemError;
    }
    h.connectStage = reinterpret_cast<uintptr_t>(s);
    memcpy(handle, &h, sizeof(h));
    return kNetSuccess;  // deliberately not connected yet
  }

  if (s->magic != kStageMagic) {
    CT_WARN("connect: the handle's connect state is corrupt");
    return kNetInternalError;
  }
  pollfd pfd{s->fd, POLLOUT, 0};
  int ready = poll(&pfd, 1, 0);
  if (ready == 0 || (ready < 0 && errno == EINTR)) return kNetSuccess;
  int err = 0;
  socklen_t errLen = sizeof(err);
  if (ready < 0 || getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &errLen) != 0 || err != 0) {
    CT_WARN("connect: %s", strerror(err != 0 ? err : errno));
    dropStage(s, handle, &h);
    return kNetSystemError;
  }
  Io io = sendSome(s->fd, &s->hello, sizeof(s->hello), &s->helloDone);
  if (io == Io::kWouldBlock) return kNetSuccess;
  if (io != Io::kDone) {
    CT_WARN("connect: sending the hello failed: %s",
            io == Io::kClosed ? "peer closed the connection" : strerror(errno));
    dropStage(s, handle, &h);
    return io == Io::kClosed ? kNetRemoteError : kNetSystemError;
  }
  Comm* c = new (std::nothrow) Comm{};
  if (c == nullptr) {
    dropStage(s, handle, &h);
    return kNetSystemError;
  }
  c->magic = kCommMagic;
  c->kind = CommKind::kSend;
  c->fd = s->fd;
  c->dev = s->dev;
  s->fd = -1;
  dropStage(s, handle, &h);
  *sendComm = c;
  return kNetSuccess;
}

NetResult netAccept(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm) {
  CallGuard guard(__func__);
  ListenComm* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || l->magic != kListenMagic) {
    CT_WARN("accept: %p is not a CollTest listen comm", listenComm);
    return kNetInvalidArgument;
  }
  if (recvComm == nullptr) return kNetInvalidArgument;
  *recvComm = nullptr;
  if (recvDevComm != nullptr) *recvDevComm = nullptr;
  if (l->accepted) {
    CT_WARN("accept: this listen comm has already accepted its connection");
    return kNetInternalError;
  }
  if (l->acceptedFd < 0) {
    int fd = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return kNetSuccess;
      CT_WARN("accept: %s", strerror(errno));
      return kNetSystemError;
    }
    setNoDelay(fd);
    l->acceptedFd = fd;
  }
  Io io = recvSome(l->acceptedFd, &l->hello, sizeof(l->hello), &l->helloDone);
  if (io == Io::kWouldBlock) return kNetSuccess;
  if (io != Io::kDone || l->hello.magic != kHelloMagic) {
    if (io == Io::kDone) {
      CT_WARN("accept: the connecting side is not CollTest (hello magic 0x%" PRIx64 ")", l->hello.magic);
    } else {
      CT_WARN("accept: the connection closed before its hello arrived");
    }
    close(l->acceptedFd);
    l->acceptedFd = -1;
    l->helloDone = 0;
    return kNetRemoteError;
  }
  Comm* c = new (std::nothrow) Comm{};
  if (c == nullptr) return kNetSystemError;
  c->magic = kCommMagic;
  c->kind = CommKind::kRecv;
  c->fd = l->acceptedFd;
  c->dev = l->dev;
  l->acceptedFd = -1;
  l->accepted = true;
  trace("accept dev=%d peerVersion=%u", l->dev, l->hello.version);
  *recvComm = c;
  return kNetSuccess;
}

NetResult netCloseListen(void* listenComm) {
  CallGuard guard(__func__);
  ListenComm* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || l->magic != kListenMagic) {
    CT_WARN("closeListen: %p is not a CollTest listen comm", listenComm);
    return kNetInvalidArgument;
  }
  if (l->acceptedFd >= 0) close(l->acceptedFd);
  close(l->fd);
  l->magic = 0;
  trace("closeListen dev=%d accepted=%d", l->dev, l->accepted ? 1 : 0);
  delete l;
  return kNetSuccess;
}

// --- Memory registration -----------------------------------------------------------------------------------------

NetResult netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  CallGuard guard(__func__);
  Comm* c = asComm(comm, "regMr");
  if (c == nullptr || mhandle == nullptr) return kNetInvalidArgument;
  if (type != kNetPtrHost) {
    CT_WARN("regMr: memory type %d is not supported (host memory only, type %d)", type, kNetPtrHost);
    return kNetInvalidArgument;
  }
  if (data == nullptr && size > 0) {
    CT_WARN("regMr: NULL buffer of %zu bytes", size);
    return kNetInvalidArgument;
  }
  MemHandle* mh = new (std::nothrow) MemHandle{kMrMagic, c, reinterpret_cast<uintptr_t>(data), size, type};
  if (mh == nullptr) return kNetSystemError;
  c->liveMrs++;
  trace("regMr type=%d bytes=%zu comm=%s", type, size, kindName(c));
  *mhandle = mh;
  return kNetSuccess;
}

#if COLLTEST_NET_VERSION <= 7
NetResult netRegMrInt(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) return kNetInvalidArgument;
  return netRegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}
#endif

NetResult netRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  CT_WARN("regMrDmaBuf: DMA-BUF is not supported (ptrSupport is host only)");
  return kNetInternalError;
}

NetResult netDeregMr(void* comm, void* mhandle) {
  CallGuard guard(__func__);
  MemHandle* mh = static_cast<MemHandle*>(mhandle);
  if (mh == nullptr || mh->magic != kMrMagic) {
    CT_WARN("deregMr: %p is not a CollTest memory handle", mhandle);
    return kNetInvalidArgument;
  }
  if (mh->comm != comm) {
    CT_WARN("deregMr: handle registered on comm %p, deregistered on %p", static_cast<const void*>(mh->comm), comm);
    return kNetInvalidArgument;
  }
  // The comm may already be closed; only a live one counts its registrations.
  Comm* c = static_cast<Comm*>(comm);
  if (c != nullptr && c->magic == kCommMagic) c->liveMrs--;
  trace("deregMr bytes=%zu", mh->size);
  mh->magic = 0;
  delete mh;
  return kNetSuccess;
}

NetResult checkMr(const Comm* c, const void* data, size_t size, void* mhandle, const char* call) {
  const MemHandle* mh = static_cast<const MemHandle*>(mhandle);
  if (mh == nullptr || mh->magic != kMrMagic) {
    CT_WARN("%s: %p is not a CollTest memory handle", call, mhandle);
    return kNetInvalidArgument;
  }
  if (mh->comm != c) {
    CT_WARN("%s: memory handle registered on another comm (regIsGlobal is 0)", call);
    return kNetInvalidArgument;
  }
  if (size == 0) return kNetSuccess;
  uintptr_t p = reinterpret_cast<uintptr_t>(data);
  if (p < mh->base || p - mh->base > mh->size || size > mh->size - (p - mh->base)) {
    CT_WARN("%s: buffer [%p, +%zu) is outside its registration [0x%" PRIxPTR ", +%zu)", call, data, size, mh->base,
            mh->size);
    return kNetInvalidArgument;
  }
  return kNetSuccess;
}

// --- Data path ---------------------------------------------------------------------------------------------------

Request* postRequest(Comm* c, void* data, size_t size, int tag) {
  for (Request& r : c->requests) {
    if (r.state != ReqState::kFree) continue;
    r = Request{};
    r.magic = kRequestMagic;
    r.state = ReqState::kPosted;
    r.comm = c;
    r.data = static_cast<char*>(data);
    r.size = size;
    r.tag = tag;
    r.seq = c->nextSeq++;
    r.header = FrameHeader{kFrameMagic, tag, size};
    return &r;
  }
  c->busy++;
  return nullptr;
}

Request* headRequest(Comm* c) {
  for (Request& r : c->requests) {
    if (r.state == ReqState::kPosted && r.seq == c->headSeq) return &r;
  }
  return nullptr;
}

NetResult ioFailure(Comm* c, Request* r, Io io, const char* what) {
  if (io == Io::kClosed) {
    CT_WARN("%s of %zu bytes (tag %d): the peer closed the connection", what, r->size, r->tag);
    return kNetRemoteError;
  }
  CT_WARN("%s of %zu bytes (tag %d) on the %s comm: %s", what, r->size, r->tag, kindName(c), strerror(errno));
  return kNetSystemError;
}

// Advances the head send; *finished once its last byte is in the socket.
NetResult progressSend(Comm* c, Request* r, bool* finished) {
  Io io = sendSome(c->fd, &r->header, sizeof(r->header), &r->headerDone);
  if (io == Io::kDone) io = sendSome(c->fd, r->data, r->size, &r->payloadDone);
  if (io == Io::kWouldBlock) return kNetSuccess;
  if (io != Io::kDone) return ioFailure(c, r, io, "send");
  r->transferred = r->size;
  *finished = true;
  return kNetSuccess;
}

// Advances the head receive: the frame header first (checked against the posted size and tag), then the payload.
NetResult progressRecv(Comm* c, Request* r, bool* finished) {
  Io io = recvSome(c->fd, &r->header, sizeof(r->header), &r->headerDone);
  if (io == Io::kWouldBlock) return kNetSuccess;
  if (io != Io::kDone) return ioFailure(c, r, io, "receive");
  if (!r->headerChecked) {
    if (r->header.magic != kFrameMagic) {
      CT_WARN("receive: corrupt frame header (magic 0x%x)", r->header.magic);
      return kNetRemoteError;
    }
    if (r->header.size > r->size) {
      CT_WARN("receive: message of %" PRIu64 " bytes (tag %d) is larger than the posted receive of %zu bytes",
              r->header.size, r->header.tag, r->size);
      return kNetRemoteError;
    }
    if (r->header.tag != r->tag) {
      CT_WARN("receive: message tag %d does not match the posted receive's tag %d (%" PRIu64 " bytes)", r->header.tag,
              r->tag, r->header.size);
      return kNetRemoteError;
    }
    r->headerChecked = true;
    r->transferred = r->header.size;
  }
  io = recvSome(c->fd, r->data, r->transferred, &r->payloadDone);
  if (io == Io::kWouldBlock) return kNetSuccess;
  if (io != Io::kDone) return ioFailure(c, r, io, "receive");
  *finished = true;
  return kNetSuccess;
}

// Moves as many bytes as the socket takes without blocking, completing requests in posting order.
void progress(Comm* c) {
  while (c->broken == kNetSuccess) {
    Request* r = headRequest(c);
    if (r == nullptr) return;
    bool finished = false;
    NetResult res = c->kind == CommKind::kSend ? progressSend(c, r, &finished) : progressRecv(c, r, &finished);
    if (res != kNetSuccess) {
      c->broken = res;
      for (Request& other : c->requests) {
        if (other.state == ReqState::kPosted) {
          other.state = ReqState::kFailed;
          other.error = res;
        }
      }
      return;
    }
    if (!finished) return;
    r->state = ReqState::kDone;
    c->headSeq++;
    c->messages++;
    c->bytes += r->transferred;
  }
}

NetResult postSend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  CallGuard guard(__func__);
  Comm* c = asCommOfKind(sendComm, CommKind::kSend, "isend");
  if (c == nullptr || request == nullptr) return kNetInvalidArgument;
  if (c->broken != kNetSuccess) return c->broken;
  if (NetResult r = checkMr(c, data, size, mhandle, "isend"); r != kNetSuccess) return r;
  *request = postRequest(c, data, size, tag);
  return kNetSuccess;
}

NetResult postRecv(void* recvComm, int n, void** data, size_t size, int* tags, void** mhandles, void** request) {
  CallGuard guard(__func__);
  Comm* c = asCommOfKind(recvComm, CommKind::kRecv, "irecv");
  if (c == nullptr || request == nullptr) return kNetInvalidArgument;
  if (n != 1) {
    CT_WARN("irecv: %d grouped receives, maxRecvs is 1", n);
    return kNetInvalidArgument;
  }
  if (data == nullptr || tags == nullptr || mhandles == nullptr) return kNetInvalidArgument;
  if (c->broken != kNetSuccess) return c->broken;
  if (NetResult r = checkMr(c, data[0], size, mhandles[0], "irecv"); r != kNetSuccess) return r;
  *request = postRequest(c, data[0], size, tags[0]);
  return kNetSuccess;
}

NetResult netTest(void* request, int* done, int* sizes) {
  CallGuard guard(__func__);
  Request* r = static_cast<Request*>(request);
  if (r == nullptr || r->magic != kRequestMagic || r->state == ReqState::kFree || done == nullptr) {
    CT_WARN("test: %p is not a live CollTest request", request);
    return kNetInvalidArgument;
  }
  if (r->state == ReqState::kPosted) progress(r->comm);
  if (r->state == ReqState::kFailed) return r->error;  // warned where the failure was decided
  if (r->state != ReqState::kDone) {
    *done = 0;
    return kNetSuccess;
  }
  *done = 1;
  if (sizes != nullptr) *sizes = static_cast<int>(r->transferred);
  r->magic = 0;
  r->state = ReqState::kFree;
  return kNetSuccess;
}

NetResult netIflush(void* recvComm, int, void**, int*, void**, void** request) {
  CallGuard guard(__func__);
  if (asCommOfKind(recvComm, CommKind::kRecv, "iflush") == nullptr || request == nullptr) return kNetInvalidArgument;
  *request = nullptr;  // host memory: nothing to flush
  return kNetSuccess;
}

[[maybe_unused]] NetResult netIrecvConsumed(void* recvComm, int n, void*) {
  Comm* c = asCommOfKind(recvComm, CommKind::kRecv, "irecvConsumed");
  if (c == nullptr) return kNetInvalidArgument;
  if (n != 1) {
    CT_WARN("irecvConsumed: n=%d, maxRecvs is 1", n);
    return kNetInvalidArgument;
  }
  c->consumed++;
  return kNetSuccess;
}

NetResult closeComm(void* comm, CommKind kind, const char* call) {
  CallGuard guard(__func__);
  Comm* c = asCommOfKind(comm, kind, call);
  if (c == nullptr) return kNetInvalidArgument;
  if (kind == CommKind::kSend) {
    trace("closeSend messages=%" PRIu64 " bytes=%" PRIu64 " busy=%" PRIu64 " mrs=%d", c->messages, c->bytes, c->busy,
          c->liveMrs);
  } else {
    trace("closeRecv messages=%" PRIu64 " bytes=%" PRIu64 " consumed=%" PRIu64 " busy=%" PRIu64 " mrs=%d", c->messages,
          c->bytes, c->consumed, c->busy, c->liveMrs);
  }
  close(c->fd);
  for (Request& r : c->requests) r.magic = 0;
  c->magic = 0;
  delete c;
  return kNetSuccess;
}

NetResult netCloseSend(void* sendComm) { return closeComm(sendComm, CommKind::kSend, "closeSend"); }
NetResult netCloseRecv(void* recvComm) { return closeComm(recvComm, CommKind::kRecv, "closeRecv"); }

template <typename VProps>
NetResult netMakeVDevice(int*, VProps*) {
  CT_INFO("makeVDevice is not supported");
  return kNetInternalError;
}

// --- The version-specific entry points ---------------------------------------------------------------------------

#if COLLTEST_NET_VERSION <= 10  // v8-v10: init is process-wide

#if COLLTEST_NET_VERSION <= 9
NetResult netInit(NetLogger logger) {
  startUsing(logger);
  trace("init v%d", kVersion);
  CT_INFO("v%d initialized: %d devices", kVersion, gNumDevices);
  return kNetSuccess;
}
#else
NetResult netInit(NetLogger logger, NetProfilerCallback profiler) {
  startUsing(logger);
  trace("init v%d profiler=%d", kVersion, profiler != nullptr ? 1 : 0);
  CT_INFO("v%d initialized: %d devices", kVersion, gNumDevices);
  return kNetSuccess;
}
#endif

NetResult netListen(int dev, void* handle, void** listenComm) { return listenOn(dev, handle, listenComm); }

#if COLLTEST_NET_VERSION == 6
NetResult netConnect(int dev, void* handle, void** sendComm) {
  return connectTo(dev, handle, sendComm, nullptr, nullptr);
}
NetResult netAcceptV6(void* listenComm, void** recvComm) { return netAccept(listenComm, recvComm, nullptr); }
#elif COLLTEST_NET_VERSION <= 9
NetResult netConnect(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm) {
  return connectTo(dev, handle, sendComm, sendDevComm, nullptr);
}
#else
NetResult netConnect(int dev, NetCommConfig* config, void* handle, void** sendComm, NetDeviceHandle** sendDevComm) {
  if (config == nullptr) {
    CT_WARN("connect: v10 connect needs a config (got NULL)");
    return kNetInvalidArgument;
  }
  return connectTo(dev, handle, sendComm, sendDevComm, &config->trafficClass);
}
#endif

#else  // v11, v12: a context per init

constexpr uint64_t kContextMagic = 0xC011'7E57'C0E7'0000ull;

struct Context {  // v11+: one per init(), i.e. per communicator
  uint64_t magic;
  uint64_t commId;
  int trafficClass;
};

NetResult checkContext(void* ctx, const char* call) {
  const Context* c = static_cast<const Context*>(ctx);
  if (c != nullptr && c->magic == kContextMagic) return kNetSuccess;
  CT_WARN("%s: ctx %p is not a context returned by this plugin's init", call, ctx);
  return kNetInvalidArgument;
}

NetResult netInit(void** ctx, uint64_t commId, NetCommConfig* config, NetLogger logger, NetProfilerCallback) {
  if (logger != nullptr) __atomic_store_n(&gLogger, logger, __ATOMIC_RELEASE);
  if (ctx == nullptr || config == nullptr) {
    CT_WARN("init: v%d init needs a ctx pointer and a config (ctx=%p config=%p)", kVersion, static_cast<void*>(ctx),
            static_cast<void*>(config));
    return kNetInvalidArgument;
  }
  Context* c = new (std::nothrow) Context{kContextMagic, commId, config->trafficClass};
  if (c == nullptr) return kNetSystemError;
  startUsing(logger);
  trace("init v%d commId=0x%016" PRIx64 " trafficClass=%d", kVersion, commId, config->trafficClass);
  CT_INFO("v%d initialized for commId 0x%016" PRIx64 ": %d devices", kVersion, commId, gNumDevices);
  *ctx = c;
  return kNetSuccess;
}

NetResult netFinalize(void* ctx) {
  if (NetResult r = checkContext(ctx, "finalize"); r != kNetSuccess) return r;
  Context* c = static_cast<Context*>(ctx);
  trace("finalize commId=0x%016" PRIx64, c->commId);
  c->magic = 0;
  delete c;
  return kNetSuccess;
}

NetResult netSetNetAttr(void* ctx, NetAttr*) {
  if (NetResult r = checkContext(ctx, "setNetAttr"); r != kNetSuccess) return r;
  trace("setNetAttr");
  return kNetSuccess;  // accepted and ignored
}

NetResult netListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (NetResult r = checkContext(ctx, "listen"); r != kNetSuccess) return r;
  return listenOn(dev, handle, listenComm);
}

NetResult netConnect(void* ctx, int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm) {
  if (NetResult r = checkContext(ctx, "connect"); r != kNetSuccess) return r;
  return connectTo(dev, handle, sendComm, sendDevComm, &static_cast<Context*>(ctx)->trafficClass);
}
#endif

#if COLLTEST_NET_VERSION <= 8
NetResult netIsend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) return kNetInvalidArgument;
  return postSend(sendComm, data, static_cast<size_t>(size), tag, mhandle, request);
}
NetResult netIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (sizes == nullptr || (n == 1 && sizes[0] < 0)) return kNetInvalidArgument;
  return postRecv(recvComm, n, data, n == 1 ? static_cast<size_t>(sizes[0]) : 0, tags, mhandles, request);
}
#elif COLLTEST_NET_VERSION == 9
NetResult netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return postSend(sendComm, data, size, tag, mhandle, request);
}
NetResult netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  if (sizes == nullptr) return kNetInvalidArgument;
  return postRecv(recvComm, n, data, n == 1 ? sizes[0] : 0, tags, mhandles, request);
}
#else
NetResult netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return postSend(sendComm, data, size, tag, mhandle, request);
}
NetResult netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                   void** request) {
  if (sizes == nullptr) return kNetInvalidArgument;
  return postRecv(recvComm, n, data, n == 1 ? sizes[0] : 0, tags, mhandles, request);
}
#endif

// Fills the table by field name; constexpr, so the exported symbol is initialized before any code runs.
constexpr Table makeTable() {
  Table t{};
  t.name = "CollTest";
  t.init = netInit;
  t.devices = netDevices;
  t.getProperties = netGetProperties;
  t.listen = netListen;
  t.connect = netConnect;
#if COLLTEST_NET_VERSION == 6
  t.accept = netAcceptV6;
#else
  t.accept = netAccept;
#endif
#if COLLTEST_NET_VERSION <= 7
  t.regMr = netRegMrInt;
#else
  t.regMr = netRegMr;
#endif
  t.regMrDmaBuf = netRegMrDmaBuf;
  t.deregMr = netDeregMr;
  t.isend = netIsend;
  t.irecv = netIrecv;
  t.iflush = netIflush;
  t.test = netTest;
  t.closeSend = netCloseSend;
  t.closeRecv = netCloseRecv;
  t.closeListen = netCloseListen;
#if COLLTEST_NET_VERSION >= 7
  t.getDeviceMr = nullptr;  // optional: host memory has no device-side handle
  t.irecvConsumed = netIrecvConsumed;
#endif
#if COLLTEST_NET_VERSION >= 9
  t.makeVDevice = netMakeVDevice;
#endif
#if COLLTEST_NET_VERSION >= 11
  t.finalize = netFinalize;
  t.setNetAttr = netSetNetAttr;
#endif
  return t;
}

}  // namespace
}  // namespace colltest

#define COLLTEST_PASTE(a, b) a##b
#define COLLTEST_SYMBOL(version) COLLTEST_PASTE(ncclNetPlugin_v, version)

// The one exported symbol. Not const: NCCL's own plugins export a mutable struct, and a loader may expect that.
extern "C" __attribute__((visibility("default"))) colltest::Table COLLTEST_SYMBOL(COLLTEST_NET_VERSION);
colltest::Table COLLTEST_SYMBOL(COLLTEST_NET_VERSION) = colltest::makeTable();

// COLLTEST_NET_NAME renames the network before the loader reads the table (a library's constructors run inside
// dlopen), so that a test can present it as, say, an IB plugin.
__attribute__((constructor)) static void colltestNameFromEnvironment() {
  if (const char* name = getenv("COLLTEST_NET_NAME")) COLLTEST_SYMBOL(COLLTEST_NET_VERSION).name = name;
}
