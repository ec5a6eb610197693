// Collectives on device buffers with ranks as threads on the one GPU of the device machine: every
// collective, type, op and placement through the CUDA device executor (the interpreter kernel over
// p2p FIFOs in device memory), one stream per rank; the same checks CI runs on the emulated device
// (tests/multiproc/test_device_emulated.cc). Skipped (exit 77 from main) without a usable GPU.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "multiproc/checks.h"
#include "multiproc/collcheck.h"

using colltest::Case;
using colltest::Coll;

namespace {

// A rank's CUDA memory and stream for collcheck's runCase.
struct CudaMemory {
  colltest::Memory mem;
  cudaStream_t stream = nullptr;
  CudaMemory() {
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    mem.stream = reinterpret_cast<collStream_t>(stream);
    mem.alloc = [](size_t bytes) {
      void* p = nullptr;
      return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
    };
    mem.release = [](void* p) { cudaFree(p); };
    mem.copy = [](void* dst, const void* src, size_t bytes) { cudaMemcpy(dst, src, bytes, cudaMemcpyDefault); };
    cudaStream_t s = stream;
    mem.sync = [s]() -> std::string {
      cudaError_t e = cudaStreamSynchronize(s);
      return e == cudaSuccess ? "" : cudaGetErrorString(e);
    };
  }
  ~CudaMemory() { cudaStreamDestroy(stream); }
};

const Coll kAll[] = {Coll::kAllReduce,     Coll::kBroadcast, Coll::kReduce,  Coll::kAllGather,
                     Coll::kReduceScatter, Coll::kAllToAll,  Coll::kSendRecv};

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

std::string matrix(collComm_t comm, const std::vector<size_t>& counts, bool allTypes = true) {
  int n = 0;
  collCommCount(comm, &n);
  cudaSetDevice(0);  // this rank's thread
  CudaMemory cm;
  for (Coll c : kAll)
    for (int t = 0; t < collNumTypes; ++t) {
      if (!allTypes && t != collFloat32) continue;
      for (int op = 0; op < (reduces(c) ? collNumOps : 1); ++op)
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Coll::kSendRecv) continue;
            int root = (count + t) % n;
            std::string e = colltest::runCase(
                comm, Case{c, static_cast<collDataType_t>(t), static_cast<collRedOp_t>(op), count, inPlace, root},
                &cm.mem);
            if (!e.empty()) return e;
          }
    }
  return "";
}

}  // namespace

TEST_CASE("device buffers, ranks as threads on one GPU: every collective, type, op and placement",
          "[gpu][collectives]") {
  for (int n : {1, 2, 4, 8}) {
    INFO("ranks " << n);
    std::vector<collComm_t> comms(n);
    std::vector<int> devs(n, 0);
    REQUIRE(collCommInitAll(comms.data(), n, devs.data()) == collSuccess);
    auto errors = colltest::onRanks(comms, [](collComm_t c) { return matrix(c, {0, 1, 7, 1031, (1u << 20) + 3}); });
    for (const auto& e : errors) CHECK(e == "");
    for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  }
}

// What compute-sanitizer's memcheck and racecheck run (tests/gpu/run_on_device.sh): small and quick.
TEST_CASE("device buffers, 2 ranks on one GPU, float32, a few counts", "[gpu][collectives][small]") {
  std::vector<collComm_t> comms(2);
  std::vector<int> devs(2, 0);
  REQUIRE(collCommInitAll(comms.data(), 2, devs.data()) == collSuccess);
  auto errors = colltest::onRanks(comms, [](collComm_t c) { return matrix(c, {1, 1031}, false); });
  for (const auto& e : errors) CHECK(e == "");
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}
