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

/// Unmaps and frees what alloc() mapped at p; false when p is not such an allocation.
bool free(void* p);

}  // namespace coll::device::vmm
