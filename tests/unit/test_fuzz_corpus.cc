// Replays the fuzzers' checked-in corpus (tests/fuzz/corpus/<target>/, regression inputs
// included) through the same target bodies under the normal build, so that a decoder change that
// breaks one shows in coll_unit_tests without clang. The bodies abort on a broken invariant.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bootstrap/bootstrap_wire.h"

namespace coll::fuzz {
int bootstrapWire(const uint8_t* data, size_t size);
int topoFile(const uint8_t* data, size_t size);
int uniqueId(const uint8_t* data, size_t size);
int env(const uint8_t* data, size_t size);
}  // namespace coll::fuzz

namespace {

int replay(const std::string& target, int (*body)(const uint8_t*, size_t)) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(COLL_FUZZ_CORPUS_DIR) + "/" + target)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().string());
    CHECK(body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("the fuzz corpus decodes without breaking an invariant", "[fuzz]") {
  CHECK(replay("fuzz_bootstrap_wire", coll::fuzz::bootstrapWire) > 0);
  CHECK(replay("fuzz_topo_file", coll::fuzz::topoFile) > 0);
  CHECK(replay("fuzz_unique_id", coll::fuzz::uniqueId) > 0);
  CHECK(replay("fuzz_env", coll::fuzz::env) > 0);
}

TEST_CASE("the bootstrap decoders refuse what the fuzzers found", "[fuzz]") {
  using namespace coll::bootstrap;
  Hello h{};
  h.info.rank = 0;
  h.nranks = 0x7fffffff;  // issue 21: the root allocated a table this large and died
  auto bytes = reinterpret_cast<const uint8_t*>(&h);
  auto r = decodeHello(bytes, sizeof(h));
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == collInvalidUsage);
  CHECK_THAT(r.status().message(), Catch::Contains("above the limit"));
  h.nranks = 2;
  std::memset(h.info.hostName, 'a', sizeof(h.info.hostName));  // no terminating NUL
  r = decodeHello(bytes, sizeof(h));
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == collRemoteError);
  std::vector<char> answer = encodeRootAnswer(collInvalidUsage, "why", {});
  int32_t code = 99;
  std::memcpy(answer.data(), &code, 4);
  auto a = decodeRootAnswer(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), 2);
  REQUIRE_FALSE(a.isOk());
  CHECK_THAT(a.status().message(), Catch::Contains("unknown result code 99"));
}
