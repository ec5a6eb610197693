#include "core/unique_id.h"

#include <sys/random.h>

#include <cstring>
#include <random>

namespace coll {
namespace {
constexpr char kMagic[8] = {'C', 'O', 'L', 'L', 'I', 'D', 1, 0};
constexpr size_t kAddrOffset = 16;
constexpr size_t kSumOffset = kAddrOffset + sizeof(net::PackedAddress);
constexpr size_t kUsedBytes = kSumOffset + 8;
static_assert(kUsedBytes <= COLL_UNIQUE_ID_BYTES, "id layout");
}  // namespace

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

void encodeUniqueId(const IdContents& c, collUniqueId* id) {
  unsigned char* b = reinterpret_cast<unsigned char*>(id->internal);
  std::memset(b, 0, COLL_UNIQUE_ID_BYTES);
  std::memcpy(b, kMagic, 8);
  std::memcpy(b + 8, &c.secret, 8);
  net::PackedAddress packed = net::PackedAddress::pack(c.root);
  std::memcpy(b + kAddrOffset, &packed, sizeof(packed));
  uint64_t sum = fnv1a(b, kSumOffset);
  std::memcpy(b + kSumOffset, &sum, 8);
}

Result<IdContents> decodeUniqueId(const collUniqueId& id) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(id.internal);
  if (std::memcmp(b, kMagic, 8) != 0)
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("the collUniqueId is not one made by collGetUniqueId (wrong magic): was it copied "
                                 "whole to every rank?"));
  uint64_t sum;
  std::memcpy(&sum, b + kSumOffset, 8);
  bool padClean = true;
  for (size_t i = kUsedBytes; i < COLL_UNIQUE_ID_BYTES; ++i) padClean &= b[i] == 0;
  if (sum != fnv1a(b, kSumOffset) || !padClean)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("the collUniqueId is corrupted (checksum mismatch)"));
  IdContents c;
  std::memcpy(&c.secret, b + 8, 8);
  net::PackedAddress packed;
  std::memcpy(&packed, b + kAddrOffset, sizeof(packed));
  auto addr = packed.unpack();
  if (!addr.isOk()) return addr.takeStatus().prefix("the collUniqueId is invalid: ");
  c.root = *addr;
  return c;
}

}  // namespace coll
