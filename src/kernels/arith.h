// Element arithmetic for every collDataType_t x collRedOp_t, written once for the host kernels
// (kernels/cpu/reduce.cc), the device kernels (kernels/cuda/reduce.cu) and the device interpreter
// in both its builds (exec/cuda), so that a result has the same bits wherever it was computed:
//  - integers wrap (computed unsigned); max/min compare signed or unsigned as the type says;
//  - float16, bfloat16 and the float8 types are widened to float32 for each op and rounded to
//    nearest-even once after it ("accumulate in float, round once per step");
//  - floating max/min propagate NaN and order signed zeros (max(-0,+0) = +0 in either order), so a
//    reduction gives the same bits in any order;
//  - collAvg reduces as a sum and divide() ends it (integers: C division); a PreMulSum op
//    multiplies each input element by its scalar (as collProd) and reduces as a sum.
//
// The float8 types are OCP's (and NCCL's, CUDA's __nv_fp8_*): e4m3 ("fn": no infinities, NaN is
// S.1111.111, largest 448) and e5m2 (IEEE-like, largest 57344). Rounding to them saturates to the
// largest finite value, as CUDA's conversions do by default (__NV_SATFINITE) and so NCCL's sums
// do; a NaN stays a NaN. The conversions are written with selects rather than branches, so that
// the host loops vectorise and the GPU code has no divergence.
//
// float16 on the host goes through the compiler's _Float16 (F16C instructions in the x86-64-v3
// and v4 clones of the host loops); on the GPU the non-NaN cases use the hardware's cvt. Both
// round to nearest-even with subnormals, as the written-out code below does; NaNs keep their
// payload with the quiet bit set on every path.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/hd.h"

namespace coll::kernels::dev {

/// Storage of the narrow floating types: their bit patterns.
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};
struct Fp8E4m3 {
  uint8_t bits;
};
struct Fp8E5m2 {
  uint8_t bits;
};

/// The reduction applied element by element (collAvg and PreMulSum reduce as kSum).
enum class Op : int { kSum, kProd, kMax, kMin, kBand, kBor, kBxor };

COLL_HD float bitsToFloat(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}
COLL_HD uint32_t floatToBits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

COLL_HD float widen(Bf16 v) { return bitsToFloat(static_cast<uint32_t>(v.bits) << 16); }
COLL_HD Bf16 narrow(float f, Bf16) {
  uint32_t bits = floatToBits(f);
  uint16_t nan = static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN, payload kept
#if defined(__CUDA_ARCH__)
  uint16_t h;  // the hardware's round to nearest-even: the same bits as below, in one instruction
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return Bf16{(bits & 0x7fffffffu) > 0x7f800000u ? nan : h};
#else
  uint16_t rounded = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);  // nearest, ties to even
  return Bf16{(bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded};
#endif
}

#if !defined(__CUDA_ARCH__) && !defined(__CUDACC__) && defined(__FLT16_MAX__)
#define COLL_HOST_FLOAT16 1  // the compiler has _Float16: conversions it can vectorise
#endif

COLL_HD float widen(Half v) {
#if defined(__CUDA_ARCH__)
  // The hardware's conversion is exact, as the code below is; a NaN keeps its payload as below
  // (which the hardware does not promise), by a select rather than a branch.
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  uint32_t nan = static_cast<uint32_t>(v.bits & 0x8000u) << 16 | 0x7fc00000u | (v.bits & 0x3ffu) << 13;
  bool isNan = (v.bits & 0x7c00u) == 0x7c00u && (v.bits & 0x3ffu) != 0;
  return isNan ? bitsToFloat(nan) : f;
#elif defined(COLL_HOST_FLOAT16)
  _Float16 h;
  memcpy(&h, &v.bits, 2);
  return static_cast<float>(h);
#else
  uint32_t sign = static_cast<uint32_t>(v.bits & 0x8000u) << 16;
  uint32_t exp = (v.bits >> 10) & 0x1fu, man = v.bits & 0x3ffu;
  if (exp == 0x1f)  // inf; NaN quieted, payload kept
    return bitsToFloat(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
  if (exp == 0) {
    // Subnormal: man x 2^-24, exact in float32.
    float f = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (man << 13));
#endif
}

COLL_HD Half narrow(float f, Half) {
#if defined(COLL_HOST_FLOAT16)
  _Float16 h = static_cast<_Float16>(f);
  Half r;
  memcpy(&r.bits, &h, 2);
  return r;
#else
  uint32_t bits = floatToBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  uint16_t nan = static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
#endif
#if defined(__CUDA_ARCH__)
  uint16_t h;  // round to nearest-even with subnormals and overflow to inf, as below
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return Half{abs > 0x7f800000u ? nan : h};  // a select, not a branch
#elif !defined(COLL_HOST_FLOAT16)
  if (abs > 0x7f800000u) return Half{nan};
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Below the smallest normal (2^-14): subnormal or zero, rounded to nearest-even in units of 2^-24.
    if (abs < 0x33000000u) return Half{sign};  // below half the smallest subnormal: zero
    uint32_t exp = abs >> 23, man = (abs & 0x7fffffu) | 0x800000u;
    int shift = static_cast<int>(126 - exp);  // man x 2^(exp-150) in units of 2^-24: shift right by 126-exp
    uint32_t q = man >> shift, rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return Half{static_cast<uint16_t>(sign | q)};
  }
  uint32_t q = ((abs >> 13) - (112u << 10));
  uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;  // may carry into the exponent: still right
  return Half{static_cast<uint16_t>(sign | q)};
#endif
}

/// All ones where c holds, else 0: the host loops blend with masks rather than ?:, which GCC's
/// vectoriser takes only when both sides have one type (it narrows the float8 codes otherwise).
COLL_HD uint32_t maskIf(bool c) { return 0u - static_cast<uint32_t>(c); }

/// float -> an 8-bit float with kMan mantissa bits and exponent bias kBias, rounded to
/// nearest-even, saturating at the largest finite code kMax; NaN becomes nanCode (with the sign).
/// Integer arithmetic and masks only, so that the host loops vectorise (a floating-point operation
/// under a condition keeps GCC from if-converting a loop, as it may trap): normal results round
/// on the float's bits (a carry moves into the exponent, as it should; beyond kMax, infinity
/// included, the minimum saturates); results below the smallest normal shift the float's
/// significand right to the target's subnormal step, by a per-element shift, and round the bits
/// shifted out (a carry reaches the smallest normal's code, which is right).
template <int kMan, int kBias, uint32_t kMax>
COLL_HD uint8_t narrowFp8(float f, uint32_t nanCode) {
  uint32_t bits = floatToBits(f);
  uint32_t sign = (bits >> 24) & 0x80u;
  uint32_t abs = bits & 0x7fffffffu;
  constexpr int kDrop = 23 - kMan;
  uint32_t normal = ((abs + ((1u << (kDrop - 1)) - 1u) + ((abs >> kDrop) & 1u)) >> kDrop) -
                    (static_cast<uint32_t>(127 - kBias) << kMan);
  // Below the smallest normal: significand x 2^(e - 150) in steps of 2^(1 - kBias - kMan) is the
  // significand shifted right by (151 - kBias - kMan) - e, at least 24 - kMan; from 31 on, zero.
  uint32_t e = abs >> 23;
  uint32_t significand = (abs & 0x7fffffu) | (0x800000u & maskIf(e != 0));
  uint32_t shift = static_cast<uint32_t>(151 - kBias - kMan) - e;
  shift = shift - 1u > 30u ? 31u : shift;  // 1..31 (0 and the wrapped ones are normal inputs: unused)
  uint32_t q = significand >> shift;
  uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  uint32_t sub = q + ((static_cast<uint32_t>(rest > half) | (static_cast<uint32_t>(rest == half) & q)) & 1u);
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  uint32_t isSub = maskIf(abs < kMinNormal);
  uint32_t code = (sub & isSub) | (normal & ~isSub);
  code = code < kMax ? code : kMax;
  uint32_t isNan = maskIf(abs > 0x7f800000u);
  code = (nanCode & isNan) | (code & ~isNan);
  return static_cast<uint8_t>(sign | code);
}

/// An 8-bit float with kMan mantissa bits and exponent bias kBias -> float, exactly: the magnitude
/// with exponent field e (1 for e = 0) rebiased into a float is exact for normals; for subnormals
/// (e = 0) it is the smallest normal too much, which one exact subtraction removes (done for every
/// element, of 0 for normals, so that no floating-point operation is conditional and the host
/// loops vectorise). The sign goes on last, so that -0 stays -0. kInfinities (e5m2): the all-ones
/// exponent is infinity, or a NaN whose payload is kept with the quiet bit set, as float16's;
/// otherwise (e4m3, "fn") S.1111.111 is the only NaN and the rest of that exponent is finite.
template <int kMan, int kBias, bool kInfinities>
COLL_HD float widenFp8(uint32_t b) {
  constexpr uint32_t kExpMax = (1u << (7 - kMan)) - 1u;
  constexpr int kShift = 23 - kMan;
  uint32_t exp = (b >> kMan) & kExpMax, man = b & ((1u << kMan) - 1u);
  uint32_t isSub = maskIf(exp == 0);
  uint32_t magnitude = ((exp | (1u & isSub)) + static_cast<uint32_t>(127 - kBias)) << 23 | man << kShift;
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  uint32_t out = floatToBits(bitsToFloat(magnitude) - bitsToFloat(kMinNormal & isSub));
  if constexpr (kInfinities) {
    uint32_t special = 0x7f800000u | man << kShift | (0x400000u & maskIf(man != 0));
    uint32_t isSpecial = maskIf(exp == kExpMax);
    out = (out & ~isSpecial) | (special & isSpecial);
  } else {
    out |= 0x7fc00000u & maskIf((b & 0x7fu) == 0x7fu);
  }
  return bitsToFloat(out | (b & 0x80u) << 24);
}

COLL_HD float widen(Fp8E4m3 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // sm_89 and later widen to float16 in one instruction (exact: every e4m3 value is a float16),
  // then float16's path; the only NaN code stays a NaN.
  uint32_t pair;
  uint16_t in = static_cast<uint16_t>(v.bits);
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"(in));
  return widen(Half{static_cast<uint16_t>(pair & 0xffffu)});
#endif
  return widenFp8<3, 7, false>(v.bits);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// sm_89 and later convert to float8 in one instruction, rounding to nearest-even with satfinite
// (a magnitude above the largest finite value, infinity included, becomes it), as narrowFp8 does:
// the same bits for every non-NaN input, in far fewer registers; NaNs take narrowFp8's code.
// Both halves of the pair are f's: the low byte is the result.
#define COLL_FP8_CVT(KIND, F, OUT) asm("cvt.rn.satfinite." KIND "x2.f32 %0, %1, %1;" : "=h"(OUT) : "f"(F))
#endif

COLL_HD Fp8E4m3 narrow(float f, Fp8E4m3) {
  // Largest 448 (0x7e); NaN 0x7f.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t h;
  COLL_FP8_CVT("e4m3", f, h);
  uint32_t bits = floatToBits(f);
  uint8_t nan = static_cast<uint8_t>(((bits >> 24) & 0x80u) | 0x7fu);
  return Fp8E4m3{(bits & 0x7fffffffu) > 0x7f800000u ? nan : static_cast<uint8_t>(h & 0xffu)};
#else
  return Fp8E4m3{narrowFp8<3, 7, 0x7eu>(f, 0x7fu)};
#endif
}

COLL_HD float widen(Fp8E5m2 v) {
#if defined(__CUDA_ARCH__)
  // On the GPU: e5m2 is the upper byte of a float16, the same value exactly, and float16's path
  // is one cvt (and the NaN select), fewer registers than the integer code below.
  return widen(Half{static_cast<uint16_t>(v.bits << 8)});
#endif
  return widenFp8<2, 15, true>(v.bits);
}
COLL_HD Fp8E5m2 narrow(float f, Fp8E5m2) {
  // Largest 57344 (0x7b); a NaN keeps the top of its payload with the quiet bit set, as float16's.
  uint32_t bits = floatToBits(f);
  uint32_t nan = 0x7eu | ((bits >> 21) & 1u);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t h;
  COLL_FP8_CVT("e5m2", f, h);
  uint8_t signedNan = static_cast<uint8_t>(((bits >> 24) & 0x80u) | nan);
  return Fp8E5m2{(bits & 0x7fffffffu) > 0x7f800000u ? signedNan : static_cast<uint8_t>(h & 0xffu)};
#else
  return Fp8E5m2{narrowFp8<2, 15, 0x7bu>(f, nan)};
#endif
}

COLL_HD bool floatSign(float f) { return (floatToBits(f) >> 31) != 0; }
COLL_HD bool floatSign(double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  return (b >> 63) != 0;
}

template <typename F>
COLL_HD F maxOrdered(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a > b) return a;
  if (b > a) return b;
  return floatSign(a) ? b : a;
}
template <typename F>
COLL_HD F minOrdered(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a < b) return a;
  if (b < a) return b;
  return floatSign(a) ? a : b;
}

template <Op O, typename F>
COLL_HD F applyFloat(F a, F b) {
  if constexpr (O == Op::kProd) return a * b;
  if constexpr (O == Op::kMax) return maxOrdered(a, b);
  if constexpr (O == Op::kMin) return minOrdered(a, b);
  return a + b;
}

/// Whether T is stored narrow and computed in float32.
template <typename T>
struct IsNarrow {
  static constexpr bool value = std::is_same<T, Half>::value || std::is_same<T, Bf16>::value ||
                                std::is_same<T, Fp8E4m3>::value || std::is_same<T, Fp8E5m2>::value;
};

/// a op b for one element.
template <typename T, Op O>
COLL_HD T apply(T a, T b) {
  if constexpr (IsNarrow<T>::value) {
    return narrow(applyFloat<O>(widen(a), widen(b)), T{});
  } else if constexpr (std::is_floating_point<T>::value) {
    return applyFloat<O>(a, b);
  } else {
    using U = typename std::make_unsigned<T>::type;
    if constexpr (O == Op::kMax) return a > b ? a : b;
    if constexpr (O == Op::kMin) return a < b ? a : b;
    if constexpr (O == Op::kBand) return static_cast<T>(a & b);
    if constexpr (O == Op::kBor) return static_cast<T>(a | b);
    if constexpr (O == Op::kBxor) return static_cast<T>(a ^ b);
    if constexpr (O == Op::kProd) return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}

/// The end of collAvg: v / nranks.
template <typename T>
COLL_HD T divide(T v, int nranks) {
  if constexpr (IsNarrow<T>::value) {
    return narrow(widen(v) / static_cast<float>(nranks), T{});
  } else if constexpr (std::is_floating_point<T>::value) {
    return v / static_cast<T>(nranks);
  } else {
    return static_cast<T>(v / static_cast<T>(nranks));
  }
}

/// PreMulSum's first step: scalar x v, with collProd's semantics.
template <typename T>
COLL_HD T premul(T v, T scalar) {
  return apply<T, Op::kProd>(v, scalar);
}

}  // namespace coll::kernels::dev
