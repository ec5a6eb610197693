// Element arithmetic of the device executor, for both builds (portable.h): every collDataType_t
// x collRedOp_t with the host kernels' semantics (kernels/cpu/reduce.h), so a device result has
// the same bits as a host result:
//  - integers wrap (computed unsigned); max/min compare signed or unsigned as the type says;
//  - float16/bfloat16 are widened to float32 for each op and rounded to nearest-even after it;
//  - floating max/min propagate NaN and order signed zeros (max(-0,+0) = +0 in either order);
//  - collAvg reduces as a sum and divide() ends it (integers: C division); a PreMulSum op
//    multiplies each input element by its scalar (as collProd) and reduces as a sum.
// float16/bfloat16 conversions are written out here (bit manipulation), so that the host build
// rounds as IEEE does; on the GPU the non-NaN cases use the hardware's cvt (round to nearest-even,
// subnormals kept), which gives the same bits in one instruction, and NaNs take the written-out
// path so that their payloads match the host's too.
#pragma once

#include <type_traits>

#include "exec/cuda/portable.h"

namespace coll::exec::dev {

/// Storage of float16 and bfloat16 elements: the 16-bit pattern.
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
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
#endif
  if ((bits & 0x7fffffffu) > 0x7f800000u) return Bf16{nan};
  bits += 0x7fffu + ((bits >> 16) & 1u);  // nearest, ties to even
  return Bf16{static_cast<uint16_t>(bits >> 16)};
}

COLL_HD float widen(Half v) {
#if defined(__CUDA_ARCH__)
  // The hardware's conversion is exact, as the code below is; a NaN keeps its payload as below
  // (which the hardware does not promise), by a select rather than a branch.
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  uint32_t nan = static_cast<uint32_t>(v.bits & 0x8000u) << 16 | 0x7f800000u | (v.bits & 0x3ffu) << 13;
  bool isNan = (v.bits & 0x7c00u) == 0x7c00u && (v.bits & 0x3ffu) != 0;
  return isNan ? bitsToFloat(nan) : f;
#endif
  uint32_t sign = static_cast<uint32_t>(v.bits & 0x8000u) << 16;
  uint32_t exp = (v.bits >> 10) & 0x1fu, man = v.bits & 0x3ffu;
  if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000u | (man << 13));  // inf, NaN (payload kept)
  if (exp == 0) {
    if (man == 0) return bitsToFloat(sign);
    // Subnormal: man x 2^-24, exact in float32.
    float f = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (man << 13));
}

COLL_HD Half narrow(float f, Half) {
  uint32_t bits = floatToBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  uint16_t nan = static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
#if defined(__CUDA_ARCH__)
  uint16_t h;  // round to nearest-even with subnormals and overflow to inf, as below
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return Half{abs > 0x7f800000u ? nan : h};  // a select, not a branch
#endif
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

template <typename T>
struct IsNarrow {
  static constexpr bool value = false;
};
template <>
struct IsNarrow<Half> {
  static constexpr bool value = true;
};
template <>
struct IsNarrow<Bf16> {
  static constexpr bool value = true;
};

template <typename T>
struct Unsigned;
template <>
struct Unsigned<int8_t> {
  using type = uint8_t;
};
template <>
struct Unsigned<uint8_t> {
  using type = uint8_t;
};
template <>
struct Unsigned<int32_t> {
  using type = uint32_t;
};
template <>
struct Unsigned<uint32_t> {
  using type = uint32_t;
};
template <>
struct Unsigned<int64_t> {
  using type = uint64_t;
};
template <>
struct Unsigned<uint64_t> {
  using type = uint64_t;
};

/// a op b for one element.
template <typename T, Op O>
COLL_HD T apply(T a, T b) {
  if constexpr (IsNarrow<T>::value) {
    return narrow(applyFloat<O>(widen(a), widen(b)), T{});
  } else if constexpr (std::is_floating_point<T>::value) {
    return applyFloat<O>(a, b);
  } else {
    using U = typename Unsigned<T>::type;
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

}  // namespace coll::exec::dev
