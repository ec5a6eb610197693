// A rank program for the process tests, started by coll-run, mpirun, or the tests themselves.
//
//   coll_test_worker basic [RANKVAR SIZEVAR]  init from env; check rank/size against the launcher's
//                                             own variables; all-gather, send/recv, splits; finalize
//   coll_test_worker init-expect-fail         init from env; print the error; exit 3 if it failed
//   coll_test_worker fail-rank R CODE         init; rank R exits with CODE, the others wait in a
//                                             barrier (which only a launcher's kill ends early)
//   coll_test_worker collectives [big]        every collective x type x op x placement on a few
//                                             counts (big: also 1 MiB + 1 and 64 MiB floats)
//   coll_test_worker redops [big]             PreMulSum and bitwise ops on the reducing collectives,
//                                             then their refusals (big: also 1M + 3 elements)
//   coll_test_worker many N                   N back-to-back 8-byte all-reduces, checked
//   coll_test_worker alltoallv                a group where each rank sends to and receives from
//                                             every rank (itself included), sizes varying per pair
//   coll_test_worker die-in R                 rank R is killed (SIGKILL) inside an all-reduce; the
//                                             others report what they saw
//   coll_test_worker stop-in R S              rank R stops itself (SIGSTOP) inside an all-reduce and
//                                             is killed S seconds later; the others report what they saw
//   coll_test_worker mismatch R               after one good all-reduce, rank R calls an all-gather
//                                             where the others call an all-reduce
//   coll_test_worker device-collectives       every collective x float32/bfloat16/int8 x op x placement on
//                                             emulated device buffers (COLL_DEVICE_EMULATION), one stream
//   coll_test_worker device-die-in R N        the same device path: rank R is killed (SIGKILL) while
//                                             the others' launches (all-reduces of N floats) wait for
//                                             it; they report what they saw
//   coll_test_worker device-graph-die-in R N  the same while the others replay a CUDA graph
//   coll_test_worker device-stop-in R N S     the same, rank R stopped (SIGSTOP) and killed S seconds later
//   coll_test_worker sleep S                  sleep S seconds (launcher tests)
//   coll_test_worker under-flood GO         rings up, waits for GO, times an all-to-all under a flood, split, finalize
//   coll_test_worker idle S                   init from the environment, stay S seconds, destroy
//   coll_test_worker onesided [die R|die-mid-put R|device] one-sided puts (onesidedcheck.h): windows from
//                                             collMemAlloc, then from the heap; or rank R killed
//                                             while rank 0 waits for its signal
//   coll_test_worker windows [heap|mismatch|die R|device|device-mismatch]
//                                             collectives on windows (windowcheck.h): from
//                                             collMemAlloc, from the heap, a mismatched count, or
//                                             rank R killed instead of calling
//   coll_test_worker tagged [die R|bound]     tagged messages (taggedcheck.h): the whole check; or
//                                             rank R killed while rank 0 receives from it; or the
//                                             bound of held messages passed
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "core/comm.h"
#include "device/runtime.h"
#include "multiproc/checks.h"
#include "multiproc/collcheck.h"
#include "multiproc/emulated_memory.h"
#include "multiproc/mismatchcheck.h"
#include "multiproc/onesidedcheck.h"
#include "multiproc/redopcheck.h"
#include "multiproc/streamcheck.h"
#include "multiproc/taggedcheck.h"
#include "multiproc/windowcheck.h"

namespace {

int fail(int rank, const std::string& what) {
  std::printf("worker rank %d FAILED: %s\n", rank, what.c_str());
  return 1;
}

int basic(const char* rankVar, const char* sizeVar) {
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collSuccess) return fail(-1, std::string("init: ") + collGetLastError(nullptr));
  int rank = -1, size = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &size);
  const char* wantRank = std::getenv(rankVar);
  const char* wantSize = std::getenv(sizeVar);
  if (!wantRank || !wantSize || std::atoi(wantRank) != rank || std::atoi(wantSize) != size)
    return fail(rank, std::string("rank/size disagree with ") + rankVar + "/" + sizeVar);
  std::string err = colltest::checkAllGather(comm);
  if (err.empty()) err = colltest::checkSendRecv(comm);
  if (err.empty()) err = colltest::checkSplits(comm);
  if (!err.empty()) return fail(rank, err);
  if ((rc = collCommFinalize(comm)) != collSuccess) return fail(rank, collGetLastError(comm));
  if ((rc = collCommDestroy(comm)) != collSuccess) return fail(rank, collGetLastError(nullptr));
  std::printf("worker rank %d/%d ok (pid %d)\n", rank, size, getpid());
  return 0;
}

int initExpectFail() {
  collComm_t comm = nullptr;
  auto start = std::chrono::steady_clock::now();
  collResult_t rc = collCommInitFromEnv(&comm);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rc == collSuccess) {
    std::printf("init unexpectedly succeeded\n");
    collCommDestroy(comm);
    return 0;
  }
  std::printf("init failed after %.2f s: %s: %s\n", s, collGetErrorString(rc), collGetLastError(nullptr));
  return 3;
}

int failRank(int victim, int code) {
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) return fail(-1, collGetLastError(nullptr));
  int rank = -1;
  collCommUserRank(comm, &rank);
  std::printf("worker rank %d initialized\n", rank);
  std::fflush(stdout);
  if (rank == victim) _exit(code);
  comm->bootstrap->barrier().isOk();  // blocks until the launcher ends us (or the deadline)
  return 0;
}

collComm_t initOrDie() {
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) {
    std::printf("worker FAILED: init: %s\n", collGetLastError(nullptr));
    std::exit(1);
  }
  return comm;
}

int collectives(bool big) {
  using colltest::Case;
  using colltest::Coll;
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  const Coll all[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                      Coll::kAllToAll,  Coll::kSendRecv,  Coll::kGather, Coll::kScatter};
  int cases = 0;
  for (Coll c : all) {
    bool reduces = c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
    for (int t = 0; t < collNumTypes; ++t)
      for (int op = 0; op < (reduces ? collNumOps : 1); ++op)
        for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(13), size_t(1031)})
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Coll::kSendRecv) continue;
            Case k{c,       static_cast<collDataType_t>(t),   static_cast<collRedOp_t>(op), count,
                   inPlace, static_cast<int>((count + t) % n)};
            std::string e = colltest::runCase(comm, k);
            if (!e.empty()) return fail(rank, e);
            ++cases;
          }
    if (big)
      for (size_t count : {(size_t(1) << 20) + 1, size_t(16) << 20}) {
        std::string e = colltest::runCase(comm, Case{c, collFloat32, collSum, count, c != Coll::kSendRecv, n - 1});
        if (!e.empty()) return fail(rank, e);
        ++cases;
      }
  }
  collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: %d collective cases\n", rank, n, cases);
  return 0;
}

int redops(bool big) {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::string e = colltest::runRedOpChecks(comm, {0, 1, 7, 1031}, big ? (size_t(1) << 20) + 3 : 0);
  if (!e.empty()) return fail(rank, e);
  collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: PreMulSum and bitwise ops\n", rank, n);
  return 0;
}

int many(int iterations) {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  for (int i = 0; i < iterations; ++i) {
    int64_t v = rank + i, out = -1;
    if (collAllReduce(&v, &out, 1, collInt64, collSum, comm, nullptr) != collSuccess)
      return fail(rank, collGetLastError(comm));
    int64_t want = static_cast<int64_t>(n) * (n - 1) / 2 + static_cast<int64_t>(n) * i;
    if (out != want) return fail(rank, "wrong sum at iteration " + std::to_string(i));
  }
  collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: %d all-reduces\n", rank, n, iterations);
  return 0;
}

int alltoallv() {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  // Rank a sends 1000*(a+1) + 7*b + 1 int32 values to rank b, each value a*100000 + b*1000 + index%1000.
  auto bytesFor = [](int a, int b) { return static_cast<size_t>(1000 * (a + 1) + 7 * b + 1); };
  std::vector<std::vector<int32_t>> out(n), in(n);
  collGroupStart();
  for (int p = 0; p < n; ++p) {
    out[p].resize(bytesFor(rank, p));
    for (size_t i = 0; i < out[p].size(); ++i) out[p][i] = rank * 100000 + p * 1000 + static_cast<int32_t>(i % 1000);
    in[p].assign(bytesFor(p, rank), -1);
    collSend(out[p].data(), out[p].size(), collInt32, p, comm, nullptr);
    collRecv(in[p].data(), in[p].size(), collInt32, p, comm, nullptr);
  }
  if (collGroupEnd() != collSuccess) return fail(rank, collGetLastError(comm));
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < in[p].size(); ++i)
      if (in[p][i] != p * 100000 + rank * 1000 + static_cast<int32_t>(i % 1000))
        return fail(rank, "wrong data from rank " + std::to_string(p));
  collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: all-to-all send/recv group\n", rank, n);
  return 0;
}

// Host streams (multiproc/streamcheck.h): the checks, then work queued while peers go away.
int streams() {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::string e = colltest::streamChecks(comm);
  if (!e.empty()) return fail(rank, e);
  collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: host streams\n", rank, n);
  return 0;
}

int streamsPeerGone(int timeoutMs) {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::string e = colltest::streamPeerGone(comm, timeoutMs, true);
  if (!e.empty()) return fail(rank, e);
  if (rank == 0) collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: queued work with peers gone\n", rank, n);
  return 0;
}

// After a failed call: how it failed, and how long an abort then takes.
int reportFailure(collComm_t comm, int rank, collResult_t rc, double seconds) {
  std::printf("worker rank %d: all-reduce failed after %.2f s: %s: %s\n", rank, seconds, collGetErrorString(rc),
              collGetLastError(comm));
  auto t0 = std::chrono::steady_clock::now();
  collCommAbort(comm);
  double a = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("worker rank %d: abort returned in %.3f s\n", rank, a);
  std::fflush(stdout);
  // COLL_TEST_LINGER_MS: a survivor stays alive this long after it failed, so that the others
  // cannot learn of the failure from its exit (only from the victim, or from its notice).
  if (const char* linger = std::getenv("COLL_TEST_LINGER_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(linger)));
  return rc == collSuccess ? 1 : 3;
}

// Rank victim sends itself sig (SIGKILL: dies; SIGSTOP: stops, and a child kills it killAfter
// seconds later) inside an all-reduce; the others report what they saw.
int faultIn(int victim, int sig, double killAfter) {
  collComm_t comm = initOrDie();
  int rank = 0;
  collCommUserRank(comm, &rank);
  // Out of place, so that with COLL_SHM_DIRECT_MIN the survivors read from the victim's memory.
  std::vector<float> buf(1 << 20, 1.0f), out(buf.size());
  // One good all-reduce first, so that connections exist and the failure happens mid-collective.
  if (collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr) != collSuccess)
    return fail(rank, collGetLastError(comm));
  if (rank == victim) {
    std::fflush(stdout);
    if (sig == SIGSTOP) {
      // A stopped process cannot end itself: a child kills it later (fork, then only
      // async-signal-safe calls).
      pid_t parent = getpid();
      if (fork() == 0) {
        usleep(static_cast<useconds_t>(killAfter * 1e6));
        ::kill(parent, SIGKILL);
        _exit(0);
      }
    }
    std::thread([sig] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ::kill(getpid(), sig);
    }).detach();
    for (;;) collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr);
  }
  auto start = std::chrono::steady_clock::now();
  collResult_t rc = collSuccess;
  for (int i = 0; i < 1000000 && rc == collSuccess; ++i)
    rc = collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // COLLTEST_FREE_ON_FAILURE: the buffers go back to the allocator (4 MiB each: unmapped) the
  // moment the call fails, and the rank lingers before its abort: a transport still reading them
  // (a piece sent by reference) is a use-after-free for the sanitizers, or a fault.
  if (std::getenv("COLLTEST_FREE_ON_FAILURE")) {
    std::vector<float>().swap(buf);
    std::vector<float>().swap(out);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return reportFailure(comm, rank, rc, took);
}

// Rank victim dies (SIGKILL) inside an all-reduce; the others, once theirs fails, shrink the
// communicator without it (COLL_SHRINK_ABORT) and check an all-reduce on the survivors.
// Init, one all-reduce (rings connected, data listeners open), then "<go>.ready.<rank>" holding the
// pid; once <go> exists (the test has flooded every listener), an all-to-all that opens a
// connection to every peer is timed, then a split with an all-reduce on it, finalize, destroy.
int underFlood(const std::string& go) {
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) return std::printf("init: %s\n", collGetLastError(nullptr)), 1;
  int rank = 0, n = 1;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::vector<int32_t> a(64, 1), b(64 * n, 0);
  if (collAllReduce(a.data(), b.data(), 64, collInt32, collSum, comm, nullptr) != collSuccess)
    return std::printf("all-reduce: %s\n", collGetLastError(nullptr)), 1;
  {
    std::FILE* f = std::fopen((go + ".ready." + std::to_string(rank)).c_str(), "w");
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }
  for (int i = 0; i < 3000 && access(go.c_str(), F_OK) != 0; ++i) usleep(10000);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> send(64 * n, rank), recv(64 * n, -1);
  if (collAllToAll(send.data(), recv.data(), 64, collInt32, comm, nullptr) != collSuccess)
    return std::printf("worker rank %d: all-to-all: %s\n", rank, collGetLastError(nullptr)), 1;
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int p = 0; p < n; ++p)
    if (recv[64 * p] != p) return std::printf("worker rank %d: all-to-all wrong from %d\n", rank, p), 1;
  collComm_t half = nullptr;
  if (collCommSplit(comm, rank % 2, rank, &half, nullptr) != collSuccess)
    return std::printf("worker rank %d: split: %s\n", rank, collGetLastError(nullptr)), 1;
  if (collAllReduce(a.data(), b.data(), 64, collInt32, collSum, half, nullptr) != collSuccess)
    return std::printf("worker rank %d: split all-reduce: %s\n", rank, collGetLastError(nullptr)), 1;
  if (collCommFinalize(half) != collSuccess || collCommFinalize(comm) != collSuccess)
    return std::printf("worker rank %d: finalize: %s\n", rank, collGetLastError(nullptr)), 1;
  collCommDestroy(half);
  collCommDestroy(comm);
  std::printf("worker rank %d: all-to-all under flood took %.3f s; split and finalize ok\n", rank, took);
  return 0;
}

int shrinkAfterKill(int victim) {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::vector<float> buf(1 << 20, 1.0f), out(buf.size());
  if (collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr) != collSuccess)
    return fail(rank, collGetLastError(comm));
  if (rank == victim) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ::kill(getpid(), SIGKILL);
    }).detach();
    for (;;) collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr);
  }
  collResult_t rc = collSuccess;
  for (int i = 0; i < 1000000 && rc == collSuccess; ++i)
    rc = collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr);
  std::printf("worker rank %d: all-reduce failed: %s\n", rank, collGetLastError(comm));
  collComm_t shrunk = nullptr;
  int excluded[] = {victim};
  if (collCommShrink(comm, excluded, 1, &shrunk, nullptr, COLL_SHRINK_ABORT) != collSuccess)
    return fail(rank, std::string("collCommShrink: ") + collGetLastError(comm));
  int m = 0, me = -1;
  collCommCount(shrunk, &m);
  collCommUserRank(shrunk, &me);
  std::vector<float> v(4099, static_cast<float>(rank + 1));
  if (collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, shrunk, nullptr) != collSuccess)
    return fail(rank, collGetLastError(shrunk));
  float want = 0;
  for (int r = 0; r < n; ++r)
    if (r != victim) want += static_cast<float>(r + 1);
  for (float x : v)
    if (x != want) return fail(rank, "the shrunk communicator's all-reduce is wrong");
  std::printf("worker rank %d: shrunk to rank %d of %d, all-reduce correct\n", rank, me, m);
  std::fflush(stdout);
  collCommDestroy(shrunk);
  collCommAbort(comm);
  return 0;
}

collResult_t settle(collComm_t comm) { return colltest::settle(comm, 20000); }

// A non-blocking communicator as processes use it (COLL_COMM_BLOCKING=0 or NCCL_COMM_BLOCKING=0,
// NCCL's variable): init, calls without a stream, a group, a split (inheriting non-blocking) and
// finalize all return collInProgress and complete through collCommGetAsyncError; a revoke ends a
// call in flight and the revoked communicator splits.
int nonBlocking() {
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collInProgress)
    return fail(-1, std::string("init returned ") + collGetErrorString(rc) +
                        ", not collInProgress: " + collGetLastError(nullptr));
  if (settle(comm) != collSuccess) return fail(-1, std::string("init: ") + collGetLastError(comm));
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  const size_t count = 70001;
  std::vector<float> in(count), sum(count, -1), bc(count, -1);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i % 13) * (rank + 1));
  if (rank == 0) bc = in;
  auto expect = [&](collResult_t got, const char* what) {
    return got == collInProgress
               ? std::string()
               : std::string(what) + " returned " + collGetErrorString(got) + ": " + collGetLastError(comm);
  };
  std::string e = expect(collAllReduce(in.data(), sum.data(), count, collFloat32, collSum, comm, nullptr), "allreduce");
  if (e.empty()) e = expect(collBroadcast(bc.data(), bc.data(), count, collFloat32, 0, comm, nullptr), "broadcast");
  float ringIn = static_cast<float>(rank), ringOut = -1;
  if (e.empty()) {
    collGroupStart();
    collSend(&ringIn, 1, collFloat32, (rank + 1) % n, comm, nullptr);
    collRecv(&ringOut, 1, collFloat32, (rank + n - 1) % n, comm, nullptr);
    e = expect(collGroupEnd(), "a group's end");
  }
  if (!e.empty()) return fail(rank, e);
  if (settle(comm) != collSuccess) return fail(rank, std::string("calls: ") + collGetLastError(comm));
  const float ranksSum = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < count; ++i)
    if (sum[i] != static_cast<float>(i % 13) * ranksSum || bc[i] != static_cast<float>(i % 13))
      return fail(rank, "element " + std::to_string(i) + " is wrong");
  if (ringOut != static_cast<float>((rank + n - 1) % n)) return fail(rank, "the ring's receive is wrong");

  collComm_t half = nullptr;  // NULL config: non-blocking, as the parent
  e = expect(collCommSplit(comm, rank % 2, rank, &half, nullptr), "split");
  if (!e.empty()) return fail(rank, e);
  if (settle(comm) != collSuccess || settle(half) != collSuccess)
    return fail(rank, std::string("split: ") + collGetLastError(half));
  int halfN = 0;
  collCommCount(half, &halfN);
  float one = 1, ones = -1;
  e = expect(collAllReduce(&one, &ones, 1, collFloat32, collSum, half, nullptr), "allreduce on the split");
  if (!e.empty() || settle(half) != collSuccess || ones != static_cast<float>(halfN))
    return fail(rank, "the split's all-reduce: " + e + collGetLastError(half));

  e = expect(collCommFinalize(half), "finalize");
  if (!e.empty()) return fail(rank, e);
  if (settle(half) != collSuccess) return fail(rank, std::string("finalize: ") + collGetLastError(half));
  if (collCommDestroy(half) != collSuccess) return fail(rank, std::string("destroy: ") + collGetLastError(nullptr));

  // Revoke: rank 0's all-reduce waits for peers that never join it; every rank revokes (rank 0
  // after a moment, with the call in flight, which then ends), and the revoked communicator
  // splits into one that works.
  if (rank == 0) {
    e = expect(collAllReduce(in.data(), sum.data(), count, collFloat32, collSum, comm, nullptr), "lone allreduce");
    if (!e.empty()) return fail(rank, e);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  if (collCommRevoke(comm, COLL_REVOKE_DEFAULT) != collSuccess)
    return fail(rank, std::string("revoke: ") + collGetLastError(comm));
  if (rank == 0 && settle(comm) == collSuccess) return fail(rank, "the revoked all-reduce did not end in an error");
  collComm_t again = nullptr;
  e = expect(collCommSplit(comm, 0, rank, &again, nullptr), "split after revoke");
  if (!e.empty()) return fail(rank, e);
  if (settle(again) != collSuccess) return fail(rank, std::string("split after revoke: ") + collGetLastError(again));
  float mine = static_cast<float>(rank + 1), total = -1;
  e = expect(collAllReduce(&mine, &total, 1, collFloat32, collSum, again, nullptr), "allreduce after revoke");
  if (!e.empty() || settle(again) != collSuccess || total != ranksSum)
    return fail(rank, "the all-reduce after revoke: " + e + collGetLastError(again));
  e = expect(collCommFinalize(again), "finalize after revoke");
  if (!e.empty() || settle(again) != collSuccess) return fail(rank, "finalize after revoke: " + e);
  if (collCommDestroy(again) != collSuccess || collCommDestroy(comm) != collSuccess)
    return fail(rank, std::string("destroy: ") + collGetLastError(nullptr));
  std::printf("worker rank %d/%d ok: non-blocking calls, group, split, finalize and revoke correct\n", rank, n);
  std::fflush(stdout);
  return 0;
}

int deviceCollectives() {
  using colltest::Case;
  using colltest::Coll;
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  colltest::EmulatedMemory em;
  if (!em.error().empty()) return fail(rank, em.error());
  const Coll all[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                      Coll::kAllToAll,  Coll::kSendRecv,  Coll::kGather, Coll::kScatter};
  int cases = 0;
  for (Coll c : all) {
    bool reduces = c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
    for (collDataType_t t : {collFloat32, collBfloat16, collInt8})
      for (int op = 0; op < (reduces ? collNumOps : 1); ++op)
        for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(70001)})
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Coll::kSendRecv) continue;
            Case k{c, t, static_cast<collRedOp_t>(op), count, inPlace, static_cast<int>((count + t) % n)};
            std::string e = colltest::runCase(comm, k, &em.memory());
            if (!e.empty()) return fail(rank, e);
            ++cases;
          }
  }
  char transports[256] = "";
  collCommGetTransports(comm, transports, sizeof(transports));
  collCommDestroy(comm);
  std::printf("worker rank %d/%d ok: %d device collective cases (%s)\n", rank, n, cases, transports);
  return 0;
}

// Rank victim dies while the others' all-reduces of count floats wait in their launches: each
// survivor's launch ends (the proxy sees the dead process, or a survivor's notice, and raises the
// abort word) and the communicator reports the death through collCommGetAsyncError. With graph,
// every rank first captures one all-reduce into a CUDA graph and replays it, and the survivors
// go on replaying it: the executor enqueued nothing for those replays, so it is the proxy's watch
// while the graph lives that ends them, not COLL_TIMEOUT_MS.
int deviceDeath(int victim, size_t count, bool graph, int sig = SIGKILL, double killAfter = 0) {
  collComm_t comm = initOrDie();
  int rank = 0;
  collCommUserRank(comm, &rank);
  colltest::EmulatedMemory em;
  if (!em.error().empty()) return fail(rank, em.error());
  const colltest::Memory& m = em.memory();
  void* buf = m.alloc(count * sizeof(float));
  auto allReduce = [&] { return collAllReduce(buf, buf, count, collFloat32, collSum, comm, m.stream); };
  // Eagerly first: the connections exist afterwards (a capture cannot make them).
  if (allReduce() != collSuccess || !m.sync().empty()) return fail(rank, collGetLastError(comm));
  coll::device::Runtime* rt = coll::device::runtime();
  auto stream = static_cast<coll::device::Stream>(m.stream);
  coll::device::Graph g = nullptr;
  if (graph) {
    if (!rt->beginCapture(stream).isOk()) return fail(rank, "beginCapture failed");
    collResult_t captured = allReduce();
    if (!rt->endCapture(stream, &g).isOk() || captured != collSuccess)
      return fail(rank, std::string("capture failed: ") + collGetLastError(comm));
    for (int i = 0; i < 3; ++i)
      if (!rt->launchGraph(g, stream).isOk()) return fail(rank, "launchGraph failed");
    if (!m.sync().empty()) return fail(rank, "sync failed");
  }
  if (rank == victim) {
    std::fflush(stdout);
    // A stopped process cannot end itself: a child kills it later (fork, then only
    // async-signal-safe calls).
    pid_t parent = getpid();
    if (sig == SIGSTOP && fork() == 0) {
      usleep(static_cast<useconds_t>(killAfter * 1e6));
      ::kill(parent, SIGKILL);
      _exit(0);
    }
    ::kill(getpid(), sig);
  }
  auto start = std::chrono::steady_clock::now();
  collResult_t async = collSuccess;
  for (int i = 0; i < 1000000 && async == collSuccess; ++i) {
    bool issued = graph ? rt->launchGraph(g, stream).isOk() : allReduce() == collSuccess;
    if (!issued) break;
    std::string e = m.sync();
    if (!e.empty()) return fail(rank, e);
    collCommGetAsyncError(comm, &async);
  }
  collResult_t rc = async != collSuccess ? async : collInternalError;
  int code =
      reportFailure(comm, rank, rc, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (g) rt->destroyGraph(g);
  return code;
}

int mismatch(int odd) {
  collComm_t comm = initOrDie();
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::vector<float> buf(4096, 1.0f), out(4096 * static_cast<size_t>(n));
  if (collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr) != collSuccess)
    return fail(rank, collGetLastError(comm));
  auto start = std::chrono::steady_clock::now();
  collResult_t rc = rank == odd
                        ? collAllGather(buf.data(), out.data(), 1000, collFloat32, comm, nullptr)
                        : collAllReduce(buf.data(), out.data(), buf.size(), collFloat32, collSum, comm, nullptr);
  return reportFailure(comm, rank, rc, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Inits from the environment, runs check (its "" is success), finalizes unless a peer was killed
// (the communicator cannot finalize with it: destroy alone), destroys, and says "ok".
int checkedJob(const std::function<std::string(collComm_t)>& check, bool peerKilled) {
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) return fail(-1, std::string("init: ") + collGetLastError(nullptr));
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  std::string e = check(comm);
  if (!e.empty()) return fail(rank, e);
  if (!peerKilled && collCommFinalize(comm) != collSuccess) return fail(rank, collGetLastError(comm));
  if (collCommDestroy(comm) != collSuccess) return fail(rank, collGetLastError(nullptr));
  std::printf("worker rank %d/%d ok (pid %d)\n", rank, n, getpid());
  return 0;
}

// A mismatched collective under the in-band check (multiproc/mismatchcheck.h); the communicator
// is broken afterwards, so it is destroyed without finalizing.
int inbandMismatch(int collective, int mismatch, int odd) {
  return checkedJob(
      [&](collComm_t comm) {
        return colltest::checkMismatch(comm, collective, static_cast<colltest::Mismatch>(mismatch), odd);
      },
      true);
}

int tagged(const std::string& what, int victim) {
  return checkedJob(
      [&](collComm_t comm) {
        return what == "die"     ? colltest::checkTaggedSenderDies(comm, victim)
               : what == "bound" ? colltest::checkTaggedBound(comm)
                                 : colltest::checkTagged(comm);
      },
      what == "die");
}

int onesided(const std::string& what, int victim) {
  return checkedJob(
      [&](collComm_t comm) {
        if (what == "die" || what == "die-mid-put")
          return colltest::checkOneSidedPeerDies(comm, victim, what == "die-mid-put");
        // The emulated device (COLL_DEVICE_EMULATION set by the test): device windows mapped from
        // the other processes, puts and waits on a stream of the emulated device.
        if (what == "device")
          return colltest::withDeviceStream([&](collStream_t s) { return colltest::checkDeviceOneSided(comm, s); });
        std::string e = colltest::checkOneSided(comm, true);
        return e.empty() ? colltest::checkOneSided(comm, false) : e;
      },
      what == "die" || what == "die-mid-put");
}

// Collectives on windows: memory from collMemAlloc (must take the path, COLL_ALGO=window given by
// the test), "heap" (must not: the processes reach heap windows only through the kernel's
// copies), a mismatched count, or rank R killed instead of calling.
int windows(const std::string& what, int victim) {
  return checkedJob(
      [&](collComm_t comm) {
        if (what == "die") return colltest::checkWindowPeerDies(comm, victim);
        if (what == "mismatch") return colltest::checkWindowMismatch(comm);
        // The emulated device (COLL_DEVICE_EMULATION set by the test): collMemAlloc gives device
        // memory, which the ranks map from each other at registration; calls on the default stream.
        if (what == "device")
          return colltest::checkDeviceWindowCollectives(comm, nullptr, colltest::WindowPath::kTaken);
        if (what == "device-mismatch") return colltest::checkDeviceWindowMismatch(comm, nullptr);
        if (what == "heap") return colltest::checkWindowCollectives(comm, false, colltest::WindowPath::kNotTaken);
        // Several (simulated) hosts: all-reduce alone takes the path, composed with the ring
        // between the hosts; "uneven": hosts with different rank counts, where nothing does.
        if (what == "hosts") return colltest::checkWindowCollectives(comm, true, colltest::WindowPath::kAllReduceOnly);
        if (what == "uneven") return colltest::checkWindowCollectives(comm, true, colltest::WindowPath::kNotTaken);
        return colltest::checkWindowCollectives(comm, true, colltest::WindowPath::kTaken);
      },
      what == "die" || what == "mismatch" || what == "device-mismatch");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "basic") return basic(argc > 3 ? argv[2] : "COLL_RANK", argc > 3 ? argv[3] : "COLL_WORLD_SIZE");
  if (mode == "init-expect-fail") return initExpectFail();
  if (mode == "fail-rank" && argc == 4) return failRank(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "collectives") return collectives(argc > 2 && std::string(argv[2]) == "big");
  if (mode == "redops") return redops(argc > 2 && std::string(argv[2]) == "big");
  if (mode == "many" && argc == 3) return many(std::atoi(argv[2]));
  if (mode == "alltoallv") return alltoallv();
  if (mode == "streams") return streams();
  if (mode == "streams-peer-gone" && argc == 3) return streamsPeerGone(std::atoi(argv[2]));
  if (mode == "die-in" && argc == 3) return faultIn(std::atoi(argv[2]), SIGKILL, 0);
  if (mode == "shrink-after-kill" && argc == 3) return shrinkAfterKill(std::atoi(argv[2]));
  if (mode == "stop-in" && argc == 4) return faultIn(std::atoi(argv[2]), SIGSTOP, std::atof(argv[3]));
  if (mode == "mismatch" && argc == 3) return mismatch(std::atoi(argv[2]));
  if (mode == "inband-mismatch" && argc == 5)
    return inbandMismatch(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
  if (mode == "device-collectives") return deviceCollectives();
  if (mode == "nonblocking") return nonBlocking();
  if ((mode == "device-die-in" || mode == "device-graph-die-in") && argc == 4)
    return deviceDeath(std::atoi(argv[2]), std::strtoull(argv[3], nullptr, 10), mode == "device-graph-die-in");
  if (mode == "under-flood" && argc == 3) return underFlood(argv[2]);
  if (mode == "device-stop-in" && argc == 5)
    return deviceDeath(std::atoi(argv[2]), std::strtoull(argv[3], nullptr, 10), false, SIGSTOP, std::atof(argv[4]));
  if (mode == "idle" && argc == 3) {  // init, stay S seconds (for tests that probe a live job), destroy
    collComm_t comm = nullptr;
    if (collCommInitFromEnv(&comm) != collSuccess)
      return std::fprintf(stderr, "init: %s\n", collGetLastError(nullptr)), 1;
    std::printf("worker idle pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(std::atof(argv[2]) * 1000)));
    collCommDestroy(comm);
    return 0;
  }
  if (mode == "tagged") return tagged(argc > 2 ? argv[2] : "", argc > 3 ? std::atoi(argv[3]) : -1);
  if (mode == "onesided") return onesided(argc > 2 ? argv[2] : "", argc > 3 ? std::atoi(argv[3]) : -1);
  if (mode == "windows") return windows(argc > 2 ? argv[2] : "", argc > 3 ? std::atoi(argv[3]) : -1);
  if (mode == "sleep" && argc == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(std::atof(argv[2]) * 1000)));
    return 0;
  }
  std::fprintf(stderr, "usage: coll_test_worker basic|init-expect-fail|fail-rank R CODE|sleep S\n");
  return 2;
}
