#include "bootstrap/unique_id.h"

#include <cstring>

namespace coll {
namespace {
constexpr char kMagic[8] = {'C', 'O', 'L', 'L', 'I', 'D', 1, 0};
constexpr size_t kAddrOffset = 16;
constexpr size_t kSumOffset = kAddrOffset + sizeof(net::PackedAddress);
constexpr size_t kUsedBytes = kSumOffset + 8;
static_assert(kUsedBytes <= COLL_UNIQUE_ID_BYTES, "id layout");
}  // namespace

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
