// GPU tests: the device reduce/average/copy/scale kernels against the host kernels (bit for bit),
// the device-memory check, and a collScalarDevice scalar in CUDA memory. The collectives on device
// buffers are in test_gpu_collectives.cc.
//
// Without a usable GPU (no driver, no device) the binary prints the reason and exits 77, which
// ctest reports as skipped (SKIP_RETURN_CODE): a skipped run is never a pass.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/device.h"

namespace {

using coll::kernels::typeSize;
namespace cuda = coll::kernels::cuda;

// Exact by construction: small integers (and their halves), so sums and products of a few of them
// are exact in every type; includes -0/+0 pairs for max/min and negative values for the integers.
void fill(std::vector<unsigned char>& bytes, size_t n, collDataType_t type, int seed) {
  size_t elem = typeSize(type);
  bytes.assign(n * elem, 0);
  for (size_t i = 0; i < n; ++i) {
    int v = static_cast<int>((i * 7 + static_cast<size_t>(seed) * 13) % 11) - 5;  // -5..5
    unsigned char* p = bytes.data() + i * elem;
    switch (type) {
      case collInt8:
      case collUint8: {
        int8_t x = static_cast<int8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case collInt32:
      case collUint32: {
        int32_t x = v;
        std::memcpy(p, &x, 4);
        break;
      }
      case collInt64:
      case collUint64: {
        int64_t x = v;
        std::memcpy(p, &x, 8);
        break;
      }
      case collFloat16: {
        uint16_t x = coll::kernels::floatToHalf(v == 0 && seed % 2 ? -0.0f : v * 0.5f);
        std::memcpy(p, &x, 2);
        break;
      }
      case collBfloat16: {
        uint16_t x = coll::kernels::floatToBfloat16(v == 0 && seed % 2 ? -0.0f : v * 0.5f);
        std::memcpy(p, &x, 2);
        break;
      }
      case collFloat32: {
        float x = v == 0 && seed % 2 ? -0.0f : v * 0.5f;
        std::memcpy(p, &x, 4);
        break;
      }
      case collFloat64: {
        double x = v == 0 && seed % 2 ? -0.0 : v * 0.5;
        std::memcpy(p, &x, 8);
        break;
      }
      case collFloat8e4m3:
        *p = coll::kernels::floatToFloat8e4m3(v == 0 && seed % 2 ? -0.0f : v * 0.5f);
        break;
      case collFloat8e5m2:
        *p = coll::kernels::floatToFloat8e5m2(v == 0 && seed % 2 ? -0.0f : v * 0.5f);
        break;
      default:
        break;
    }
  }
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { REQUIRE(cudaMalloc(&ptr, bytes + 64) == cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  char* at(size_t offset) const { return static_cast<char*>(ptr) + offset; }
};

const collDataType_t kTypes[] = {collInt8,    collUint8,   collInt32,   collUint32,   collInt64,      collUint64,
                                 collFloat16, collFloat32, collFloat64, collBfloat16, collFloat8e4m3, collFloat8e5m2};
const collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};

}  // namespace

TEST_CASE("device reduce matches the host kernels bit for bit, aligned and not", "[gpu]") {
  for (collDataType_t type : kTypes)
    for (collRedOp_t op : kOps)
      for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(1 << 20) + 3})
        for (size_t misalign : {size_t(0), size_t(1)}) {
          INFO("type " << type << " op " << op << " n " << n << " offset " << misalign << " element(s)");
          size_t elem = typeSize(type), bytes = n * elem, off = misalign * elem;
          std::vector<unsigned char> a, b, want(bytes), got(bytes, 0xA5);
          fill(a, n, type, 1);
          fill(b, n, type, 2);
          coll::kernels::reduce(want.data(), a.data(), b.data(), n, type, op);
          DeviceBuffer da(bytes), db(bytes), dd(bytes);
          REQUIRE(cudaMemcpy(da.at(off), a.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
          REQUIRE(cudaMemcpy(db.at(off), b.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
          REQUIRE(cudaMemset(dd.ptr, 0xA5, bytes + 64) == cudaSuccess);  // poisoned
          REQUIRE(cuda::reduce(dd.at(off), da.at(off), db.at(off), n, type, op, nullptr).empty());
          REQUIRE(cudaMemcpy(got.data(), dd.at(off), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
          // In place, dst = a.
          REQUIRE(cuda::reduce(da.at(off), da.at(off), db.at(off), n, type, op, nullptr).empty());
          REQUIRE(cudaMemcpy(got.data(), da.at(off), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
          // The average's division, as the host does it.
          coll::kernels::finishAverage(want.data(), n, type, 3);
          REQUIRE(cuda::finishAverage(da.at(off), n, type, 3, nullptr).empty());
          REQUIRE(cudaMemcpy(got.data(), da.at(off), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
        }
}

TEST_CASE("device copy: any size and alignment, nothing written past the end", "[gpu]") {
  for (size_t bytes : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(4097), size_t(64 << 20) + 5})
    for (size_t off : {size_t(0), size_t(3)}) {
      INFO("bytes " << bytes << " offset " << off);
      std::vector<unsigned char> src(bytes), got(bytes + 16);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 31 + 7);
      DeviceBuffer ds(bytes), dd(bytes + 16);
      REQUIRE(cudaMemcpy(ds.at(off), src.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
      REQUIRE(cudaMemset(dd.ptr, 0xA5, bytes + 80) == cudaSuccess);
      REQUIRE(cuda::copy(dd.at(off), ds.at(off), bytes, nullptr).empty());
      REQUIRE(cudaMemcpy(got.data(), dd.at(off), bytes + 16, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(std::memcmp(got.data(), src.data(), bytes) == 0);
      for (size_t i = bytes; i < bytes + 16; ++i) CHECK(got[i] == 0xA5);
    }
}

TEST_CASE("device memory is recognised; host, pinned and stack memory are not", "[gpu]") {
  DeviceBuffer d(1024);
  int dev = -1;
  CHECK(cuda::isDeviceMemory(d.ptr, &dev));
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(dev == current);
  void* managed = nullptr;
  REQUIRE(cudaMallocManaged(&managed, 1024) == cudaSuccess);
  CHECK(cuda::isDeviceMemory(managed, nullptr));
  cudaFree(managed);
  void* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, 1024) == cudaSuccess);
  CHECK_FALSE(cuda::isDeviceMemory(pinned, nullptr));
  cudaFreeHost(pinned);
  std::vector<char> heap(1024);
  int stack = 0;
  CHECK_FALSE(cuda::isDeviceMemory(heap.data(), nullptr));
  CHECK_FALSE(cuda::isDeviceMemory(&stack, nullptr));
}

TEST_CASE("device bitwise ops and scale match the host kernels bit for bit", "[gpu][redop]") {
  for (collDataType_t type : kTypes)
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(1 << 20) + 3})
      for (size_t misalign : {size_t(0), size_t(1)}) {
        INFO("type " << type << " n " << n << " offset " << misalign << " element(s)");
        size_t elem = typeSize(type), bytes = n * elem, off = misalign * elem;
        std::vector<unsigned char> a, b, k, want(bytes), got(bytes, 0xA5);
        fill(a, n, type, 1);
        fill(b, n, type, 2);
        fill(k, 1, type, 4);  // the scalar: 3 (integers) or 1.5
        DeviceBuffer da(bytes), db(bytes), dd(bytes);
        REQUIRE(cudaMemcpy(da.at(off), a.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(db.at(off), b.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
        for (collRedOp_t op : {collBand, collBor, collBxor}) {
          bool integer = coll::kernels::supportsOp(type, op);
          std::string e = cuda::reduce(dd.at(off), da.at(off), db.at(off), n, type, op, nullptr);
          if (!integer || n == 0) {
            CHECK(e.empty() == (n == 0 || integer));  // floating types: refused with a reason
            continue;
          }
          REQUIRE(e.empty());
          coll::kernels::reduce(want.data(), a.data(), b.data(), n, type, op);
          REQUIRE(cudaMemcpy(got.data(), dd.at(off), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
        }
        coll::kernels::scale(want.data(), a.data(), n, type, k.data());
        REQUIRE(cudaMemset(dd.ptr, 0xA5, bytes + 64) == cudaSuccess);
        REQUIRE(cuda::scale(dd.at(off), da.at(off), n, type, k.data(), nullptr).empty());
        REQUIRE(cudaMemcpy(got.data(), dd.at(off), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
        REQUIRE(cuda::scale(da.at(off), da.at(off), n, type, k.data(), nullptr).empty());  // in place
        REQUIRE(cudaMemcpy(got.data(), da.at(off), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
      }
}

TEST_CASE("a collScalarDevice scalar in CUDA memory is read at each run (host buffers)", "[gpu][redop]") {
  collComm_t comm = nullptr;
  int devs[] = {0};
  REQUIRE(collCommInitAll(&comm, 1, devs) == collSuccess);
  DeviceBuffer scalar(sizeof(float));
  float two = 2, half = 0.5;
  REQUIRE(cudaMemcpy(scalar.ptr, &two, sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  collRedOp_t op;
  REQUIRE(collRedOpCreatePreMulSum(&op, scalar.ptr, collFloat32, collScalarDevice, comm) == collSuccess);
  std::vector<float> in(5, 3.0f), out(5, -1.0f);
  CHECK(collAllReduce(in.data(), out.data(), 5, collFloat32, op, comm, nullptr) == collSuccess);
  CHECK(out[4] == 6.0f);
  REQUIRE(cudaMemcpy(scalar.ptr, &half, sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(collAllReduce(in.data(), out.data(), 5, collFloat32, op, comm, nullptr) == collSuccess);
  CHECK(out[4] == 1.5f);
  std::vector<unsigned char> back(4);
  CHECK(cuda::copyToHost(back.data(), scalar.ptr, 4).empty());
  CHECK(std::memcmp(back.data(), &half, 4) == 0);
  CHECK(collRedOpDestroy(op, comm) == collSuccess);
  CHECK(collCommDestroy(comm) == collSuccess);
}

// collMemAlloc (NCCL's ncclMemAlloc) on a GPU: memory from CUDA's virtual memory management,
// which cuMemRetainAllocationHandle recognises (cudaMalloc's memory it refuses), usable by a
// collective and freed by collMemFree.
TEST_CASE("collMemAlloc gives cuMem device memory that collectives use", "[gpu][memalloc]") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  void* p = nullptr;
  const size_t n = 1031;
  REQUIRE(collMemAlloc(&p, n * sizeof(float)) == collSuccess);
  REQUIRE(p != nullptr);
  CHECK(cuda::isDeviceMemory(p, nullptr));
  using Retain = int (*)(unsigned long long*, void*);
  using Release = int (*)(unsigned long long);
  void* retain = nullptr;
  void* release = nullptr;
  cudaDriverEntryPointQueryResult q1, q2;
  REQUIRE(cudaGetDriverEntryPointByVersion("cuMemRetainAllocationHandle", &retain, 12000, cudaEnableDefault, &q1) ==
          cudaSuccess);
  REQUIRE(cudaGetDriverEntryPointByVersion("cuMemRelease", &release, 12000, cudaEnableDefault, &q2) == cudaSuccess);
  unsigned long long handle = 0;
  int vmm = reinterpret_cast<Retain>(retain)(&handle, p);
  CHECK(vmm == 0);  // CUDA_SUCCESS: a cuMem mapping (the device supports VMM on H100/H200)
  if (vmm == 0) reinterpret_cast<Release>(release)(handle);
  collComm_t comm = nullptr;
  int devs[] = {0};
  REQUIRE(collCommInitAll(&comm, 1, devs) == collSuccess);
  std::vector<float> host(n, 2.0f), back(n, -1.0f);
  REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(collAllReduce(p, p, n, collFloat32, collSum, comm, nullptr) == collSuccess);
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
  REQUIRE(cudaMemcpy(back.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[n - 1] == 2.0f);
  CHECK(collCommDestroy(comm) == collSuccess);
  CHECK(collMemFree(p) == collSuccess);
  CHECK(collMemFree(p) == collInvalidArgument);  // freed already
}

int main(int argc, char** argv) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (!cuda::built() || e != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no usable GPU (%s)\n", !cuda::built()     ? "coll built without CUDA"
                                                 : e != cudaSuccess ? cudaGetErrorString(e)
                                                                    : "0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
