// The qualifiers and loop pragmas that let one function compile for both the GPU (nvcc) and the
// host (plain C++): the element arithmetic (kernels/arith.h), the data movers (kernels/cuda/move.h)
// and the device interpreter built on them (exec/cuda).
#pragma once

// COLL_HD: small functions, inlined; COLL_HD_FN: the interpreter's larger ones. COLL_NOINLINE
// keeps a device function a call: the kernel dispatches to about 60 (type, op) instantiations,
// and with everything inlined into it ptxas took 7 to 13 minutes and 8 GB per architecture on a
// 2-core machine; with a channel's run() and its per-piece mover as calls, 2 minutes and 3 GB.
// A call per piece (kilobytes of data) costs nothing measurable next to moving it.
#if defined(__CUDACC__)
#define COLL_HD __host__ __device__ __forceinline__
#define COLL_HD_FN __host__ __device__
#define COLL_NOINLINE __noinline__
#else
#define COLL_HD inline
#define COLL_HD_FN
#define COLL_NOINLINE
#endif

// Loop unrolling that both compilers understand: full unrolling of the fixed-count loops over a
// pack's elements and a thread's packs in flight.
// COLL_NO_UNROLL keeps the scalar head and tail loops single (nvcc unrolls them by 4 otherwise:
// more code, and four times the byte loads of the 8-bit kernels).
#if defined(__CUDA_ARCH__)
#define COLL_UNROLL _Pragma("unroll")
#define COLL_NO_UNROLL _Pragma("unroll 1")
#elif defined(__CUDACC__)
// nvcc's host pass: neither its front end nor gcc behind it takes the other's pragma quietly.
#define COLL_UNROLL
#define COLL_NO_UNROLL
#else
#define COLL_UNROLL _Pragma("GCC unroll 16")
#define COLL_NO_UNROLL
#endif
