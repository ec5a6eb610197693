// The 128-byte collUniqueId: what a rank needs to find and prove itself to the rendezvous root.
//
// Layout (host byte order; ids never cross architectures within one job):
//   [0,8)   magic "COLLID\x01\x00"   [8,16) secret (random 64-bit)
//   [16,40) root address (net::PackedAddress: family, port, scope id, IP)
//   [40,48) checksum of [0,40)        [48,128) zero
// decode() rejects a wrong magic, an unknown family, port 0, a bad checksum or non-zero padding,
// so that a truncated or garbage id is a clear collInvalidArgument instead of a hang.
#pragma once

#include <cstdint>

#include "base/random.h"
#include "base/socket.h"
#include "base/status.h"
#include "coll/coll.h"

namespace coll {

struct IdContents {
  uint64_t secret = 0;
  net::Address root;
};

void encodeUniqueId(const IdContents& contents, collUniqueId* id);
Result<IdContents> decodeUniqueId(const collUniqueId& id);

}  // namespace coll
