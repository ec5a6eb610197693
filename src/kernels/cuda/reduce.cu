// Device reduce, scale, average and copy kernels (device.h states their semantics).
//
// One grid-stride loop per (type, op): each thread loads 16 bytes of each operand (uint4), reduces
// the 16 / sizeof(T) elements in registers and stores 16 bytes, which is what saturates HBM; an
// unaligned call, and the tail of an aligned one, goes element by element. The narrow floating
// types travel as their bit patterns (kernels/arith.h's storage structs) and are converted for
// each op, so that the storage type stays plain old data inside the vector union.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/arith.h"
#include "kernels/cuda/device.h"

namespace coll::kernels::cuda {
namespace {

// The element arithmetic is kernels/arith.h's, shared with the host kernels and the interpreter.
using dev::Op;

template <typename S>
union Vec {
  uint4 raw;
  S e[16 / sizeof(S)];
};

template <typename S, Op O>
__global__ void reduceKernel(S* dst, const S* a, const S* b, size_t n, bool aligned) {
  constexpr size_t kPer = 16 / sizeof(S);
  size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t done = 0;
  if (aligned) {
    size_t vectors = n / kPer;
    for (size_t v = tid; v < vectors; v += stride) {
      Vec<S> x, y, z;
      x.raw = reinterpret_cast<const uint4*>(a)[v];
      y.raw = reinterpret_cast<const uint4*>(b)[v];
#pragma unroll
      for (size_t k = 0; k < kPer; ++k) z.e[k] = dev::apply<S, O>(x.e[k], y.e[k]);
      reinterpret_cast<uint4*>(dst)[v] = z.raw;
    }
    done = vectors * kPer;
  }
  for (size_t i = done + tid; i < n; i += stride) dst[i] = dev::apply<S, O>(a[i], b[i]);
}

// dst[i] = k * src[i], with collProd's semantics.
template <typename S>
__global__ void scaleKernel(S* dst, const S* src, size_t n, S k) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    dst[i] = dev::premul(src[i], k);
}

template <typename S>
__global__ void averageKernel(S* data, size_t n, int nranks) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    data[i] = dev::divide(data[i], nranks);  // integers: C division
}

__global__ void copyKernel(uint4* dst, const uint4* src, size_t vectors, char* dstTail, const char* srcTail,
                           size_t tail) {
  size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t v = tid; v < vectors; v += stride) dst[v] = src[v];
  for (size_t i = tid; i < tail; i += stride) dstTail[i] = srcTail[i];
}

constexpr int kThreads = 512;

unsigned blocksFor(size_t units) {
  size_t blocks = (units + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 2048 ? 2048 : blocks));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

std::string launched() {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

template <typename S>
std::string reduceAs(void* dst, const void* a, const void* b, size_t n, collRedOp_t op, cudaStream_t s) {
  bool aligned = aligned16(dst) && aligned16(a) && aligned16(b);
  unsigned blocks = blocksFor(aligned ? n / (16 / sizeof(S)) + 1 : n);
  auto d = static_cast<S*>(dst);
  auto x = static_cast<const S*>(a);
  auto y = static_cast<const S*>(b);
  switch (op) {
    case collProd:
      reduceKernel<S, Op::kProd><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
      break;
    case collMax:
      reduceKernel<S, Op::kMax><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
      break;
    case collMin:
      reduceKernel<S, Op::kMin><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
      break;
    case collBand:
    case collBor:
    case collBxor:
      if constexpr (std::is_integral<S>::value) {
        if (op == collBand)
          reduceKernel<S, Op::kBand><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
        else if (op == collBor)
          reduceKernel<S, Op::kBor><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
        else
          reduceKernel<S, Op::kBxor><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
        break;
      } else {
        return "bitwise ops take integer types only";
      }
    default:
      reduceKernel<S, Op::kSum><<<blocks, kThreads, 0, s>>>(d, x, y, n, aligned);
      break;
  }
  return launched();
}

template <typename S>
std::string scaleAs(void* dst, const void* src, size_t n, const void* scalar, cudaStream_t s) {
  S k;
  memcpy(&k, scalar, sizeof(S));
  scaleKernel<S><<<blocksFor(n), kThreads, 0, s>>>(static_cast<S*>(dst), static_cast<const S*>(src), n, k);
  return launched();
}

template <typename S>
std::string averageAs(void* data, size_t n, int nranks, cudaStream_t s) {
  averageKernel<S><<<blocksFor(n), kThreads, 0, s>>>(static_cast<S*>(data), n, nranks);
  return launched();
}

// The one table from collDataType_t to storage type: calls f with a Tag<S>.
template <typename S>
struct Tag {
  using Storage = S;
};

template <typename F>
std::string byType(collDataType_t type, F&& f) {
  switch (type) {
    case collInt8:
      return f(Tag<int8_t>{});
    case collUint8:
      return f(Tag<uint8_t>{});
    case collInt32:
      return f(Tag<int32_t>{});
    case collUint32:
      return f(Tag<uint32_t>{});
    case collInt64:
      return f(Tag<int64_t>{});
    case collUint64:
      return f(Tag<uint64_t>{});
    case collFloat16:
      return f(Tag<dev::Half>{});
    case collFloat32:
      return f(Tag<float>{});
    case collFloat64:
      return f(Tag<double>{});
    case collBfloat16:
      return f(Tag<dev::Bf16>{});
    case collFloat8e4m3:
      return f(Tag<dev::Fp8E4m3>{});
    case collFloat8e5m2:
      return f(Tag<dev::Fp8E5m2>{});
    default:
      return "invalid datatype";
  }
}

}  // namespace

bool built() { return true; }

bool isDeviceMemory(const void* ptr, int* device) {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // no driver, or not a CUDA pointer: host memory; clear the sticky error
    return false;
  }
  bool device_ = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  if (device_ && device) *device = attr.device;
  return device_;
}

std::string reduce(void* dst, const void* a, const void* b, size_t n, collDataType_t type, collRedOp_t op,
                   void* stream) {
  if (n == 0) return "";
  return byType(type, [&](auto tag) {
    using T = decltype(tag);
    return reduceAs<typename T::Storage>(dst, a, b, n, op, static_cast<cudaStream_t>(stream));
  });
}

std::string scale(void* dst, const void* src, size_t n, collDataType_t type, const void* scalar, void* stream) {
  if (n == 0) return "";
  return byType(type, [&](auto tag) {
    using T = decltype(tag);
    return scaleAs<typename T::Storage>(dst, src, n, scalar, static_cast<cudaStream_t>(stream));
  });
}

std::string copyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return "";
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

std::string finishAverage(void* data, size_t n, collDataType_t type, int nranks, void* stream) {
  if (n == 0) return "";
  return byType(type, [&](auto tag) {
    using T = decltype(tag);
    return averageAs<typename T::Storage>(data, n, nranks, static_cast<cudaStream_t>(stream));
  });
}

std::string copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return "";
  bool aligned = aligned16(dst) && aligned16(src);
  size_t vectors = aligned ? bytes / 16 : 0, head = vectors * 16;
  copyKernel<<<blocksFor(vectors > 0 ? vectors : bytes - head), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint4*>(dst), static_cast<const uint4*>(src), vectors, static_cast<char*>(dst) + head,
      static_cast<const char*>(src) + head, bytes - head);
  return launched();
}

}  // namespace coll::kernels::cuda
