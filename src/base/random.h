// Random numbers and hashing for secrets, ids and checksums.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll {

/// 64 bits from the kernel's random source (getrandom), for secrets and connection ids.
uint64_t randomU64();
/// FNV-1a over n bytes: checksums and stable ids, not security.
uint64_t fnv1a(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace coll
