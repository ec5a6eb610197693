// The status questions' client and decoders (bootstrap/status_wire.h): what coll-top and a host
// leader rely on when a rank is stopped, gone, or answers garbage.
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "bootstrap/status_wire.h"

using namespace coll::bootstrap;
namespace net = coll::net;

namespace {

const uint8_t* bytes(const std::vector<HostEntry>& v) { return reinterpret_cast<const uint8_t*>(v.data()); }

HostEntry entry(int rank, int32_t state) {
  HostEntry e{};
  e.rank = rank;
  e.state = state;
  e.st.rank = rank;
  e.st.nranks = 4;
  return e;
}

}  // namespace

TEST_CASE("a host answer names each rank of the job at most once, in range, in a known state", "[status]") {
  std::vector<HostEntry> good{entry(0, kAnswered), entry(2, kNotAnswering), entry(3, kMissing)};
  auto ok = decodeHostAnswer(bytes(good), good.size() * sizeof(HostEntry), 4);
  REQUIRE(ok.isOk());
  CHECK(ok->size() == 3);
  auto refused = [](std::vector<HostEntry> v, int nranks, size_t size) {
    auto r = decodeHostAnswer(bytes(v), size, nranks);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == collRemoteError);
    return r.status().message();
  };
  CHECK_THAT(refused(good, 4, good.size() * sizeof(HostEntry) - 1), Catch::Contains("not a whole number"));
  CHECK_THAT(refused(good, 2, good.size() * sizeof(HostEntry)), Catch::Contains("3 entries for 2 ranks"));
  std::vector<HostEntry> twice{entry(1, kAnswered), entry(1, kMissing)};
  CHECK_THAT(refused(twice, 4, twice.size() * sizeof(HostEntry)), Catch::Contains("rank 1 out of range or twice"));
  std::vector<HostEntry> outside{entry(4, kAnswered)};
  CHECK_THAT(refused(outside, 4, sizeof(HostEntry)), Catch::Contains("rank 4"));
  std::vector<HostEntry> state{entry(0, 7)};
  CHECK_THAT(refused(state, 4, sizeof(HostEntry)), Catch::Contains("state 7"));
  std::vector<HostEntry> text{entry(0, kAnswered)};
  std::memset(text[0].st.detail, 'x', sizeof(text[0].st.detail));
  CHECK_THAT(refused(text, 4, sizeof(HostEntry)), Catch::Contains("not terminated"));
  CHECK_FALSE(decodeHostAnswer(bytes(good), 0, 4).isOk());
}

TEST_CASE("a table answer holds whole entries with valid addresses; a self answer is one terminated status",
          "[status]") {
  auto addr = net::Address::resolve("127.0.0.1", 4242);
  REQUIRE(addr.isOk());
  std::vector<TableEntry> table{{net::PackedAddress::pack(*addr), 1}, {net::PackedAddress::pack(*addr), 2}};
  auto t = decodeTableAnswer(reinterpret_cast<const uint8_t*>(table.data()), table.size() * sizeof(TableEntry));
  REQUIRE(t.isOk());
  CHECK((*t)[1].hostHash == 2);
  CHECK_FALSE(decodeTableAnswer(reinterpret_cast<const uint8_t*>(table.data()), 0).isOk());
  CHECK_FALSE(decodeTableAnswer(reinterpret_cast<const uint8_t*>(table.data()), sizeof(TableEntry) + 3).isOk());
  std::memset(static_cast<void*>(&table[1].listen), 0xff, sizeof(table[1].listen));
  auto bad = decodeTableAnswer(reinterpret_cast<const uint8_t*>(table.data()), table.size() * sizeof(TableEntry));
  REQUIRE_FALSE(bad.isOk());
  CHECK_THAT(bad.status().message(), Catch::Contains("rank 1's inbox address is invalid"));

  JobStatus st{};
  st.rank = 2;
  st.nranks = 3;
  CHECK(decodeSelfAnswer(reinterpret_cast<const uint8_t*>(&st), sizeof(st)).isOk());
  CHECK_FALSE(decodeSelfAnswer(reinterpret_cast<const uint8_t*>(&st), sizeof(st) - 1).isOk());
  st.rank = 3;
  CHECK_FALSE(decodeSelfAnswer(reinterpret_cast<const uint8_t*>(&st), sizeof(st)).isOk());
  st.rank = 0;
  std::memset(st.host, 'h', sizeof(st.host));
  CHECK_FALSE(decodeSelfAnswer(reinterpret_cast<const uint8_t*>(&st), sizeof(st)).isOk());
}

TEST_CASE("askStatusAll: one answer, a silent listener and a closed port, all settled by one deadline", "[status]") {
  constexpr uint64_t kSecret = 0x5eed;
  auto any = net::Address::resolve("127.0.0.1", 0);
  REQUIRE(any.isOk());
  // An inbox that answers: reads the question, sends a JobStatus.
  auto answering = net::Listener::listen(*any, false);
  REQUIRE(answering.isOk());
  // One that takes connections into its backlog and never reads them (a stopped process).
  auto silent = net::Listener::listen(*any, false);
  REQUIRE(silent.isOk());
  // A port nobody listens on (a process that is gone): a listener opened and closed.
  net::Address gone;
  {
    auto l = net::Listener::listen(*any, false);
    REQUIRE(l.isOk());
    gone = l->address();
  }
  std::thread server([&] {
    net::Address peer;
    net::Socket s;
    for (int i = 0; i < 200 && !s.valid(); ++i) {
      s = answering->accept(&peer);
      if (!s.valid()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!s.valid()) return;
    auto deadline = net::Deadline::afterMs(2000);
    auto q = recvMessage(s, kSecret, kTagStatusQuery, deadline, nullptr, "tool");
    if (!q.isOk() || q->payload.size() != sizeof(StatusQuestion)) return;
    JobStatus st{};
    st.rank = 5;
    st.nranks = 8;
    (void)sendMessage(s, makeHeader(kSecret, kTagStatusAnswer, sizeof(st), 5), &st, deadline, nullptr, "tool");
  });
  auto start = std::chrono::steady_clock::now();
  auto answers = askStatusAll({answering->address(), silent->address(), gone}, kSecret, StatusQuestion{kAskSelf, 0},
                              800, sizeof(JobStatus));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  server.join();
  REQUIRE(answers.size() == 3);
  REQUIRE(answers[0].isOk());
  auto st = decodeSelfAnswer(reinterpret_cast<const uint8_t*>(answers[0]->data()), answers[0]->size());
  REQUIRE(st.isOk());
  CHECK(st->rank == 5);
  REQUIRE_FALSE(answers[1].isOk());
  CHECK(answers[1].status().code() == collTimeout);
  CHECK_THAT(answers[1].status().message(), Catch::Contains("did not answer within 800 ms"));
  REQUIRE_FALSE(answers[2].isOk());
  CHECK(answers[2].status().code() == collRemoteError);
  CHECK_THAT(answers[2].status().message(), Catch::Contains("its process is gone"));
  CHECK(took < 1.5);
  // An answer larger than the caller allows is refused before it is read.
  auto small = askStatusAll({silent->address()}, kSecret, StatusQuestion{kAskSelf, 0}, 100, 8);
  CHECK_FALSE(small.front().isOk());
}
