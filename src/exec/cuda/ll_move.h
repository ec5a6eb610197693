// The device interpreter's waits and its LL mover (both builds, portable.h): polling a flag with
// the abort word and a deadline, and moving a piece through LL lines, whose flag travels in the
// same store as the data. The bulk movers, which do not wait, are the kernels' (kernels/cuda/move.h).
#pragma once

#include "exec/cuda/portable.h"
#include "kernels/cuda/move.h"

namespace coll::exec::dev {

// The element types, their arithmetic and the bulk movers are the kernels' (kernels/arith.h,
// kernels/cuda/move.h); the interpreter adds the waits, the FIFOs and the schedule around them.
using namespace coll::kernels::dev;  // NOLINT(google-build-using-namespace)

/// Polls ready() until it holds (0), the abort word rises (DevResult::kAborted), or nothing moved
/// for timeoutNs (DevResult::kTimeout). The abort word and the clock are read every 256 polls, and
/// then waitWord (DevResult::recvWait or sendWait, where given) says peer + 1, and stepWord
/// (DevResult::atStep, where given) step + 1; the wait that ends after that clears waitWord. The
/// ready path writes nothing: a wait that ends within 256 polls costs no store to host memory.
template <typename Ready>
COLL_HD int pollUntil(Ready ready, const uint32_t* abortFlag, uint64_t timeoutNs, uint32_t* waitWord = nullptr,
                      uint32_t peer = 0, uint32_t* stepWord = nullptr, uint32_t step = 0) {
  uint64_t start = 0;
  for (uint64_t spins = 1;; ++spins) {
    if (ready()) {
      if (waitWord && spins > 256) storeVolatile(waitWord, 0);
      return 0;
    }
    if ((spins & 255) == 0) {
      if (abortFlag && loadVolatile(abortFlag)) return 1;  // DevResult::kAborted
      if (stepWord) storeVolatile(stepWord, step + 1);
      if (waitWord) storeVolatile(waitWord, peer + 1);
      uint64_t now = nowNs();
      if (start == 0) start = now;
      if (timeoutNs && now - start > timeoutNs) return 2;  // DevResult::kTimeout
    }
    backoff(spins);
  }
}

/// LL: the piece's lines u = tid, tid + nthreads, ... (8 data bytes each, the last one partly):
/// waits for each received line's flag, combines, stores to dst and/or the outgoing line with its
/// flag. Returns 0, or pollUntil's failure code for the first line that never came.
template <typename T, Op O>
COLL_HD int moveLL(const LLLine* in, uint32_t inFlag, const char* src, char* dst, LLLine* out, uint32_t outFlag,
                   uint64_t bytes, uint32_t flags, T scalar, int nranks, const uint32_t* abortFlag, uint64_t timeoutNs,
                   uint32_t* waitWord, uint32_t peer, int tid, int nthreads, uint32_t* stepWord = nullptr,
                   uint32_t step = 0) {
  constexpr uint64_t kSize = sizeof(T);
  constexpr int kPer = static_cast<int>(8 / kSize);
  const bool hasR = in != nullptr, hasL = src != nullptr;
  uintptr_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  const bool words = (bits & 7) == 0;  // whole lines as one 8-byte load or store
  const bool elems = bits % kSize == 0;
  uint64_t lines = (bytes + 7) / 8;
  for (uint64_t u = tid; u < lines; u += nthreads) {
    uint64_t at = u * 8;
    int k = bytes - at < 8 ? static_cast<int>((bytes - at) / kSize) : kPer;
    uint64_t rv = 0, lv = 0;
    if (hasR) {
      int code =
          pollUntil([&] { return loadLL(in + u, inFlag, &rv); }, abortFlag, timeoutNs, waitWord, peer, stepWord, step);
      if (code) return code;
    }
    union {
      uint64_t w;
      T e[kPer];
    } r, l, o;
    r.w = rv;
    if (hasL) {
      if (words && k == kPer) {
        lv = *reinterpret_cast<const uint64_t*>(src + at);
      } else {
        // A partial line or an unaligned source: element by element into the word, in a loop
        // (one load in the code, and no register array indexed at run time).
        COLL_NO_UNROLL
        for (int e = 0; e < k; ++e) {
          T x = loadElem<T>(src + at + e * kSize, elems);
          uint64_t word = 0;
          memcpy(&word, &x, kSize);
          lv |= word << (8 * kSize * e);
        }
      }
    }
    l.w = lv;
    o.w = 0;
    COLL_UNROLL
    for (int e = 0; e < kPer; ++e)
      if (e < k) o.e[e] = combineOne<T, O>(r.e[e], l.e[e], hasR, hasL, flags, scalar, nranks);
    if (dst) {
      if (words && k == kPer) {
        *reinterpret_cast<uint64_t*>(dst + at) = o.w;
      } else {
        COLL_NO_UNROLL
        for (int e = 0; e < k; ++e) {
          uint64_t word = o.w >> (8 * kSize * e);
          T x;
          memcpy(&x, &word, kSize);
          storeElem<T>(dst + at + e * kSize, x, elems);
        }
      }
    }
    if (out) storeLL(out + u, o.w, outFlag);
  }
  return 0;
}

}  // namespace coll::exec::dev
