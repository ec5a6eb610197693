// How the device interpreter touches data, for both builds (kernels/hd.h): 16-byte packs held in
// registers for the aligned body of a piece, and single elements for its head and tail.
//
// Why this file exists: a memcpy from a char pointer of unknown alignment compiles, on the GPU,
// to one 8-bit load per byte (LD.E.U8), which is what the first interpreter did for every element.
// Here a pack is loaded as one uint4 (LD.E.128) and reinterpreted in registers, and an element is
// loaded as its own type.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/hd.h"

namespace coll::kernels::dev {

/// 16 bytes of elements of T, in registers once the loops over it are unrolled.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = static_cast<int>(16 / sizeof(T));
  T e[kN];
};

/// Packs in flight per thread and source in the reduce loops: 4 x 16 bytes, except for 32- and
/// 64-bit integers and the float8 types, which take 2: with 4, ptxas spilled their kernels (the
/// integers' bitwise ops and sums; float8's sums and products, whose 16 elements per pack each
/// widen to float32 and round back) within the 128 registers a thread has at 512 threads per CTA,
/// and the SASS check (scripts/check_sass.sh) fails on any spill. Plain copies keep kCopyUnroll (8)
/// in flight whatever the type (move.h).
/// Before sm_89 the GPU has no float8 conversion instructions: the written-out conversions
/// (kernels/arith.h) need more registers still, and float8 takes 1 there.
template <typename T>
constexpr bool kIsFloat8 = !std::is_integral<T>::value && sizeof(T) == 1;
template <typename T>
constexpr int kUnrollOf =
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    kIsFloat8<T> ? 1 :
#endif
    (std::is_integral<T>::value && sizeof(T) >= 4) || kIsFloat8<T> ? 2
                                                                   : 4;

/// Loads 16 bytes from p (16-byte aligned) as one vector load.
template <typename T>
COLL_HD Pack<T> loadPack(const char* p) {
#if defined(__CUDA_ARCH__)
  union {
    uint4 u;
    Pack<T> v;
  } x;
  x.u = *reinterpret_cast<const uint4*>(p);
  return x.v;
#else
  Pack<T> v;
  memcpy(&v, __builtin_assume_aligned(p, 16), 16);
  return v;
#endif
}

/// Stores 16 bytes at p (16-byte aligned) as one vector store.
template <typename T>
COLL_HD void storePack(char* p, const Pack<T>& v) {
#if defined(__CUDA_ARCH__)
  union {
    uint4 u;
    Pack<T> v;
  } x;
  x.v = v;
  *reinterpret_cast<uint4*>(p) = x.u;
#else
  memcpy(__builtin_assume_aligned(p, 16), &v, 16);
#endif
}

/// One element at p. On the GPU p is always aligned for T (the API refuses device buffers that
/// are not, and every offset the schedules make is a whole number of elements): a load of T. The
/// host build also runs on host buffers, which may sit anywhere: where `aligned` is false, a memcpy.
template <typename T>
COLL_HD T loadElem(const char* p, bool aligned) {
  T v;
#if defined(__CUDA_ARCH__)
  (void)aligned;
  v = *reinterpret_cast<const T*>(p);
#else
  if (aligned)
    v = *reinterpret_cast<const T*>(p);
  else
    memcpy(&v, p, sizeof(T));
#endif
  return v;
}

template <typename T>
COLL_HD void storeElem(char* p, T v, bool aligned) {
#if defined(__CUDA_ARCH__)
  (void)aligned;
  *reinterpret_cast<T*>(p) = v;
#else
  if (aligned)
    *reinterpret_cast<T*>(p) = v;
  else
    memcpy(p, &v, sizeof(T));
#endif
}

/// How a set of pointers (nullptr: not used) can be walked: whether all share one offset within 16
/// bytes (then a scalar head brings them all to a pack boundary together), that offset, and
/// whether all are aligned for their element type.
struct Alignment {
  bool together = true;
  uintptr_t offset = 0;
  bool elements = true;
};

COLL_HD Alignment alignmentOf(const void* a, const void* b, const void* c, const void* d, uintptr_t elem) {
  Alignment r;
  bool first = true;
  const void* ps[4] = {a, b, c, d};
  COLL_UNROLL
  for (int i = 0; i < 4; ++i) {
    if (!ps[i]) continue;
    auto v = reinterpret_cast<uintptr_t>(ps[i]);
    if (v % elem != 0) r.elements = false;
    if (first) {
      r.offset = v & 15;
      first = false;
    } else if ((v & 15) != r.offset) {
      r.together = false;
    }
  }
  return r;
}

}  // namespace coll::kernels::dev
