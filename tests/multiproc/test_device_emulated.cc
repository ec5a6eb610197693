// The device path end to end on the emulated device (COLL_DEVICE_EMULATION, device/runtime.h):
// ranks as threads of one process on one device, buffers in (emulated) device memory, one stream
// per rank, FIFOs in device memory (p2p transport), the device executor launching the
// interpreter's host build. What runs here is the path a GPU takes, except the kernel itself:
// stream semantics (return once enqueued), groups as one launch, launches of one communicator
// kept in order across streams, abort, timeouts, errors. Nothing here says a GPU works.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "coll/coll.h"
#include "core/comm.h"
#include "device/runtime.h"
#include "multiproc/checks.h"
#include "multiproc/collcheck.h"
#include "multiproc/emulated_memory.h"

using colltest::Case;
using colltest::Coll;
using colltest::onRanks;

namespace {

constexpr int kDevices = 2;

// The emulated runtime. Checked once, by the test's own thread (makeComms calls it first): Catch's
// assertions are not for the rank threads, which call it too.
coll::device::Runtime& rt() {
  static bool checked = false;
  if (!checked) {
    setenv("COLL_DEVICE_EMULATION", "2", 1);  // before the first coll call decides the runtime
    coll::device::Runtime* r = coll::device::runtime();
    REQUIRE(r != nullptr);
    REQUIRE(std::string(r->name()) == "emulated");
    REQUIRE(r->deviceCount() == kDevices);
    checked = true;
  }
  return *coll::device::runtime();
}

std::vector<collComm_t> makeComms(int n, int device = 0) {
  rt();
  std::vector<collComm_t> comms(n);
  std::vector<int> devs(n, device);
  REQUIRE(collCommInitAll(comms.data(), n, devs.data()) == collSuccess);
  return comms;
}

void destroy(std::vector<collComm_t>& comms) {
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
}

const Coll kAll[] = {Coll::kAllReduce,     Coll::kBroadcast, Coll::kReduce,  Coll::kAllGather,
                     Coll::kReduceScatter, Coll::kAllToAll,  Coll::kSendRecv};

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

std::string matrix(collComm_t comm, const std::vector<size_t>& counts, bool allTypes) {
  int n = 0;
  collCommCount(comm, &n);
  colltest::EmulatedMemory em;
  if (!em.error().empty()) return em.error();
  for (Coll c : kAll)
    for (int t = 0; t < collNumTypes; ++t) {
      if (!allTypes && t != collFloat32 && t != collBfloat16 && t != collInt8) continue;
      for (int op = 0; op < (reduces(c) ? collNumOps : 1); ++op)
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if (inPlace && c == Coll::kSendRecv) continue;
            int root = (count + t) % n;
            std::string e = colltest::runCase(
                comm, Case{c, static_cast<collDataType_t>(t), static_cast<collRedOp_t>(op), count, inPlace, root},
                &em.memory());
            if (!e.empty()) return e;
          }
    }
  return "";
}

void runMatrix(int n, const std::vector<size_t>& counts, bool allTypes) {
  auto comms = makeComms(n);
  auto errors = onRanks(comms, [&](collComm_t c) { return matrix(c, counts, allTypes); });
  for (const auto& e : errors) CHECK(e == "");
  destroy(comms);
}

// Device buffers of n floats per rank, each on its own stream.
struct Buffers {
  std::vector<float*> data;
  std::vector<coll::device::Stream> streams;
  explicit Buffers(int ranks, size_t n) : data(ranks), streams(ranks) {
    for (int r = 0; r < ranks; ++r) {
      void* p = nullptr;
      REQUIRE(rt().alloc(0, n * sizeof(float), &p).isOk());
      data[r] = static_cast<float*>(p);
      REQUIRE(rt().newStream(&streams[r]).isOk());
    }
  }
  ~Buffers() {
    for (float* p : data) rt().free(p);
    for (auto s : streams) (void)rt().destroyStream(s);
  }
  collStream_t stream(int r) const { return static_cast<collStream_t>(streams[r]); }
  void sync() const {
    for (auto s : streams) REQUIRE(rt().synchronize(s).isOk());
  }
};

// One all-reduce on every rank, each from its own thread: the connections exist afterwards.
void warmUp(std::vector<collComm_t>& comms, const Buffers& b, size_t count) {
  auto errors = onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    bool ok = collAllReduce(b.data[r], b.data[r], count, collFloat32, collSum, c, b.stream(r)) == collSuccess;
    return ok ? "" : collGetLastError(c);
  });
  for (const auto& e : errors) REQUIRE(e == "");
  b.sync();
}

uint64_t launches(collComm_t comm) { return comm->deviceExecutor ? comm->deviceExecutor->launches() : 0; }

}  // namespace

TEST_CASE("device buffers, ranks as threads on one device: every collective, type, op and placement",
          "[device][emulated]") {
  for (int n : {1, 2, 3}) {
    INFO("ranks " << n);
    runMatrix(n, {0, 1, 7, 1031}, true);
  }
}

TEST_CASE("device buffers at 4 and 8 ranks, and counts that wrap a small FIFO", "[device][emulated]") {
  for (int n : {4, 8}) {
    INFO("ranks " << n);
    runMatrix(n, {1, 4099}, false);
  }
  // Two slots of 4 KiB: every operation of more than a few KiB wraps the FIFO many times.
  setenv("COLL_NSLOTS", "2", 1);
  setenv("COLL_BUFFSIZE", "8192", 1);
  for (int n : {2, 3, 5}) {
    INFO("small FIFO, ranks " << n);
    runMatrix(n, {3, 50001}, false);
  }
  unsetenv("COLL_NSLOTS");
  unsetenv("COLL_BUFFSIZE");
}

// NCCL's stream semantics: the call returns once the work is on the stream; the work waits there
// for the peers, and the result exists once the stream has passed it.
TEST_CASE("a device call returns once enqueued; its result exists after the stream", "[device][emulated]") {
  const int n = 2;
  const size_t count = 100003;
  auto comms = makeComms(n);
  Buffers b(n, count);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) b.data[r][i] = static_cast<float>(r + 1);
  // Connections are made by the first call of each rank (collectively), so both call once first.
  auto warm = onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    if (collAllReduce(b.data[r], b.data[r], count, collFloat32, collSum, c, b.stream(r)) != collSuccess)
      return collGetLastError(c);
    return rt().synchronize(b.streams[r]).isOk() ? "" : "sync failed";
  });
  for (const auto& e : warm) REQUIRE(e == "");
  CHECK(b.data[0][count - 1] == 3.0f);

  // Rank 0 alone: the call returns at once although rank 1 has not called yet.
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(collAllReduce(b.data[0], b.data[0], count, collFloat32, collSum, comms[0], b.stream(0)) == collSuccess);
  double callSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(callSeconds < 0.5);
  coll::device::Event e = nullptr;
  REQUIRE(rt().newEvent(&e).isOk());
  REQUIRE(rt().record(e, b.streams[0]).isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(rt().done(e));  // still waiting for rank 1 on the stream
  REQUIRE(collAllReduce(b.data[1], b.data[1], count, collFloat32, collSum, comms[1], b.stream(1)) == collSuccess);
  b.sync();
  CHECK(rt().done(e));
  rt().destroyEvent(e);
  CHECK(b.data[0][0] == 6.0f);
  CHECK(b.data[1][count - 1] == 6.0f);
  for (auto c : comms) {
    collResult_t async = collInProgress;
    CHECK(collCommGetAsyncError(c, &async) == collSuccess);
    CHECK(async == collSuccess);
  }
  // Finalize flushes what is still on the streams: rank 1's last call is enqueued, not done, when
  // both ranks finalize (each from its own thread: finalize ends in a barrier).
  auto t1 = std::chrono::steady_clock::now();
  REQUIRE(collAllReduce(b.data[0], b.data[0], count, collFloat32, collSum, comms[0], b.stream(0)) == collSuccess);
  REQUIRE(collAllReduce(b.data[1], b.data[1], count, collFloat32, collSum, comms[1], b.stream(1)) == collSuccess);
  auto fin = onRanks(
      comms, [](collComm_t c) -> std::string { return collCommFinalize(c) == collSuccess ? "" : collGetLastError(c); });
  for (const auto& e : fin) CHECK(e == "");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 5.0);
  CHECK(b.data[0][0] == 12.0f);  // read before any stream sync: finalize waited for the launch
  CHECK(b.data[1][count - 1] == 12.0f);
  destroy(comms);
}

TEST_CASE("one thread drives every rank: a group is one launch per rank, collectives then sends and receives",
          "[device][emulated][group]") {
  for (int n : {1, 3, 4}) {
    INFO("ranks " << n);
    auto comms = makeComms(n);
    const size_t count = 70001;
    Buffers a(n, count), x(n, count), y(n, count * n), s(n, count * n), q(n, count * n);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        a.data[r][i] = static_cast<float>(r + 1);
        x.data[r][i] = static_cast<float>(i % 97);
      }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count * n; ++i) s.data[r][i] = static_cast<float>(r * 1000 + i % 1000);
    // Three collectives per rank in one group, all ranks from this thread.
    std::vector<uint64_t> before(n);
    for (int r = 0; r < n; ++r) before[r] = launches(comms[r]);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r) {
      REQUIRE(collAllReduce(a.data[r], a.data[r], count, collFloat32, collSum, comms[r], a.stream(r)) == collSuccess);
      REQUIRE(collBroadcast(x.data[r], x.data[r], count, collFloat32, 0, comms[r], a.stream(r)) == collSuccess);
      REQUIRE(collAllGather(x.data[r], y.data[r], count, collFloat32, comms[r], a.stream(r)) == collSuccess);
    }
    REQUIRE(collGroupEnd() == collSuccess);
    a.sync();
    for (int r = 0; r < n; ++r) {
      CHECK(launches(comms[r]) == before[r] + 1);
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += a.data[r][i] != static_cast<float>(n * (n + 1) / 2);
      for (size_t i = 0; i < count * n; ++i) bad += y.data[r][i] != static_cast<float>((i % count) % 97);
      CHECK(bad == 0);
    }
    // Every rank sends a block to every rank (itself too): one launch per rank, a CTA per peer and direction.
    for (int r = 0; r < n; ++r) before[r] = launches(comms[r]);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        REQUIRE(collSend(s.data[r] + p * count, count, collFloat32, p, comms[r], a.stream(r)) == collSuccess);
        REQUIRE(collRecv(q.data[r] + p * count, count, collFloat32, p, comms[r], a.stream(r)) == collSuccess);
      }
    REQUIRE(collGroupEnd() == collSuccess);
    a.sync();
    for (int r = 0; r < n; ++r) {
      CHECK(launches(comms[r]) == before[r] + 1);
      size_t bad = 0;
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          bad += q.data[r][p * count + i] != static_cast<float>(p * 1000 + (r * count + i) % 1000);
      CHECK(bad == 0);
    }
    destroy(comms);
  }
}

TEST_CASE("launches of one communicator on two streams run in call order", "[device][emulated]") {
  const int n = 2;
  const size_t count = 30011;
  auto comms = makeComms(n);
  Buffers first(n, count), second(n, count);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) first.data[r][i] = 1.0f;
  auto errors = onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    // The second all-reduce reads what the first wrote; it is on another stream.
    if (collAllReduce(first.data[r], first.data[r], count, collFloat32, collSum, c, first.stream(r)) != collSuccess)
      return collGetLastError(c);
    coll::device::Event e = nullptr;
    if (!rt().newEvent(&e).isOk() || !rt().record(e, first.streams[r]).isOk() ||
        !rt().waitEvent(second.streams[r], e).isOk())
      return "event";
    if (collAllReduce(first.data[r], second.data[r], count, collFloat32, collSum, c, second.stream(r)) != collSuccess)
      return collGetLastError(c);
    (void)rt().synchronize(second.streams[r]);
    rt().destroyEvent(e);
    return "";
  });
  for (const auto& e : errors) CHECK(e == "");
  first.sync();
  second.sync();
  for (int r = 0; r < n; ++r) CHECK(second.data[r][count - 1] == 4.0f);
  destroy(comms);
}

TEST_CASE("collCommAbort wakes a launch waiting for a peer that never comes", "[device][emulated][abort]") {
  const size_t count = 4096;
  auto comms = makeComms(2);
  Buffers b(2, count);
  warmUp(comms, b, count);
  REQUIRE(collAllReduce(b.data[0], b.data[0], count, collFloat32, collSum, comms[0], b.stream(0)) == collSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  CHECK(collCommAbort(comms[0]) == collSuccess);  // returns once the launch has ended
  REQUIRE(rt().synchronize(b.streams[0]).isOk());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 2.0);
  CHECK(collCommDestroy(comms[1]) == collSuccess);
}

TEST_CASE("a peer that never comes ends the launch in collTimeout naming it", "[device][emulated][timeout]") {
  setenv("COLL_TIMEOUT_MS", "800", 1);
  const size_t count = 4096;
  auto comms = makeComms(3);
  Buffers b(3, count);
  warmUp(comms, b, count);
  // Rank 2 stays away: rank 0 and 1 wait in their launches until the timeout.
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(collAllReduce(b.data[0], b.data[0], count, collFloat32, collSum, comms[0], b.stream(0)) == collSuccess);
  REQUIRE(collAllReduce(b.data[1], b.data[1], count, collFloat32, collSum, comms[1], b.stream(1)) == collSuccess);
  REQUIRE(rt().synchronize(b.streams[0]).isOk());
  REQUIRE(rt().synchronize(b.streams[1]).isOk());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 5.0);
  for (int r = 0; r < 2; ++r) {
    collResult_t async = collSuccess;
    CHECK(collCommGetAsyncError(comms[r], &async) == collSuccess);
    CHECK(async == collTimeout);
    std::string why = collGetLastError(comms[r]);
    INFO(why);
    CHECK(why.find("nothing moved within the timeout waiting for rank") != std::string::npos);
    // Later calls are refused with the first failure's sentence.
    CHECK(collAllReduce(b.data[r], b.data[r], count, collFloat32, collSum, comms[r], b.stream(r)) == collTimeout);
    CHECK(std::string(collGetLastError(comms[r])).find("broken by an earlier error") != std::string::npos);
  }
  for (auto c : comms) CHECK(collCommDestroy(c) == collSuccess);
  unsetenv("COLL_TIMEOUT_MS");
}

TEST_CASE("device calls that cannot run are refused with the reason", "[device][emulated][args]") {
  rt();
  const size_t count = 64;
  void *d0 = nullptr, *d1 = nullptr;
  REQUIRE(rt().alloc(0, count * 4, &d0).isOk());
  REQUIRE(rt().alloc(1, count * 4, &d1).isOk());
  std::vector<float> host(count);
  coll::device::Stream s = nullptr;
  REQUIRE(rt().newStream(&s).isOk());
  auto stream = static_cast<collStream_t>(s);

  auto refused = [](collResult_t rc, collResult_t want, collComm_t c, const char* text) {
    CHECK(rc == want);
    std::string why = collGetLastError(c);
    INFO(why);
    CHECK(why.find(text) != std::string::npos);
  };
  collComm_t hostOnly = nullptr;
  REQUIRE(collCommInitAll(&hostOnly, 1, nullptr) == collSuccess);
  refused(collAllReduce(d0, d0, count, collFloat32, collSum, hostOnly, stream), collInvalidUsage, hostOnly,
          "this communicator is host-only");
  refused(collAllReduce(host.data(), host.data(), count, collFloat32, collSum, hostOnly, stream), collInvalidArgument,
          hostOnly, "host buffers need a NULL stream or a live coll host stream");
  CHECK(collCommDestroy(hostOnly) == collSuccess);

  auto comms = makeComms(1);
  collComm_t c = comms[0];
  refused(collAllReduce(d0, host.data(), count, collFloat32, collSum, c, stream), collInvalidUsage, c,
          "sendbuff is device memory and recvbuff is not");
  refused(collAllReduce(d1, d1, count, collFloat32, collSum, c, stream), collInvalidUsage, c,
          "memory of device 1, but this communicator is on device 0");
  collStream_t hostStream = nullptr;
  REQUIRE(collHostStreamCreate(&hostStream) == collSuccess);
  refused(collAllReduce(d0, d0, count, collFloat32, collSum, c, hostStream), collInvalidUsage, c,
          "device buffers go on a device stream");
  CHECK(collHostStreamDestroy(hostStream) == collSuccess);
  refused(collAllReduce(d0, d0, count, collFloat32, collSum, c, reinterpret_cast<collStream_t>(0x10)),
          collInvalidArgument, c, "is not a live stream of the emulated device runtime");
  // A group mixing host and device buffers on one communicator.
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collAllReduce(d0, d0, count, collFloat32, collSum, c, stream) == collSuccess);
  REQUIRE(collAllReduce(host.data(), host.data(), count, collFloat32, collSum, c, nullptr) == collSuccess);
  refused(collGroupEnd(), collInvalidUsage, c, "same stream");
  // Refusals leave the communicator usable.
  REQUIRE(collAllReduce(d0, d0, count, collFloat32, collSum, c, stream) == collSuccess);
  REQUIRE(rt().synchronize(s).isOk());
  destroy(comms);
  (void)rt().destroyStream(s);
  rt().free(d0);
  rt().free(d1);
}
