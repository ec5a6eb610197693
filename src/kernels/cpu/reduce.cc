#include "kernels/cpu/reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/arith.h"

namespace coll::kernels {
namespace {

// The element arithmetic is the one the device code uses (kernels/arith.h): same bits everywhere.
using dev::Bf16;
using dev::Fp8E4m3;
using dev::Fp8E5m2;
using dev::Half;
using dev::Op;

template <Op O, typename T>
__attribute__((always_inline)) inline void loop(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = dev::apply<T, O>(x[i], y[i]);
}

// dst[i] = scalar * src[i], with collProd's semantics.
template <typename T>
__attribute__((always_inline)) inline void scaleLoop(void* dst, const void* src, size_t n, const void* scalar) {
  T k;
  std::memcpy(&k, scalar, sizeof(T));
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = dev::apply<T, Op::kProd>(k, x[i]);
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);
using ScaleFn = void (*)(void*, const void*, size_t, const void*);

// One non-template function per (type, op), so that target_clones can multiversion it. Under
// ThreadSanitizer the ifunc resolvers would run before its runtime starts, so that build keeps
// the baseline loop only.
#ifdef COLL_NO_TARGET_CLONES
#define COLL_TARGET_CLONES
#else
#define COLL_TARGET_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#define COLL_REDUCE_FN(NAME, OP, TYPE) \
  COLL_TARGET_CLONES void NAME(void* d, const void* a, const void* b, size_t n) { loop<OP, TYPE>(d, a, b, n); }
#define COLL_REDUCE_TYPE(SUFFIX, TYPE)           \
  COLL_REDUCE_FN(sum_##SUFFIX, Op::kSum, TYPE)   \
  COLL_REDUCE_FN(prod_##SUFFIX, Op::kProd, TYPE) \
  COLL_REDUCE_FN(max_##SUFFIX, Op::kMax, TYPE)   \
  COLL_REDUCE_FN(min_##SUFFIX, Op::kMin, TYPE)

COLL_REDUCE_TYPE(i8, int8_t)
COLL_REDUCE_TYPE(u8, uint8_t)
COLL_REDUCE_TYPE(i32, int32_t)
COLL_REDUCE_TYPE(u32, uint32_t)
COLL_REDUCE_TYPE(i64, int64_t)
COLL_REDUCE_TYPE(u64, uint64_t)
COLL_REDUCE_TYPE(f16, Half)
COLL_REDUCE_TYPE(f32, float)
COLL_REDUCE_TYPE(f64, double)
COLL_REDUCE_TYPE(bf16, Bf16)
COLL_REDUCE_TYPE(e4m3, Fp8E4m3)
COLL_REDUCE_TYPE(e5m2, Fp8E5m2)

// Bitwise ops, integer types only.
#define COLL_BITWISE_TYPE(SUFFIX, TYPE)          \
  COLL_REDUCE_FN(band_##SUFFIX, Op::kBand, TYPE) \
  COLL_REDUCE_FN(bor_##SUFFIX, Op::kBor, TYPE)   \
  COLL_REDUCE_FN(bxor_##SUFFIX, Op::kBxor, TYPE)

COLL_BITWISE_TYPE(i8, int8_t)
COLL_BITWISE_TYPE(u8, uint8_t)
COLL_BITWISE_TYPE(i32, int32_t)
COLL_BITWISE_TYPE(u32, uint32_t)
COLL_BITWISE_TYPE(i64, int64_t)
COLL_BITWISE_TYPE(u64, uint64_t)

#define COLL_SCALE_FN(SUFFIX, TYPE)                                                         \
  COLL_TARGET_CLONES void scale_##SUFFIX(void* d, const void* s, size_t n, const void* k) { \
    scaleLoop<TYPE>(d, s, n, k);                                                            \
  }

COLL_SCALE_FN(i8, int8_t)
COLL_SCALE_FN(u8, uint8_t)
COLL_SCALE_FN(i32, int32_t)
COLL_SCALE_FN(u32, uint32_t)
COLL_SCALE_FN(i64, int64_t)
COLL_SCALE_FN(u64, uint64_t)
COLL_SCALE_FN(f16, Half)
COLL_SCALE_FN(f32, float)
COLL_SCALE_FN(f64, double)
COLL_SCALE_FN(bf16, Bf16)
COLL_SCALE_FN(e4m3, Fp8E4m3)
COLL_SCALE_FN(e5m2, Fp8E5m2)

// Indexed by collDataType_t, then by op (sum, prod, max, min).
const ReduceFn kTable[collNumTypes][4] = {
    {sum_i8, prod_i8, max_i8, min_i8},         {sum_u8, prod_u8, max_u8, min_u8},
    {sum_i32, prod_i32, max_i32, min_i32},     {sum_u32, prod_u32, max_u32, min_u32},
    {sum_i64, prod_i64, max_i64, min_i64},     {sum_u64, prod_u64, max_u64, min_u64},
    {sum_f16, prod_f16, max_f16, min_f16},     {sum_f32, prod_f32, max_f32, min_f32},
    {sum_f64, prod_f64, max_f64, min_f64},     {sum_bf16, prod_bf16, max_bf16, min_bf16},
    {sum_e4m3, prod_e4m3, max_e4m3, min_e4m3}, {sum_e5m2, prod_e5m2, max_e5m2, min_e5m2},
};

// The integer types (collInt8..collUint64, the first six collDataType_t values), then by op
// (band, bor, bxor).
constexpr int kIntegerTypes = 6;
static_assert(collInt8 == 0 && collUint64 == kIntegerTypes - 1, "the integer types come first");
const ReduceFn kBitwiseTable[kIntegerTypes][3] = {
    {band_i8, bor_i8, bxor_i8},    {band_u8, bor_u8, bxor_u8},    {band_i32, bor_i32, bxor_i32},
    {band_u32, bor_u32, bxor_u32}, {band_i64, bor_i64, bxor_i64}, {band_u64, bor_u64, bxor_u64},
};

// Indexed by collDataType_t.
const ScaleFn kScaleTable[collNumTypes] = {scale_i8,  scale_u8,  scale_i32, scale_u32,  scale_i64,  scale_u64,
                                           scale_f16, scale_f32, scale_f64, scale_bf16, scale_e4m3, scale_e5m2};

template <typename T>
void divideAll(void* data, size_t n, int nranks) {
  T* d = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) d[i] = dev::divide(d[i], nranks);
}

}  // namespace

bool supportsOp(collDataType_t type, collRedOp_t op) {
  int t = static_cast<int>(type), o = static_cast<int>(op);
  if (t < 0 || t >= collNumTypes) return false;
  if (o >= 0 && o < collNumOps) return true;
  return o >= collBand && o <= collBxor && t < kIntegerTypes;
}

void reduce(void* dst, const void* a, const void* b, size_t n, collDataType_t type, collRedOp_t op) {
  if (op >= collBand) return kBitwiseTable[type][op - collBand](dst, a, b, n);
  int o = op == collAvg ? 0 : static_cast<int>(op);
  kTable[type][o](dst, a, b, n);
}

void scale(void* dst, const void* src, size_t n, collDataType_t type, const void* scalar) {
  kScaleTable[type](dst, src, n, scalar);
}

void finishAverage(void* data, size_t n, collDataType_t type, int nranks) {
  switch (type) {
    case collInt8:
      return divideAll<int8_t>(data, n, nranks);
    case collUint8:
      return divideAll<uint8_t>(data, n, nranks);
    case collInt32:
      return divideAll<int32_t>(data, n, nranks);
    case collUint32:
      return divideAll<uint32_t>(data, n, nranks);
    case collInt64:
      return divideAll<int64_t>(data, n, nranks);
    case collUint64:
      return divideAll<uint64_t>(data, n, nranks);
    case collFloat16:
      return divideAll<Half>(data, n, nranks);
    case collFloat32:
      return divideAll<float>(data, n, nranks);
    case collFloat64:
      return divideAll<double>(data, n, nranks);
    case collBfloat16:
      return divideAll<Bf16>(data, n, nranks);
    case collFloat8e4m3:
      return divideAll<Fp8E4m3>(data, n, nranks);
    case collFloat8e5m2:
      return divideAll<Fp8E5m2>(data, n, nranks);
    default:
      return;
  }
}

float halfToFloat(uint16_t h) { return dev::widen(Half{h}); }
uint16_t floatToHalf(float f) { return dev::narrow(f, Half{}).bits; }
float bfloat16ToFloat(uint16_t b) { return dev::widen(Bf16{b}); }
uint16_t floatToBfloat16(float f) { return dev::narrow(f, Bf16{}).bits; }
float float8e4m3ToFloat(uint8_t v) { return dev::widen(Fp8E4m3{v}); }
uint8_t floatToFloat8e4m3(float f) { return dev::narrow(f, Fp8E4m3{}).bits; }
float float8e5m2ToFloat(uint8_t v) { return dev::widen(Fp8E5m2{v}); }
uint8_t floatToFloat8e5m2(float f) { return dev::narrow(f, Fp8E5m2{}).bits; }

}  // namespace coll::kernels
