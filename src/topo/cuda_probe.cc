#include "topo/cuda_probe.h"

#include <dlfcn.h>

#include <mutex>

#include "base/params.h"

namespace coll::topo {
namespace {

// The few driver entry points we need, with their C signatures (CUresult is an int-sized enum,
// CUdevice an int, CUcontext a pointer). No CUDA header is needed to build this file.
using CuInit = int (*)(unsigned int);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuCtxGetCurrent = int (*)(void**);
using CuCtxGetDevice = int (*)(int*);
using CuDeviceGetPCIBusId = int (*)(char*, int, int);

struct Driver {
  CuCtxGetCurrent ctxGetCurrent = nullptr;
  CuCtxGetDevice ctxGetDevice = nullptr;
  CuDeviceGetPCIBusId busId = nullptr;
  CudaInfo info;
};

Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    if (params::kCudaDisable.get()) {
      d.info.why = "COLL_CUDA_DISABLE=1";
      return;
    }
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      d.info.why = "no CUDA driver (libcuda.so.1 not found)";
      return;
    }
    auto init = reinterpret_cast<CuInit>(dlsym(h, "cuInit"));
    auto version = reinterpret_cast<CuDriverGetVersion>(dlsym(h, "cuDriverGetVersion"));
    auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(h, "cuDeviceGetCount"));
    d.ctxGetCurrent = reinterpret_cast<CuCtxGetCurrent>(dlsym(h, "cuCtxGetCurrent"));
    d.ctxGetDevice = reinterpret_cast<CuCtxGetDevice>(dlsym(h, "cuCtxGetDevice"));
    d.busId = reinterpret_cast<CuDeviceGetPCIBusId>(dlsym(h, "cuDeviceGetPCIBusId"));
    if (!init || !version || !count || !d.ctxGetCurrent || !d.ctxGetDevice || !d.busId) {
      d.info.why = "libcuda.so.1 lacks expected symbols";
      return;
    }
    int rc = init(0);
    if (rc != 0) {
      d.info.why = "cuInit failed with CUresult " + std::to_string(rc) + " (no usable GPU or driver)";
      return;
    }
    d.info.driverLoaded = true;
    version(&d.info.driverVersion);
    if (count(&d.info.deviceCount) != 0) d.info.deviceCount = 0;
    if (d.info.deviceCount == 0) d.info.why = "the CUDA driver reports no devices";
  });
  return d;
}

}  // namespace

const CudaInfo& cudaInfo() { return driver().info; }

int currentCudaDevice() {
  Driver& d = driver();
  if (d.info.deviceCount == 0) return -1;
  void* ctx = nullptr;
  int dev = 0;
  // Without a current context the runtime's current device is 0, which is what cudaGetDevice says.
  if (d.ctxGetCurrent(&ctx) != 0 || ctx == nullptr) return 0;
  return d.ctxGetDevice(&dev) == 0 ? dev : 0;
}

std::string cudaBusId(int device) {
  Driver& d = driver();
  if (device < 0 || device >= d.info.deviceCount) return "";
  char buf[32] = {0};
  return d.busId(buf, sizeof(buf), device) == 0 ? std::string(buf) : std::string();
}

}  // namespace coll::topo
