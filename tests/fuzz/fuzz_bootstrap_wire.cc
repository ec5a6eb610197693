// Fuzzes what the bootstrap root and a rank decode from a socket (src/bootstrap/bootstrap_wire.h):
// the input is one connection's bytes, a 40-byte MsgHeader and its payload. The header goes
// through decodeHeader (MessageServer and recvMessage call it), the payload by tag through
// decodeHello (the root) or decodeRootAnswer (a rank reading the root's answer); a status answer
// (kTagStatusAnswer) through the decoders coll-top and a host leader use (status_wire.h).
#include <fmt/format.h>

#include <cstring>

#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/status_wire.h"
#include "fuzz_check.h"

namespace coll::fuzz {
namespace {

using namespace coll::bootstrap;

// The secret the seed corpus is made with (tests/fuzz/make_corpus.cc).
constexpr uint64_t kSecret = 0x5eed5eed12345678ull;

// What the root and the ranks do with a RankInfo: print its strings, use its address.
void useRankInfo(const RankInfo& info) {
  COLL_FUZZ_CHECK(terminated(info.hostName, sizeof(info.hostName)));
  COLL_FUZZ_CHECK(terminated(info.hostId, sizeof(info.hostId)));
  COLL_FUZZ_CHECK(terminated(info.busId, sizeof(info.busId)));
  std::string line =
      fmt::format("rank {} (pid {} on {}) {} {}", info.rank, info.pid, info.hostName, info.hostId, info.busId);
  (void)line;
}

void hello(const uint8_t* data, size_t size) {
  Result<Hello> h = decodeHello(data, size);
  if (!h.isOk()) {
    Status s = h.takeStatus();
    COLL_FUZZ_CHECK(s.code() == collRemoteError || s.code() == collInvalidUsage);
    return;
  }
  // The root sizes its table by nranks and indexes it by rank.
  COLL_FUZZ_CHECK(h->nranks >= 1 && h->nranks <= kMaxRanks);
  COLL_FUZZ_CHECK(h->info.rank >= 0 && h->info.rank < h->nranks);
  useRankInfo(h->info);
}

void answer(const uint8_t* data, size_t size, int nranks) {
  Result<RootAnswer> a = decodeRootAnswer(data, size, nranks);
  if (!a.isOk()) return;
  COLL_FUZZ_CHECK(a->code >= collSuccess && a->code <= collTimeout);
  if (a->code != collSuccess) return;
  COLL_FUZZ_CHECK(a->table.size() == static_cast<size_t>(nranks));
  for (size_t r = 0; r < a->table.size(); ++r) {
    COLL_FUZZ_CHECK(a->table[r].rank == static_cast<int>(r));
    COLL_FUZZ_CHECK(a->table[r].listen.unpack().isOk());
    useRankInfo(a->table[r]);
  }
  // What the root would send back for the same table decodes to the same bytes.
  std::vector<char> again = encodeRootAnswer(a->code, a->message, a->table);
  COLL_FUZZ_CHECK(again.size() == size && std::memcmp(again.data(), data, size) == 0);
}

// What coll-top prints of a rank's status.
void useStatus(const JobStatus& st) {
  std::string line = fmt::format("{} {} {} {}", st.host, st.detail, st.wait.opName, st.rank);
  (void)line;
}

// A status answer, read as each of its three kinds; srcRank stands for the job's nranks.
void statusAnswer(const uint8_t* data, size_t size, int nranks) {
  if (auto self = decodeSelfAnswer(data, size); self.isOk()) {
    COLL_FUZZ_CHECK(self->rank >= 0 && self->rank < self->nranks);
    useStatus(*self);
  }
  if (auto table = decodeTableAnswer(data, size); table.isOk()) {
    COLL_FUZZ_CHECK(!table->empty() && table->size() <= static_cast<size_t>(kMaxRanks));
    for (const TableEntry& e : *table) COLL_FUZZ_CHECK(e.listen.unpack().isOk());
  }
  if (auto host = decodeHostAnswer(data, size, nranks); host.isOk()) {
    std::vector<bool> seen(static_cast<size_t>(nranks), false);
    for (const HostEntry& e : *host) {
      // coll-top indexes its views by these ranks.
      COLL_FUZZ_CHECK(e.rank >= 0 && e.rank < nranks && !seen[static_cast<size_t>(e.rank)]);
      seen[static_cast<size_t>(e.rank)] = true;
      COLL_FUZZ_CHECK(e.state == kAnswered || e.state == kNotAnswering || e.state == kMissing);
      useStatus(e.st);
    }
  }
}

}  // namespace

int bootstrapWire(const uint8_t* data, size_t size) {
  size_t headerBytes = std::min(size, sizeof(MsgHeader));
  Result<MsgHeader> h = decodeHeader(data, headerBytes, kSecret);
  if (!h.isOk()) return 0;
  COLL_FUZZ_CHECK(size >= sizeof(MsgHeader) && h->size <= kMaxPayloadBytes);
  const uint8_t* payload = data + sizeof(MsgHeader);
  size_t available = size - sizeof(MsgHeader);
  if (available < h->size) return 0;  // the socket would wait for the rest
  // One message per connection: bytes after the announced size are never read.
  size_t n = static_cast<size_t>(h->size);
  if (h->tag == kTagHello) hello(payload, n);
  // The root sends srcRank -1; here srcRank stands for the nranks the receiving rank expects.
  if (h->tag == kTagReply) answer(payload, n, h->srcRank);
  if (h->tag == kTagAbortNotice) (void)std::string(payload, payload + n);
  if (h->tag == kTagStatusAnswer) statusAnswer(payload, n, h->srcRank);
  return 0;
}

}  // namespace coll::fuzz

COLL_FUZZ_ENTRY(coll::fuzz::bootstrapWire)
