// Device-memory reduce and copy kernels, and the questions the runtime asks CUDA about a buffer.
//
// No CUDA header here: the core includes it in builds without CUDA too, where every function
// reports that no device is usable. In CUDA builds the CUDA runtime is linked statically, so
// libcoll still loads, and runs host work, on a machine with no driver: the calls then fail
// softly (cudaErrorInsufficientDriver / NoDevice) and buffers count as host memory.
//
// The kernels keep the host kernels' semantics exactly (kernels/cpu/reduce.h): integers wrap,
// float16/bfloat16/float8 are computed in float32 and rounded to nearest-even after every op, max/min
// propagate NaN and order signed zeros, collAvg reduces as a sum and finishAverage divides,
// collBand/collBor/collBxor exist for the integer types only, scale multiplies as collProd. Each
// thread moves 16 bytes per iteration (uint4 loads and stores) where the three pointers are
// 16-byte aligned, else single elements.
#pragma once

#include <cstddef>
#include <string>

#include "coll/coll.h"

namespace coll::kernels::cuda {

/// Whether this build has the CUDA kernels.
bool built();

/// Whether ptr is memory a CUDA device can address as device memory (cudaMemoryTypeDevice or
/// managed), and its device. False for host memory, unregistered pointers, or without a driver.
bool isDeviceMemory(const void* ptr, int* device);

/// dst[i] = a[i] op b[i] for n elements, enqueued on stream (a cudaStream_t; nullptr: the legacy
/// default stream). dst may alias a or b. Returns "" or CUDA's error string.
std::string reduce(void* dst, const void* a, const void* b, size_t n, collDataType_t type, collRedOp_t op,
                   void* stream);

/// dst[i] = scalar * src[i] for n elements (the first step of a PreMulSum op), enqueued on
/// stream. scalar is one element of type in host memory, read during the call. dst may alias src.
std::string scale(void* dst, const void* src, size_t n, collDataType_t type, const void* scalar, void* stream);

/// Copies `bytes` from src, device memory, to dst, host memory, and waits for the copy (how a
/// collScalarDevice scalar in CUDA memory is read). Returns "" or CUDA's error string.
std::string copyToHost(void* dst, const void* src, size_t bytes);

/// data[i] = data[i] / nranks (the end of collAvg), enqueued on stream.
std::string finishAverage(void* data, size_t n, collDataType_t type, int nranks, void* stream);

/// Device-to-device copy of `bytes`, enqueued on stream (the kernel, not a copy engine, so that
/// it can run inside a fused launch later).
std::string copy(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace coll::kernels::cuda
