// p2p: FIFOs in device memory between ranks that are threads of one process (collCommInitAll, or
// one process driving several GPUs). The receiver allocates its FIFO on its own device (so the
// producer's stores travel and the consumer polls local memory, as NCCL's P2P transport places its
// buffers) and sends the pointer; in one process the sender uses that pointer as it is. Counters
// start at zero because the runtime's allocations are zeroed.
//
// Ranks of different processes need CUDA IPC handles for the same memory: not built yet, so this
// transport refuses them and the device path reports that no device transport connects them.
#include <unistd.h>

#include <cstring>

#include "device/runtime.h"
#include "transport/transport.h"

namespace coll::transport {
namespace {

struct Descriptor {
  uint64_t address;
  int32_t pid;
  int32_t nslots;
  uint64_t slotBytes;
};

class P2PConnection : public Connection {
 public:
  P2PConnection(int peer, device::Runtime* rt, void* owned) : Connection(peer, "p2p"), rt_(rt), owned_(owned) {}
  ~P2PConnection() override {
    if (owned_) rt_->free(owned_);
  }
  void setFifo(const Fifo& f) { info_.fifo = f; }

 private:
  device::Runtime* rt_;
  void* owned_;  // the receiving end's FIFO memory; nullptr on the sending end
};

// The FIFO's view over device memory: Fifo::over without touching it (the host may not be able to).
Fifo viewOver(void* memory, int nslots, size_t slotBytes) {
  Fifo f;
  f.header = static_cast<FifoHeader*>(memory);
  f.slots = static_cast<char*>(memory) + (Fifo::bytesFor(nslots, slotBytes) - static_cast<size_t>(nslots) * slotBytes);
  f.nslots = nslots;
  f.slotBytes = slotBytes;
  f.tagged = false;
  return f;
}

class P2PTransport : public Transport {
 public:
  const char* name() const override { return "p2p"; }
  bool canConnect(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) const override {
    return me.hostHash == peer.hostHash && me.pid == peer.pid && me.cudaDev >= 0 && peer.cudaDev >= 0 &&
           device::runtime() != nullptr;
  }
  Caps caps() const override { return Caps{1.0, 300.0, size_t(64) << 20}; }
  std::unique_ptr<TransportState> newState(const Context&) const override { return std::make_unique<TransportState>(); }

  Result<std::unique_ptr<Connection>> createRecv(const Context& ctx, TransportState&, int peer,
                                                 std::vector<char>* descriptor) const override {
    device::Runtime* rt = device::runtime();
    if (!rt || ctx.cudaDev < 0)
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} has no device"), ctx.rank);
    Descriptor d{};
    size_t bytes = Fifo::bytesFor(ctx.nslots, ctx.slotBytes);
    void* memory = nullptr;
    COLL_TRY(rt->alloc(ctx.cudaDev, bytes, &memory));
    auto conn = std::make_unique<P2PConnection>(peer, rt, memory);
    conn->setFifo(viewOver(memory, ctx.nslots, ctx.slotBytes));
    d.address = reinterpret_cast<uintptr_t>(memory);
    d.pid = getpid();
    d.nslots = ctx.nslots;
    d.slotBytes = ctx.slotBytes;
    descriptor->resize(sizeof(d));
    std::memcpy(descriptor->data(), &d, sizeof(d));
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Result<std::unique_ptr<Connection>> connectSend(const Context&, TransportState&, int peer,
                                                  const std::vector<char>& descriptor) const override {
    Descriptor d;
    if (descriptor.size() != sizeof(d))
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} sent a descriptor of {} bytes"), peer,
                        descriptor.size());
    std::memcpy(&d, descriptor.data(), sizeof(d));
    if (d.pid != getpid())
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} is process {}, not this one"), peer, d.pid);
    if (d.nslots < 2 || d.nslots > kMaxSlots || d.slotBytes == 0)
      return COLL_ERROR(collInternalError, FMT_STRING("p2p: rank {} sent a FIFO of {} slots of {} bytes"), peer,
                        d.nslots, d.slotBytes);
    auto conn = std::make_unique<P2PConnection>(peer, device::runtime(), nullptr);
    conn->setFifo(viewOver(reinterpret_cast<void*>(static_cast<uintptr_t>(d.address)), d.nslots, d.slotBytes));
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
