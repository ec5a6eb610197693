// p2p: FIFOs in device memory between ranks on GPUs of one host that can reach each other's
// memory. The receiver allocates its FIFO on its own device (so the producer's stores travel and
// the consumer polls local memory, as NCCL's P2P transport places its buffers) and describes it:
//  - to a sender in the same process (collCommInitAll, one process driving several GPUs): by its
//    address, used as it is once the sender's device may access the receiver's (peer access);
//  - to a sender in another process: by a CUDA IPC handle, which the sender opens (device memory
//    to device memory, no host copy).
// Which pairs qualify is the topology's call, as NCCL_P2P_LEVEL makes it: ranks on one GPU always,
// GPUs whose path (NVLink, PCIe switches, host bridge, ...) is no farther than COLL_P2P_LEVEL
// (default PXB); farther ones stage through host shared memory (shm). COLL_P2P_DISABLE=1 removes
// this transport.
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "base/log.h"
#include "base/params.h"
#include "device/runtime.h"
#include "topo/host_system.h"
#include "topo/paths.h"
#include "transport/transport.h"

namespace coll::transport {
namespace {

struct Descriptor {
  uint64_t address;  // in the receiver's process
  int32_t pid;       // the receiver's
  int32_t nslots;
  uint64_t slotBytes;
  uint64_t llLines;
  uint64_t bytes;   // the whole allocation
  int32_t cudaDev;  // the receiver's device
  uint8_t hasIpc;   // ipc holds a handle (a sender in another process)
  device::IpcHandle ipc;
};

class P2PConnection : public Connection {
 public:
  P2PConnection(int peer, device::Runtime* rt, void* owned, void* imported, size_t ownedBytes = 0)
      : Connection(peer, "p2p"), rt_(rt), owned_(owned), imported_(imported), ownedBytes_(ownedBytes) {}
  ~P2PConnection() override {
    if (owned_) rt_->free(owned_);
    if (imported_) rt_->ipcClose(imported_);
  }
  void setFifo(const Fifo& f) { info_.fifo = f; }
  size_t deviceBytes() const override { return owned_ ? ownedBytes_ : 0; }

 private:
  device::Runtime* rt_;
  void* owned_;     // the receiving end's FIFO memory
  void* imported_;  // a sending end's mapping of another process's FIFO
  size_t ownedBytes_;
};

// The host's topology, read once per process (the decision is made for every pair of ranks).
const topo::System& hostSystem() {
  static std::once_flag once;
  static topo::System system;
  std::call_once(once, [] {
    auto s = localSystem();
    if (s.isOk()) system = *s;
  });
  return system;
}

// Whether two ranks' GPUs are close enough for device memory to device memory.
bool withinLevel(const bootstrap::RankInfo& a, const bootstrap::RankInfo& b, device::Runtime& rt) {
  if (a.pid == b.pid && a.cudaDev == b.cudaDev) return true;  // one GPU, one process
  std::string busA(a.busId, strnlen(a.busId, sizeof(a.busId))), busB(b.busId, strnlen(b.busId, sizeof(b.busId)));
  if (rt.emulated()) return true;                  // emulated devices all share this host's memory
  if (!busA.empty() && busA == busB) return true;  // one GPU, two processes
  topo::PathType level = topo::PathType::kPxb, path;
  topo::parsePathType(params::kP2PLevel.get(), &level);               // validated at init (checkDataPathParams)
  if (!topo::gpuPath(hostSystem(), busA, busB, &path)) return false;  // unknown: stage through the host
  return path <= level;
}

class P2PTransport : public Transport {
 public:
  const char* name() const override { return "p2p"; }
  bool canConnect(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) const override {
    device::Runtime* rt = device::runtime();
    return me.hostHash == peer.hostHash && me.cudaDev >= 0 && peer.cudaDev >= 0 && rt != nullptr &&
           withinLevel(me, peer, *rt);
  }
  Caps caps() const override { return Caps{1.0, 300.0, size_t(64) << 20}; }
  bool carriesLL() const override { return true; }
  std::unique_ptr<TransportState> newState(const Context&) const override { return std::make_unique<TransportState>(); }

  Result<std::unique_ptr<Connection>> createRecv(const Context& ctx, TransportState&, int peer,
                                                 std::vector<char>* descriptor) const override {
    device::Runtime* rt = device::runtime();
    if (!rt || ctx.cudaDev < 0)
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} has no device"), ctx.rank);
    Descriptor d{};
    size_t bytes = Fifo::bytesFor(ctx.nslots, ctx.slotBytes, ctx.llLines);
    void* memory = nullptr;
    COLL_TRY(rt->alloc(ctx.cudaDev, bytes, &memory));  // zeroed: counters and LL flags start at 0
    auto conn = std::make_unique<P2PConnection>(peer, rt, memory, nullptr, bytes);
    conn->setFifo(Fifo::over(memory, ctx.nslots, ctx.slotBytes, false, ctx.llLines));
    d.address = reinterpret_cast<uintptr_t>(memory);
    d.pid = getpid();
    d.nslots = ctx.nslots;
    d.slotBytes = ctx.slotBytes;
    d.llLines = ctx.llLines;
    d.bytes = bytes;
    d.cudaDev = ctx.cudaDev;
    if (ctx.peers && peer < static_cast<int>(ctx.peers->size()) && (*ctx.peers)[peer].pid != d.pid) {
      COLL_TRY(rt->ipcExport(memory, bytes, &d.ipc));
      d.hasIpc = 1;
    }
    descriptor->resize(sizeof(d));
    std::memcpy(descriptor->data(), &d, sizeof(d));
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Result<std::unique_ptr<Connection>> connectSend(const Context& ctx, TransportState&, int peer,
                                                  const std::vector<char>& descriptor) const override {
    Descriptor d;
    if (descriptor.size() != sizeof(d))
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} sent a descriptor of {} bytes"), peer,
                        descriptor.size());
    std::memcpy(&d, descriptor.data(), sizeof(d));
    if (!Fifo::plausible(d.nslots, d.slotBytes, d.llLines, d.bytes))
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} sent a FIFO of {} slots of {} bytes"), peer,
                        d.nslots, d.slotBytes);
    device::Runtime* rt = device::runtime();
    if (!rt) return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} has no device runtime"), ctx.rank);
    void* memory = reinterpret_cast<void*>(static_cast<uintptr_t>(d.address));
    void* imported = nullptr;
    if (d.pid == getpid()) {
      // This process's kernels store into the receiver's device memory.
      COLL_TRY(rt->enablePeerAccess(ctx.cudaDev, d.cudaDev));
    } else {
      if (!d.hasIpc)
        return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} (process {}) sent no IPC handle"), peer, d.pid);
      Status s = rt->ipcOpen(d.ipc, d.bytes, ctx.cudaDev, &imported);
      if (!s.isOk())
        return COLL_ERROR(s.code(), FMT_STRING("p2p: opening rank {}'s FIFO (CUDA IPC, process {}): {}"), peer, d.pid,
                          s.message());
      memory = imported;
      COLL_LOG(INFO, NET, "rank {} -> rank {}: p2p through CUDA IPC (process {}, device {})", ctx.rank, peer, d.pid,
               d.cudaDev);
    }
    auto conn = std::make_unique<P2PConnection>(peer, rt, nullptr, imported);
    conn->setFifo(Fifo::over(memory, d.nslots, d.slotBytes, false, d.llLines));
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Status completeRecv(const Context&, TransportState&, Connection&) const override { return Status::ok(); }
};

}  // namespace

const Transport& p2pTransport() {
  static const P2PTransport t;
  return t;
}

}  // namespace coll::transport
