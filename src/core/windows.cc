#include "core/windows.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/process.h"
#include "core/comm.h"
#include "core/registration.h"
#include "device/runtime.h"

namespace coll {

namespace {

// What each rank tells the others about its range.
struct RangeInfo {
  uint64_t addr;
  uint64_t size;
  uint64_t fdOffset;  // where addr lies in the memfd (fd >= 0)
  int32_t fd;         // the owner's memfd holding the range, -1: none (other memory)
  int32_t device;     // 1: the range is device memory
  int32_t shared;     // device memory: share holds its allocation, the range at fdOffset in it
  int32_t cudaDev;    // device memory: the owner's device
  device::ShareHandle share;
};

// Maps the owner's memfd range; false with why set where it cannot.
bool mapPeer(const RangeInfo& info, PeerRange* r) {
  std::string why;
  int fd = borrowFd(r->pid, info.fd, &why);
  if (fd < 0) {
    r->why = why;
    return false;
  }
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t start = info.fdOffset / page * page;
  size_t bytes = (info.fdOffset + info.size + page - 1) / page * page - start;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  int err = errno;
  ::close(fd);  // the mapping keeps the memory
  if (p == MAP_FAILED) {
    r->why = std::string("mmap of its memfd: ") + std::strerror(err);
    return false;
  }
  r->mapping = p;
  r->mappingBytes = bytes;
  r->base = static_cast<char*>(p) + (info.fdOffset - start);
  r->access = PeerRange::Access::kPointer;
  return true;
}

// Whether this process may read the owner's memory at its address (the test the by-reference
// path makes): one byte, where the range has one.
bool cmaWorks(const PeerRange& r, std::string* why) {
  if (r.size == 0) return true;
  char byte;
  iovec local{&byte, 1};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(r.remote)), 1};
  if (process_vm_readv(r.pid, &local, 1, &remote, 1, 0) == 1) return true;
  *why = std::string("process_vm_readv: ") + std::strerror(errno);
  return false;
}

// Reaches a peer's device range: its own pointer in this process (a thread), else its allocation
// mapped here. false with why set where neither works.
bool reachDevice(collComm* comm, const RangeInfo& info, bool sameProcess, PeerRange* r) {
  device::Runtime* rt = device::runtime();
  if (!rt) {
    r->why = "this process has no device runtime";
    return false;
  }
  if (sameProcess) {
    if (info.cudaDev != comm->cudaDev) {
      Status s = rt->enablePeerAccess(comm->cudaDev, info.cudaDev);
      if (!s.isOk()) {
        r->why = s.message();
        return false;
      }
    }
    r->base = reinterpret_cast<char*>(static_cast<uintptr_t>(info.addr));
  } else if (!info.shared) {
    r->why = "its device memory could not be shared (see its log)";
    return false;
  } else {
    void* p = nullptr;
    Status s = rt->openShared(info.share, comm->cudaDev, &p);
    if (!s.isOk()) {
      r->why = s.message();
      return false;
    }
    r->opened = p;
    r->base = static_cast<char*>(p) + info.fdOffset;
  }
  r->access = PeerRange::Access::kPointer;
  r->device = true;
  return true;
}

}  // namespace

WindowPeers::~WindowPeers() {
  for (auto& r : ranks) {
    if (r.mapping) munmap(r.mapping, r.mappingBytes);
    if (r.opened) device::runtime()->closeShared(r.opened);
  }
}

Result<std::shared_ptr<WindowPeers>> exchangeRanges(collComm* comm, void* buff, size_t size) {
  int n = comm->nranks, me = comm->rank;
  std::vector<RangeInfo> all(static_cast<size_t>(n));
  RangeInfo& mine = all[static_cast<size_t>(me)];
  mine = RangeInfo{};
  mine.share.fd = -1;
  mine.addr = reinterpret_cast<uintptr_t>(buff);
  mine.size = size;
  mine.fd = -1;
  device::Runtime* rt = device::runtime();
  int dev = -1;
  bool exported = false;
  if (rt && size > 0 && rt->isDeviceMemory(buff, &dev)) {
    mine.device = 1;
    mine.cudaDev = dev;
    void* base = nullptr;
    size_t total = 0;
    if (rt->allocationOf(buff, size, &base, &total)) {
      Status s = rt->share(base, total, &mine.share);
      if (s.isOk()) {
        exported = true;
        mine.shared = 1;
        mine.fdOffset = static_cast<uint64_t>(static_cast<char*>(buff) - static_cast<char*>(base));
      } else {
        COLL_LOG(WARN, INIT, "rank {}: the device memory of a window cannot be shared: {}", me, s.message());
      }
    }
  } else {
    int fd = -1;
    size_t offset = 0;
    if (size > 0 && hostAllocationOf(buff, size, &fd, &offset)) {
      mine.fd = fd;
      mine.fdOffset = offset;
    }
  }
  COLL_TRY(comm->bootstrap->allGather(all.data(), sizeof(RangeInfo)));

  auto out = std::make_shared<WindowPeers>();
  out->ranks.resize(static_cast<size_t>(n));
  const auto& peers = comm->bootstrap->peers();
  for (int p = 0; p < n; ++p) {
    const RangeInfo& info = all[static_cast<size_t>(p)];
    PeerRange& r = out->ranks[static_cast<size_t>(p)];
    r.remote = info.addr;
    r.size = info.size;
    bool sameHost = peers[p].hostHash == peers[me].hostHash;
    r.pid = sameHost ? peers[p].pid : 0;
    if (!sameHost) {
      r.why = fmt::format("it is on host {}: windows reach the ranks of one host", peers[p].hostName);
    } else if (info.device) {
      (void)reachDevice(comm, info, peers[p].pid == getpid(), &r);
    } else if (peers[p].pid == getpid()) {
      // A thread of this process (this rank included): its own address.
      r.base = reinterpret_cast<char*>(static_cast<uintptr_t>(info.addr));
      r.access = PeerRange::Access::kPointer;
    } else if (info.fd >= 0 && mapPeer(info, &r)) {
      // mapped
    } else {
      std::string why;
      if (cmaWorks(r, &why)) {
        r.access = PeerRange::Access::kCma;
        r.why.clear();
      } else {
        r.why = r.why.empty() ? why : r.why + "; " + why;
      }
    }
    const char* how = r.access == PeerRange::Access::kCma    ? "process_vm_writev"
                      : r.access == PeerRange::Access::kNone ? "not reachable"
                      : r.mapping                            ? "its memfd, mapped"
                      : r.opened                             ? "its device allocation, mapped"
                                                             : "its pointer (same process)";
    COLL_LOG(INFO, NET, "rank {}: rank {}'s range of {} bytes at 0x{:x}: {}{}{}", me, p, r.size, r.remote, how,
             r.why.empty() ? "" : ": ", r.why);
  }
  // Whether this rank reaches everyone by pointer is its own finding (a peer's mmap may fail where
  // this rank's succeeds): the ranks share theirs, so that all see the same answer.
  // Bit 0: every rank by pointer; bit 1: every rank of this host by pointer.
  std::vector<uint8_t> reaches(static_cast<size_t>(n));
  bool every = true, host = true;
  for (int p = 0; p < n; ++p) {
    bool pointer = out->ranks[static_cast<size_t>(p)].access == PeerRange::Access::kPointer;
    every = every && pointer;
    if (peers[p].hostHash == peers[me].hostHash) host = host && pointer;
  }
  reaches[static_cast<size_t>(me)] = static_cast<uint8_t>((every ? 1 : 0) | (host ? 2 : 0));
  Status agreed = comm->bootstrap->allGather(reaches.data(), 1);
  // Every peer has opened this rank's allocation by now (or given up): what share() holds for it
  // (a descriptor) can go.
  if (exported) rt->unshare(mine.share);
  COLL_TRY(agreed);
  out->allPointers = std::all_of(reaches.begin(), reaches.end(), [](uint8_t b) { return (b & 1) != 0; });
  out->hostPointers = std::all_of(reaches.begin(), reaches.end(), [](uint8_t b) { return (b & 2) != 0; });
  out->device = std::all_of(all.begin(), all.end(), [](const RangeInfo& i) { return i.device != 0; });
  return out;
}

Status writeRange(const PeerRange& r, int rank, size_t offset, const void* src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  if (r.device)
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("rank {}'s window is device memory: one-sided operations on it go on a device "
                                 "stream"),
                      rank);
  switch (r.access) {
    case PeerRange::Access::kPointer:
      std::memcpy(r.base + offset, src, bytes);
      return Status::ok();
    case PeerRange::Access::kCma: {
      // process_vm_writev may move less than asked (a page at a time): go on from where it stopped.
      size_t done = 0;
      while (done < bytes) {
        iovec local{const_cast<char*>(static_cast<const char*>(src)) + done, bytes - done};
        iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(r.remote + offset + done)), bytes - done};
        ssize_t got = process_vm_writev(r.pid, &local, 1, &remote, 1, 0);
        if (got <= 0)
          return COLL_ERROR(collRemoteError, FMT_STRING("writing {} bytes into rank {}'s window (pid {}) failed: {}"),
                            bytes, rank, r.pid, got == 0 ? "no progress" : std::strerror(errno));
        done += static_cast<size_t>(got);
      }
      return Status::ok();
    }
    case PeerRange::Access::kNone:
      break;
  }
  return COLL_ERROR(collInvalidUsage, FMT_STRING("rank {} cannot be reached through its window: {}"), rank, r.why);
}

}  // namespace coll
