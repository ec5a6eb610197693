#include <catch2/catch.hpp>
#include <cstring>

#include "bootstrap/unique_id.h"

using namespace coll;

namespace {
IdContents sample(const char* host, uint16_t port) {
  IdContents c;
  c.secret = 0x0123456789abcdefull;
  c.root = *net::Address::resolve(host, port);
  return c;
}
}  // namespace

TEST_CASE("an id round-trips its secret and root address", "[id]") {
  for (auto [host, port] :
       {std::pair<const char*, uint16_t>{"127.0.0.1", 5000}, {"10.1.2.3", 65535}, {"::1", 29500}, {"fd00::2", 1}}) {
    collUniqueId id;
    encodeUniqueId(sample(host, port), &id);
    auto back = decodeUniqueId(id);
    REQUIRE(back.isOk());
    CHECK(back->secret == 0x0123456789abcdefull);
    CHECK(back->root.hostString() == net::Address::resolve(host, port)->hostString());
    CHECK(back->root.port() == port);
  }
}

TEST_CASE("a damaged id is rejected with a reason", "[id]") {
  collUniqueId id;
  encodeUniqueId(sample("127.0.0.1", 5000), &id);

  collUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  auto r = decodeUniqueId(zero);
  CHECK(r.status().code() == collInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains("wrong magic"));

  for (int byte : {8, 17, 20, 30, 45, 100}) {  // secret, family, address, checksum, padding
    collUniqueId bad = id;
    bad.internal[byte] ^= 0x5a;
    auto d = decodeUniqueId(bad);
    CHECK(d.status().code() == collInvalidArgument);
  }
}

TEST_CASE("random secrets differ", "[id]") {
  CHECK(randomU64() != randomU64());
  CHECK(fnv1a("a", 1) != fnv1a("b", 1));
}
