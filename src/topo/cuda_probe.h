// CUDA discovery through the driver library loaded at run time (dlopen "libcuda.so.1"), so that
// libcoll loads and runs host work on machines without a GPU driver. Every function fails soft:
// no driver or no device is reported, never fatal.
#pragma once

#include <string>

namespace coll::topo {

struct CudaInfo {
  bool driverLoaded = false;  // libcuda.so.1 found and cuInit succeeded
  int driverVersion = 0;      // e.g. 13000
  int deviceCount = 0;
  std::string why;  // when no device is usable: the reason, for messages and coll-info
};

/// Loads the driver once per process and reports what it found. Thread-safe.
const CudaInfo& cudaInfo();
/// The calling thread's current CUDA device (as cudaGetDevice reports it), or -1 without devices.
int currentCudaDevice();
/// PCI bus id ("0000:3b:00.0") of a device, or "" if unavailable.
std::string cudaBusId(int device);

}  // namespace coll::topo
