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

#include "coll/coll.h"
#include "core/socket.h"
#include "core/status.h"

namespace coll {

struct IdContents {
  uint64_t secret = 0;
  net::Address root;
};

void encodeUniqueId(const IdContents& contents, collUniqueId* id);
Result<IdContents> decodeUniqueId(const collUniqueId& id);

/// 64 random bits from the kernel (getrandom).
uint64_t randomU64();
/// FNV-1a over bytes; used for checksums and derived host/secret hashes.
uint64_t fnv1a(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace coll
