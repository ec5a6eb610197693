// Fuzzes decodeUniqueId (src/bootstrap/unique_id.cc), which collCommInitRank applies to the id a
// user passes in: the input's first 128 bytes are the collUniqueId (zero-filled when shorter).
#include <algorithm>
#include <cstring>

#include "bootstrap/unique_id.h"
#include "fuzz_check.h"

namespace coll::fuzz {

int uniqueId(const uint8_t* data, size_t size) {
  collUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, data, std::min(size, sizeof(id.internal)));
  Result<IdContents> c = decodeUniqueId(id);
  if (!c.isOk()) {
    COLL_FUZZ_CHECK(c.status().code() == collInvalidArgument);
    return 0;
  }
  // A decoded id names a usable root; encoding what was decoded gives an id that decodes alike.
  COLL_FUZZ_CHECK(c->root.family() == AF_INET || c->root.family() == AF_INET6);
  COLL_FUZZ_CHECK(c->root.port() != 0);
  collUniqueId again;
  encodeUniqueId(*c, &again);
  Result<IdContents> d = decodeUniqueId(again);
  COLL_FUZZ_CHECK(d.isOk());
  COLL_FUZZ_CHECK(d->secret == c->secret && d->root.toString() == c->root.toString());
  return 0;
}

}  // namespace coll::fuzz

COLL_FUZZ_ENTRY(coll::fuzz::uniqueId)
