// bfloat16 as 16-bit words: the working precision of the mixed-precision layers (parameters and
// gradients travel and are kept in it; the optimizer keeps float32 master weights).
#pragma once

#include <cstdint>
#include <cstring>

namespace coll::parallel {

/// float -> bfloat16, round to nearest even (NaN stays NaN).
inline uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// bfloat16 -> float (exact).
inline float fromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// The float nearest to f that bfloat16 can hold.
inline float roundBf16(float f) { return fromBf16(toBf16(f)); }

}  // namespace coll::parallel
