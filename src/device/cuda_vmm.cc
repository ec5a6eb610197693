#include "device/cuda_vmm.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>

namespace coll::device::vmm {
namespace {

// The driver's entry points, found through the runtime (libcoll links the runtime statically and
// not libcuda, so that it loads where there is no driver).
struct Driver {
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemSetAccess_v10020 setAccess = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemAddressFree_v10020 addressFree = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuDeviceGetAttribute_v2000 attribute = nullptr;
  PFN_cuMemGetAddressRange_v3020 addressRange = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 retain = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 exportHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 importHandle = nullptr;
  std::string why;  // empty when every entry point was found
};

template <typename F>
void find(const char* name, F* fn, std::string* why) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    if (why->empty()) *why = std::string("the driver has no ") + name;
    return;
  }
  *fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    find("cuMemGetAllocationGranularity", &x.granularity, &x.why);
    find("cuMemCreate", &x.create, &x.why);
    find("cuMemAddressReserve", &x.reserve, &x.why);
    find("cuMemMap", &x.map, &x.why);
    find("cuMemSetAccess", &x.setAccess, &x.why);
    find("cuMemUnmap", &x.unmap, &x.why);
    find("cuMemAddressFree", &x.addressFree, &x.why);
    find("cuMemRelease", &x.release, &x.why);
    find("cuDeviceGetAttribute", &x.attribute, &x.why);
    find("cuMemGetAddressRange", &x.addressRange, &x.why);
    find("cuMemRetainAllocationHandle", &x.retain, &x.why);
    find("cuMemExportToShareableHandle", &x.exportHandle, &x.why);
    find("cuMemImportFromShareableHandle", &x.importHandle, &x.why);
    return x;
  }();
  return d;
}

Status check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  return COLL_ERROR(collUnhandledCudaError, FMT_STRING("{} failed: CUresult {}"), what, static_cast<int>(r));
}

CUmemAllocationProp propsFor(int dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  int rdma = 0;
  if (driver().attribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev) == CUDA_SUCCESS &&
      rdma)
    prop.allocFlags.gpuDirectRDMACapable = 1;  // a NIC may register it, as NCCL asks
  return prop;
}

// What free() needs of each mapping.
struct Mapping {
  size_t bytes;
};
std::mutex gMu;
std::map<CUdeviceptr, Mapping>& mappings() {
  static auto* m = new std::map<CUdeviceptr, Mapping>;  // never freed: frees may come at exit
  return *m;
}

}  // namespace

bool supported(int dev, std::string* why) {
  const Driver& d = driver();
  if (!d.why.empty()) {
    if (why) *why = d.why;
    return false;
  }
  int vmm = 0, fd = 0;
  if (d.attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS || !vmm) {
    if (why) *why = "the device does not support virtual memory management";
    return false;
  }
  if (d.attribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) != CUDA_SUCCESS || !fd) {
    if (why) *why = "the device cannot export allocations as file descriptors";
    return false;
  }
  return true;
}

namespace {

// Read and write access to [ptr, ptr + size) for dev and every device that can reach it as a peer.
Status grantAccess(CUdeviceptr ptr, size_t size, int dev) {
  int count = 0;
  cudaGetDeviceCount(&count);
  Status s;
  for (int peer = 0; peer < count && s.isOk(); ++peer) {
    int can = peer == dev;
    if (!can && cudaDeviceCanAccessPeer(&can, peer, dev) != cudaSuccess) can = 0;
    if (!can) continue;
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = peer;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    s = check(driver().setAccess(ptr, size, &access, 1), "cuMemSetAccess");
  }
  cudaGetLastError();
  return s;
}

// Maps the allocation of handle (size bytes, aligned to align) at a reserved address, readable
// and writable by dev and its peers, and records the mapping for free(); the mapping holds the
// memory from here on, so the handle is released whatever happens.
Status mapHandle(CUmemGenericAllocationHandle handle, size_t size, size_t align, int dev, void** out) {
  const Driver& d = driver();
  CUdeviceptr ptr = 0;
  Status s = check(d.reserve(&ptr, size, align, 0, 0), "cuMemAddressReserve");
  if (s.isOk()) s = check(d.map(ptr, size, 0, handle, 0), "cuMemMap");
  d.release(handle);
  if (s.isOk()) s = grantAccess(ptr, size, dev);
  if (!s.isOk()) {
    if (ptr) {
      d.unmap(ptr, size);
      d.addressFree(ptr, size);
    }
    return s;
  }
  {
    std::lock_guard<std::mutex> lock(gMu);
    mappings()[ptr] = Mapping{size};
  }
  *out = reinterpret_cast<void*>(ptr);
  return Status::ok();
}

}  // namespace

Status alloc(int dev, size_t bytes, void** out) {
  const Driver& d = driver();
  CUmemAllocationProp prop = propsFor(dev);
  size_t gran = 0;
  COLL_TRY(check(d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity"));
  if (gran == 0) gran = size_t(2) << 20;
  size_t size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle handle = 0;
  COLL_TRY(check(d.create(&handle, size, &prop, 0), "cuMemCreate"));
  // Read and write for the device and for every device that can reach it as a peer (the p2p
  // transport's kernels on other GPUs of this process write into it), as NCCL grants.
  return mapHandle(handle, size, gran, dev, out);
}

bool free(void* p) {
  Mapping m{};
  {
    std::lock_guard<std::mutex> lock(gMu);
    auto it = mappings().find(reinterpret_cast<CUdeviceptr>(p));
    if (it == mappings().end()) return false;
    m = it->second;
    mappings().erase(it);
  }
  const Driver& d = driver();
  d.unmap(reinterpret_cast<CUdeviceptr>(p), m.bytes);
  d.addressFree(reinterpret_cast<CUdeviceptr>(p), m.bytes);
  return true;
}

bool owns(const void* p) {
  std::lock_guard<std::mutex> lock(gMu);
  return mappings().count(reinterpret_cast<CUdeviceptr>(p)) != 0;
}

bool addressRange(const void* p, void** base, size_t* size) {
  const Driver& d = driver();
  if (!d.addressRange) return false;
  CUdeviceptr b = 0;
  size_t n = 0;
  if (d.addressRange(&b, &n, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) {
    cudaGetLastError();
    return false;
  }
  *base = reinterpret_cast<void*>(b);
  *size = n;
  return true;
}

Status exportFd(void* base, int* fd) {
  const Driver& d = driver();
  CUmemGenericAllocationHandle handle = 0;
  COLL_TRY(check(d.retain(&handle, base), "cuMemRetainAllocationHandle"));
  int out = -1;
  Status s =
      check(d.exportHandle(&out, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
  d.release(handle);  // the descriptor holds its own reference
  if (s.isOk()) *fd = out;
  return s;
}

Status importFd(int fd, size_t bytes, int dev, void** out) {
  const Driver& d = driver();
  CUmemGenericAllocationHandle handle = 0;
  COLL_TRY(check(d.importHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                 "cuMemImportFromShareableHandle"));
  CUmemAllocationProp prop = propsFor(dev);
  size_t gran = 0;
  Status s = check(d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  if (!s.isOk()) {
    d.release(handle);
    return s;
  }
  return mapHandle(handle, bytes, gran == 0 ? size_t(2) << 20 : gran, dev, out);
}

}  // namespace coll::device::vmm
