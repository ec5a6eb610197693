#include "multiproc/streamcheck.h"

#include <dirent.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace colltest {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string said(collResult_t rc, collComm_t comm) {
  return std::string(collGetErrorString(rc)) + ": " + collGetLastError(comm);
}

// Compute for the calling thread while operations are in flight (a result the compiler must keep).
std::atomic<uint64_t> gSink;
void compute(int rounds) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < rounds; ++i) h = (h ^ static_cast<uint64_t>(i)) * 1099511628211ull;
  gSink.store(h, std::memory_order_relaxed);
}

// 64 all-reduces of distinct buffers and sizes in flight at once.
std::string manyInFlight(collComm_t comm, collStream_t s, int rank, int n) {
  const size_t sizes[] = {0, 1, 17, 1031, 16 << 10, (1 << 18) + 3};
  constexpr int kOps = 64;
  std::vector<std::vector<int32_t>> in(kOps), out(kOps);
  for (int k = 0; k < kOps; ++k) {
    size_t count = sizes[k % 6];
    in[k].resize(count);
    out[k].assign(count, -7);  // poisoned
    for (size_t i = 0; i < count; ++i) in[k][i] = static_cast<int32_t>(rank * 3 + k + i % 101);
    collResult_t rc = collAllReduce(in[k].data(), out[k].data(), count, collInt32, collSum, comm, s);
    if (rc != collSuccess) return "queueing all-reduce " + std::to_string(k) + ": " + said(rc, comm);
    compute(2000);
  }
  collResult_t rc = collStreamSynchronize(s);
  if (rc != collSuccess) return "synchronize after 64 all-reduces: " + said(rc, nullptr);
  if ((rc = collStreamQuery(s)) != collSuccess) return "query after synchronize: " + said(rc, nullptr);
  for (int k = 0; k < kOps; ++k)
    for (size_t i = 0; i < out[k].size(); ++i) {
      int64_t want = 3LL * n * (n - 1) / 2 + static_cast<int64_t>(n) * (k + static_cast<int64_t>(i % 101));
      if (out[k][i] != want)
        return "all-reduce " + std::to_string(k) + " element " + std::to_string(i) + ": got " +
               std::to_string(out[k][i]) + ", want " + std::to_string(want);
    }
  return "";
}

// Each operation reads what the one before it wrote, and sum and product do not commute in
// sequence, so only stream order gives the right answer: x = rank + 1, then 12 in-place
// all-reduces alternating sum and product (uint32: wraps, exact). Interleaved, on a second stream
// of the same communicator, max all-reduces of a counter.
std::string chained(collComm_t comm, collStream_t s, collStream_t s2, int rank, int n) {
  constexpr size_t kCount = 4099;
  std::vector<uint32_t> x(kCount, static_cast<uint32_t>(rank + 1));
  std::vector<std::vector<uint32_t>> counters(12, std::vector<uint32_t>(7));
  uint32_t want = 0;
  for (int k = 0; k < 12; ++k) {
    collRedOp_t op = k % 2 == 0 ? collSum : collProd;
    if (collAllReduce(x.data(), x.data(), kCount, collUint32, op, comm, s) != collSuccess) return "queue";
    if (k == 0) {
      want = static_cast<uint32_t>(n * (n + 1) / 2);
    } else if (op == collSum) {
      want *= static_cast<uint32_t>(n);
    } else {
      uint32_t p = 1;
      for (int r = 0; r < n; ++r) p *= want;
      want = p;
    }
    for (size_t i = 0; i < counters[k].size(); ++i) counters[k][i] = static_cast<uint32_t>(rank + k + i);
    if (collAllReduce(counters[k].data(), counters[k].data(), 7, collUint32, collMax, comm, s2) != collSuccess)
      return "queue";
  }
  collResult_t rc = collStreamSynchronize(s);
  if (rc == collSuccess) rc = collStreamSynchronize(s2);
  if (rc != collSuccess) return "synchronize of the chain: " + said(rc, nullptr);
  for (size_t i = 0; i < kCount; ++i)
    if (x[i] != want)
      return "chain element " + std::to_string(i) + ": got " + std::to_string(x[i]) + ", want " + std::to_string(want);
  for (int k = 0; k < 12; ++k)
    for (size_t i = 0; i < 7; ++i)
      if (counters[k][i] != static_cast<uint32_t>(n - 1 + k + i))
        return "second stream's all-reduce " + std::to_string(k);
  // Queued work, then a blocking call on the same communicator without synchronizing: the
  // blocking call runs after it (x: n*want, then n*n*want).
  if (collAllReduce(x.data(), x.data(), kCount, collUint32, collSum, comm, s) != collSuccess) return "queue";
  rc = collAllReduce(x.data(), x.data(), kCount, collUint32, collSum, comm, nullptr);
  if (rc != collSuccess) return "blocking all-reduce after queued work: " + said(rc, comm);
  if ((rc = collStreamSynchronize(s)) != collSuccess) return "synchronize: " + said(rc, nullptr);
  uint32_t want2 = want * static_cast<uint32_t>(n) * static_cast<uint32_t>(n);
  for (size_t i = 0; i < kCount; ++i)
    if (x[i] != want2) return "blocking after queued: got " + std::to_string(x[i]) + ", want " + std::to_string(want2);
  return "";
}

// A ring shift of send/recv in a group on a stream, twice, the second reading the first's output.
std::string ringShift(collComm_t comm, collStream_t s, int rank, int n) {
  constexpr size_t kCount = 100003;
  std::vector<int64_t> a(kCount), b(kCount, -1), c(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) a[i] = rank * 1000003LL + static_cast<int64_t>(i);
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (auto [from, to] : {std::pair<int64_t*, int64_t*>{a.data(), b.data()}, {b.data(), c.data()}}) {
    collGroupStart();
    collSend(from, kCount, collInt64, next, comm, s);
    collRecv(to, kCount, collInt64, prev, comm, s);
    collResult_t rc = collGroupEnd();
    if (rc != collSuccess) return "queueing a send/recv group: " + said(rc, comm);
  }
  collResult_t rc = collStreamSynchronize(s);
  if (rc != collSuccess) return "synchronize of the ring shift: " + said(rc, nullptr);
  int src = ((rank - 2) % n + n) % n;
  for (size_t i = 0; i < kCount; ++i)
    if (c[i] != src * 1000003LL + static_cast<int64_t>(i)) return "ring shift element " + std::to_string(i);
  return "";
}

// PreMulSum and bitwise ops on a stream; the PreMulSum op is destroyed as soon as the call that
// uses it returns (the queued call keeps its own copy, as NCCL allows).
std::string opsOnStream(collComm_t comm, collStream_t s, int rank, int n) {
  constexpr size_t kCount = 1031;
  std::vector<int32_t> in(kCount), out(kCount, -7), bits(kCount), ored(kCount, -7);
  for (size_t i = 0; i < kCount; ++i) {
    in[i] = rank + static_cast<int32_t>(i % 7);
    bits[i] = static_cast<int32_t>((1u << (rank % 31)) | (i << 8));
  }
  int32_t scalar = 3;
  collRedOp_t op;
  collResult_t rc = collRedOpCreatePreMulSum(&op, &scalar, collInt32, collScalarHostImmediate, comm);
  if (rc != collSuccess) return "collRedOpCreatePreMulSum: " + said(rc, comm);
  if ((rc = collAllReduce(in.data(), out.data(), kCount, collInt32, op, comm, s)) != collSuccess)
    return "queueing a PreMulSum all-reduce: " + said(rc, comm);
  if ((rc = collRedOpDestroy(op, comm)) != collSuccess) return "collRedOpDestroy: " + said(rc, comm);
  if ((rc = collAllReduce(bits.data(), ored.data(), kCount, collInt32, collBor, comm, s)) != collSuccess)
    return "queueing a collBor all-reduce: " + said(rc, comm);
  if ((rc = collStreamSynchronize(s)) != collSuccess) return "synchronize of the ops: " + said(rc, nullptr);
  for (size_t i = 0; i < kCount; ++i) {
    int32_t want = 3 * (n * (n - 1) / 2 + n * static_cast<int32_t>(i % 7));
    uint32_t wantBits = static_cast<uint32_t>(i << 8);
    for (int r = 0; r < n; ++r) wantBits |= 1u << (r % 31);
    if (out[i] != want) return "PreMulSum on a stream, element " + std::to_string(i);
    if (static_cast<uint32_t>(ored[i]) != wantBits) return "collBor on a stream, element " + std::to_string(i);
  }
  return "";
}

// Bad arguments are refused at the call; nothing is queued.
std::string refused(collComm_t comm, collStream_t s) {
  int32_t v = 1;
  collResult_t rc = collAllReduce(&v, &v, 1, static_cast<collDataType_t>(99), collSum, comm, s);
  if (rc != collInvalidArgument) return "a bad datatype on a stream was not refused at the call";
  rc = collAllReduce(nullptr, &v, 1, collInt32, collSum, comm, s);
  if (rc != collInvalidArgument) return "a NULL sendbuff on a stream was not refused at the call";
  if (std::string(collGetLastError(comm)).find("sendbuff is NULL") == std::string::npos)
    return std::string("no sentence for a NULL sendbuff: ") + collGetLastError(comm);
  collStream_t bogus = reinterpret_cast<collStream_t>(&v);
  rc = collAllReduce(&v, &v, 1, collInt32, collSum, comm, bogus);
  if (rc != collInvalidArgument) return "an unknown stream was not refused";
  if (collStreamSynchronize(bogus) != collInvalidArgument) return "synchronizing an unknown stream was not refused";
  if ((rc = collStreamSynchronize(s)) != collSuccess) return "synchronize after refusals: " + said(rc, nullptr);
  return "";
}

int threadCount() {
  int count = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) count += e->d_name[0] != '.';
    closedir(d);
  }
  return count;
}

}  // namespace

std::string streamChecks(collComm_t comm) {
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  collStream_t s = nullptr, s2 = nullptr;
  if (collHostStreamCreate(&s) != collSuccess || collHostStreamCreate(&s2) != collSuccess) return "stream create";
  std::string e = manyInFlight(comm, s, rank, n);
  if (e.empty()) e = chained(comm, s, s2, rank, n);
  if (e.empty()) e = ringShift(comm, s, rank, n);
  if (e.empty()) e = opsOnStream(comm, s, rank, n);
  if (e.empty()) e = refused(comm, s);
  collResult_t rc1 = collHostStreamDestroy(s), rc2 = collHostStreamDestroy(s2);
  if (e.empty() && (rc1 != collSuccess || rc2 != collSuccess)) e = "stream destroy";
  return e.empty() ? "" : "rank " + std::to_string(rank) + ": " + e;
}

std::string streamPeerGone(collComm_t comm, int timeoutMs, bool countThreads) {
  int rank = 0;
  collCommUserRank(comm, &rank);
  std::string who = "rank " + std::to_string(rank) + ": ";
  collStream_t s = nullptr;
  if (collHostStreamCreate(&s) != collSuccess) return who + "stream create";
  std::vector<std::vector<float>> bufs(8, std::vector<float>(1 << 16, 1.0f));
  // Connections first, so that rank 0's wait is on the data path (COLL_TIMEOUT_MS).
  collResult_t warm =
      collAllReduce(bufs[0].data(), bufs[0].data(), bufs[0].size(), collFloat32, collSum, comm, nullptr);
  if (warm != collSuccess) return who + "warm-up all-reduce: " + said(warm, comm);
  if (rank != 0) {
    int threadsBefore = threadCount();
    for (auto& b : bufs) collAllReduce(b.data(), b.data(), b.size(), collFloat32, collSum, comm, s);
    auto t0 = Clock::now();
    collResult_t rc = collCommDestroy(comm);
    double took = since(t0);
    if (rc != collSuccess) return who + "destroy with queued work failed: " + said(rc, nullptr);
    if (took > 5.0) return who + "destroy with queued work took " + std::to_string(took) + " s";
    rc = collStreamSynchronize(s);
    std::string text = collGetLastError(nullptr);
    if (rc == collSuccess || text.find("collCommDestroy was called") == std::string::npos)
      return who + "the cancelled work's stream said: " + said(rc, nullptr);
    if (collHostStreamDestroy(s) != collSuccess) return who + "stream destroy";
    // The communicator's worker thread is gone with it.
    if (countThreads && threadCount() > threadsBefore) return who + "threads left behind after destroy";
    return "";
  }
  auto t0 = Clock::now();
  for (auto& b : bufs) collAllReduce(b.data(), b.data(), b.size(), collFloat32, collSum, comm, s);
  collResult_t rc = collStreamSynchronize(s);
  double took = since(t0);
  std::string text = collGetLastError(nullptr);
  collHostStreamDestroy(s);
  if (rc == collSuccess) return who + "all-reduces completed although the peers destroyed their communicators";
  if (rc != collTimeout && rc != collRemoteError) return who + "unexpected result: " + said(rc, nullptr);
  if (text.find("rank ") == std::string::npos || text.find("collAllReduce") == std::string::npos)
    return who + "the error does not name the call and a peer: " + text;
  if (took > timeoutMs / 1000.0 + 10.0) return who + "the error took " + std::to_string(took) + " s";
  return "";
}

}  // namespace colltest
