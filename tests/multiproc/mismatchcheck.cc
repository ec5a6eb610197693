#include "multiproc/mismatchcheck.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "multiproc/checks.h"

namespace colltest {

namespace {

using Clock = std::chrono::steady_clock;

enum Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };

struct Call {
  int kind = kAllReduce;
  collDataType_t type = collFloat32;
  collRedOp_t op = collSum;
  int root = 0;
  size_t count = 1000;
};

collResult_t run(const Call& c, const void* in, void* out, collComm_t comm) {
  return callCollective(c.kind, in, out, c.count, c.type, c.op, c.root, comm, nullptr);
}

// Whether a failed call's sentence is the check's: "" if so, else what is wrong with it.
std::string judge(collResult_t rc, const std::string& why, int odd, const char* which) {
  if (rc != collInvalidUsage && rc != collRemoteError)
    return fmt::format("the {} call returned {} ({})", which, collGetErrorString(rc), why);
  if (why.find("COLL_CHECK_CALLS") == std::string::npos)
    return fmt::format("the {} call's sentence is not the check's: {}", which, why);
  if (why.find(fmt::format("rank {} ", odd)) == std::string::npos)
    return fmt::format("the {} call's sentence does not name rank {}: {}", which, odd, why);
  return "";
}

}  // namespace

const char* mismatchName(Mismatch m) {
  static const char* names[] = {"op", "type", "count", "root", "collective", "skipped call"};
  return names[static_cast<int>(m)];
}

std::vector<Mismatch> mismatchesFor(int collective) {
  std::vector<Mismatch> out = {Mismatch::kType, Mismatch::kCount, Mismatch::kCollective, Mismatch::kSkip};
  if (collective == kAllReduce || collective == kReduceScatter || collective == kReduce) out.push_back(Mismatch::kOp);
  if (collective == kBroadcast || collective == kReduce) out.push_back(Mismatch::kRoot);
  return out;
}

std::string checkMismatch(collComm_t comm, int collective, Mismatch m, int odd) {
  int me = -1, n = 0;
  collCommUserRank(comm, &me);
  collCommCount(comm, &n);
  Call call;
  call.kind = collective;
  Call mine = call;
  bool skip = false;
  if (me == odd) {
    switch (m) {
      case Mismatch::kOp:
        mine.op = collMax;
        break;
      case Mismatch::kType:
        mine.type = collInt32;  // the same bytes
        break;
      case Mismatch::kCount:
        mine.count += 1;
        break;
      case Mismatch::kRoot:
        mine.root = n - 1;  // the others' root is 0
        break;
      case Mismatch::kCollective:
        mine.kind = collective == kAllReduce ? kBroadcast : kAllReduce;
        break;
      case Mismatch::kSkip:
        skip = true;
        break;
    }
  }
  std::vector<float> in(2 * 1001 * static_cast<size_t>(n), 1.0f), out(in.size(), 0.0f);
  // Matching calls that must pass the check, and connections between every pair: the in-band
  // check sees pieces on connections already made (a call that needs a new one waits for the
  // peer to take part in making it first).
  collResult_t rc = collAllReduce(in.data(), out.data(), 1000, collFloat32, collSum, comm, nullptr);
  if (rc != collSuccess) return std::string("the matching all-reduce failed: ") + collGetLastError(comm);
  if (out[999] != static_cast<float>(n)) return fmt::format("the matching all-reduce gave {}", out[999]);
  rc = collAllToAll(in.data(), out.data(), 1000, collFloat32, comm, nullptr);
  if (rc != collSuccess) return std::string("the matching all-to-all failed: ") + collGetLastError(comm);
  auto start = Clock::now();
  rc = skip ? collSuccess : run(mine, in.data(), out.data(), comm);
  std::string e;
  if (rc != collSuccess) {
    e = judge(rc, collGetLastError(comm), odd, "mismatched");
  } else {
    // It received nothing from a rank that differs (or skipped the call): its next call fails.
    int one = 1;
    rc = collAllReduce(&one, &one, 1, collInt32, collSum, comm, nullptr);
    e = rc == collSuccess ? std::string("neither the mismatched call nor the next one failed")
                          : judge(rc, collGetLastError(comm), odd, "next");
  }
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (e.empty() && took > 1) e = fmt::format("the mismatch was seen after {:.2f} s", took);
  return e.empty() ? e : fmt::format("rank {}: {}", me, e);
}

}  // namespace colltest
