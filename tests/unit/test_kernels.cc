// The host kernels against a scalar reference, for every type and op, with special values; the
// bitwise ops (integer types) and scale (every type).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/reduce.h"

using namespace coll::kernels;

namespace {

template <typename T>
T refOp(T a, T b, collRedOp_t op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case collProd:
        return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case collMax:
        return std::max(a, b);
      case collMin:
        return std::min(a, b);
      default:
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
  } else {
    if (op == collMax || op == collMin) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      if (a == b) return (op == collMax) == std::signbit(a) ? b : a;
      return (op == collMax) == (a > b) ? a : b;
    }
    return op == collProd ? a * b : a + b;
  }
}

// Inputs: mostly random, plus the values that break careless kernels.
template <typename T>
std::vector<T> inputs(std::mt19937& rng, size_t n, int which) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      v[i] = static_cast<T>(rng());
      if (i % 7 == 0) v[i] = std::numeric_limits<T>::max();  // overflow must wrap
      if (i % 11 == 0) v[i] = std::numeric_limits<T>::min();
    } else {
      v[i] = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
      const T specials[] = {T(0),
                            -T(0),
                            std::numeric_limits<T>::infinity(),
                            -std::numeric_limits<T>::infinity(),
                            std::numeric_limits<T>::quiet_NaN(),
                            T(1),
                            T(-1)};
      if (i % 5 == 0) v[i] = specials[(i / 5 + which) % 7];
    }
  }
  return v;
}

template <typename T>
bool sameBits(T a, T b) {
  if constexpr (!std::is_integral_v<T>)
    if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void checkType(collDataType_t type) {
  std::mt19937 rng(1234 + type);
  for (collRedOp_t op : {collSum, collProd, collMax, collMin, collAvg}) {
    for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(31), size_t(1000), size_t(4099)}) {
      auto a = inputs<T>(rng, n, 0), b = inputs<T>(rng, n, 3);
      std::vector<T> out(n), inplace = a;
      reduce(out.data(), a.data(), b.data(), n, type, op);
      reduce(inplace.data(), inplace.data(), b.data(), n, type, op);
      for (size_t i = 0; i < n; ++i) {
        T want = refOp(a[i], b[i], op);
        INFO("type " << type << " op " << op << " n " << n << " i " << i);
        REQUIRE(sameBits(out[i], want));
        REQUIRE(sameBits(inplace[i], want));
      }
    }
  }
}

// float16/bfloat16/float8: the reference works in float32 and rounds with the checked converters.
template <typename S>
void checkHalf(collDataType_t type, float (*toF)(S), S (*fromF)(float)) {
  std::mt19937 rng(99 + type);
  for (collRedOp_t op : {collSum, collProd, collMax, collMin}) {
    size_t n = 3001;
    auto fa = inputs<float>(rng, n, 1), fb = inputs<float>(rng, n, 4);
    std::vector<S> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) a[i] = fromF(fa[i]), b[i] = fromF(fb[i]);
    reduce(out.data(), a.data(), b.data(), n, type, op);
    for (size_t i = 0; i < n; ++i) {
      float want = refOp(toF(a[i]), toF(b[i]), op);
      S wantBits = fromF(want);
      INFO("type " << type << " op " << op << " i " << i << " a " << toF(a[i]) << " b " << toF(b[i]));
      if (std::isnan(want))
        REQUIRE(std::isnan(toF(out[i])));
      else
        REQUIRE(out[i] == wantBits);
    }
  }
}

template <typename T>
T refBitwise(T a, T b, collRedOp_t op) {
  return static_cast<T>(op == collBand ? (a & b) : (op == collBor ? (a | b) : (a ^ b)));
}

template <typename T>
void checkBitwise(collDataType_t type) {
  std::mt19937 rng(77 + type);
  for (collRedOp_t op : {collBand, collBor, collBxor}) {
    CHECK(supportsOp(type, op));
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1003)}) {
      auto a = inputs<T>(rng, n, 0), b = inputs<T>(rng, n, 2);
      std::vector<T> out(n + 1, T(0x5a)), inplace = b;  // one guard element after the output
      reduce(out.data(), a.data(), b.data(), n, type, op);
      reduce(inplace.data(), a.data(), inplace.data(), n, type, op);
      for (size_t i = 0; i < n; ++i) {
        T want = refBitwise(a[i], b[i], op);
        INFO("type " << type << " op " << op << " n " << n << " i " << i);
        REQUIRE(out[i] == want);
        REQUIRE(inplace[i] == want);
      }
      REQUIRE(out[n] == T(0x5a));
    }
  }
}

// scale against k * x computed here: integers as unsigned (wrapping), floating types in their own
// arithmetic, float16/bfloat16 in float32 then rounded with the checked converters.
template <typename T>
void checkScale(collDataType_t type) {
  std::mt19937 rng(555 + type);
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1003)}) {
    auto x = inputs<T>(rng, n, 1);
    for (T k : inputs<T>(rng, 4, 2)) {
      std::vector<T> out(n + 1, T(3)), inplace = x;
      scale(out.data(), x.data(), n, type, &k);
      scale(inplace.data(), inplace.data(), n, type, &k);
      for (size_t i = 0; i < n; ++i) {
        T want;
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;
          want = static_cast<T>(static_cast<U>(k) * static_cast<U>(x[i]));
        } else {
          want = k * x[i];
        }
        INFO("type " << type << " n " << n << " i " << i);
        REQUIRE(sameBits(out[i], want));
        REQUIRE(sameBits(inplace[i], want));
      }
      REQUIRE(out[n] == T(3));
    }
  }
}

template <typename S>
void checkScaleHalf(collDataType_t type, float (*toF)(S), S (*fromF)(float)) {
  std::mt19937 rng(5 + type);
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1003)}) {
    auto fx = inputs<float>(rng, n, 3);
    std::vector<S> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = fromF(fx[i]);
    for (float fk : {0.5f, -3.0f, 1.7f, 1e4f}) {
      S k = fromF(fk);
      std::vector<S> out(n + 1, S(0x34));
      scale(out.data(), x.data(), n, type, &k);
      for (size_t i = 0; i < n; ++i) {
        float want = toF(k) * toF(x[i]);
        INFO("type " << type << " i " << i << " k " << toF(k) << " x " << toF(x[i]));
        if (std::isnan(want))
          REQUIRE(std::isnan(toF(out[i])));
        else
          REQUIRE(out[i] == fromF(want));
      }
      REQUIRE(out[n] == S(0x34));
    }
  }
}

// A float8 code's value from its fields, written independently of the library: sign, exponent and
// mantissa with the given widths and bias; NaN for e4m3's S.1111.111 and e5m2's all-ones exponent
// with a mantissa (e5m2's infinities are infinities).
double fp8Value(uint8_t code, int man, int bias, bool e4m3) {
  int expBits = 7 - man;
  int e = (code >> man) & ((1 << expBits) - 1), m = code & ((1 << man) - 1);
  double sign = (code & 0x80) ? -1 : 1;
  if (e4m3 && (code & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  if (!e4m3 && e == (1 << expBits) - 1)
    return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, 1 - bias - man);
  return sign * std::ldexp((1 << man) + m, e - bias - man);
}

// The float8 code nearest to f by brute force over every finite code: ties to the even code,
// beyond the largest finite value saturate to it (CUDA's __NV_SATFINITE), NaN to NaN.
uint8_t fp8Nearest(float f, int man, int bias, bool e4m3, uint8_t maxCode) {
  if (std::isnan(f)) return 0xff;  // a NaN marker; the caller checks NaN-ness instead of bits
  double best = -1;
  uint8_t bestCode = 0;
  double maxValue = fp8Value(maxCode, man, bias, e4m3);
  double x = std::fabs(static_cast<double>(f));
  for (int c = 0; c <= maxCode; ++c) {
    double v = fp8Value(static_cast<uint8_t>(c), man, bias, e4m3);
    double d = std::fabs(v - x);
    if (best < 0 || d < best || (d == best && (c & 1) == 0)) best = d, bestCode = static_cast<uint8_t>(c);
  }
  if (x > maxValue) bestCode = maxCode;  // beyond the largest finite value (and infinity): saturate
  return static_cast<uint8_t>(bestCode | (std::signbit(f) ? 0x80 : 0));
}

void checkFp8Conversions(bool e4m3) {
  const int man = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const uint8_t maxCode = e4m3 ? 0x7e : 0x7b;
  auto toF = e4m3 ? float8e4m3ToFloat : float8e5m2ToFloat;
  auto fromF = e4m3 ? floatToFloat8e4m3 : floatToFloat8e5m2;
  // Every code widens to its value, and back to itself.
  for (int c = 0; c < 256; ++c) {
    double want = fp8Value(static_cast<uint8_t>(c), man, bias, e4m3);
    INFO("code " << c);
    if (std::isnan(want)) {
      CHECK(std::isnan(toF(static_cast<uint8_t>(c))));
      continue;
    }
    CHECK(static_cast<double>(toF(static_cast<uint8_t>(c))) == want);
    if (!std::isinf(want)) CHECK(fromF(toF(static_cast<uint8_t>(c))) == c);
  }
  // Narrowing: every code's value, the midpoints between neighbours (ties), a float either side of
  // each midpoint, random floats over the whole range, and the specials.
  std::vector<float> probes;
  for (int c = 0; c < maxCode; ++c) {
    double lo = fp8Value(static_cast<uint8_t>(c), man, bias, e4m3);
    double hi = fp8Value(static_cast<uint8_t>(c + 1), man, bias, e4m3);
    float mid = static_cast<float>((lo + hi) / 2);
    for (float f : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)})
      probes.insert(probes.end(), {f, -f});
  }
  std::mt19937 rng(8 + e4m3);
  for (int i = 0; i < 20000; ++i) {
    float f =
        std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), std::uniform_int_distribution<int>(-30, 20)(rng));
    probes.push_back(i % 2 ? f : -f);
  }
  for (float f :
       {0.0f, -0.0f, 1e-30f, 1e30f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()})
    probes.push_back(f);
  for (float f : probes) {
    INFO("f " << f);
    CHECK(fromF(f) == fp8Nearest(f, man, bias, e4m3, maxCode));
  }
  CHECK(std::isnan(toF(fromF(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(toF(fromF(-std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace

TEST_CASE("half and bfloat16 conversions round to nearest even", "[kernels]") {
  CHECK(floatToHalf(1.0f) == 0x3c00);
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65520.0f) == 0x7c00);               // rounds up to infinity
  CHECK(floatToHalf(2049.0f) == floatToHalf(2048.0f));  // tie to even
  CHECK(floatToHalf(2051.0f) == floatToHalf(2052.0f));
  CHECK(floatToHalf(-0.0f) == 0x8000);
  CHECK(std::isnan(halfToFloat(floatToHalf(NAN))));
  CHECK(floatToBfloat16(1.0f) == 0x3f80);
  CHECK(floatToBfloat16(257.0f) == floatToBfloat16(256.0f));  // 8-bit mantissa: tie to even
  CHECK(floatToBfloat16(259.0f) == floatToBfloat16(260.0f));
  CHECK(bfloat16ToFloat(0xbf80) == -1.0f);
  CHECK(std::isnan(bfloat16ToFloat(floatToBfloat16(NAN))));
  CHECK(floatToBfloat16(std::numeric_limits<float>::infinity()) == 0x7f80);
}

TEST_CASE("float8 e4m3 and e5m2 conversions: exact widening, nearest-even narrowing that saturates",
          "[kernels][float8]") {
  checkFp8Conversions(true);
  checkFp8Conversions(false);
  // Fixed points of the formats (OCP's tables), independent of both references above.
  CHECK(floatToFloat8e4m3(448.0f) == 0x7e);
  CHECK(floatToFloat8e4m3(1e6f) == 0x7e);  // saturates, never NaN
  CHECK(floatToFloat8e4m3(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(floatToFloat8e4m3(1.0f) == 0x38);
  CHECK(floatToFloat8e4m3(0.001953125f) == 0x01);               // 2^-9, the smallest subnormal
  CHECK(floatToFloat8e4m3(17.0f) == floatToFloat8e4m3(16.0f));  // tie to even
  CHECK(floatToFloat8e5m2(57344.0f) == 0x7b);
  CHECK(floatToFloat8e5m2(std::numeric_limits<float>::infinity()) == 0x7b);
  CHECK(floatToFloat8e5m2(1.0f) == 0x3c);
  CHECK(float8e5m2ToFloat(0x7c) == std::numeric_limits<float>::infinity());
  CHECK(float8e4m3ToFloat(0x7f) != float8e4m3ToFloat(0x7f));  // NaN
}

TEST_CASE("reduce matches the scalar reference for every type and op", "[kernels]") {
  checkType<int8_t>(collInt8);
  checkType<uint8_t>(collUint8);
  checkType<int32_t>(collInt32);
  checkType<uint32_t>(collUint32);
  checkType<int64_t>(collInt64);
  checkType<uint64_t>(collUint64);
  checkType<float>(collFloat32);
  checkType<double>(collFloat64);
  checkHalf(collFloat16, halfToFloat, floatToHalf);
  checkHalf(collBfloat16, bfloat16ToFloat, floatToBfloat16);
  checkHalf(collFloat8e4m3, float8e4m3ToFloat, floatToFloat8e4m3);
  checkHalf(collFloat8e5m2, float8e5m2ToFloat, floatToFloat8e5m2);
}

TEST_CASE("max and min give the same bits in either order, signed zeros included", "[kernels]") {
  float a[2] = {0.0f, -0.0f}, b[2] = {-0.0f, 0.0f}, r1[2], r2[2];
  reduce(r1, a, b, 2, collFloat32, collMax);
  reduce(r2, b, a, 2, collFloat32, collMax);
  CHECK(std::memcmp(r1, r2, sizeof(r1)) == 0);
  CHECK_FALSE(std::signbit(r1[0]));
  reduce(r1, a, b, 2, collFloat32, collMin);
  CHECK(std::signbit(r1[0]));
  CHECK(std::signbit(r1[1]));
}

TEST_CASE("average divides the final sum: C division for integers, float32 for halves", "[kernels]") {
  int32_t i[3] = {7, -7, 9};
  finishAverage(i, 3, collInt32, 2);
  CHECK(i[0] == 3);
  CHECK(i[1] == -3);
  CHECK(i[2] == 4);
  float f[2] = {3.0f, 1.0f};
  finishAverage(f, 2, collFloat32, 4);
  CHECK(f[0] == 0.75f);
  uint16_t h = floatToHalf(3.0f);
  finishAverage(&h, 1, collFloat16, 2);
  CHECK(halfToFloat(h) == 1.5f);
  uint8_t e4 = floatToFloat8e4m3(7.0f), e5 = floatToFloat8e5m2(6.0f);
  finishAverage(&e4, 1, collFloat8e4m3, 2);
  finishAverage(&e5, 1, collFloat8e5m2, 4);
  CHECK(float8e4m3ToFloat(e4) == 3.5f);
  CHECK(float8e5m2ToFloat(e5) == 1.5f);
  CHECK(typeSize(collBfloat16) == 2);
  CHECK(typeSize(collFloat8e4m3) == 1);
  CHECK(typeSize(collFloat8e5m2) == 1);
  CHECK(typeSize(static_cast<collDataType_t>(42)) == 0);
}

TEST_CASE("bitwise and, or and xor match the scalar reference for every integer type", "[kernels][redop]") {
  checkBitwise<int8_t>(collInt8);
  checkBitwise<uint8_t>(collUint8);
  checkBitwise<int32_t>(collInt32);
  checkBitwise<uint32_t>(collUint32);
  checkBitwise<int64_t>(collInt64);
  checkBitwise<uint64_t>(collUint64);
  // Exact values, not only against the reference.
  uint8_t a[3] = {0xf0, 0xff, 0x0f}, b[3] = {0x3c, 0x00, 0xff}, r[3];
  reduce(r, a, b, 3, collUint8, collBand);
  CHECK((r[0] == 0x30 && r[1] == 0x00 && r[2] == 0x0f));
  reduce(r, a, b, 3, collUint8, collBor);
  CHECK((r[0] == 0xfc && r[1] == 0xff && r[2] == 0xff));
  reduce(r, a, b, 3, collUint8, collBxor);
  CHECK((r[0] == 0xcc && r[1] == 0xff && r[2] == 0xf0));
}

TEST_CASE("bitwise ops are refused on floating types; built-in ops are taken by every type", "[kernels][redop]") {
  for (collDataType_t t : {collFloat16, collFloat32, collFloat64, collBfloat16, collFloat8e4m3, collFloat8e5m2})
    for (collRedOp_t op : {collBand, collBor, collBxor}) {
      INFO("type " << t << " op " << op);
      CHECK_FALSE(supportsOp(t, op));
    }
  for (int t = 0; t < collNumTypes; ++t)
    for (int op = 0; op < collNumOps; ++op)
      CHECK(supportsOp(static_cast<collDataType_t>(t), static_cast<collRedOp_t>(op)));
  CHECK_FALSE(supportsOp(collInt32, static_cast<collRedOp_t>(collNumOps)));  // dynamic ops live on a communicator
  CHECK_FALSE(supportsOp(collInt32, static_cast<collRedOp_t>(collBxor + 1)));
  CHECK_FALSE(supportsOp(collInt32, static_cast<collRedOp_t>(-1)));
  CHECK_FALSE(supportsOp(static_cast<collDataType_t>(collNumTypes), collBand));
}

TEST_CASE("scale multiplies by the scalar for every type", "[kernels][redop]") {
  checkScale<int8_t>(collInt8);
  checkScale<uint8_t>(collUint8);
  checkScale<int32_t>(collInt32);
  checkScale<uint32_t>(collUint32);
  checkScale<int64_t>(collInt64);
  checkScale<uint64_t>(collUint64);
  checkScale<float>(collFloat32);
  checkScale<double>(collFloat64);
  checkScaleHalf(collFloat16, halfToFloat, floatToHalf);
  checkScaleHalf(collBfloat16, bfloat16ToFloat, floatToBfloat16);
  checkScaleHalf(collFloat8e4m3, float8e4m3ToFloat, floatToFloat8e4m3);
  checkScaleHalf(collFloat8e5m2, float8e5m2ToFloat, floatToFloat8e5m2);
  // Exact values: wrapping, and a scalar read from unaligned bytes.
  int8_t i8[2] = {100, -3}, k8 = 3;
  scale(i8, i8, 2, collInt8, &k8);
  CHECK(i8[0] == 44);  // 300 wraps to 44
  CHECK(i8[1] == -9);
  alignas(8) unsigned char raw[16];
  double k = 0.5, d[2] = {3, -7};
  std::memcpy(raw + 1, &k, sizeof(k));
  scale(d, d, 2, collFloat64, raw + 1);
  CHECK(d[0] == 1.5);
  CHECK(d[1] == -3.5);
}
