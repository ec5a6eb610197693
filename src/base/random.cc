#include "base/random.h"

#include <sys/random.h>

#include <random>

namespace coll {

uint64_t fnv1a(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) == static_cast<ssize_t>(sizeof(v))) return v;
  std::random_device rd;  // getrandom only fails on ancient kernels
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace coll
