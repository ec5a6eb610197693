#include "coll-info/selfcheck.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "coll/coll.h"
#include "core/comm.h"

namespace collinfo {
namespace {

struct Slot {
  int32_t rank;
  int32_t pid;
  char host[64];
};

int fail(int rank, const char* what, collResult_t rc, collComm_t comm) {
  std::fprintf(stderr, "coll-info --check: rank %d: %s failed: %s: %s\n", rank, what, collGetErrorString(rc),
               collGetLastError(comm));
  return 1;
}

}  // namespace

int runSelfCheck() {
  auto start = std::chrono::steady_clock::now();
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collSuccess) return fail(-1, "collCommInitFromEnv", rc, nullptr);
  int rank = -1, size = 0;
  if ((rc = collCommUserRank(comm, &rank)) != collSuccess) return fail(rank, "collCommUserRank", rc, comm);
  if ((rc = collCommCount(comm, &size)) != collSuccess) return fail(rank, "collCommCount", rc, comm);

  // All-gather through the bootstrap and compare with the table the root handed out.
  std::vector<Slot> slots(size);
  slots[rank].rank = rank;
  slots[rank].pid = getpid();
  gethostname(slots[rank].host, sizeof(slots[rank].host) - 1);
  coll::Status s = comm->bootstrap->allGather(slots.data(), sizeof(Slot));
  if (!s.isOk()) {
    std::fprintf(stderr, "coll-info --check: rank %d: bootstrap all-gather failed: %s\n", rank, s.message().c_str());
    collCommAbort(comm);
    return 1;
  }
  int bad = 0;
  for (int r = 0; r < size; ++r) {
    const auto& info = comm->bootstrap->peers()[r];
    if (slots[r].rank != r || slots[r].pid != info.pid) ++bad;
  }

  // Split into even and odd ranks, keyed in reverse order, and check the new ranks.
  collComm_t half = nullptr;
  if ((rc = collCommSplit(comm, rank % 2, -rank, &half, nullptr)) != collSuccess)
    return fail(rank, "collCommSplit", rc, comm);
  int hrank = -1, hsize = 0;
  collCommUserRank(half, &hrank);
  collCommCount(half, &hsize);
  int expectSize = (size + 1 - rank % 2) / 2;
  int expectRank = (size - 1 - rank) / 2;  // members of my parity above me, in reverse order
  if (hsize != expectSize || hrank != expectRank) ++bad;

  if ((rc = collCommFinalize(half)) != collSuccess) return fail(rank, "collCommFinalize (split)", rc, half);
  collCommDestroy(half);
  if ((rc = collCommFinalize(comm)) != collSuccess) return fail(rank, "collCommFinalize", rc, comm);

  if (rank == 0) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-6s %-20s %-8s %s\n", "rank", "host", "pid", "bootstrap inbox");
    for (int r = 0; r < size; ++r) {
      auto addr = comm->bootstrap->peers()[r].listen.unpack();
      std::printf("%-6d %-20s %-8d %s\n", r, slots[r].host, slots[r].pid, addr.isOk() ? addr->toString().c_str() : "?");
    }
    std::printf("bootstrap self-check %s: %d rank(s) on %d host(s); init, all-gather, split and finalize in %lld ms\n",
                bad ? "FAILED" : "passed", size, comm->nHosts, static_cast<long long>(ms));
  }
  if (bad) std::fprintf(stderr, "coll-info --check: rank %d: %d inconsistency(ies)\n", rank, bad);
  collCommDestroy(comm);
  return bad ? 1 : 0;
}

}  // namespace collinfo
