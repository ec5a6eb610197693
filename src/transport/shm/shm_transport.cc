// shm: ranks on one host share a POSIX shared-memory segment holding the FIFO.
//
// The receiver creates the segment (so its pages are first touched, and placed, by the reader),
// names it in the descriptor, and unlinks it as soon as the sender reports that it has mapped it
// (completeRecv): from then on the segment has no name, and a crash of either side leaves nothing
// in /dev/shm. Ranks that are threads of one process use the same path.
//
// Large pieces may travel by reference (fifo.h): the sender writes its pid and the address of a
// known word into the segment when it connects; completeRecv reads that word with
// process_vm_readv and, if it can, accepts references. Ranks as threads of one process always
// can. Where the kernel forbids cross-process reads (ptrace restrictions, seccomp), pieces are
// copied through the slots as before.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/random.h"
#include "transport/transport.h"

namespace coll::transport {
namespace {

struct Descriptor {
  char name[64];
  uint64_t bytes;
  int32_t nslots;
  uint64_t slotBytes;
  uint8_t tagged;    // the receiver's choice (Context::untagged), which the sender follows
  uint64_t llLines;  // LL lines per slot after the slots (Context::llLines), 0 for none
};

class ShmConnection : public Connection {
 public:
  ShmConnection(int peer, void* map, size_t bytes, std::string name)
      : Connection(peer, "shm"), map_(map), bytes_(bytes), name_(std::move(name)) {}
  ~ShmConnection() override {
    if (!name_.empty()) shm_unlink(name_.c_str());  // only if completeRecv never ran
    munmap(map_, bytes_);
  }
  void unlinkName() {
    if (!name_.empty()) shm_unlink(name_.c_str());
    name_.clear();
  }
  void setFifo(const Fifo& f) { info_.fifo = f; }
  void acceptRefs(int pid) {
    info_.refPid = pid;
    info_.refSameProcess = pid == getpid();
  }

 private:
  void* map_;
  size_t bytes_;
  std::string name_;
};

// The word a consumer reads from the producer's memory to learn whether it may.
const uint64_t kProbeWord = 0x636f6c6c2d726566ull;  // "coll-ref"

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

bool canReadProducer(const FifoHeader& h) {
  // Between threads, the two ends map the segment at different addresses, so ThreadSanitizer
  // cannot see that a reference's tag (release, through one mapping) orders the producer's writes
  // before the consumer's reads (acquire, through the other), and would report every reference
  // as a race. Its builds copy between threads; processes still read by reference.
  if (h.producerPid == getpid()) return !kThreadSanitizer;
  uint64_t word = 0;
  iovec local{&word, sizeof(word)};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(h.probeAddress)), sizeof(word)};
  return process_vm_readv(h.producerPid, &local, 1, &remote, 1, 0) == sizeof(word) && word == kProbeWord;
}

Result<void*> mapSegment(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return COLL_ERROR(collSystemError, FMT_STRING("mmap of shared memory {} ({} bytes) failed: {}"), name, bytes,
                      std::strerror(errno));
  return p;
}

class ShmTransport : public Transport {
 public:
  const char* name() const override { return "shm"; }
  bool canConnect(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) const override {
    return me.hostHash == peer.hostHash;
  }
  Caps caps() const override { return Caps{0.2, 10.0, size_t(64) << 20}; }
  bool carriesLL() const override { return true; }  // the device reads the registered segment in place
  std::unique_ptr<TransportState> newState(const Context&) const override { return std::make_unique<TransportState>(); }

  Result<std::unique_ptr<Connection>> createRecv(const Context& ctx, TransportState&, int peer,
                                                 std::vector<char>* descriptor) const override {
    Descriptor d{};
    std::string name = fmt::format("/coll-{}-{}-{:016x}", getpid(), ctx.rank, randomU64());
    std::strncpy(d.name, name.c_str(), sizeof(d.name) - 1);
    d.nslots = ctx.nslots;
    d.slotBytes = ctx.slotBytes;
    d.llLines = ctx.llLines;
    d.bytes = Fifo::bytesFor(ctx.nslots, ctx.slotBytes, d.llLines);
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return COLL_ERROR(collSystemError, FMT_STRING("shm_open({}) failed: {}"), name, std::strerror(errno));
    int rc = ftruncate(fd, static_cast<off_t>(d.bytes));
    int err = errno;
    auto map = rc == 0 ? mapSegment(fd, d.bytes, name) : Result<void*>(Status());
    ::close(fd);
    if (rc != 0 || !map.isOk()) {
      shm_unlink(name.c_str());
      if (rc != 0)
        return COLL_ERROR(collSystemError,
                          FMT_STRING("sizing shared memory {} to {} bytes failed: {} (is /dev/shm full?)"), name,
                          d.bytes, std::strerror(err));
      return map.takeStatus();
    }
    auto conn = std::make_unique<ShmConnection>(peer, *map, d.bytes, name);
    Fifo f = Fifo::over(*map, d.nslots, d.slotBytes, true, d.llLines);
    // Both ends in shared memory: the consumer polls tag lines, unless its executor reads head.
    f.tagged = !ctx.untagged;
    d.tagged = f.tagged ? 1 : 0;
    conn->setFifo(f);
    descriptor->assign(reinterpret_cast<char*>(&d), reinterpret_cast<char*>(&d) + sizeof(d));
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Result<std::unique_ptr<Connection>> connectSend(const Context&, TransportState&, int peer,
                                                  const std::vector<char>& descriptor) const override {
    if (descriptor.size() != sizeof(Descriptor))
      return COLL_ERROR(collInternalError, FMT_STRING("rank {} sent a malformed shm descriptor"), peer);
    Descriptor d;
    std::memcpy(&d, descriptor.data(), sizeof(d));
    d.name[sizeof(d.name) - 1] = '\0';
    // The segment must hold the FIFO the descriptor describes, or the views below would reach
    // past the mapping.
    if (!Fifo::plausible(d.nslots, d.slotBytes, d.llLines, d.bytes))
      return COLL_ERROR(collInternalError, FMT_STRING("rank {} sent an shm descriptor of an inconsistent FIFO"), peer);
    int fd = shm_open(d.name, O_RDWR, 0600);
    if (fd < 0)
      return COLL_ERROR(collSystemError, FMT_STRING("cannot open rank {}'s shared memory {}: {}"), peer, d.name,
                        std::strerror(errno));
    auto map = mapSegment(fd, d.bytes, d.name);
    ::close(fd);
    if (!map.isOk()) return map.takeStatus();
    auto conn = std::make_unique<ShmConnection>(peer, *map, d.bytes, "");
    Fifo f = Fifo::over(*map, d.nslots, d.slotBytes, false, d.llLines);
    f.tagged = d.tagged != 0;
    f.header->producerPid = getpid();
    f.header->probeAddress = reinterpret_cast<uintptr_t>(&kProbeWord);
    conn->setFifo(f);
    return std::unique_ptr<Connection>(std::move(conn));
  }

  Status completeRecv(const Context& ctx, TransportState&, Connection& conn) const override {
    static_cast<ShmConnection&>(conn).unlinkName();
    FifoHeader& h = *conn.fifo().header;
    if (canReadProducer(h)) {
      static_cast<ShmConnection&>(conn).acceptRefs(h.producerPid);
      h.refsAccepted.store(kRefsTagged, std::memory_order_release);
      COLL_LOG(INFO, NET, "rank {} <- rank {}: reads pieces by reference from pid {}", ctx.rank, conn.peer(),
               h.producerPid);
    } else {
      COLL_LOG(INFO, NET, "rank {}: cannot read rank {}'s memory (process_vm_readv: {}); large pieces are copied",
               ctx.rank, conn.peer(), std::strerror(errno));
    }
    return Status::ok();
  }
};

}  // namespace

const Transport& shmTransport() {
  static ShmTransport t;
  return t;
}

}  // namespace coll::transport
