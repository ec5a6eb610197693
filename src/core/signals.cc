#include "core/signals.h"

#include <cstring>

#include "base/log.h"
#include "core/comm.h"
#include "core/registration.h"
#include "device/runtime.h"

namespace coll {

Result<std::unique_ptr<Signals>> Signals::create(collComm* comm) {
  std::unique_ptr<Signals> s(new Signals());
  size_t n = static_cast<size_t>(comm->nranks);
  size_t bytes = n * kStride;
  // Host memory always: memAlloc would hand out device memory on a thread with a current device.
  COLL_TRY(memAllocHost(bytes, &s->own_));
  std::memset(s->own_, 0, bytes);
  // With a device, the device one-sided path's kernels add to and wait on these areas: each rank
  // makes its own area addressable by the device before the exchange (so that it is when any
  // rank's registration returns; ranks that are threads of this process reach it so), and the
  // areas of other processes once mapped here.
  device::Runtime* rt = comm->cudaDev >= 0 ? device::runtime() : nullptr;
  if (rt) {
    Status reg = rt->registerHost(s->own_, bytes);
    if (reg.isOk()) {
      s->registered_.push_back(s->own_);
      s->registeredWith_ = rt;
    } else {
      COLL_LOG(WARN, INIT, "rank {}: the signal area is not addressable by the device: {}", comm->rank, reg.message());
      rt = nullptr;
    }
  }
  COLL_ASSIGN_OR_RETURN(s->areas_, exchangeRanges(comm, s->own_, bytes));
  for (const PeerRange& r : s->areas_->ranks) {
    if (!rt || !r.mapping) continue;
    Status reg = rt->registerHost(r.mapping, r.mappingBytes);
    if (!reg.isOk()) {
      COLL_LOG(WARN, INIT, "rank {}: a peer's signal area is not addressable by the device: {}", comm->rank,
               reg.message());
      rt = nullptr;
      continue;
    }
    s->registered_.push_back(r.mapping);
  }
  s->deviceReady_ = rt != nullptr;
  s->rank_ = comm->rank;
  s->consumed_.assign(n, 0);
  return s;
}

Signals::~Signals() {
  for (void* p : registered_) registeredWith_->unregisterHost(p);
  registered_.clear();
  areas_.reset();  // the peers' mappings first
  if (own_) (void)memFree(own_);
}

Status Signals::check(int peer) const {
  const PeerRange& r = areas_->ranks[static_cast<size_t>(peer)];
  if (r.access != PeerRange::Access::kPointer)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("rank {}'s signals cannot be reached from rank {}: {}"), peer, rank_,
                      r.why.empty() ? "its signal area could not be mapped" : r.why);
  return Status::ok();
}

void Signals::raise(int peer) {
  // An add, not a store of a count kept here: the device path's kernels add to the same word
  // (core/device_onesided.h), and a host raise must not overwrite theirs.
  __atomic_fetch_add(slot(peer), uint64_t(1), __ATOMIC_RELEASE);
}

uint64_t* Signals::slot(int peer) const {
  const PeerRange& r = areas_->ranks[static_cast<size_t>(peer)];
  return reinterpret_cast<uint64_t*>(r.base + static_cast<size_t>(rank_) * kStride);
}

const uint64_t* Signals::own(int peer) const {
  return reinterpret_cast<const uint64_t*>(static_cast<const char*>(own_) + static_cast<size_t>(peer) * kStride);
}

uint64_t Signals::arrived(int peer) const { return __atomic_load_n(own(peer), __ATOMIC_ACQUIRE); }

}  // namespace coll
