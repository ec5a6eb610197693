// Device memory from CUDA's virtual memory management (cuMem*), as NCCL's ncclMemAlloc gives it:
// a physical allocation whose handle can be exported as a POSIX file descriptor (so that another
// process of the host can map it without cudaIpc, and NVLink SHARP / multicast objects can bind
// it), mapped at a reserved address with read and write access for its device and every device
// that can reach it as a peer. CUDA builds only (cuda.cc).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace coll::device::vmm {

/// Whether device dev supports VMM allocations with POSIX file-descriptor handles, and the driver
/// gives the cuMem entry points this needs. false with *why set otherwise.
bool supported(int dev, std::string* why);

/// bytes (rounded up to the allocation granularity) of device memory on dev, mapped at *out.
Status alloc(int dev, size_t bytes, void** out);

/// Unmaps and frees what alloc() or importFd() mapped at p; false when p is not such a mapping.
bool free(void* p);

/// Whether p is the start of a mapping of alloc() or importFd().
bool owns(const void* p);

/// The allocation of device memory holding p (cuMemGetAddressRange): its start and size.
bool addressRange(const void* p, void** base, size_t* size);

/// alloc()'s allocation at base exported as a file descriptor of this process (the caller closes
/// it), which another process of the host maps with importFd after borrowing it.
Status exportFd(void* base, int* fd);

/// Maps an exported allocation of `bytes` for dev (and its peers), as alloc() does; freed by free().
Status importFd(int fd, size_t bytes, int dev, void** out);

}  // namespace coll::device::vmm
