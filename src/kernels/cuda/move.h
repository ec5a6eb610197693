// The device interpreter's data movers (both builds, kernels/hd.h): the loops that read and write a
// piece's bytes, with no waits and no descriptors, taking plain pointers and integers. They are
// inlined into each (type, op) kernel (kernel.cuh), which makes no call at all: as calls of their
// own, ptxas had to keep the caller's values across them within the 128 registers that 512
// threads leave, and spilled in most instantiations.
//
// The shape is NCCL's (common_kernel.h): dispatch on alignment once per piece, move the aligned
// body as 16-byte packs with kUnroll packs per source in flight per thread, reduce on registers,
// and leave a scalar loop only for an unaligned head and tail.
#pragma once

#include "kernels/arith.h"
#include "kernels/cuda/pack.h"

namespace coll::kernels::dev {

/// How a move combines: the local source scaled (PreMulSum's inputs), the result divided by
/// nranks (collAvg's final values).
constexpr uint32_t kMoveScale = 1, kMoveDivide = 2;

/// One element of a move: received op local, either alone, scaled and divided as flags say.
/// kDivides: whether this copy of the code can divide. Scaling (PreMulSum) and the division
/// (collAvg) come only with sums, and the division never in the unrolled loops: a floating-point
/// division's slow path is a called subroutine on the GPU, and a call inside the unrolled loop made
/// ptxas spill (the final steps of an average move one pack at a time instead).
template <typename T, Op O, bool kDivides = true>
COLL_HD T combineOne(const T& r, T l, bool hasR, bool hasL, uint32_t flags, T scalar, int nranks) {
  if constexpr (O == Op::kSum)
    if (hasL && (flags & kMoveScale)) l = premul(l, scalar);
  T v = hasR && hasL ? apply<T, O>(r, l) : (hasR ? r : l);
  if constexpr (O == Op::kSum && kDivides)
    if (flags & kMoveDivide) v = divide(v, nranks);
  return v;
}

template <typename T, Op O, bool kDivides = true>
COLL_HD Pack<T> combinePack(const Pack<T>& r, const Pack<T>& l, bool hasR, bool hasL, uint32_t flags, T scalar,
                            int nranks) {
  Pack<T> o;
  COLL_UNROLL
  for (int e = 0; e < Pack<T>::kN; ++e)
    o.e[e] = combineOne<T, O, kDivides>(r.e[e], l.e[e], hasR, hasL, flags, scalar, nranks);
  return o;
}

/// Packs in flight per thread when a move only copies: raw 16-byte packs need no registers for
/// arithmetic, so more of them fit.
constexpr int kCopyUnroll = 8;

/// packs 16-byte packs from src to dst and/or out (16-byte aligned), kCopyUnroll in flight per
/// thread.
COLL_HD void copyPacks(const char* src, char* dst, char* out, uint64_t packs, int tid, int nthreads) {
  const uint64_t stride = static_cast<uint64_t>(nthreads);
  uint64_t p = static_cast<uint64_t>(tid);
  for (; p + (kCopyUnroll - 1) * stride < packs; p += kCopyUnroll * stride) {
    Pack<uint32_t> v[kCopyUnroll];
    COLL_UNROLL
    for (int k = 0; k < kCopyUnroll; ++k) v[k] = loadPack<uint32_t>(src + (p + k * stride) * 16);
    COLL_UNROLL
    for (int k = 0; k < kCopyUnroll; ++k) {
      if (dst) storePack<uint32_t>(dst + (p + k * stride) * 16, v[k]);
      if (out) storePack<uint32_t>(out + (p + k * stride) * 16, v[k]);
    }
  }
  for (; p < packs; p += stride) {
    Pack<uint32_t> v = loadPack<uint32_t>(src + p * 16);
    if (dst) storePack<uint32_t>(dst + p * 16, v);
    if (out) storePack<uint32_t>(out + p * 16, v);
  }
}

/// Copies bytes of the largest unit U (8, 4, 2 or 1 bytes) that src, dst, out and n are all
/// multiples of, thread tid taking units tid, tid + nthreads, ...
template <typename U>
COLL_HD void copyUnits(const char* src, char* dst, char* out, uint64_t n, int tid, int nthreads) {
  COLL_NO_UNROLL
  for (uint64_t i = tid; i < n / sizeof(U); i += nthreads) {
    U v = reinterpret_cast<const U*>(src)[i];
    if (dst) reinterpret_cast<U*>(dst)[i] = v;
    if (out) reinterpret_cast<U*>(out)[i] = v;
  }
}

/// The widest unit, from 8 bytes down to kMin (the element size: every pointer and length is a
/// multiple of it, so narrower paths would be dead code).
template <int kMin>
COLL_HD void copySmall(const char* src, char* dst, char* out, uint64_t n, int tid, int nthreads) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                   reinterpret_cast<uintptr_t>(out) | static_cast<uintptr_t>(n);
  if (kMin >= 8 || (bits & 7) == 0) return copyUnits<uint64_t>(src, dst, out, n, tid, nthreads);
  if (kMin >= 4 || (bits & 3) == 0) return copyUnits<uint32_t>(src, dst, out, n, tid, nthreads);
  if (kMin >= 2 || (bits & 1) == 0) return copyUnits<uint16_t>(src, dst, out, n, tid, nthreads);
  copyUnits<uint8_t>(src, dst, out, n, tid, nthreads);
}

/// A move that only copies (one source, no scaling, no division), for every type: src to dst
/// and/or out, n bytes. The body as 16-byte packs, kCopyUnroll in flight per thread, where the
/// pointers share their offset within 16 bytes; the rest in the widest unit they allow.
template <int kMin>
COLL_HD void copyBytes(const char* src, char* dst, char* out, uint64_t n, int tid, int nthreads) {
#if !defined(__CUDA_ARCH__)
  // The host build also runs on host buffers, which may sit at any address.
  if (!alignmentOf(src, dst, out, nullptr, kMin).elements) return copySmall<1>(src, dst, out, n, tid, nthreads);
#endif
  Alignment a = alignmentOf(src, dst, out, nullptr, 1);
  if (!a.together) return copySmall<kMin>(src, dst, out, n, tid, nthreads);
  uint64_t head = (16 - a.offset) & 15;
  if (head > n) head = n;
  uint64_t packs = (n - head) / 16, body = head + packs * 16;
  copySmall<kMin>(src, dst, out, head, tid, nthreads);
  copyPacks(src + head, dst ? dst + head : nullptr, out ? out + head : nullptr, packs, tid, nthreads);
  copySmall<kMin>(src + body, dst ? dst + body : nullptr, out ? out + body : nullptr, n - body, tid, nthreads);
}

/// n elements: v = in[i] op src[i] (either may be nullptr, not both), then dst[i] = v and/or
/// out[i] = v. Thread tid of nthreads takes elements tid, tid + nthreads, ... of the head and
/// tail, and packs tid, tid + nthreads, ... of the body. dst may be src (in place).
template <typename T, Op O, bool hasR, bool hasL>
COLL_HD void moveElems(const char* in, const char* src, char* dst, char* out, uint64_t n, uint32_t flags, T scalar,
                       int nranks, int tid, int nthreads) {
  constexpr uint64_t kSize = sizeof(T);
  constexpr int kN = Pack<T>::kN;
  constexpr int kUnroll = kUnrollOf<T>;
  Alignment a = alignmentOf(in, src, dst, out, kSize);
  // The head: elements before the first 16-byte boundary of every pointer, or all of them when the
  // pointers sit at different offsets within 16 bytes.
  uint64_t head = n;
  if (a.together && a.elements) {
    head = ((16 - a.offset) & 15) / kSize;
    if (head > n) head = n;
  }
  uint64_t packs = (n - head) / kN;
  auto one = [&](uint64_t i) {
    uint64_t at = i * kSize;
    T r{}, l{};
    if (hasR) r = loadElem<T>(in + at, a.elements);
    if (hasL) l = loadElem<T>(src + at, a.elements);
    T v = combineOne<T, O>(r, l, hasR, hasL, flags, scalar, nranks);
    if (dst) storeElem<T>(dst + at, v, a.elements);
    if (out) storeElem<T>(out + at, v, a.elements);
  };
  if (packs) {
    uint64_t base = head * kSize;
    const char* in16 = hasR ? in + base : nullptr;
    const char* src16 = hasL ? src + base : nullptr;
    char* dst16 = dst ? dst + base : nullptr;
    char* out16 = out ? out + base : nullptr;
    const uint64_t stride = static_cast<uint64_t>(nthreads);
    uint64_t p = static_cast<uint64_t>(tid);
    // kUnroll packs per source in flight: every load is issued before the first is used.
    const bool divides = O == Op::kSum && (flags & kMoveDivide) != 0;  // then one pack at a time
    for (; !divides && p + (kUnroll - 1) * stride < packs; p += kUnroll * stride) {
      Pack<T> r[kUnroll] = {}, l[kUnroll] = {};
      COLL_UNROLL
      for (int k = 0; k < kUnroll; ++k) {
        if (hasR) r[k] = loadPack<T>(in16 + (p + k * stride) * 16);
        if (hasL) l[k] = loadPack<T>(src16 + (p + k * stride) * 16);
      }
      COLL_UNROLL
      for (int k = 0; k < kUnroll; ++k) {
        Pack<T> o = combinePack<T, O, false>(r[k], l[k], hasR, hasL, flags, scalar, nranks);
        if (dst16) storePack<T>(dst16 + (p + k * stride) * 16, o);
        if (out16) storePack<T>(out16 + (p + k * stride) * 16, o);
      }
    }
    for (; p < packs; p += stride) {
      Pack<T> r{}, l{};
      if (hasR) r = loadPack<T>(in16 + p * 16);
      if (hasL) l = loadPack<T>(src16 + p * 16);
      Pack<T> o = combinePack<T, O>(r, l, hasR, hasL, flags, scalar, nranks);
      if (dst16) storePack<T>(dst16 + p * 16, o);
      if (out16) storePack<T>(out16 + p * 16, o);
    }
  }
  // The head and the tail in one loop (one copy of the scalar code).
  uint64_t tailAt = head + packs * kN, scalars = head + (n - tailAt);
  COLL_NO_UNROLL
  for (uint64_t j = tid; j < scalars; j += nthreads) one(j < head ? j : tailAt + (j - head));
}

/// n elements: v = src[0][i] op src[1][i] op ... op src[nsrc - 1][i], in that order (the same bits
/// wherever it is computed), then dst[k][i] = v for every k (a collective on windows: the sources
/// and destinations are the peers' buffers). Thread tid of nthreads takes packs tid, tid +
/// nthreads, ... when every pointer is 16-byte aligned, elements otherwise, and reads each element
/// before it writes it: a destination may be a source (in place). No division here (collAvg's is
/// a pass of its own over the results): the division's subroutine call made the window kernels
/// keep the loop's pointers in local memory across it.
template <typename T, Op O>
COLL_HD void foldMove(const char* const* src, int nsrc, char* const* dst, int ndst, uint64_t n, int tid, int nthreads) {
  constexpr uint64_t kSize = sizeof(T);
  constexpr int kN = Pack<T>::kN;
  uintptr_t bits = 0;
  for (int s = 0; s < nsrc; ++s) bits |= reinterpret_cast<uintptr_t>(src[s]);
  for (int d = 0; d < ndst; ++d) bits |= reinterpret_cast<uintptr_t>(dst[d]);
  const bool elems = bits % kSize == 0;
  const uint64_t packs = (bits & 15) == 0 ? n / kN : 0;
  const uint64_t step = static_cast<uint64_t>(nthreads);
  for (uint64_t p = static_cast<uint64_t>(tid); p < packs; p += step) {
    Pack<T> acc = loadPack<T>(src[0] + p * 16);
    // One source in flight at a time, not unrolled: the fold is bound by the peers' links, and an
    // unrolled one needs registers for every pack in flight.
    COLL_NO_UNROLL
    for (int s = 1; s < nsrc; ++s) {
      Pack<T> t = loadPack<T>(src[s] + p * 16);
      COLL_UNROLL
      for (int e = 0; e < kN; ++e) acc.e[e] = apply<T, O>(acc.e[e], t.e[e]);
    }
    COLL_NO_UNROLL
    for (int d = 0; d < ndst; ++d) storePack<T>(dst[d] + p * 16, acc);
  }
  COLL_NO_UNROLL
  for (uint64_t i = packs * kN + static_cast<uint64_t>(tid); i < n; i += step) {
    T v = loadElem<T>(src[0] + i * kSize, elems);
    COLL_NO_UNROLL
    for (int s = 1; s < nsrc; ++s) v = apply<T, O>(v, loadElem<T>(src[s] + i * kSize, elems));
    COLL_NO_UNROLL
    for (int d = 0; d < ndst; ++d) storeElem<T>(dst[d] + i * kSize, v, elems);
  }
}

/// dst = block 0 op block 1 op ... op block nranks-1 of `blocks` (count elements each, back to
/// back), in rank order on every rank (the same bits everywhere); divided when flags say so.
template <typename T, Op O>
COLL_HD void reduceBlocks(const char* blocks, char* dst, uint64_t count, int nranks, uint32_t flags, int tid,
                          int nthreads) {
  constexpr uint64_t kSize = sizeof(T);
  constexpr int kN = Pack<T>::kN;
  constexpr int kUnroll = kUnrollOf<T>;
  const uint64_t stride = count * kSize;
  const bool div = O == Op::kSum && (flags & kMoveDivide) != 0;
  uintptr_t bits = reinterpret_cast<uintptr_t>(blocks) | reinterpret_cast<uintptr_t>(dst);
  bool elems = bits % kSize == 0 && stride % kSize == 0;
  uint64_t packs = ((bits | stride) & 15) == 0 ? count / kN : 0;
  const uint64_t step = static_cast<uint64_t>(nthreads);
  uint64_t p = static_cast<uint64_t>(tid);
  for (; !div && p + (kUnroll - 1) * step < packs; p += kUnroll * step) {  // no division in here
    Pack<T> acc[kUnroll];
    COLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) acc[k] = loadPack<T>(blocks + (p + k * step) * 16);
    for (int b = 1; b < nranks; ++b) {
      Pack<T> t[kUnroll];
      COLL_UNROLL
      for (int k = 0; k < kUnroll; ++k) t[k] = loadPack<T>(blocks + b * stride + (p + k * step) * 16);
      COLL_UNROLL
      for (int k = 0; k < kUnroll; ++k) {
        COLL_UNROLL
        for (int e = 0; e < kN; ++e) acc[k].e[e] = apply<T, O>(acc[k].e[e], t[k].e[e]);
      }
    }
    COLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) storePack<T>(dst + (p + k * step) * 16, acc[k]);
  }
  for (; p < packs; p += step) {
    Pack<T> acc = loadPack<T>(blocks + p * 16);
    for (int b = 1; b < nranks; ++b) {
      Pack<T> t = loadPack<T>(blocks + b * stride + p * 16);
      COLL_UNROLL
      for (int e = 0; e < kN; ++e) acc.e[e] = apply<T, O>(acc.e[e], t.e[e]);
    }
    if (div) {
      COLL_UNROLL
      for (int e = 0; e < kN; ++e) acc.e[e] = divide(acc.e[e], nranks);
    }
    storePack<T>(dst + p * 16, acc);
  }
  COLL_NO_UNROLL
  for (uint64_t i = packs * kN + tid; i < count; i += step) {
    T v = loadElem<T>(blocks + i * kSize, elems);
    COLL_NO_UNROLL
    for (int b = 1; b < nranks; ++b) v = apply<T, O>(v, loadElem<T>(blocks + b * stride + i * kSize, elems));
    storeElem<T>(dst + i * kSize, div ? divide(v, nranks) : v, elems);
  }
}

}  // namespace coll::kernels::dev
