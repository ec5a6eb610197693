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

collResult_t run(const Call& c, const void* in, void* out, collComm_t comm, collStream_t stream) {
  return callCollective(c.kind, in, out, c.count, c.type, c.op, c.root, comm, stream);
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

const char* mismatchCollectiveName(int collective) {
  static const char* names[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce", "all-to-all"};
  return names[collective];
}

std::vector<Mismatch> mismatchesFor(int collective) {
  std::vector<Mismatch> out = {Mismatch::kType, Mismatch::kCount, Mismatch::kCollective, Mismatch::kSkip};
  if (collective == kAllReduce || collective == kReduceScatter || collective == kReduce) out.push_back(Mismatch::kOp);
  if (collective == kBroadcast || collective == kReduce) out.push_back(Mismatch::kRoot);
  return out;
}

std::string checkMismatch(collComm_t comm, int collective, Mismatch m, int odd, const Memory* mem) {
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
  std::vector<float> hostIn(2 * 1001 * static_cast<size_t>(n), 1.0f), hostOut(hostIn.size(), 0.0f);
  const size_t bytes = hostIn.size() * sizeof(float);
  float* in = hostIn.data();
  float* out = hostOut.data();
  int hostOne = 1;
  int* one = &hostOne;
  collStream_t stream = nullptr;
  struct Release {  // the device buffers, on every return
    const Memory* mem;
    std::vector<void*> held;
    ~Release() {
      if (mem)
        for (void* p : held)
          if (p) mem->release(p);
    }
  } release{mem, {}};
  if (mem) {
    in = static_cast<float*>(mem->alloc(bytes));
    out = static_cast<float*>(mem->alloc(bytes));
    one = static_cast<int*>(mem->alloc(sizeof(int)));
    release.held = {in, out, one};
    if (!in || !out || !one) return "no device memory for the buffers";
    mem->copy(in, hostIn.data(), bytes);
    mem->copy(one, &hostOne, sizeof(int));
    stream = mem->stream;
  }
  // A call's outcome: what it returned or, for a device call (it returns once enqueued), the
  // communicator's asynchronous error once the stream has passed it.
  auto settle = [&](collResult_t rc) {
    if (rc != collSuccess || !mem) return rc;
    std::string failed = mem->sync();
    collResult_t async = collSuccess;
    collCommGetAsyncError(comm, &async);
    return async == collSuccess && !failed.empty() ? collInternalError : async;
  };
  // Matching calls that must pass the check, and connections between every pair: the in-band
  // check sees pieces on connections already made (a call that needs a new one waits for the
  // peer to take part in making it first).
  collResult_t rc = settle(collAllReduce(in, out, 1000, collFloat32, collSum, comm, stream));
  if (rc != collSuccess) return std::string("the matching all-reduce failed: ") + collGetLastError(comm);
  if (mem) mem->copy(hostOut.data(), out, bytes);
  if (hostOut[999] != static_cast<float>(n)) return fmt::format("the matching all-reduce gave {}", hostOut[999]);
  rc = settle(collAllToAll(in, out, 1000, collFloat32, comm, stream));
  if (rc != collSuccess) return std::string("the matching all-to-all failed: ") + collGetLastError(comm);
  auto start = Clock::now();
  rc = skip ? collSuccess : settle(run(mine, in, out, comm, stream));
  std::string e;
  if (rc != collSuccess) {
    e = judge(rc, collGetLastError(comm), odd, "mismatched");
  } else {
    // It received nothing from a rank that differs (or skipped the call): its next call fails.
    rc = settle(collAllReduce(one, one, 1, collInt32, collSum, comm, stream));
    e = rc == collSuccess ? std::string("neither the mismatched call nor the next one failed")
                          : judge(rc, collGetLastError(comm), odd, "next");
  }
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (e.empty() && took > 1) e = fmt::format("the mismatch was seen after {:.2f} s", took);
  return e.empty() ? e : fmt::format("rank {}: {}", me, e);
}

}  // namespace colltest
