// The CUDA device runtime (runtime.h), over the CUDA runtime API linked statically. Used only
// where topo's driver probe reports devices, so a machine without a driver never calls it.
// Written against the CUDA 13 runtime; compiled in every CUDA build, run only on a GPU machine.
#include <cuda_runtime.h>

#include <cstring>

#include "device/runtime.h"
#include "topo/cuda_probe.h"

namespace coll::device {
namespace {

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return COLL_ERROR(collUnhandledCudaError, FMT_STRING("{} failed: {} ({})"), what, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

class Cuda : public Runtime {
 public:
  const char* name() const override { return "cuda"; }
  bool emulated() const override { return false; }
  int deviceCount() override { return topo::cudaInfo().deviceCount; }

  Status alloc(int dev, size_t bytes, void** out) override {
    int was = 0;
    COLL_TRY(check(cudaGetDevice(&was), "cudaGetDevice"));
    COLL_TRY(check(cudaSetDevice(dev), "cudaSetDevice"));
    Status s = check(cudaMalloc(out, bytes), "cudaMalloc");
    if (s.isOk()) s = check(cudaMemset(*out, 0, bytes), "cudaMemset");
    cudaSetDevice(was);
    return s;
  }
  void free(void* p) override { cudaFree(p); }

  Status allocHost(size_t bytes, void** out) override {
    COLL_TRY(check(cudaHostAlloc(out, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc"));
    std::memset(*out, 0, bytes);
    return Status::ok();
  }
  void freeHost(void* p) override { cudaFreeHost(p); }

  Status registerHost(void* p, size_t bytes) override {
    COLL_TRY(check(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable), "cudaHostRegister"));
    void* d = nullptr;
    Status s = check(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer");
    if (s.isOk() && d != p)
      s = COLL_ERROR(collSystemError,
                     FMT_STRING("the device sees registered host memory {} at another address ({}): host-staged "
                                "connections need a system where it does not"),
                     p, d);
    if (!s.isOk()) cudaHostUnregister(p);
    return s;
  }
  void unregisterHost(void* p) override { cudaHostUnregister(p); }

  bool isDeviceMemory(const void* p, int* dev) override {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // an unregistered pointer is not an error to keep
      return false;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return false;
    if (dev) *dev = a.device;
    return true;
  }

  bool isStream(Stream s) override {
    if (!s) return true;
    cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(s));
    if (e == cudaSuccess || e == cudaErrorNotReady) return true;
    cudaGetLastError();
    return false;
  }

  Status copyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)), "cudaMemcpyAsync");
  }

  Status hostTask(Stream, std::function<void()>) override {
    return Status(collInternalError, "hostTask is the emulated device's; CUDA launches kernels");
  }

  Status newEvent(Event* out) override {
    cudaEvent_t e;
    COLL_TRY(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    *out = e;
    return Status::ok();
  }
  void destroyEvent(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  Status record(Event e, Stream s) override {
    return check(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)), "cudaEventRecord");
  }
  Status waitEvent(Stream s, Event e) override {
    return check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0),
                 "cudaStreamWaitEvent");
  }
  bool done(Event e) override { return cudaEventQuery(static_cast<cudaEvent_t>(e)) != cudaErrorNotReady; }
  Status waitFor(Event e) override {
    return check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize");
  }

  Status newStream(Stream* out) override {
    cudaStream_t s;
    COLL_TRY(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    *out = s;
    return Status::ok();
  }
  Status destroyStream(Stream s) override {
    return check(cudaStreamDestroy(static_cast<cudaStream_t>(s)), "cudaStreamDestroy");
  }
  Status synchronize(Stream s) override {
    return check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  }
};

}  // namespace

Runtime* cudaRuntime(std::string* why) {
  const topo::CudaInfo& info = topo::cudaInfo();
  if (info.deviceCount <= 0) {
    if (why) *why = info.why.empty() ? "no CUDA device is usable" : info.why;
    return nullptr;
  }
  static Cuda* rt = new Cuda;  // never freed, like a static: communicators destroyed at exit use it
  return rt;
}

}  // namespace coll::device
