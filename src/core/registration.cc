#include "core/registration.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/windows.h"
#include "device/runtime.h"

namespace coll {

void* Registrations::add(void* buff, size_t size, bool window, int flags, std::shared_ptr<const WindowPeers> peers) {
  auto r = std::make_unique<Registration>();
  r->buff = buff;
  r->size = size;
  r->window = window;
  r->flags = flags;
  r->peers = std::move(peers);
  void* handle = r.get();
  std::lock_guard<std::mutex> lock(mu_);
  if (window) {
    windowList_.push_back(r.get());
    windows_.store(static_cast<int>(windowList_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  records_.emplace(handle, std::move(r));
  return handle;
}

Result<Registrations::Map::iterator> Registrations::locate(void* handle, bool window, const char* what) {
  auto it = records_.find(handle);
  if (it == records_.end() || it->second->window != window)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("{} {} is not registered with this communicator"), what, handle);
  return it;
}

Status Registrations::remove(void* handle, bool window, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  COLL_ASSIGN_OR_RETURN(auto it, locate(handle, window, what));
  if (window) {
    windowList_.erase(std::find(windowList_.begin(), windowList_.end(), it->second.get()));
    windows_.store(static_cast<int>(windowList_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  records_.erase(it);
  return Status::ok();
}

Result<Registration> Registrations::find(void* handle, bool window, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  COLL_ASSIGN_OR_RETURN(auto it, locate(handle, window, what));
  return *it->second;
}

const Registration* Registrations::windowHolding(const void* p, size_t bytes, size_t* offset) const {
  auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Registration* r : windowList_) {
    auto base = reinterpret_cast<uintptr_t>(r->buff);
    if (at >= base && at - base <= r->size && bytes <= r->size - (at - base)) {
      *offset = at - base;
      return r;
    }
  }
  return nullptr;
}

const Registration* Registrations::windowBySerial(uint64_t serial) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Registration* r : windowList_)
    if (r->peers && r->peers->serial == serial) return r;
  return nullptr;
}

uint64_t Registrations::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [handle, r] : records_) total += r->size;
  return total;
}

namespace {

// What memAlloc handed out, by address: the host kind's descriptor and length, or the device.
struct Allocation {
  int fd = -1;  // host kind: the memfd
  size_t length = 0;
  device::Runtime* rt = nullptr;  // device kind
};
std::mutex gAllocMu;
std::map<const void*, Allocation>& allocations() {
  static auto* m = new std::map<const void*, Allocation>();  // never destroyed: frees may come at exit
  return *m;
}

}  // namespace

Status memAllocHost(size_t size, void** out) {
  *out = nullptr;
  if (size == 0) return Status::ok();
  Allocation a;
  long page = sysconf(_SC_PAGESIZE);
  size_t length = (size + page - 1) / page * page;
  int fd = memfd_create("coll-mem", MFD_CLOEXEC);
  if (fd < 0) return COLL_ERROR(collSystemError, FMT_STRING("memfd_create: {}"), std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
    int err = errno;
    ::close(fd);
    return COLL_ERROR(collSystemError, FMT_STRING("ftruncate of {} bytes: {}"), length, std::strerror(err));
  }
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return COLL_ERROR(collSystemError, FMT_STRING("mmap of {} bytes: {}"), length, std::strerror(err));
  }
  a.fd = fd;
  a.length = length;
  *out = p;
  std::lock_guard<std::mutex> lock(gAllocMu);
  allocations().emplace(*out, a);
  return Status::ok();
}

Status memAlloc(size_t size, void** out) {
  *out = nullptr;
  if (size == 0) return Status::ok();
  device::Runtime* rt = device::runtime();
  int dev = rt ? rt->currentDevice() : -1;
  if (!(rt && dev >= 0 && dev < rt->deviceCount())) return memAllocHost(size, out);
  Allocation a;
  COLL_TRY(rt->allocShareable(dev, size, out));
  a.rt = rt;
  a.length = size;
  std::lock_guard<std::mutex> lock(gAllocMu);
  allocations().emplace(*out, a);
  return Status::ok();
}

bool hostAllocationOf(const void* p, size_t size, int* fd, size_t* offset) {
  std::lock_guard<std::mutex> lock(gAllocMu);
  auto& all = allocations();
  auto it = all.upper_bound(p);  // the first allocation after p: the one before may hold it
  if (it == all.begin()) return false;
  --it;
  const auto* base = static_cast<const char*>(it->first);
  const auto* at = static_cast<const char*>(p);
  if (it->second.rt || at >= base + it->second.length || size > it->second.length - static_cast<size_t>(at - base))
    return false;
  *fd = it->second.fd;
  *offset = static_cast<size_t>(at - base);
  return true;
}

Status memFree(void* p) {
  if (!p) return Status::ok();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    auto it = allocations().find(p);
    if (it == allocations().end())
      return COLL_ERROR(collInvalidArgument, FMT_STRING("{} was not allocated by collMemAlloc (or was freed)"), p);
    a = it->second;
    allocations().erase(it);
  }
  if (a.rt) {
    a.rt->freeShareable(p);
  } else {
    munmap(p, a.length);
    ::close(a.fd);
  }
  return Status::ok();
}

}  // namespace coll
