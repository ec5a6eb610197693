// Collectives on device buffers with ranks as threads on the one GPU of the device machine: every
// collective, type, op and placement through the CUDA device executor (the interpreter kernel over
// p2p FIFOs in device memory), one stream per rank; the same checks CI runs on the emulated device
// (tests/multiproc/test_device_emulated.cc). Skipped (exit 77 from main) without a usable GPU.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "multiproc/checks.h"
#include "multiproc/collcheck.h"
#include "multiproc/mismatchcheck.h"

using colltest::Case;
using colltest::Coll;

namespace {

// A rank's CUDA memory and stream for collcheck's runCase: one device arena and one pinned staging
// buffer, allocated before any rank launches (made on the main thread for every rank), and copies
// on the rank's own non-blocking stream through the pinned buffer. So nothing a case does between
// its collectives can wait for a peer's spinning kernel: no cudaMalloc or cudaFree, no copy on the
// legacy stream (NCCL's rule for ranks sharing a GPU).
struct CudaMemory {
  static constexpr size_t kArena = size_t(160) << 20;  // the largest case: 8 ranks x (1M+3) x 8 B, in and out
  colltest::Memory mem;
  cudaStream_t stream = nullptr;
  char* arena = nullptr;
  char* pinned = nullptr;
  bool memAlloc = false;
  /// fromMemAlloc: the arena from collMemAlloc (cuMem, shareable), for tests that make it a window.
  explicit CudaMemory(bool fromMemAlloc = false) : memAlloc(fromMemAlloc) {
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    if (fromMemAlloc) {
      void* p = nullptr;
      REQUIRE(collMemAlloc(&p, kArena) == collSuccess);
      arena = static_cast<char*>(p);
    } else {
      REQUIRE(cudaMalloc(&arena, kArena) == cudaSuccess);
    }
    REQUIRE(cudaHostAlloc(&pinned, kArena, cudaHostAllocDefault) == cudaSuccess);
    cudaStream_t s = stream;
    char *a = arena, *h = pinned;
    auto onDevice = [a](const void* p) {
      auto c = static_cast<const char*>(p);
      return c >= a && c < a + kArena;
    };
    // Host to device: into the pinned buffer, then on the stream; device to host the other way.
    auto copy = [s, h, onDevice](void* dst, const void* src, size_t bytes) {
      if (onDevice(dst)) {
        std::memcpy(h, src, bytes);
        cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, s);
        cudaStreamSynchronize(s);
      } else {
        cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
        std::memcpy(dst, h, bytes);
      }
    };
    mem = colltest::arenaMemory(arena, kArena, copy, reinterpret_cast<collStream_t>(stream), [s]() -> std::string {
      cudaError_t e = cudaStreamSynchronize(s);
      return e == cudaSuccess ? "" : cudaGetErrorString(e);
    });
  }
  ~CudaMemory() {
    cudaFreeHost(pinned);
    if (memAlloc)
      collMemFree(arena);
    else
      cudaFree(arena);
    cudaStreamDestroy(stream);
  }
};

const Coll kAll[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                     Coll::kAllToAll,  Coll::kSendRecv,  Coll::kGather, Coll::kScatter};

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

// GPU_TEST_TRACE=1 (the device script sets it): rank 0 names each case on stderr, unbuffered,
// before it runs, so that a run killed in a hang says which case it was (every rank runs the same
// cases in the same order).
void trace(collComm_t comm, int n, const Case& c) {
  static const bool on = std::getenv("GPU_TEST_TRACE") && std::getenv("GPU_TEST_TRACE")[0] == '1';
  int r = 0;
  collCommUserRank(comm, &r);
  if (!on || r != 0) return;
  std::fprintf(stderr, "case: %d ranks %s type %d op %d count %zu %s root %d\n", n, colltest::collName(c.coll),
               static_cast<int>(c.type), static_cast<int>(c.op), c.count, c.inPlace ? "in-place" : "out-of-place",
               c.root);
}

// Every collective over types x ops (reducing ones) x counts, in and out of place.
std::string matrix(collComm_t comm, CudaMemory& cm, const std::vector<size_t>& counts, const std::vector<int>& types,
                   const std::vector<int>& ops) {
  int n = 0;
  collCommCount(comm, &n);
  cudaSetDevice(0);  // this rank's thread
  for (Coll c : kAll)
    for (int t : types)
      for (int op : ops) {
        if (!reduces(c) && op != ops.front()) continue;
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Coll::kSendRecv) continue;
            int root = (count + t) % n;
            Case k{c, static_cast<collDataType_t>(t), static_cast<collRedOp_t>(op), count, inPlace, root};
            trace(comm, n, k);
            std::string e = colltest::runCase(comm, k, &cm.mem);
            if (!e.empty()) return e;
          }
      }
  return "";
}

std::vector<int> upTo(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// Runs matrix on n ranks as threads on GPU 0, each with memory made before any rank launches.
// onWindow: each rank's arena is from collMemAlloc and registered as a symmetric window (the cases
// take the same pieces of it on every rank), so the calls whose buffers allow it run on the window
// kernels (core/device_window_path.h); some must have.
void onGpu(int n, const std::vector<size_t>& counts, const std::vector<int>& types, const std::vector<int>& ops,
           bool onWindow = false) {
  INFO("ranks " << n << (onWindow ? ", buffers in symmetric windows" : ""));
  std::vector<collComm_t> comms(n);
  std::vector<int> devs(n, 0);
  REQUIRE(collCommInitAll(comms.data(), n, devs.data()) == collSuccess);
  std::vector<std::unique_ptr<CudaMemory>> mems;
  for (int r = 0; r < n; ++r) mems.push_back(std::make_unique<CudaMemory>(onWindow));
  auto errors = colltest::onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    if (!onWindow) return matrix(c, *mems[r], counts, types, ops);
    cudaSetDevice(0);
    collWindow_t win = nullptr;
    if (collCommWindowRegister(c, mems[r]->arena, CudaMemory::kArena, &win, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
      return std::string("collCommWindowRegister: ") + collGetLastError(c);
    std::string e = matrix(c, *mems[r], counts, types, ops);
    unsigned long long calls = 0;
    collCommMemStats(c, collStatWindowCollectives, &calls);
    if (e.empty() && n > 1 && calls == 0) e = "no call ran on the window";
    if (collCommWindowDeregister(c, win) != collSuccess && e.empty())
      e = std::string("collCommWindowDeregister: ") + collGetLastError(c);
    return e;
  });
  for (const auto& e : errors) CHECK(e == "");
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

}  // namespace

// The device script's first check (tests/gpu/run_on_device.sh): the types and ops training uses
// most, counts that leave a head, a tail and several pieces, at 2 and 8 ranks.
TEST_CASE("device buffers on one GPU, reduced matrix: float32, bfloat16, int32 x sum, max, avg",
          "[gpu][collectives][reduced]") {
  for (int n : {2, 8})
    onGpu(n, {1, 1031, 65539, (1u << 20) + 3}, {collFloat32, collBfloat16, collInt32}, {collSum, collMax, collAvg});
}

TEST_CASE("device buffers, ranks as threads on one GPU: every collective, type, op and placement",
          "[gpu][collectives]") {
  for (int n : {1, 2, 4, 8}) onGpu(n, {0, 1, 7, 1031, (1u << 20) + 3}, upTo(collNumTypes), upTo(collNumOps));
}

// Collectives on symmetric windows of device memory (the window kernels, ranks as threads: each
// reads and writes the others' cuMem buffers by pointer), the reduced matrix's types and ops.
TEST_CASE("device buffers in symmetric windows on one GPU: every collective, float32, bfloat16, int32",
          "[gpu][collectives][windows]") {
  for (int n : {2, 8})
    onGpu(n, {1, 1031, 65539, (1u << 20) + 3}, {collFloat32, collBfloat16, collInt32}, {collSum, collMax, collAvg},
          true);
}

// What compute-sanitizer's memcheck and racecheck run (tests/gpu/run_on_device.sh): small and quick.
TEST_CASE("device buffers, 2 ranks on one GPU, float32, a few counts", "[gpu][collectives][small]") {
  onGpu(2, {1, 1031}, {collFloat32}, {collSum});
}

// The in-band call check in the real kernel (exec/cuda/interpreter.h): a sample of the matrix the
// emulated device runs whole (tests/multiproc/test_device_emulated.cc [mismatch]), over LL and
// Simple: every rank names the mismatch within a second and the communicators abort cleanly.
TEST_CASE("in-band call check on one GPU: op, type, count and skipped calls over LL and Simple", "[gpu][mismatch]") {
  struct Case {
    int n, collective;
    colltest::Mismatch m;
    int odd;
    const char* llMax;
  };
  for (Case c : {Case{2, 0, colltest::Mismatch::kOp, 1, "65536"}, Case{3, 0, colltest::Mismatch::kOp, 2, "0"},
                 Case{2, 2, colltest::Mismatch::kType, 0, "65536"}, Case{3, 3, colltest::Mismatch::kCount, 1, "0"},
                 Case{3, 5, colltest::Mismatch::kSkip, 0, "65536"}}) {
    INFO("ranks " << c.n << ", collective " << c.collective << ", mismatch " << colltest::mismatchName(c.m)
                  << " on rank " << c.odd << ", COLL_DEVICE_LL_MAX=" << c.llMax);
    setenv("COLL_DEVICE_LL_MAX", c.llMax, 1);
    std::vector<collComm_t> comms(c.n);
    std::vector<int> devs(c.n, 0);
    REQUIRE(collCommInitAll(comms.data(), c.n, devs.data()) == collSuccess);
    std::vector<std::unique_ptr<CudaMemory>> mems;
    for (int r = 0; r < c.n; ++r) mems.push_back(std::make_unique<CudaMemory>());
    auto errors = colltest::onRanks(comms, [&](collComm_t comm) -> std::string {
      int r = 0;
      collCommUserRank(comm, &r);
      cudaSetDevice(0);
      return colltest::checkMismatch(comm, c.collective, c.m, c.odd, &mems[r]->mem);
    });
    for (const auto& e : errors) CHECK(e == "");
    for (auto comm : comms) CHECK(collCommAbort(comm) == collSuccess);
    unsetenv("COLL_DEVICE_LL_MAX");
  }
}

// One-sided puts on device windows on a GPU (core/device_onesided.h): ranks as threads, each puts
// its piece into the next rank's cuMem window and waits on its stream for the previous rank's
// signal; what arrived is copied back and checked, over several rounds.
TEST_CASE("one-sided puts on device windows on one GPU: a ring", "[gpu][windows][onesided]") {
  for (int n : {2, 4}) {
    INFO("ranks " << n);
    const size_t count = (1u << 20) + 3;
    std::vector<collComm_t> comms(n);
    std::vector<int> devs(n, 0);
    REQUIRE(collCommInitAll(comms.data(), n, devs.data()) == collSuccess);
    // Memory and streams made before any rank launches (no cudaMalloc while a peer's kernel spins).
    std::vector<void*> win(n, nullptr), src(n, nullptr);
    std::vector<cudaStream_t> streams(n, nullptr);
    std::vector<std::vector<int32_t>> host(n, std::vector<int32_t>(count));
    for (int r = 0; r < n; ++r) {
      REQUIRE(collMemAlloc(&win[r], count * sizeof(int32_t)) == collSuccess);
      REQUIRE(cudaMalloc(&src[r], count * sizeof(int32_t)) == cudaSuccess);
      REQUIRE(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) == cudaSuccess);
    }
    auto errors = colltest::onRanks(comms, [&](collComm_t c) -> std::string {
      int r = 0;
      collCommUserRank(c, &r);
      cudaSetDevice(0);
      collWindow_t w = nullptr;
      if (collCommWindowRegister(c, win[r], count * sizeof(int32_t), &w, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
        return std::string("collCommWindowRegister: ") + collGetLastError(c);
      auto s = reinterpret_cast<collStream_t>(streams[r]);
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      std::string e;
      for (int k = 0; k < 3 && e.empty(); ++k) {
        std::vector<int32_t>& h = host[r];
        for (size_t i = 0; i < count; ++i) h[i] = static_cast<int32_t>(r * 1000003 + k * 7919 + i);
        cudaMemcpyAsync(src[r], h.data(), count * sizeof(int32_t), cudaMemcpyHostToDevice, streams[r]);
        collWaitSignalDesc_t d{1, prev, 0, 0};
        if (collPutSignal(src[r], count, collInt32, next, w, 0, 0, 0, 0, c, s) != collSuccess ||
            collWaitSignal(1, &d, c, s) != collSuccess)
          return std::string("put or wait: ") + collGetLastError(c);
        cudaMemcpyAsync(h.data(), win[r], count * sizeof(int32_t), cudaMemcpyDeviceToHost, streams[r]);
        if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return "cudaStreamSynchronize failed";
        collResult_t async = collSuccess;
        collCommGetAsyncError(c, &async);
        if (async != collSuccess) return std::string("async: ") + collGetLastError(c);
        for (size_t i = 0; i < count && e.empty(); ++i)
          if (h[i] != static_cast<int32_t>(prev * 1000003 + k * 7919 + i))
            e = "round " + std::to_string(k) + ": element " + std::to_string(i) + " is " + std::to_string(h[i]);
        // Nobody puts the next round into a window before its owner has read it.
        int one = 1;
        if (e.empty() && collAllReduce(&one, &one, 1, collInt32, collSum, c, nullptr) != collSuccess)
          e = collGetLastError(c);
      }
      if (collCommWindowDeregister(c, w) != collSuccess && e.empty()) e = collGetLastError(c);
      return e;
    });
    for (const auto& e : errors) CHECK(e == "");
    for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
    for (int r = 0; r < n; ++r) {
      collMemFree(win[r]);
      cudaFree(src[r]);
      cudaStreamDestroy(streams[r]);
    }
  }
}
