// Ranks as threads of one process: init (collCommInitAll and collCommInitRank), bootstrap
// collectives, split, finalize/destroy, non-blocking init, abort, and the failure paths of the
// rendezvous (missing ranks, contradictions, wrong secrets, garbage).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/ifaddr.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/unique_id.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/enqueue.h"
#include "core/flight_recorder.h"
#include "multiproc/checks.h"

namespace {

// Runs f(rank) on one thread per rank and returns each result.
template <typename T>
std::vector<T> onEveryRank(int n, std::function<T(int)> f) {
  std::vector<T> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { out[r] = f(r); });
  for (auto& t : threads) t.join();
  return out;
}

struct InitResult {
  collResult_t rc = collInternalError;
  std::string error;
  collComm_t comm = nullptr;
  double seconds = 0;
};

// Ranks `ranks` of nranks init concurrently on id with a short deadline.
std::vector<InitResult> initRanks(const collUniqueId& id, int nranks, std::vector<int> ranks, int timeoutMs,
                                  std::function<int(int)> nranksOf = nullptr) {
  return onEveryRank<InitResult>(static_cast<int>(ranks.size()), [&](int i) {
    InitResult r;
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.bootstrapTimeoutMs = timeoutMs;
    auto start = std::chrono::steady_clock::now();
    r.rc = collCommInitRankConfig(&r.comm, nranksOf ? nranksOf(i) : nranks, id, ranks[i], &cfg);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.rc != collSuccess) r.error = collGetLastError(nullptr);
    return r;
  });
}

void destroyAll(const std::vector<InitResult>& rs) {
  for (const auto& r : rs)
    if (r.comm) CHECK(collCommDestroy(r.comm) == collSuccess);
}

collUniqueId idWithRootTimeout(int ms) {
  setenv("COLL_BOOTSTRAP_TIMEOUT_MS", std::to_string(ms).c_str(), 1);
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  unsetenv("COLL_BOOTSTRAP_TIMEOUT_MS");
  return id;
}

// collCommInitAll of n ranks with one variable set for the init only.
std::vector<collComm_t> initAllWith(int n, const char* var, const char* value) {
  setenv(var, value, 1);
  std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
  collResult_t rc = collCommInitAll(comms.data(), n, nullptr);
  unsetenv(var);
  REQUIRE(rc == collSuccess);
  return comms;
}

// Rank 0's bootstrap inbox still delivers a message from rank 1.
void expectInboxServes(const std::vector<collComm_t>& comms, uint64_t v) {
  uint64_t got = 0;
  REQUIRE(comms[1]->bootstrap->send(0, 5, &v, sizeof(v)).isOk());
  REQUIRE(comms[0]->bootstrap->recv(1, 5, &got, sizeof(got)).isOk());
  CHECK(got == v);
}

// Connects to addr and writes raw bytes (as a stranger would).
void sendRaw(const coll::net::Address& addr, const void* data, size_t n) {
  auto sock = coll::net::Socket::connect(addr, coll::net::Deadline::afterMs(2000), nullptr, "test peer");
  REQUIRE(sock.isOk());
  if (n) REQUIRE(sock->sendAll(data, n, coll::net::Deadline::afterMs(2000), nullptr, "test peer").isOk());
}

}  // namespace

TEST_CASE("collCommInitAll: 1..8 ranks as threads, bootstrap collectives, split, finalize, destroy", "[threads]") {
  for (int n = 1; n <= 8; ++n) {
    DYNAMIC_SECTION("nranks " << n) {
      std::vector<collComm_t> comms(n, nullptr);
      REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
      auto errors = onEveryRank<std::string>(n, [&](int r) -> std::string {
        int rank = -1, count = 0;
        collCommUserRank(comms[r], &rank);
        collCommCount(comms[r], &count);
        if (rank != r || count != n) return "wrong rank or count";
        std::string e = colltest::checkAllGather(comms[r]);
        if (e.empty()) e = colltest::checkSendRecv(comms[r]);
        if (e.empty()) e = colltest::checkSplits(comms[r]);
        if (e.empty() && collCommFinalize(comms[r]) != collSuccess) e = collGetLastError(comms[r]);
        return e;
      });
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        CHECK(errors[r] == "");
        CHECK(comms[r]->localSize == n);
        CHECK(comms[r]->nHosts == 1);
        CHECK(collCommDestroy(comms[r]) == collSuccess);
      }
    }
  }
  CHECK(collCommInitAll(nullptr, 2, nullptr) == collInvalidArgument);
  collComm_t c;
  CHECK(collCommInitAll(&c, 0, nullptr) == collInvalidArgument);
}

TEST_CASE("one thread inits and splits every rank inside a group (NCCL's pattern)", "[threads]") {
  // Before: the first collCommInitRank/collCommSplit waited for ranks whose calls came after it,
  // until COLL_BOOTSTRAP_TIMEOUT_MS. A short timeout makes a regression fail fast.
  setenv("COLL_BOOTSTRAP_TIMEOUT_MS", "10000", 1);
  const int n = 5;
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  std::vector<collComm_t> comms(n, nullptr);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(collCommInitRank(&comms[r], n, id, r) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  for (int r = 0; r < n; ++r) {
    REQUIRE(comms[r] != nullptr);
    int rank = -1;
    CHECK(collCommUserRank(comms[r], &rank) == collSuccess);
    CHECK(rank == r);
  }

  // Split into evens and odds (keys reversed), rank 4 opting out, and an all-reduce on each new
  // communicator, all from this thread.
  std::vector<collComm_t> subs(n, nullptr);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collCommSplit(comms[r], r == 4 ? COLL_SPLIT_NOCOLOR : r % 2, n - r, &subs[r], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  CHECK(subs[4] == nullptr);
  std::vector<std::vector<int>> values(n, std::vector<int>(7));
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < 4; ++r) {
    REQUIRE(subs[r] != nullptr);
    int size = 0, rank = -1;
    CHECK(collCommCount(subs[r], &size) == collSuccess);
    CHECK(collCommUserRank(subs[r], &rank) == collSuccess);
    CHECK(size == 2);
    CHECK(rank == (r < 2 ? 1 : 0));  // keys n - r: the higher parent rank comes first
    for (int& v : values[r]) v = r + 1;
    REQUIRE(collAllReduce(values[r].data(), values[r].data(), 7, collInt32, collSum, subs[r], nullptr) == collSuccess);
  }
  REQUIRE(collGroupEnd() == collSuccess);
  for (int r = 0; r < 4; ++r) CHECK(values[r][6] == (r % 2 == 0 ? 1 + 3 : 2 + 4));
  for (int r = 0; r < 4; ++r) CHECK(collCommDestroy(subs[r]) == collSuccess);
  for (int r = 0; r < n; ++r) CHECK(collCommDestroy(comms[r]) == collSuccess);
  unsetenv("COLL_BOOTSTRAP_TIMEOUT_MS");
}

TEST_CASE("shared resources: shm segments 0600 with unguessable names, no listener on the wildcard address",
          "[threads][security]") {
  std::vector<collComm_t> comms(2, nullptr);
  REQUIRE(collCommInitAll(comms.data(), 2, nullptr) == collSuccess);
  std::vector<std::vector<float>> v(2, std::vector<float>(1000, 1.0f));
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < 2; ++r)
    REQUIRE(collAllReduce(v[r].data(), v[r].data(), 1000, collFloat32, collSum, comms[r], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);  // the shm connection now exists

  // Segments: only this user may open them, and the name carries 64 random bits. They are
  // unlinked once both sides have mapped them, so they are found through this process's mappings
  // (/proc/self/map_files gives the inode, also of an unlinked file).
  std::string prefix = "/dev/shm/coll-" + std::to_string(getpid()) + "-";
  int segments = 0;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t at = line.find(prefix);
    if (at == std::string::npos) continue;
    ++segments;
    std::string name = line.substr(at, line.find(' ', at) - at);
    struct stat st {};
    REQUIRE(stat(("/proc/self/map_files/" + line.substr(0, line.find(' '))).c_str(), &st) == 0);
    INFO(line);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == geteuid());
    CHECK(name.size() >= prefix.size() + 2 + 16);  // rank, '-', 16 hex digits
  }
  CHECK(segments > 0);

  // Every listening socket of this process is bound to the chosen interface's address.
  int listeners = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      int fd = std::atoi(e->d_name);
      int accepting = 0;
      socklen_t len = sizeof(accepting);
      if (e->d_name[0] == '.' || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
        continue;
      sockaddr_storage a{};
      socklen_t alen = sizeof(a);
      REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen) == 0);
      ++listeners;
      if (a.ss_family == AF_INET)
        CHECK(reinterpret_cast<sockaddr_in*>(&a)->sin_addr.s_addr != htonl(INADDR_ANY));
      else if (a.ss_family == AF_INET6)
        CHECK_FALSE(IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr));
    }
    closedir(d);
  }
  CHECK(listeners > 0);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("non-blocking init reports progress through collCommGetAsyncError", "[threads]") {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  const int n = 3;
  std::vector<collComm_t> comms(n, nullptr);
  for (int r = 0; r < n; ++r) {
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    CHECK(collCommInitRankConfig(&comms[r], n, id, r, &cfg) == collInProgress);
    REQUIRE(comms[r] != nullptr);
  }
  for (int r = 0; r < n; ++r) {
    CHECK(colltest::settle(comms[r]) == collSuccess);
    int rank = -1;
    CHECK(collCommUserRank(comms[r], &rank) == collSuccess);
    CHECK(rank == r);
  }
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

using colltest::settle;

// n ranks of a new non-blocking communicator, made from this thread (each init returns
// collInProgress at once) and settled; timeoutMs: the data path's deadline (0: the default).
static std::vector<collComm_t> nonBlockingClique(int n, int timeoutMs = 0) {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  std::vector<collComm_t> comms(n, nullptr);
  for (int r = 0; r < n; ++r) {
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    if (timeoutMs) cfg.timeoutMs = timeoutMs;
    REQUIRE(collCommInitRankConfig(&comms[r], n, id, r, &cfg) == collInProgress);
  }
  for (auto c : comms) REQUIRE(settle(c) == collSuccess);
  return comms;
}

// NCCL's non-blocking split: one thread splits every rank in turn (a blocking split would wait
// for the ranks after it), each call returns collInProgress at once, and the parents and the new
// communicators settle; a NULL config under a non-blocking parent is non-blocking too.
TEST_CASE("non-blocking split: one thread splits every rank, then polls", "[threads][split]") {
  const int n = 4;
  std::vector<collComm_t> parents = nonBlockingClique(n);
  // Colors: ranks 0 and 2 together (keys reverse them), rank 1 alone, rank 3 in none.
  const int color[n] = {5, 7, 5, COLL_SPLIT_NOCOLOR};
  const int key[n] = {1, 0, 0, 0};
  std::vector<collComm_t> kids(n, reinterpret_cast<collComm_t>(0x1));
  for (int r = 0; r < n; ++r) {
    collConfig_t* cfg = nullptr;  // inherits blocking=0 from the parent
    REQUIRE(collCommSplit(parents[r], color[r], key[r], &kids[r], cfg) == collInProgress);
  }
  CHECK(kids[3] == nullptr);
  for (int r = 0; r < n; ++r) {
    CHECK(settle(parents[r]) == collSuccess);
    if (kids[r]) REQUIRE(settle(kids[r]) == collSuccess);
  }
  int size = 0, rank = -1;
  REQUIRE(collCommCount(kids[0], &size) == collSuccess);
  REQUIRE(collCommUserRank(kids[0], &rank) == collSuccess);
  CHECK(size == 2);
  CHECK(rank == 1);  // key 1 after rank 2's key 0
  REQUIRE(collCommCount(kids[1], &size) == collSuccess);
  CHECK(size == 1);
  // The new communicators work, non-blocking as their parents (NCCL's): an all-reduce on the pair
  // (ranks 0 and 2) and on rank 1 alone, all issued from this thread, then polled.
  float x[3] = {1, 0, 2}, y[3] = {-1, -1, -1};
  for (int r : {0, 1, 2})
    REQUIRE(collAllReduce(&x[r], &y[r], 1, collFloat32, collSum, kids[r], nullptr) == collInProgress);
  for (int r : {0, 1, 2}) REQUIRE(settle(kids[r]) == collSuccess);
  CHECK(y[0] == 3.0f);
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == 3.0f);
  // The parents are usable again.
  float in[n] = {1, 1, 1, 1}, out[n] = {-1, -1, -1, -1};
  for (int r = 0; r < n; ++r)
    REQUIRE(collAllReduce(&in[r], &out[r], 1, collFloat32, collSum, parents[r], nullptr) == collInProgress);
  for (int r = 0; r < n; ++r) {
    REQUIRE(settle(parents[r]) == collSuccess);
    CHECK(out[r] == 4.0f);
  }
  for (auto c : kids)
    if (c) CHECK(collCommDestroy(c) == collSuccess);
  for (auto c : parents) CHECK(collCommDestroy(c) == collSuccess);
}

// NCCL's non-blocking communicator beyond init: calls without a stream and groups return
// collInProgress at once and run in issue order in the background, so one thread can drive every
// rank; collCommGetAsyncError says when they are done; finalize is non-blocking too, and what
// comes during it is refused.
TEST_CASE("non-blocking communicators: calls, groups and finalize from one thread", "[threads][nonblocking]") {
  const int n = 3;
  std::vector<collComm_t> comms = nonBlockingClique(n);

  // Two calls per rank, issued before any completes: an all-reduce, then a broadcast from rank 1.
  const size_t count = 100003;
  std::vector<std::vector<int32_t>> in(n), sum(n), bc(n);
  for (int r = 0; r < n; ++r) {
    in[r].assign(count, 0);
    for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<int32_t>(i % 97) * (r + 1);
    sum[r].assign(count, -1);
    bc[r].assign(count, -1);
    if (r == 1) bc[r] = in[r];
  }
  for (int r = 0; r < n; ++r) {
    REQUIRE(collAllReduce(in[r].data(), sum[r].data(), count, collInt32, collSum, comms[r], nullptr) == collInProgress);
    REQUIRE(collBroadcast(bc[r].data(), bc[r].data(), count, collInt32, 1, comms[r], nullptr) == collInProgress);
  }
  for (auto c : comms) REQUIRE(settle(c) == collSuccess);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 997) {
      INFO("rank " << r << " element " << i);
      REQUIRE(sum[r][i] == static_cast<int32_t>(i % 97) * 6);
      REQUIRE(bc[r][i] == static_cast<int32_t>(i % 97) * 2);
    }

  // A group over every rank (a send/recv ring and an all-gather): collGroupEnd is collInProgress.
  std::vector<float> ringIn(n), ringOut(n, -1), gathered(n * n, -1);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r) {
    ringIn[r] = static_cast<float>(10 + r);
    REQUIRE(collSend(&ringIn[r], 1, collFloat32, (r + 1) % n, comms[r], nullptr) == collSuccess);
    REQUIRE(collRecv(&ringOut[r], 1, collFloat32, (r + n - 1) % n, comms[r], nullptr) == collSuccess);
    REQUIRE(collAllGather(&ringIn[r], &gathered[r * n], 1, collFloat32, comms[r], nullptr) == collSuccess);
  }
  REQUIRE(collGroupEnd() == collInProgress);
  for (auto c : comms) REQUIRE(settle(c) == collSuccess);
  for (int r = 0; r < n; ++r) {
    CHECK(ringOut[r] == static_cast<float>(10 + (r + n - 1) % n));
    for (int k = 0; k < n; ++k) CHECK(gathered[r * n + k] == static_cast<float>(10 + k));
  }

  // Finalize: rank 0 alone first (its barrier cannot end before the others come), so its state
  // is collInProgress and a call meanwhile is refused; then the others, one after the other.
  REQUIRE(collCommFinalize(comms[0]) == collInProgress);
  collResult_t state = collSuccess;
  REQUIRE(collCommGetAsyncError(comms[0], &state) == collSuccess);
  CHECK(state == collInProgress);
  float z = 0;
  CHECK(collAllReduce(&z, &z, 1, collFloat32, collSum, comms[0], nullptr) == collInvalidUsage);
  CHECK_THAT(collGetLastError(comms[0]), Catch::Contains("being finalized"));
  CHECK(collCommFinalize(comms[0]) == collInvalidUsage);
  for (int r = 1; r < n; ++r) REQUIRE(collCommFinalize(comms[r]) == collInProgress);
  for (auto c : comms) REQUIRE(settle(c) == collSuccess);
  CHECK(collAllReduce(&z, &z, 1, collFloat32, collSum, comms[2], nullptr) == collInvalidUsage);
  CHECK_THAT(collGetLastError(comms[2]), Catch::Contains("already finalized"));
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

// A non-blocking call whose peer never comes: the failure is the communicator's, through
// collCommGetAsyncError, within the configured timeout; a destroy while calls are queued returns.
TEST_CASE("non-blocking calls: a failure and a destroy with calls in flight", "[threads][nonblocking]") {
  std::vector<float> v(4096, 1.0f);
  {
    auto comms = nonBlockingClique(2, 300);
    // One all-reduce on both ranks first: the connections exist, so the next wait is the data
    // path's (timeoutMs), not the connection setup's (the bootstrap's timeout).
    std::vector<float> w(v.size(), 1.0f);  // each rank its own buffer
    REQUIRE(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr) == collInProgress);
    REQUIRE(collAllReduce(w.data(), w.data(), w.size(), collFloat32, collSum, comms[1], nullptr) == collInProgress);
    for (auto c : comms) REQUIRE(settle(c) == collSuccess);
    CHECK(v[0] == 2.0f);
    auto start = std::chrono::steady_clock::now();
    REQUIRE(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr) == collInProgress);
    CHECK(settle(comms[0]) == collTimeout);  // rank 1 never calls
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK_THAT(collGetLastError(comms[0]), Catch::Contains("rank 1"));
    for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  }
  {
    // Calls queued behind one that cannot finish (rank 0 never calls, no deadline soon): the
    // destroy cancels them, aborts the running one and returns.
    auto comms = nonBlockingClique(2, 600000);
    for (int i = 0; i < 3; ++i)
      REQUIRE(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[1], nullptr) == collInProgress);
    auto start = std::chrono::steady_clock::now();
    CHECK(collCommDestroy(comms[1]) == collSuccess);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    // A non-blocking finalize whose barrier cannot end (its peer is gone): destroy stops it.
    REQUIRE(collCommFinalize(comms[0]) == collInProgress);
    start = std::chrono::steady_clock::now();
    CHECK(collCommDestroy(comms[0]) == collSuccess);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
}

TEST_CASE("collCommSetTimeout: calls made after it wait that long; calls made before keep theirs",
          "[threads][timeout]") {
  auto comms = nonBlockingClique(2, 600000);
  std::vector<float> v(4096, 1.0f), w(4096, 1.0f);
  auto both = [&] {
    REQUIRE(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr) == collInProgress);
    REQUIRE(collAllReduce(w.data(), w.data(), w.size(), collFloat32, collSum, comms[1], nullptr) == collInProgress);
  };
  both();  // connects: the waits below are the data path's
  for (auto c : comms) REQUIRE(settle(c) == collSuccess);
  CHECK(collCommSetTimeout(comms[0], -1) == collInvalidArgument);
  CHECK_THAT(collGetLastError(comms[0]), Catch::Contains("timeoutMs=-1 is negative"));
  CHECK(collCommSetTimeout(nullptr, 100) != collSuccess);

  // Made under the 600 s deadline, then the deadline is lowered: this call still waits.
  REQUIRE(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr) == collInProgress);
  REQUIRE(collCommSetTimeout(comms[0], 300) == collSuccess);
  CHECK(settle(comms[0], 1500) == collInProgress);
  REQUIRE(collAllReduce(w.data(), w.data(), w.size(), collFloat32, collSum, comms[1], nullptr) == collInProgress);
  for (auto c : comms) REQUIRE(settle(c) == collSuccess);
  CHECK(v[0] == 4.0f);

  // Made after: it ends at the new deadline, naming the peer that never called.
  auto start = std::chrono::steady_clock::now();
  REQUIRE(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comms[0], nullptr) == collInProgress);
  CHECK(settle(comms[0]) == collTimeout);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(took >= 0.29);
  CHECK(took < 5.0);
  CHECK_THAT(collGetLastError(comms[0]), Catch::Contains("rank 1") && Catch::Contains("nothing moved for"));
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("a rank that never arrives: everyone else gets collTimeout naming it", "[threads][failure]") {
  collUniqueId id = idWithRootTimeout(800);
  auto rs = initRanks(id, 5, {0, 1, 2, 4}, 800);  // rank 3 never starts
  for (const auto& r : rs) {
    CHECK(r.rc == collTimeout);
    CHECK_THAT(r.error, Catch::Contains("1 of 5 ranks never arrived") && Catch::Contains("rank 3"));
    CHECK(r.seconds < 5.0);
    CHECK(r.comm == nullptr);
  }
  destroyAll(rs);
}

TEST_CASE("contradictions at the rendezvous are named to every rank", "[threads][failure]") {
  SECTION("two ranks claim the same rank") {
    collUniqueId id = idWithRootTimeout(1500);
    auto rs = initRanks(id, 2, {0, 0}, 1500);
    for (const auto& r : rs) {
      CHECK(r.rc == collInvalidUsage);
      CHECK_THAT(r.error, Catch::Contains("rank 0 arrived twice"));
    }
    destroyAll(rs);
  }
  SECTION("ranks disagree on nranks") {
    collUniqueId id = idWithRootTimeout(1500);
    auto rs = initRanks(id, 0, {0, 1}, 1500, [](int i) { return i == 0 ? 2 : 3; });
    for (const auto& r : rs) {
      CHECK(r.rc == collInvalidUsage);
      CHECK_THAT(r.error, Catch::Contains("nranks="));
    }
    destroyAll(rs);
  }
}

TEST_CASE("connections with a wrong secret or garbage are dropped; the root keeps serving", "[threads][failure]") {
  collUniqueId id = idWithRootTimeout(5000);
  auto contents = coll::decodeUniqueId(id);
  REQUIRE(contents.isOk());

  // A stranger with the right magic but a wrong secret claims rank 0: it must not take the slot.
  coll::bootstrap::Hello fake{};
  fake.nranks = 2;
  fake.info.rank = 0;
  fake.info.nranks = 2;
  auto h = coll::bootstrap::makeHeader(contents->secret ^ 1, coll::bootstrap::kTagHello, sizeof(fake), 0);
  std::vector<char> bytes(reinterpret_cast<char*>(&h), reinterpret_cast<char*>(&h) + sizeof(h));
  bytes.insert(bytes.end(), reinterpret_cast<char*>(&fake), reinterpret_cast<char*>(&fake) + sizeof(fake));
  sendRaw(contents->root, bytes.data(), bytes.size());
  // Garbage, a truncated header, and a silent connection held open during the init.
  std::string garbage(1000, 'x');
  sendRaw(contents->root, garbage.data(), garbage.size());
  sendRaw(contents->root, bytes.data(), 10);
  auto silent =
      coll::net::Socket::connect(contents->root, coll::net::Deadline::afterMs(2000), nullptr, "silent test peer");
  REQUIRE(silent.isOk());

  auto rs = initRanks(id, 2, {0, 1}, 5000);
  for (const auto& r : rs) {
    CHECK(r.rc == collSuccess);
    CHECK(r.error == "");
  }
  REQUIRE(rs[0].comm);
  REQUIRE(rs[1].comm);

  // Now the same at a rank's inbox: a forged message from rank 1 is ignored, the real one arrives.
  auto inbox = rs[0].comm->bootstrap->peers()[0].listen.unpack();
  REQUIRE(inbox.isOk());
  uint64_t forged = 666, real = 42, got = 0;
  auto fh = coll::bootstrap::makeHeader(contents->secret ^ 2, 7, sizeof(forged), 1);
  std::vector<char> fb(reinterpret_cast<char*>(&fh), reinterpret_cast<char*>(&fh) + sizeof(fh));
  fb.insert(fb.end(), reinterpret_cast<char*>(&forged), reinterpret_cast<char*>(&forged) + sizeof(forged));
  sendRaw(*inbox, fb.data(), fb.size());
  REQUIRE(rs[1].comm->bootstrap->send(0, 7, &real, sizeof(real)).isOk());
  REQUIRE(rs[0].comm->bootstrap->recv(1, 7, &got, sizeof(got)).isOk());
  CHECK(got == 42);
  destroyAll(rs);
}

TEST_CASE("bootstrap recv of the wrong size, and to invalid peers, is an error", "[threads]") {
  std::vector<collComm_t> comms(2, nullptr);
  REQUIRE(collCommInitAll(comms.data(), 2, nullptr) == collSuccess);
  uint32_t small = 1;
  uint64_t big = 0;
  REQUIRE(comms[0]->bootstrap->send(1, 9, &small, sizeof(small)).isOk());
  auto s = comms[1]->bootstrap->recv(0, 9, &big, sizeof(big));
  CHECK(s.code() == collInvalidUsage);
  CHECK_THAT(s.message(), Catch::Contains("sent 4 bytes") && Catch::Contains("8 were expected"));
  CHECK(comms[0]->bootstrap->send(2, 9, &small, 4).code() == collInvalidArgument);
  CHECK(comms[0]->bootstrap->send(1, coll::bootstrap::kTagInternal, &small, 4).code() == collInvalidArgument);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("collCommAbort wakes a thread blocked in a call on the communicator", "[threads][failure]") {
  std::vector<collComm_t> comms(2, nullptr);
  REQUIRE(collCommInitAll(comms.data(), 2, nullptr) == collSuccess);
  collResult_t rc = collSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread blocked([&] { rc = collCommFinalize(comms[0]); });  // rank 1 never finalizes
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(collCommAbort(comms[0]) == collSuccess);
  blocked.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(rc == collRemoteError);
  CHECK(s < 5.0);  // the default deadline is 60 s: only the abort can have ended it
  CHECK(collCommDestroy(comms[1]) == collSuccess);
}

TEST_CASE("a peer that fails during a bootstrap collective ends the others' waits, naming it", "[threads][failure]") {
  std::vector<collComm_t> comms(3, nullptr);
  REQUIRE(collCommInitAll(comms.data(), 3, nullptr) == collSuccess);
  // Rank 2 disappears (abort closes its inbox); ranks 0 and 1 then try an all-gather.
  CHECK(collCommAbort(comms[2]) == collSuccess);
  auto errors = onEveryRank<std::string>(2, [&](int r) {
    uint64_t slots[3] = {0, 0, 0};
    auto s = comms[r]->bootstrap->allGather(slots, sizeof(uint64_t));
    return s.isOk() ? std::string("succeeded") : s.message();
  });
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("rank 2"));
  for (int r = 0; r < 2; ++r) CHECK(collCommDestroy(comms[r]) == collSuccess);
}

TEST_CASE("the bootstrap works over IPv6 (COLL_SOCKET_FAMILY=AF_INET6)", "[threads]") {
  bool haveV6 = false;
  for (const auto& i : coll::net::listInterfaces()) haveV6 |= i.address.family() == AF_INET6;
  if (!haveV6) {
    WARN("no IPv6 address on this machine: IPv6 bootstrap not exercised");
    return;
  }
  setenv("COLL_SOCKET_FAMILY", "AF_INET6", 1);
  std::vector<collComm_t> comms(3, nullptr);
  collResult_t rc = collCommInitAll(comms.data(), 3, nullptr);
  unsetenv("COLL_SOCKET_FAMILY");
  REQUIRE(rc == collSuccess);
  auto errors = onEveryRank<std::string>(3, [&](int r) { return colltest::checkAllGather(comms[r]); });
  for (int r = 0; r < 3; ++r) {
    CHECK(errors[r] == "");
    CHECK(comms[r]->bootstrap->peers()[r].listen.family == AF_INET6);
    CHECK(collCommDestroy(comms[r]) == collSuccess);
  }
}

TEST_CASE("roots retire once their communicator is formed; at most 8 stay", "[threads]") {
  for (int i = 0; i < 10; ++i) {
    std::vector<collComm_t> comms(2, nullptr);
    REQUIRE(collCommInitAll(comms.data(), 2, nullptr) == collSuccess);
    for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  }
  CHECK(coll::bootstrap::runningRoots() == 0);
  CHECK(coll::bootstrap::retiredRoots() <= 8);
  CHECK(coll::bootstrap::retiredRoots() >= 1);
}

TEST_CASE("a rank started with the id of a formed communicator is refused at once", "[threads][failure]") {
  collUniqueId id = idWithRootTimeout(20000);
  auto rs = initRanks(id, 2, {0, 1}, 20000);
  for (const auto& r : rs) REQUIRE(r.rc == collSuccess);
  // Without the retired root's answer this rank would wait its whole 20 s deadline.
  auto stale = initRanks(id, 2, {1}, 20000);
  CHECK(stale[0].rc == collInvalidUsage);
  CHECK_THAT(stale[0].error, Catch::Contains("belongs to a job whose init already completed"));
  CHECK(stale[0].seconds < 5);
  destroyAll(rs);
  destroyAll(stale);
}

TEST_CASE("connections that never present the secret are closed after COLL_HANDSHAKE_TIMEOUT_MS",
          "[threads][failure]") {
  auto comms = initAllWith(2, "COLL_HANDSHAKE_TIMEOUT_MS", "300");
  auto inbox = comms[0]->bootstrap->peers()[0].listen.unpack();
  REQUIRE(inbox.isOk());
  // 64 silent connections and 64 that stop inside the header: each is closed by the inbox (a
  // read returns 0) well before the bootstrap's own 60 s stall deadline.
  std::vector<coll::net::Socket> socks;
  for (int i = 0; i < 128; ++i) {
    auto s = coll::net::Socket::connect(*inbox, coll::net::Deadline::afterMs(2000), nullptr, "silent test peer");
    REQUIRE(s.isOk());
    if (i % 2) REQUIRE(s->sendAll("COLL", 4, coll::net::Deadline::afterMs(2000), nullptr, "test peer").isOk());
    socks.push_back(std::move(*s));
  }
  auto start = std::chrono::steady_clock::now();
  int closed = 0;
  while (closed < 128 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    closed = 0;
    for (auto& s : socks) {
      char c;
      ssize_t k = ::recv(s.fd(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(closed == 128);
  CHECK(secs < 5);
  // The inbox still serves its communicator.
  expectInboxServes(comms, 7);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("out of file descriptors, the inbox neither spins nor stops serving", "[threads][failure]") {
  auto comms = initAllWith(2, "COLL_HANDSHAKE_TIMEOUT_MS", "1000");
  auto inbox = comms[0]->bootstrap->peers()[0].listen.unpack();
  REQUIRE(inbox.isOk());
  int open = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++open;
    closedir(d);
  }
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(open + 8);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  // A stranger (another process: its descriptors are its own) opens 200 silent connections.
  pid_t child = fork();
  if (child == 0) {
    std::vector<int> fds;
    for (int i = 0; i < 200; ++i) {
      int fd = ::socket(inbox->family(), SOCK_STREAM, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&inbox->storage), inbox->length) == 0)
        fds.push_back(fd);
    }
    ::sleep(3);
    _exit(0);
  }
  REQUIRE(child > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  getrusage(RUSAGE_SELF, &after);
  auto cpuUs = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000.0 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  double busy = (cpuUs(after) - cpuUs(before)) / 1e6;
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  INFO("CPU seconds used in 1 s while out of descriptors: " << busy);
  CHECK(busy < 0.5);  // a spinning accept loop would take a whole core
  expectInboxServes(comms, 9);
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("unsolicited bootstrap messages are bounded; the rank's next wait names the sender", "[threads][failure]") {
  auto comms = initAllWith(3, "COLL_BOOTSTRAP_INBOX_PEER_BYTES", "1048576");
  // Messages nobody asked for are held up to the bound: the first 512 KiB are kept...
  std::vector<char> chunk(256 << 10, 'x');
  REQUIRE(comms[1]->bootstrap->sendBytes(0, 11, chunk).isOk());
  REQUIRE(comms[1]->bootstrap->sendBytes(0, 12, chunk).isOk());
  auto first = comms[0]->bootstrap->recvBytes(1, 11);
  REQUIRE(first.isOk());
  CHECK(first->size() == chunk.size());
  // ...and receiving frees room: five more of 256 KiB do not fit (4 would be 1 MiB with the one held).
  for (int i = 0; i < 5; ++i) (void)comms[1]->bootstrap->sendBytes(0, 20 + i, chunk);
  auto s = comms[0]->bootstrap->recvBytes(2, 99);  // waits on another peer: fails at once anyway
  CHECK(s.status().code() == collRemoteError);
  CHECK_THAT(s.status().message(), Catch::Contains("rank 1 sent a 262144-byte bootstrap message") &&
                                       Catch::Contains("COLL_BOOTSTRAP_INBOX_PEER_BYTES"));
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("a communicator destroyed while a message's payload is still arriving hands its inbox bytes back",
          "[threads][failure]") {
  // The inbox admits a message (counting its bytes against rank 1's share) when its header comes
  // and before its payload: destroying the rank in between releases bytes of a message never
  // delivered. Under ASan a release after the bootstrap's own state is gone is a use-after-free
  // (seen as heap corruption in a mismatch test whose peers' failure notices were in flight).
  auto comms = initAllWith(2, "COLL_HANDSHAKE_TIMEOUT_MS", "5000");
  auto inbox = comms[0]->bootstrap->peers()[0].listen.unpack();
  REQUIRE(inbox.isOk());
  auto s = coll::net::Socket::connect(*inbox, coll::net::Deadline::afterMs(2000), nullptr, "test peer");
  REQUIRE(s.isOk());
  coll::bootstrap::MsgHeader h = coll::bootstrap::makeHeader(comms[0]->bootstrap->secret(), 777, 65536, 1);
  REQUIRE(s->sendAll(&h, sizeof(h), coll::net::Deadline::afterMs(2000), nullptr, "test peer").isOk());
  std::string part(4096, 'x');
  REQUIRE(s->sendAll(part.data(), part.size(), coll::net::Deadline::afterMs(2000), nullptr, "test peer").isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the inbox has read the header
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("a flood of empty bootstrap messages counts against the inbox bound; the next wait names the sender",
          "[threads][failure]") {
  // 64 KiB per peer holds at most 1024 messages (each counts 64 bytes beyond its payload).
  auto comms = initAllWith(3, "COLL_BOOTSTRAP_INBOX_PEER_BYTES", "65536");
  std::vector<char> none;
  for (int i = 0; i < 1100; ++i) (void)comms[1]->bootstrap->sendBytes(0, 1000 + i, none);
  auto s = comms[0]->bootstrap->recvBytes(2, 99);  // waits on another peer: fails at once anyway
  CHECK(s.status().code() == collRemoteError);
  CHECK_THAT(s.status().message(), Catch::Contains("rank 1 sent a 0-byte bootstrap message") &&
                                       Catch::Contains("COLL_BOOTSTRAP_INBOX_PEER_BYTES"));
  // The messages held before the bound are still delivered, each once.
  auto first = comms[0]->bootstrap->recvBytes(1, 1000);
  REQUIRE(first.isOk());
  CHECK(first->empty());
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

TEST_CASE("COLL_CHECK_CALLS: ranks calling different collectives of equal size fail at once, naming both calls",
          "[threads][failure]") {
  auto comms = initAllWith(3, "COLL_CHECK_CALLS", "1");
  struct Outcome {
    collResult_t rc = collSuccess;
    std::string error;
    float value = 0;
  };
  // First matching calls (checked, exact), then rank 2 takes max where the others sum, then rank 1
  // passes int32 where the others pass float32, then a different root: same byte counts throughout.
  auto outs = onEveryRank<std::vector<Outcome>>(3, [&](int r) {
    std::vector<Outcome> o(4);
    float in = static_cast<float>(r + 1), out = 0;
    o[0].rc = collAllReduce(&in, &out, 1, collFloat32, collSum, comms[r], nullptr);
    o[0].value = out;
    o[1].rc = collAllReduce(&in, &out, 1, collFloat32, r == 2 ? collMax : collSum, comms[r], nullptr);
    if (o[1].rc != collSuccess) o[1].error = collGetLastError(comms[r]);
    return o;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << outs[r][1].error);
    CHECK(outs[r][0].rc == collSuccess);
    CHECK(outs[r][0].value == 6.0f);
    CHECK(outs[r][1].rc == collInvalidUsage);
    CHECK_THAT(outs[r][1].error,
               Catch::Contains("rank 0 called collAllReduce(count 1, collFloat32, collSum) as collective #2, rank 2 "
                               "called collAllReduce(count 1, collFloat32, collMax) as collective #2"));
  }
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);

  // Type and root, on fresh communicators (a failed call leaves a communicator unusable).
  for (int variant = 0; variant < 2; ++variant) {
    comms = initAllWith(3, "COLL_CHECK_CALLS", "1");
    auto errs = onEveryRank<std::string>(3, [&](int r) {
      int32_t buf[4] = {1, 2, 3, 4};
      collResult_t c = variant == 0
                           ? collAllReduce(buf, buf, 4, r == 1 ? collInt32 : collFloat32, collMax, comms[r], nullptr)
                           : collBroadcast(buf, buf, 4, collInt32, r == 0 ? 0 : 1, comms[r], nullptr);
      return c == collInvalidUsage ? std::string(collGetLastError(comms[r])) : std::string("rc ") + std::to_string(c);
    });
    for (int r = 0; r < 3; ++r) {
      INFO("variant " << variant << " rank " << r);
      CHECK_THAT(errs[r], Catch::Contains(variant == 0 ? "rank 1 called collAllReduce(count 4, collInt32, collMax)"
                                                       : "rank 1 called collBroadcast(count 4, collInt32, root 1)"));
    }
    for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  }
}

// The flight recorder records without a lock (a seqlock per entry): a dump taken on another
// thread while operations are recorded must show only whole entries, with their own fields and
// times that convert to the wall clock of the moment they were recorded.
TEST_CASE("flight recorder: dumps during recording read whole entries with wall-clock times", "[threads][flight]") {
  coll::FlightRecorder recorder(0, 1, 0x1234, 64, "");
  int64_t before = coll::TickClock::nowWallUs();
  std::atomic<bool> done{false};
  std::atomic<int> wrongSeq{0};  // Catch's assertions are not thread-safe: counted, checked after
  std::thread writer([&] {
    static const char* const kNames[] = {"collAllReduce", "collBroadcast"};
    for (uint64_t i = 1; i <= 200000; ++i) {
      coll::OpArgs a{};
      a.name = kNames[i % 2];
      a.count = i * 3;  // the fields of entry i, derived from i: a torn entry mixes two
      a.type = static_cast<int>(i % 10);
      a.root = static_cast<int>(i % 7);
      uint64_t seq = recorder.start(&a, 1);
      if (seq != i) ++wrongSeq;
      recorder.end(seq, 1, true);
    }
    done = true;
  });
  int dumps = 0, entries = 0;
  while (!done || dumps == 0) {
    auto j = nlohmann::json::parse(recorder.toJson("test"));
    for (const auto& op : j["ops"]) {
      uint64_t seq = op["seq"];
      CHECK(op["count"] == seq * 3);
      CHECK(op["root"] == static_cast<int>(seq % 7));
      CHECK(op["type"] == static_cast<int>(seq % 10));
      CHECK(op["name"] == (seq % 2 ? "collBroadcast" : "collAllReduce"));
      if (op["state"] == "completed") CHECK(op["end_us"] >= op["start_us"]);
      ++entries;
    }
    ++dumps;
  }
  writer.join();
  CHECK(wrongSeq == 0);
  auto j = nlohmann::json::parse(recorder.toJson("end"));
  int64_t after = coll::TickClock::nowWallUs();
  REQUIRE(j["ops"].size() == 64);
  CHECK(j["next_seq"] == 200001);
  CHECK(j["ops"][63]["seq"] == 200000);
  for (const auto& op : j["ops"]) {
    CHECK(op["state"] == "completed");
    // Ticks converted with the measured rate land inside the test's own wall-clock span (1 ms of
    // slack for the rate's error over the span).
    CHECK(op["start_us"] >= before - 1000);
    CHECK(op["end_us"] <= after + 1000);
  }
  INFO(dumps << " dumps, " << entries << " entries read");
  CHECK(dumps > 0);
}

// Calls check a communicator's liveness without a lock when the thread checked the same one
// before (core/comm.cc): a destroy racing with calls on other threads must neither free it under
// a call (ASan and TSan run this suite) nor let a call in afterwards.
TEST_CASE("calls racing with collCommDestroy: each either runs or is refused, never on freed memory",
          "[threads][failure]") {
  for (int round = 0; round < 20; ++round) {
    std::vector<collComm_t> comms(1, nullptr);
    REQUIRE(collCommInitAll(comms.data(), 1, nullptr) == collSuccess);
    collComm_t comm = comms[0];
    std::atomic<bool> destroyed{false};
    std::atomic<int> refusedAfter{0}, wrongAfter{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t)
      callers.emplace_back([&] {
        // Calls before, during and after the destroy: until 1000 came after it returned.
        for (int after = 0; after < 1000;) {
          bool wasDestroyed = destroyed.load();
          after += wasDestroyed;
          int n = 0;
          collResult_t rc = collCommCount(comm, &n);
          if (wasDestroyed)
            (rc == collInvalidArgument ? refusedAfter : wrongAfter)++;
          else if (rc == collSuccess && n != 1)
            wrongAfter++;
        }
      });
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
    CHECK(collCommDestroy(comm) == collSuccess);
    destroyed = true;
    for (auto& t : callers) t.join();
    CHECK(wrongAfter == 0);  // a call that began after the destroy returned is refused
    CHECK(refusedAfter > 0);
  }
}
