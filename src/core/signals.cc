#include "core/signals.h"

#include <cstring>

#include "core/comm.h"
#include "core/registration.h"

namespace coll {

Result<std::unique_ptr<Signals>> Signals::create(collComm* comm) {
  std::unique_ptr<Signals> s(new Signals());
  size_t n = static_cast<size_t>(comm->nranks);
  size_t bytes = n * kStride;
  // Host memory always: memAlloc would hand out device memory on a thread with a current device.
  COLL_TRY(memAllocHost(bytes, &s->own_));
  std::memset(s->own_, 0, bytes);
  COLL_ASSIGN_OR_RETURN(s->areas_, exchangeRanges(comm, s->own_, bytes));
  s->rank_ = comm->rank;
  s->raised_.assign(n, 0);
  s->consumed_.assign(n, 0);
  return s;
}

Signals::~Signals() {
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
  const PeerRange& r = areas_->ranks[static_cast<size_t>(peer)];
  auto* counter = reinterpret_cast<uint64_t*>(r.base + static_cast<size_t>(rank_) * kStride);
  uint64_t next = ++raised_[static_cast<size_t>(peer)];
  __atomic_store_n(counter, next, __ATOMIC_RELEASE);
}

uint64_t Signals::arrived(int peer) const {
  auto* counter =
      reinterpret_cast<const uint64_t*>(static_cast<const char*>(own_) + static_cast<size_t>(peer) * kStride);
  return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}

}  // namespace coll
