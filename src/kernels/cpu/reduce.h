// Host reduce and copy kernels for every collDataType_t x collRedOp_t.
//
// Each (type, op) loop is compiled three times (x86-64-v4 = AVX-512, x86-64-v3 = AVX2 + F16C,
// baseline) and the loader picks the best the CPU runs (GCC target_clones / ifunc). The element
// arithmetic is kernels/arith.h's, which the device code shares. Semantics, identical in every
// variant and in tests/unit/test_kernels.cc's scalar reference:
//  - integers wrap on overflow (computed as unsigned);
//  - float16, bfloat16 and the float8 types are computed in float32 and rounded to nearest-even
//    after every op (float8 saturating at its largest finite value);
//  - max/min propagate NaN; max(-0, +0) = +0 and min(-0, +0) = -0 whatever the order, so a
//    reduction gives the same bits in any order;
//  - collAvg reduces as collSum; finishAverage() divides the final sum by the rank count
//    (integers: C division, truncating toward zero, as NCCL);
//  - collBand, collBor and collBxor (coll extensions) exist for the integer types only;
//  - scale() multiplies by a scalar with the semantics of collProd (the first step of a
//    collRedOpCreatePreMulSum op, which then reduces as collSum).
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/coll.h"

namespace coll::kernels {

/// Bytes per element; 0 for an invalid type.
inline size_t typeSize(collDataType_t type) {
  switch (type) {
    case collInt8:
    case collUint8:
    case collFloat8e4m3:
    case collFloat8e5m2:
      return 1;
    case collFloat16:
    case collBfloat16:
      return 2;
    case collInt32:
    case collUint32:
    case collFloat32:
      return 4;
    case collInt64:
    case collUint64:
    case collFloat64:
      return 8;
    default:
      return 0;
  }
}

/// dst[i] = a[i] op b[i] for n elements. dst may alias a or b. type and op must be valid.
void reduce(void* dst, const void* a, const void* b, size_t n, collDataType_t type, collRedOp_t op);

/// Whether reduce() takes op with type: collSum..collAvg with every valid type, collBand, collBor
/// and collBxor with the integer types (collInt8..collUint64). False for anything else.
bool supportsOp(collDataType_t type, collRedOp_t op);

/// dst[i] = scalar * src[i] for n elements, scalar being one element of type (its bits, any
/// alignment). Integers wrap (computed as unsigned); float16/bfloat16 multiply in float32 and
/// round to nearest-even. dst may alias src. type must be valid.
void scale(void* dst, const void* src, size_t n, collDataType_t type, const void* scalar);

/// data[i] = data[i] / nranks: the last step of collAvg.
void finishAverage(void* data, size_t n, collDataType_t type, int nranks);

/// float <-> float16/bfloat16/float8 bits with round-to-nearest-even (NaN stays NaN; float8
/// saturates at its largest finite value, as CUDA's __NV_SATFINITE conversions).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);
float float8e4m3ToFloat(uint8_t v);
uint8_t floatToFloat8e4m3(float f);
float float8e5m2ToFloat(uint8_t v);
uint8_t floatToFloat8e5m2(float f);

}  // namespace coll::kernels
