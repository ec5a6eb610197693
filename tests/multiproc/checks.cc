#include "multiproc/checks.h"

#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/process.h"
#include "core/comm.h"

namespace colltest {

collResult_t settle(collComm_t comm, int timeoutMs) {
  collResult_t state = collInProgress;
  for (int waited = 0; waited <= timeoutMs && state == collInProgress; waited += 5) {
    if (collCommGetAsyncError(comm, &state) != collSuccess) return collInternalError;
    if (state == collInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return state;
}

std::vector<std::string> onRanks(std::vector<collComm_t>& comms, const std::function<std::string(collComm_t)>& f) {
  std::vector<std::string> out(comms.size());
  std::vector<std::thread> ts;
  // The ranks' threads hand work to the emulated device's threads and back many times per case:
  // they ask for short slices as those do (base/process.h), so that a loaded machine (a laptop,
  // a shared runner) slows the suites by a factor, not by the busy processes' slices.
  for (size_t r = 0; r < comms.size(); ++r)
    ts.emplace_back([&, r] {
      coll::requestShortSlices();
      out[r] = f(comms[r]);
    });
  for (auto& t : ts) t.join();
  return out;
}
namespace {

struct Slot {
  int32_t rank;
  int32_t pid;
  uint64_t pattern;
};

uint64_t pattern(int rank) { return 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1); }

std::string describe(collComm_t comm, collResult_t rc) {
  return fmt::format("{} ({})", collGetErrorString(rc), collGetLastError(comm));
}

// Gathers each rank's parent rank over `child` and checks that new rank i is expected[i].
std::string checkMembers(collComm_t child, int parentRank, const std::vector<int>& expected, const char* what) {
  int rank = -1, size = 0;
  collCommUserRank(child, &rank);
  collCommCount(child, &size);
  if (size != static_cast<int>(expected.size()))
    return fmt::format("{}: size {} where {} was expected", what, size, expected.size());
  if (rank < 0 || rank >= size || expected[rank] != parentRank)
    return fmt::format("{}: parent rank {} got new rank {}", what, parentRank, rank);
  std::vector<int32_t> parents(size, -1);
  parents[rank] = parentRank;
  auto s = child->bootstrap->allGather(parents.data(), sizeof(int32_t));
  if (!s.isOk()) return fmt::format("{}: all-gather failed: {}", what, s.message());
  for (int i = 0; i < size; ++i)
    if (parents[i] != expected[i])
      return fmt::format("{}: slot {} holds parent {} not {}", what, i, parents[i], expected[i]);
  return "";
}

std::string finishChild(collComm_t child, const char* what) {
  collResult_t rc = collCommFinalize(child);
  if (rc != collSuccess) return fmt::format("{}: finalize: {}", what, describe(child, rc));
  rc = collCommDestroy(child);
  if (rc != collSuccess) return fmt::format("{}: destroy: {}", what, describe(child, rc));
  return "";
}

// Splits with color/key from f(rank) and checks membership against the same f.
template <typename ColorKey>
std::string splitCase(collComm_t comm, const char* what, ColorKey f, bool nested = false) {
  int rank = -1, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  auto [color, key] = f(rank);
  collComm_t child = reinterpret_cast<collComm_t>(0x1);  // must be overwritten
  collResult_t rc = collCommSplit(comm, color, key, &child, nullptr);
  if (rc != collSuccess) return fmt::format("{}: split: {}", what, describe(comm, rc));
  if (color == COLL_SPLIT_NOCOLOR) return child == nullptr ? "" : fmt::format("{}: NOCOLOR gave a communicator", what);
  // Expected order: same color, sorted by (key, parent rank).
  std::vector<std::pair<int, int>> members;
  for (int r = 0; r < n; ++r) {
    auto [c, k] = f(r);
    if (c == color) members.push_back({k, r});
  }
  std::sort(members.begin(), members.end());
  std::vector<int> expected;
  for (auto& m : members) expected.push_back(m.second);
  std::string err = checkMembers(child, rank, expected, what);
  if (err.empty() && nested) {
    // Split the child again, by parity of its own rank, reversing the order.
    int crank = -1;
    collCommUserRank(child, &crank);
    collComm_t grandchild = nullptr;
    rc = collCommSplit(child, crank % 2, -crank, &grandchild, nullptr);
    if (rc != collSuccess) return fmt::format("{} nested: split: {}", what, describe(child, rc));
    std::vector<int> gexpected;
    for (int i = static_cast<int>(expected.size()) - 1; i >= 0; --i)
      if (i % 2 == crank % 2) gexpected.push_back(expected[i]);
    err = checkMembers(grandchild, rank, gexpected, "nested split");
    std::string fin = finishChild(grandchild, "nested split");
    if (err.empty()) err = fin;
  }
  std::string fin = finishChild(child, what);
  return err.empty() ? fin : err;
}

}  // namespace

WindowMemory::WindowMemory(size_t bytes, bool fromMemAlloc) : bytes(bytes), memAlloc(fromMemAlloc) {
  if (memAlloc) {
    void* p = nullptr;
    ok = collMemAlloc(&p, bytes) == collSuccess;
    data = static_cast<char*>(p);
  } else {
    heap.resize(bytes);
    data = heap.data();
    ok = true;
  }
}

WindowMemory::~WindowMemory() {
  if (memAlloc && data) collMemFree(data);
}

collResult_t callCollective(int kind, const void* in, void* out, size_t count, collDataType_t type, collRedOp_t op,
                            int root, collComm_t comm, collStream_t stream) {
  switch (kind) {
    case 0:
      return collAllReduce(in, out, count, type, op, comm, stream);
    case 1:
      return collReduceScatter(in, out, count, type, op, comm, stream);
    case 2:
      return collAllGather(in, out, count, type, comm, stream);
    case 3:
      return collBroadcast(in, out, count, type, root, comm, stream);
    case 4:
      return collReduce(in, out, count, type, op, root, comm, stream);
    case 5:
      return collAllToAll(in, out, count, type, comm, stream);
  }
  return collInvalidArgument;
}

std::string barrier(collComm_t comm) {
  int one = 1;
  if (collAllReduce(&one, &one, 1, collInt32, collSum, comm, nullptr) != collSuccess)
    return std::string("barrier: ") + collGetLastError(comm);
  return "";
}

std::string checkAllGather(collComm_t comm) {
  int rank = -1, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::vector<Slot> slots(n, Slot{-1, -1, 0});
  slots[rank] = Slot{rank, static_cast<int32_t>(getpid()), pattern(rank)};
  for (int round = 0; round < 3; ++round) {  // repeated: sequence numbers must keep rounds apart
    auto s = comm->bootstrap->allGather(slots.data(), sizeof(Slot));
    if (!s.isOk()) return "all-gather failed: " + s.message();
    for (int r = 0; r < n; ++r) {
      const auto& info = comm->bootstrap->peers()[r];
      if (slots[r].rank != r || slots[r].pid != info.pid || slots[r].pattern != pattern(r))
        return fmt::format("all-gather round {}: slot {} holds rank {} pid {}", round, r, slots[r].rank, slots[r].pid);
    }
  }
  return "";
}

std::string checkSendRecv(collComm_t comm) {
  int rank = -1, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    uint64_t v = pattern(rank) ^ static_cast<uint64_t>(p);
    auto s = comm->bootstrap->send(p, 42, &v, sizeof(v));
    if (!s.isOk()) return "send failed: " + s.message();
  }
  for (int p = n - 1; p >= 0; --p) {  // the reverse order exercises the out-of-order queue
    if (p == rank) continue;
    uint64_t v = 0;
    auto s = comm->bootstrap->recv(p, 42, &v, sizeof(v));
    if (!s.isOk()) return "recv failed: " + s.message();
    if (v != (pattern(p) ^ static_cast<uint64_t>(rank))) return fmt::format("recv from {}: wrong value", p);
  }
  return "";
}

std::string checkSplits(collComm_t comm) {
  using CK = std::pair<int, int>;
  std::string err;
  if ((err = splitCase(
           comm, "split color=rank%3",
           [](int r) {
             return CK{r % 3, r};
           },
           true))
          .size())
    return err;
  if ((err = splitCase(comm, "split reversed keys", [](int r) { return CK{0, -r}; })).size()) return err;
  if ((err = splitCase(comm, "split equal keys", [](int) { return CK{7, 0}; })).size()) return err;
  if ((err = splitCase(comm, "split odd NOCOLOR", [](int r) { return CK{r % 2 ? COLL_SPLIT_NOCOLOR : 0, r}; })).size())
    return err;
  return "";
}

}  // namespace colltest
