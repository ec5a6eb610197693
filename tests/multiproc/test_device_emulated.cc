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
#include <memory>
#include <thread>

#include "coll/coll.h"
#include "core/comm.h"
#include "core/connections.h"
#include "device/runtime.h"
#include "exec/cuda/interpreter.h"
#include "multiproc/checks.h"
#include "multiproc/collcheck.h"
#include "multiproc/emulated_memory.h"
#include "multiproc/mismatchcheck.h"
#include "multiproc/onesidedcheck.h"
#include "multiproc/windowcheck.h"

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

const Coll kAll[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                     Coll::kAllToAll,  Coll::kSendRecv,  Coll::kGather, Coll::kScatter};

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

std::string matrixOn(collComm_t comm, int n, colltest::EmulatedMemory& em, const std::vector<size_t>& counts,
                     bool allTypes);

// onWindow: the rank's arena is a symmetric window (every rank's cases take the same pieces of it,
// so the buffers sit at the same offsets everywhere), and calls whose buffers allow it run on
// windows (core/device_window_path.h); some must have.
std::string matrix(collComm_t comm, const std::vector<size_t>& counts, bool allTypes, bool onWindow = false) {
  int n = 0;
  collCommCount(comm, &n);
  colltest::EmulatedMemory em;
  if (!em.error().empty()) return em.error();
  collWindow_t win = nullptr;
  if (onWindow &&
      collCommWindowRegister(comm, em.arena(), em.arenaBytes(), &win, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
    return std::string("collCommWindowRegister: ") + collGetLastError(comm);
  std::string e = matrixOn(comm, n, em, counts, allTypes);
  unsigned long long calls = 0;
  collCommMemStats(comm, collStatWindowCollectives, &calls);
  if (e.empty() && onWindow && n > 1 && calls == 0) e = "no call ran on the window";
  if (e.empty() && !onWindow && calls != 0) e = "calls ran on windows without one";
  if (win && collCommWindowDeregister(comm, win) != collSuccess && e.empty())
    e = std::string("collCommWindowDeregister: ") + collGetLastError(comm);
  return e;
}

std::string matrixOn(collComm_t comm, int n, colltest::EmulatedMemory& em, const std::vector<size_t>& counts,
                     bool allTypes) {
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

void runMatrix(int n, const std::vector<size_t>& counts, bool allTypes, bool onWindow = false) {
  auto comms = makeComms(n);
  auto errors = onRanks(comms, [&](collComm_t c) { return matrix(c, counts, allTypes, onWindow); });
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

// Whether this run forces TCP between the ranks (device_emulated_tcp): no p2p, no shm.
bool overTcp() {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && std::string(v) == "1";
  };
  return set("COLL_P2P_DISABLE") && set("COLL_SHM_DISABLE");
}

uint64_t launches(collComm_t comm) { return comm->deviceExecutor ? comm->deviceExecutor->launches() : 0; }

}  // namespace

// Sets an environment variable for one scope (the tests' threads read it when a communicator
// makes its device path).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// What the data path must not do on a GPU, counted on the emulated device: after a warm-up pass,
// a second pass of the same operations makes no call that can wait for other work on the device
// (cudaMalloc, cudaFree, cudaFreeHost: a rank blocked in one while a peer's kernel spins for it
// never returns), and the piece loops read at most one word besides the flags they wait on.
TEST_CASE("after warm-up: no call that waits for the device, one word read per piece at most",
          "[device][emulated][sync]") {
  const int n = 3;
  auto comms = makeComms(n);
  // Each rank's memory is made here, before any rank launches (it allocates).
  std::vector<std::unique_ptr<colltest::EmulatedMemory>> mems;
  for (int r = 0; r < n; ++r) {
    mems.push_back(std::make_unique<colltest::EmulatedMemory>());
    REQUIRE(mems.back()->error() == "");
  }
  auto pass = [&] {
    auto errors = onRanks(comms, [&](collComm_t c) -> std::string {
      int r = 0;
      collCommUserRank(c, &r);
      for (Coll k : kAll)
        for (size_t count : {size_t(1), size_t(1031), size_t(70001)})
          for (bool inPlace : {false, true}) {
            if (inPlace && k == Coll::kSendRecv) continue;
            std::string e = colltest::runCase(c, Case{k, collFloat32, collSum, count, inPlace, 1}, &mems[r]->memory());
            if (!e.empty()) return e;
          }
      return "";
    });
    for (const auto& e : errors) REQUIRE(e == "");
  };
  pass();  // connections, scratch and launch blocks are made here
  uint64_t blocking = rt().blockingCalls();
  auto before = coll::exec::dev::descriptorCounters();
  pass();
  auto after = coll::exec::dev::descriptorCounters();
  CHECK(rt().blockingCalls() == blocking);
  uint64_t pieces = after.pieces - before.pieces, reads = after.pieceReads - before.pieceReads;
  CHECK(pieces > 0);
  CHECK(reads <= pieces);
  INFO("pieces " << pieces << ", reads in pieces " << reads << ", descriptor loads "
                 << after.setupReads - before.setupReads);
  mems.clear();
  destroy(comms);
}

TEST_CASE("device buffers, ranks as threads on one device: every collective, type, op and placement",
          "[device][emulated]") {
  // Every count here is under COLL_DEVICE_LL_MAX (LL); 0 turns LL off (Simple).
  for (const char* llMax : {"65536", "0"}) {
    ScopedEnv env("COLL_DEVICE_LL_MAX", llMax);
    for (int n : {1, 2, 3}) {
      INFO("ranks " << n << ", COLL_DEVICE_LL_MAX=" << llMax);
      runMatrix(n, {0, 1, 7, 1031}, true);
    }
  }
}

TEST_CASE("LL: small operations never touch head, large ones publish through it; LL wraps a small FIFO",
          "[device][emulated][ll]") {
  // Whether LL really ran: it publishes through the flags in its lines, Simple through head.
  auto heads = [](collComm_t c) {
    uint64_t sum = 0;
    for (auto* conn : c->deviceConns->links().sendTo)
      if (conn) sum += conn->info().fifo.header->head.load();
    return sum;
  };
  const int n = 3;
  auto comms = makeComms(n);
  Buffers b(n, 1 << 16);
  auto allReduce = [&](size_t count) {
    auto errors = onRanks(comms, [&](collComm_t c) -> std::string {
      int r = 0;
      collCommUserRank(c, &r);
      for (size_t i = 0; i < count; ++i) b.data[r][i] = static_cast<float>(r + i % 5);
      if (collAllReduce(b.data[r], b.data[r], count, collFloat32, collSum, c, b.stream(r)) != collSuccess)
        return collGetLastError(c);
      if (!rt().synchronize(b.streams[r]).isOk()) return "sync failed";
      for (size_t i = 0; i < count; ++i)
        if (b.data[r][i] != static_cast<float>(3 + 3 * (i % 5))) return "element " + std::to_string(i) + " is wrong";
      return "";
    });
    for (const auto& e : errors) REQUIRE(e == "");
  };
  // Over TCP (COLL_P2P_DISABLE and COLL_SHM_DISABLE) the proxy moves Simple slots only.
  const bool tcp = overTcp();
  allReduce(1000);  // 4000 bytes: LL, except over TCP
  for (auto c : comms) {
    CHECK(c->deviceLLMax == (tcp ? 0u : 65536u));
    if (tcp)
      CHECK(heads(c) > 0);
    else
      CHECK(heads(c) == 0);
  }
  allReduce(1 << 16);  // 256 KiB, over the default COLL_DEVICE_LL_MAX: Simple
  for (auto c : comms) CHECK(heads(c) > 0);
  destroy(comms);

  // LL lines of a 2-slot, 4 KiB FIFO (256 lines a slot): every operation of more than 4 KiB wraps.
  ScopedEnv slots("COLL_NSLOTS", "2"), buff("COLL_BUFFSIZE", "8192"), llMax("COLL_DEVICE_LL_MAX", "1073741824");
  for (int ranks : {2, 3, 5}) {
    INFO("LL, small FIFO, ranks " << ranks);
    runMatrix(ranks, {3, 50001}, false);
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

// Channels (algorithms/channels.h): with one channel per 512 bytes, up to 4, every collective and
// every send of more than 1 KiB is split across CTAs, each over connections of its own.
TEST_CASE("device buffers split across channels: every collective, type and op; wrapping a small FIFO",
          "[device][emulated][channels]") {
  ScopedEnv most("COLL_DEVICE_NCHANNELS", "4"), per("COLL_DEVICE_CHANNEL_MIN_BYTES", "512");
  for (const char* llMax : {"65536", "0"}) {
    ScopedEnv env("COLL_DEVICE_LL_MAX", llMax);
    for (int n : {1, 2, 3}) {
      INFO("ranks " << n << ", COLL_DEVICE_LL_MAX=" << llMax);
      runMatrix(n, {1, 7, 1031}, n == 2);
    }
  }
  {
    INFO("4 ranks");
    auto comms = makeComms(4);
    auto errors = onRanks(comms, [&](collComm_t c) { return matrix(c, {4099}, false); });
    for (const auto& e : errors) CHECK(e == "");
    // Each rank connected four channels: the split really happened.
    for (auto c : comms) CHECK(c->deviceConns->links().channels == 4);
    destroy(comms);
  }
  ScopedEnv slots("COLL_NSLOTS", "2"), buff("COLL_BUFFSIZE", "8192");
  for (int n : {2, 3}) {
    INFO("small FIFO, ranks " << n);
    runMatrix(n, {50001}, false);
  }
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
    Buffers a(n, count), x(n, count), z(n, count), y(n, count * n), s(n, count * n), q(n, count * n);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        a.data[r][i] = static_cast<float>(r + 1);
        x.data[r][i] = r == 0 ? static_cast<float>(i % 97) : -1.0f;
        z.data[r][i] = static_cast<float>(i % 97);
      }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count * n; ++i) s.data[r][i] = static_cast<float>(r * 1000 + i % 1000);
    // Three collectives per rank in one group, all ranks from this thread. They do not read each
    // other's outputs: a group's collectives run side by side on their channels (as with NCCL).
    std::vector<uint64_t> before(n);
    for (int r = 0; r < n; ++r) before[r] = launches(comms[r]);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r) {
      REQUIRE(collAllReduce(a.data[r], a.data[r], count, collFloat32, collSum, comms[r], a.stream(r)) == collSuccess);
      REQUIRE(collBroadcast(x.data[r], x.data[r], count, collFloat32, 0, comms[r], a.stream(r)) == collSuccess);
      REQUIRE(collAllGather(z.data[r], y.data[r], count, collFloat32, comms[r], a.stream(r)) == collSuccess);
    }
    REQUIRE(collGroupEnd() == collSuccess);
    a.sync();
    for (int r = 0; r < n; ++r) {
      CHECK(launches(comms[r]) == before[r] + 1);
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += a.data[r][i] != static_cast<float>(n * (n + 1) / 2);
      for (size_t i = 0; i < count; ++i) bad += x.data[r][i] != static_cast<float>(i % 97);
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

// The kernels' own timing (DevTiming, collCommGetDeviceTimings): filled by the emulated CTAs as by
// the GPU's, summed over the launches since the last call, and consistent in itself.
TEST_CASE("the kernels time themselves: collCommGetDeviceTimings", "[device][emulated][timings]") {
  const int n = 3;
  auto comms = makeComms(n);
  collDeviceTimings_t t;
  t.launches = 99;
  REQUIRE(collCommGetDeviceTimings(comms[0], &t) == collSuccess);  // no device call yet: zeros
  CHECK(t.launches == 0);
  CHECK(t.kernelUs == 0);
  CHECK(collCommGetDeviceTimings(comms[0], nullptr) == collInvalidArgument);
  CHECK(std::string(collGetLastError(comms[0])).find("timings is NULL") != std::string::npos);
  const size_t count = size_t(1) << 20;  // 4 MiB: the Simple protocol (LL pieces are not timed), several channels
  Buffers a(n, count);
  warmUp(comms, a, count);
  REQUIRE(collCommGetDeviceTimings(comms[0], &t) == collSuccess);
  CHECK(t.launches == 1);  // the warm-up's
  const int iters = 3;
  for (int k = 0; k < iters; ++k) {
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r)
      REQUIRE(collAllReduce(a.data[r], a.data[r], count, collFloat32, collSum, comms[r], a.stream(r)) == collSuccess);
    REQUIRE(collGroupEnd() == collSuccess);
  }
  a.sync();
  REQUIRE(collCommGetDeviceTimings(comms[0], &t) == collSuccess);
  CHECK(t.launches == iters);
  CHECK(t.channels >= static_cast<unsigned long long>(iters));
  CHECK(t.pieces >= static_cast<unsigned long long>(iters) * 2);
  CHECK(t.kernelUs > 0);
  CHECK(t.firstPieceUs > 0);
  CHECK(t.firstPieceUs <= t.lastPieceUs);
  CHECK(t.lastPieceUs <= t.kernelUs);
  CHECK(t.recvPollUs > 0);  // every Simple piece received polls head at least once
  CHECK(t.sendPollUs > 0);
  CHECK(t.recvFenceUs > 0);
  CHECK(t.sendFenceUs > 0);
  REQUIRE(collCommGetDeviceTimings(comms[0], &t) == collSuccess);  // a new count
  CHECK(t.launches == 0);
  CHECK(t.pieces == 0);
  destroy(comms);
}

// Co-residency (core/residency.h) end to end on an emulated GPU of 2 SMs: a collective runs on one
// channel, a group that needs more CTAs than the GPU holds per rank is refused before anything is
// launched, and more ranks than SMs are refused at the first device call: nothing waits for the
// timeout.
TEST_CASE("co-residency on a 2-SM emulated GPU: channels capped, what cannot fit refused",
          "[device][emulated][residency]") {
  ScopedEnv sms("COLL_DEVICE_EMULATION_SMS", "2");
  {
    const int n = 2;
    auto comms = makeComms(n);
    const size_t count = size_t(1) << 20;  // 4 MiB: 8 channels where the GPU has room
    Buffers a(n, count);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) a.data[r][i] = static_cast<float>(r + 1);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r)
      REQUIRE(collAllReduce(a.data[r], a.data[r], count, collFloat32, collSum, comms[r], a.stream(r)) == collSuccess);
    REQUIRE(collGroupEnd() == collSuccess);
    a.sync();
    size_t bad = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) bad += a.data[r][i] != 3.0f;
    CHECK(bad == 0);
    collDeviceTimings_t t;
    REQUIRE(collCommGetDeviceTimings(comms[0], &t) == collSuccess);
    CHECK(t.launches == 1);
    CHECK(t.channels == 1);  // one CTA per rank: 2 ranks on 2 SMs
    // A send and a receive with the peer: 2 CTAs per rank, more than the 1 each may have.
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r) {
      REQUIRE(collSend(a.data[r], 1024, collFloat32, 1 - r, comms[r], a.stream(r)) == collSuccess);
      REQUIRE(collRecv(a.data[r] + 1024, 1024, collFloat32, 1 - r, comms[r], a.stream(r)) == collSuccess);
    }
    // Each rank refuses its own part; a rank whose part comes after its peer's refusal may fail
    // with the peer's notice instead (collRemoteError, the same sentence), as on the host path.
    collResult_t refused = collGroupEnd();
    CHECK((refused == collInvalidUsage || refused == collRemoteError));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    std::string why = collGetLastError(comms[0]);
    CHECK(why.find("needs 2 CTAs") != std::string::npos);
    CHECK(why.find("holds 2 CTAs") != std::string::npos);
    destroy(comms);
  }
  {
    auto comms = makeComms(3);  // 3 ranks, 2 SMs
    Buffers a(3, 16);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < 3; ++r)
      REQUIRE(collAllReduce(a.data[r], a.data[r], 16, collFloat32, collSum, comms[r], a.stream(r)) == collSuccess);
    CHECK(collGroupEnd() == collInvalidUsage);
    std::string why = collGetLastError(comms[0]);
    CHECK(why.find("at most 2 ranks on one GPU") != std::string::npos);
    destroy(comms);
  }
}

// One thread drives ranks on two GPUs (collCommInitAll over a device list, coll-perf -g 2): each
// rank's launches and records must go to its own device, which the emulation checks as CUDA does,
// and the caller's current device is the same afterwards.
TEST_CASE("two emulated GPUs from one thread: each call runs on its communicator's device",
          "[device][emulated][devices]") {
  rt();
  const int n = 2;
  std::vector<collComm_t> comms(n);
  int devs[n] = {0, 1};
  REQUIRE(collCommInitAll(comms.data(), n, devs) == collSuccess);
  int dev = -1;
  REQUIRE(collCommCuDevice(comms[1], &dev) == collSuccess);
  CHECK(dev == 1);
  // Each rank's buffer and stream on its own device, made as a user makes them: that device current.
  const size_t count = 70001;
  std::vector<float*> buf(n);
  std::vector<coll::device::Stream> st(n);
  for (int r = 0; r < n; ++r) {
    REQUIRE(rt().setDevice(r).isOk());
    void* p = nullptr;
    REQUIRE(rt().alloc(r, count * sizeof(float), &p).isOk());
    buf[r] = static_cast<float*>(p);
    REQUIRE(rt().newStream(&st[r]).isOk());
  }
  REQUIRE(rt().setDevice(0).isOk());
  // What CUDA refuses, the emulation refuses: work for device 1's stream while device 0 is current.
  CHECK_FALSE(rt().hostTask(st[1], [] {}).isOk());
  for (int current : {0, 1}) {
    INFO("current device " << current);
    REQUIRE(rt().setDevice(current).isOk());
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) buf[r][i] = static_cast<float>(r + 1);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r)
      REQUIRE(collAllReduce(buf[r], buf[r], count, collFloat32, collSum, comms[r], static_cast<collStream_t>(st[r])) ==
              collSuccess);
    REQUIRE(collGroupEnd() == collSuccess);
    CHECK(rt().currentDevice() == current);  // restored after each rank's launch
    for (int r = 0; r < n; ++r) {
      REQUIRE(rt().setDevice(r).isOk());
      REQUIRE(rt().synchronize(st[r]).isOk());
    }
    size_t bad = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) bad += buf[r][i] != 3.0f;
    CHECK(bad == 0);
  }
  destroy(comms);
  for (int r = 0; r < n; ++r) {
    REQUIRE(rt().setDevice(r).isOk());
    CHECK(rt().destroyStream(st[r]).isOk());
    rt().free(buf[r]);
  }
  REQUIRE(rt().setDevice(0).isOk());
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
  // The first rank to time out tells the other, whose proxy may read that notice before its own
  // launch times out: it then ends with collRemoteError and the first rank's sentence.
  int timedOut = 0;
  for (int r = 0; r < 2; ++r) {
    collResult_t async = collSuccess;
    CHECK(collCommGetAsyncError(comms[r], &async) == collSuccess);
    CHECK((async == collTimeout || async == collRemoteError));
    timedOut += async == collTimeout;
    std::string why = collGetLastError(comms[r]);
    INFO(why);
    CHECK(why.find("nothing moved within the timeout waiting for rank") != std::string::npos);
    // Later calls are refused with the first failure's code and sentence.
    CHECK(collAllReduce(b.data[r], b.data[r], count, collFloat32, collSum, comms[r], b.stream(r)) == async);
    CHECK(std::string(collGetLastError(comms[r])).find("broken by an earlier error") != std::string::npos);
  }
  CHECK(timedOut >= 1);
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
  // The kernels load elements as their type: a device buffer off its element's alignment is refused,
  // bytes (sends, receives, int8) are not.
  char* odd = static_cast<char*>(d0) + 2;
  refused(collAllReduce(odd, odd, count / 2, collFloat32, collSum, c, stream), collInvalidArgument, c,
          "is not aligned to its element type (4 bytes)");
  refused(collAllGather(d0, odd, 4, collFloat64, c, stream), collInvalidArgument, c, "recvbuff 0x");
  CHECK(collAllReduce(odd, odd, count, collInt8, collSum, c, stream) == collSuccess);
  REQUIRE(rt().synchronize(s).isOk());
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

// The emulation's CUDA IPC (runtime.h): a handle opened in this process maps the same pages a
// second time, as a peer process's cudaIpcOpenMemHandle would; what one mapping stores the other
// reads. A handle whose process is gone fails with the reason.
namespace {

// One mismatch on device buffers on a fresh clique of n ranks (a failed call leaves a
// communicator unusable): every rank names it within a second (mismatchcheck.h), then aborts.
void deviceMismatch(int n, int collective, colltest::Mismatch m, int odd) {
  // A root mismatch may move no byte between the ranks that differ: the full check's (see
  // mismatchcheck.h), which the device path runs at enqueue.
  if (!colltest::inBandSees(m)) setenv("COLL_CHECK_CALLS", "full", 1);
  auto comms = makeComms(n);
  unsetenv("COLL_CHECK_CALLS");
  auto errors = onRanks(comms, [&](collComm_t c) {
    colltest::EmulatedMemory em(size_t(1) << 20);
    if (!em.error().empty()) return em.error();
    return colltest::checkMismatch(c, collective, m, odd, &em.memory());
  });
  INFO(colltest::mismatchCollectiveName(collective)
       << ", " << colltest::mismatchName(m) << " on rank " << odd << " of " << n);
  for (const auto& e : errors) CHECK(e == "");
  for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
}

void deviceMismatchMatrix(int n) {
  for (int c = 0; c < 6; ++c)
    for (colltest::Mismatch m : colltest::mismatchesFor(c))
      DYNAMIC_SECTION(colltest::mismatchCollectiveName(c) << ", " << colltest::mismatchName(m)) {
        deviceMismatch(n, c, m, colltest::mismatchOddRank(c, m, n));
      }
}

}  // namespace

// The in-band check in the kernels: the first piece of each step carries the call's print (in the
// slot after the bytes for Simple, in the slot's first lines for LL), compared before a byte is
// used; a mismatch ends the launch with DevResult::kCallMismatch, put in words by the host.
TEST_CASE("in-band call check on device buffers: every collective x every mismatch, LL at 2 ranks",
          "[device][emulated][mismatch]") {
  deviceMismatchMatrix(2);  // 1000 floats: under COLL_DEVICE_LL_MAX, LL
}

TEST_CASE("in-band call check on device buffers: every collective x every mismatch, Simple at 3 ranks",
          "[device][emulated][mismatch]") {
  ScopedEnv env("COLL_DEVICE_LL_MAX", "0");
  deviceMismatchMatrix(3);
}

TEST_CASE("in-band call check on device buffers: a sample at 8 ranks, and sends against receives",
          "[device][emulated][mismatch]") {
  SECTION("8 ranks, all-reduce op, LL") { deviceMismatch(8, 0, colltest::Mismatch::kOp, 5); }
  SECTION("8 ranks, all-gather type, Simple") {
    ScopedEnv env("COLL_DEVICE_LL_MAX", "0");
    deviceMismatch(8, 2, colltest::Mismatch::kType, 3);
  }
  SECTION("a send of 64 floats against a receive of 32, LL and Simple") {
    for (const char* llMax : {"65536", "0"}) {
      ScopedEnv env("COLL_DEVICE_LL_MAX", llMax);
      auto comms = makeComms(2);
      auto errors = onRanks(comms, [&](collComm_t c) -> std::string {
        colltest::EmulatedMemory em(size_t(1) << 20);
        if (!em.error().empty()) return em.error();
        const colltest::Memory& mem = em.memory();
        int me = -1;
        collCommUserRank(c, &me);
        void* buf = mem.alloc(64 * sizeof(float));
        auto settle = [&](collResult_t rc) {
          if (rc != collSuccess) return rc;
          mem.sync();
          collResult_t async = collSuccess;
          collCommGetAsyncError(c, &async);
          return async;
        };
        collResult_t async = settle(me == 0 ? collSend(buf, 64, collFloat32, 1, c, mem.stream)
                                            : collRecv(buf, 32, collFloat32, 0, c, mem.stream));
        // The sender may have finished (its one piece fitted in a free slot): its next call fails.
        if (async == collSuccess) async = settle(collAllReduce(buf, buf, 1, collInt32, collSum, c, mem.stream));
        std::string why = collGetLastError(c);
        mem.release(buf);
        if (async != collInvalidUsage && async != collRemoteError)
          return "rank " + std::to_string(me) + ": " + collGetErrorString(async) + ": " + why;
        if (why.find("COLL_CHECK_CALLS") == std::string::npos) return "rank " + std::to_string(me) + ": " + why;
        return "";
      });
      INFO("COLL_DEVICE_LL_MAX=" << llMax);
      for (const auto& e : errors) CHECK(e == "");
      for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
    }
  }
}

TEST_CASE("emulated CUDA IPC: an opened handle maps the same device memory", "[device][emulated][ipc]") {
  const size_t bytes = 3 * 4096 + 100;
  void* mine = nullptr;
  REQUIRE(rt().alloc(1, bytes, &mine).isOk());
  coll::device::IpcHandle h{};
  REQUIRE(rt().ipcExport(mine, bytes, &h).isOk());
  void* other = nullptr;
  coll::Status s = rt().ipcOpen(h, bytes, 0, &other);
  INFO(s.message());
  REQUIRE(s.isOk());
  CHECK(other != mine);
  int dev = -1;
  CHECK(rt().isDeviceMemory(static_cast<char*>(other) + bytes - 1, &dev));
  CHECK(dev == 0);  // the opener's device
  static_cast<char*>(mine)[bytes - 1] = 42;
  CHECK(static_cast<char*>(other)[bytes - 1] == 42);
  static_cast<char*>(other)[0] = 7;
  CHECK(static_cast<char*>(mine)[0] == 7);
  // More bytes than the allocation, memory that is not an allocation's start: refused.
  coll::device::IpcHandle bad{};
  CHECK_FALSE(rt().ipcExport(static_cast<char*>(mine) + 64, 64, &bad).isOk());
  CHECK_FALSE(rt().ipcOpen(h, bytes * 2, 0, &other).isOk());
  rt().ipcClose(other);
  CHECK_FALSE(rt().isDeviceMemory(other, nullptr));
  rt().free(mine);
  // A handle naming a process that does not exist (pid field of the emulation's handle).
  coll::device::IpcHandle gone = h;
  int32_t pid = 0x7ffffff0;
  std::memcpy(gone.bytes + 4, &pid, sizeof(pid));
  s = rt().ipcOpen(gone, bytes, 0, &other);
  CHECK(s.code() == collSystemError);
  CHECK_THAT(s.message(), Catch::Contains("process"));
}

// CUDA graph capture on the emulated device (runtime.h: a captured item runs at each launch of
// the graph). Each rank captures an LL-sized and a Simple-sized all-reduce, a group, and a
// PreMulSum all-reduce whose collScalarDevice scalar is in device memory; every replay reads the
// inputs and the scalar as they are then, replays and eager calls continue each other's FIFO
// positions, a replay enqueues nothing, and destroying the graph releases what it held. Over TCP
// capture is refused (the proxy cannot follow replays).
TEST_CASE("graph capture: captured calls run at each launch of the graph", "[device][emulated][graph]") {
  const bool tcp = overTcp();
  const int n = 3;  // the sums below are for 3 ranks
  const size_t small = 1000, large = 70001;
  auto comms = makeComms(n);
  Buffers in(n, large), out(n, large), sout(n, small), gin(n, small), gout(n, n * small), pout(n, small), scalar(n, 1);
  warmUp(comms, in, large);
  warmUp(comms, gin, small);
  std::vector<collRedOp_t> premul(n);
  for (int r = 0; r < n; ++r)
    REQUIRE(collRedOpCreatePreMulSum(&premul[r], scalar.data[r], collFloat32, collScalarDevice, comms[r]) ==
            collSuccess);
  std::vector<coll::device::Graph> graphs(n, nullptr);
  auto captured = onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    if (!rt().beginCapture(in.streams[r]).isOk()) return "beginCapture failed";
    std::string e;
    if (collAllReduce(in.data[r], sout.data[r], small, collFloat32, collSum, c, in.stream(r)) != collSuccess)
      e = collGetLastError(c);
    if (e.empty()) {
      collGroupStart();
      collAllReduce(in.data[r], out.data[r], large, collFloat32, collMax, c, in.stream(r));
      collAllGather(gin.data[r], gout.data[r], small, collFloat32, c, in.stream(r));
      if (collGroupEnd() != collSuccess) e = collGetLastError(c);
    }
    if (e.empty() &&
        collAllReduce(in.data[r], pout.data[r], small, collFloat32, premul[r], c, in.stream(r)) != collSuccess)
      e = collGetLastError(c);
    coll::device::Graph g = nullptr;
    if (!rt().endCapture(in.streams[r], &g).isOk()) return "endCapture failed";
    graphs[r] = g;
    return e;
  });
  if (tcp) {
    for (const auto& e : captured) CHECK_THAT(e, Catch::Contains("CUDA graph cannot capture"));
    for (auto g : graphs) rt().destroyGraph(g);
    for (int r = 0; r < n; ++r) collRedOpDestroy(premul[r], comms[r]);
    destroy(comms);
    return;
  }
  for (const auto& e : captured) REQUIRE(e == "");
  std::vector<uint64_t> before(n);
  for (int r = 0; r < n; ++r) {
    before[r] = launches(comms[r]);
    // The group's max all-reduce and its all-gather (a copy, the sum kernel) are two launches:
    // there is one kernel per type and op.
    CHECK(comms[r]->deviceExecutor->capturedLaunches() == 4);
  }
  for (int k = 0; k < 4; ++k) {
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < large; ++i) in.data[r][i] = static_cast<float>(r + k + i % 7);
      for (size_t i = 0; i < small; ++i) gin.data[r][i] = static_cast<float>(100 * r + k);
      std::fill(out.data[r], out.data[r] + large, -1.0f);
      std::fill(sout.data[r], sout.data[r] + small, -1.0f);
      std::fill(gout.data[r], gout.data[r] + n * small, -1.0f);
      std::fill(pout.data[r], pout.data[r] + small, -1.0f);
      scalar.data[r][0] = static_cast<float>(k + 1);  // read by the replay, not at capture
    }
    for (int r = 0; r < n; ++r) REQUIRE(rt().launchGraph(graphs[r], in.streams[r]).isOk());
    in.sync();
    for (int r = 0; r < n; ++r) {
      size_t bad = 0;
      for (size_t i = 0; i < small; ++i) bad += sout.data[r][i] != static_cast<float>(3 + 3 * k + 3 * (i % 7));
      for (size_t i = 0; i < large; ++i) bad += out.data[r][i] != static_cast<float>(n - 1 + k + i % 7);
      for (size_t i = 0; i < n * small; ++i)
        bad += gout.data[r][i] != static_cast<float>(100 * static_cast<int>(i / small) + k);
      for (size_t i = 0; i < small; ++i)
        bad += pout.data[r][i] != static_cast<float>((k + 1) * (3 + 3 * k + 3 * (i % 7)));
      INFO("replay " << k << " rank " << r);
      CHECK(bad == 0);
    }
  }
  for (int r = 0; r < n; ++r) CHECK(launches(comms[r]) == before[r]);
  // Eager calls after the replays: the FIFO positions the replays left are where they go on.
  warmUp(comms, in, large);
  warmUp(comms, gin, small);
  for (auto c : comms) {
    collResult_t async = collInProgress;
    CHECK(collCommGetAsyncError(c, &async) == collSuccess);
    CHECK(async == collSuccess);
  }
  for (auto g : graphs) rt().destroyGraph(g);
  for (auto c : comms) CHECK(c->deviceExecutor->capturedLaunches() == 0);
  for (int r = 0; r < n; ++r) CHECK(collRedOpDestroy(premul[r], comms[r]) == collSuccess);
  destroy(comms);
}

// collCommSuspend/Resume and collCommMemStats on device buffers (NCCL 2.30's ncclCommSuspend):
// connections stay (their FIFOs are the persistent count), scratch is released, calls in between
// are refused, and after resuming the same all-reduce is exact again. collMemAlloc gives device
// memory on the calling thread's current device.
TEST_CASE("suspend releases device memory, calls wait for resume, memory statistics", "[device][emulated][suspend]") {
  const int n = 2;
  auto comms = makeComms(n);
  const size_t count = 4099;
  Buffers a(n, count);
  auto fill = [&] {
    for (int r = 0; r < n; ++r) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(r * 100 + static_cast<int>(i % 50));
      REQUIRE(rt().copyAsync(a.data[r], v.data(), count * sizeof(float), a.streams[r]).isOk());
      REQUIRE(rt().synchronize(a.streams[r]).isOk());  // v goes out of scope
    }
  };
  auto exact = [&] {
    for (int r = 0; r < n; ++r) {
      std::vector<float> v(count, -1.0f);
      REQUIRE(rt().copyAsync(v.data(), a.data[r], count * sizeof(float), a.streams[r]).isOk());
      REQUIRE(rt().synchronize(a.streams[r]).isOk());
      for (size_t i = 0; i < count; ++i)
        REQUIRE(v[i] == static_cast<float>(100 + 2 * static_cast<int>(i % 50)));  // rank 0 + rank 1
    }
  };
  fill();
  warmUp(comms, a, count);
  exact();
  unsigned long long suspendable = 0, persistent = 0, total = 0, suspended = 7;
  REQUIRE(collCommMemStats(comms[0], collStatDeviceMemSuspendable, &suspendable) == collSuccess);
  REQUIRE(collCommMemStats(comms[0], collStatDeviceMemPersistent, &persistent) == collSuccess);
  REQUIRE(collCommMemStats(comms[0], collStatDeviceMemTotal, &total) == collSuccess);
  REQUIRE(collCommMemStats(comms[0], collStatDeviceMemSuspended, &suspended) == collSuccess);
  CHECK(total == suspendable + persistent);
  CHECK(suspended == 0);
  const char* p2p = std::getenv("COLL_P2P_DISABLE");
  if (!p2p || std::string(p2p) != "1") CHECK(persistent > 0);  // p2p FIFOs in device memory
  CHECK(collCommMemStats(comms[0], static_cast<collCommMemStat_t>(42), &total) == collInvalidArgument);
  CHECK(collCommSuspend(comms[0], 0x10) == collInvalidArgument);
  CHECK(collCommResume(comms[0]) == collInvalidUsage);  // not suspended
  for (auto c : comms) REQUIRE(collCommSuspend(c, COLL_SUSPEND_MEM) == collSuccess);
  REQUIRE(collCommMemStats(comms[0], collStatDeviceMemSuspendable, &suspendable) == collSuccess);
  REQUIRE(collCommMemStats(comms[0], collStatDeviceMemSuspended, &suspended) == collSuccess);
  CHECK(suspendable == 0);
  CHECK(suspended == 1);
  CHECK(collAllReduce(a.data[0], a.data[0], count, collFloat32, collSum, comms[0], a.stream(0)) == collInvalidUsage);
  CHECK(std::string(collGetLastError(comms[0])).find("suspended") != std::string::npos);
  CHECK(collCommSuspend(comms[0], COLL_SUSPEND_MEM) == collInvalidUsage);  // no nesting
  for (auto c : comms) REQUIRE(collCommResume(c) == collSuccess);
  fill();
  warmUp(comms, a, count);
  exact();
  // collMemAlloc: device memory on the current device; freed once.
  void* p = nullptr;
  REQUIRE(collMemAlloc(&p, 1 << 20) == collSuccess);
  int dev = -1;
  CHECK(rt().isDeviceMemory(p, &dev));
  CHECK(dev == 0);
  REQUIRE(collMemFree(p) == collSuccess);
  CHECK(collMemFree(p) == collInvalidArgument);
  destroy(comms);
}

// Collectives on symmetric windows of device memory (core/device_window_path.h): ranks as threads
// of one process reach each other's device pointers; each rank calls on a stream of its own.
TEST_CASE("collectives on device windows, ranks as threads: every collective, exact, on the path",
          "[device][emulated][windows]") {
  for (int n : {2, 3, 5}) {
    DYNAMIC_SECTION(n << " ranks") {
      auto comms = makeComms(n);
      auto errors = onRanks(comms, [&](collComm_t c) {
        return colltest::withDeviceStream(
            [&](collStream_t s) { return colltest::checkDeviceWindowCollectives(c, s, colltest::WindowPath::kTaken); });
      });
      for (const auto& e : errors) CHECK(e == "");
      destroy(comms);
    }
  }
}

TEST_CASE("collectives on device windows: COLL_ALGO=^window keeps them on the FIFOs, a mismatch is named",
          "[device][emulated][windows]") {
  SECTION("^window") {
    ScopedEnv env("COLL_ALGO", "^window");
    auto comms = makeComms(2);
    auto errors = onRanks(comms, [&](collComm_t c) {
      return colltest::withDeviceStream([&](collStream_t s) {
        return colltest::checkDeviceWindowCollectives(c, s, colltest::WindowPath::kNotTaken);
      });
    });
    for (const auto& e : errors) CHECK(e == "");
    destroy(comms);
  }
  SECTION("mismatched counts") {
    auto comms = makeComms(3);
    auto errors = onRanks(comms, [&](collComm_t c) {
      return colltest::withDeviceStream([&](collStream_t s) { return colltest::checkDeviceWindowMismatch(c, s); });
    });
    for (const auto& e : errors) CHECK(e == "");
    for (auto c : comms) CHECK(collCommAbort(c) == collSuccess);
  }
}

// A collective on device windows captured in a graph: the call counter the arrivals use lives in
// device memory and the kernels advance it, so every replay is a new call, and eager calls between
// replays go on from where the replays left it.
TEST_CASE("collectives on device windows in a graph: each replay is a new call", "[device][emulated][windows][graph]") {
  const int n = 2;
  const size_t count = 5000;
  auto comms = makeComms(n);
  std::vector<float*> buf(n, nullptr);
  std::vector<collWindow_t> win(n, nullptr);
  std::vector<coll::device::Stream> streams(n, nullptr);
  std::vector<coll::device::Graph> graphs(n, nullptr);
  auto made = onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    void* p = nullptr;
    if (collMemAlloc(&p, count * sizeof(float)) != collSuccess) return collGetLastError(nullptr);
    buf[r] = static_cast<float*>(p);
    if (collCommWindowRegister(c, p, count * sizeof(float), &win[r], COLL_WIN_COLL_SYMMETRIC) != collSuccess)
      return collGetLastError(c);
    coll::device::Runtime* d = coll::device::runtime();
    if (!d->newStream(&streams[r]).isOk() || !d->beginCapture(streams[r]).isOk()) return "no stream to capture";
    std::string e;
    if (collAllReduce(p, p, count, collFloat32, collSum, c, static_cast<collStream_t>(streams[r])) != collSuccess)
      e = collGetLastError(c);
    if (!d->endCapture(streams[r], &graphs[r]).isOk()) return "endCapture failed";
    return e;
  });
  for (const auto& e : made) REQUIRE(e == "");
  for (int k = 0; k < 3; ++k) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) buf[r][i] = static_cast<float>(r + k + i % 5);
    for (int r = 0; r < n; ++r) REQUIRE(rt().launchGraph(graphs[r], streams[r]).isOk());
    for (int r = 0; r < n; ++r) REQUIRE(rt().synchronize(streams[r]).isOk());
    // Then an eager call on the same buffers: the sum again.
    auto eager = onRanks(comms, [&](collComm_t c) -> std::string {
      int r = 0;
      collCommUserRank(c, &r);
      if (collAllReduce(buf[r], buf[r], count, collFloat32, collSum, c, static_cast<collStream_t>(streams[r])) !=
          collSuccess)
        return collGetLastError(c);
      return rt().synchronize(streams[r]).isOk() ? "" : "synchronize failed";
    });
    for (const auto& e : eager) REQUIRE(e == "");
    for (int r = 0; r < n; ++r) {
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += buf[r][i] != static_cast<float>(2 * (1 + 2 * k + 2 * (i % 5)));
      INFO("replay " << k << " rank " << r);
      CHECK(bad == 0);
    }
  }
  for (auto c : comms) {
    collResult_t async = collInProgress;
    CHECK(collCommGetAsyncError(c, &async) == collSuccess);
    CHECK(async == collSuccess);
    unsigned long long calls = 0;
    collCommMemStats(c, collStatWindowCollectives, &calls);
    CHECK(calls == 4);  // the captured call once, and the three eager ones
  }
  for (auto g : graphs) rt().destroyGraph(g);
  auto gone = onRanks(comms, [&](collComm_t c) -> std::string {
    int r = 0;
    collCommUserRank(c, &r);
    if (collCommWindowDeregister(c, win[r]) != collSuccess) return collGetLastError(c);
    return collMemFree(buf[r]) == collSuccess ? "" : collGetLastError(nullptr);
  });
  for (const auto& e : gone) CHECK(e == "");
  for (auto s : streams) (void)rt().destroyStream(s);
  destroy(comms);
}

// The whole matrix with every rank's buffers in a symmetric window of device memory: what the
// window kernels take (all-reduce, reduce-scatter, all-gather, all-to-all out of place, broadcast
// and reduce in place) runs there, the rest on the FIFOs, all exact.
TEST_CASE("device buffers in symmetric windows: every collective, type, op and placement",
          "[device][emulated][windows]") {
  for (int n : {2, 3}) {
    INFO("ranks " << n);
    runMatrix(n, {0, 1, 7, 1031}, true, true);
  }
}

// One-sided puts and signals on device windows (core/device_onesided.h): each rank on a stream of
// its own, ranks as threads.
TEST_CASE("one-sided puts on device windows, ranks as threads: rings, halos, signals, refusals",
          "[device][emulated][windows][onesided]") {
  for (int n : {2, 3, 4}) {
    DYNAMIC_SECTION(n << " ranks") {
      auto comms = makeComms(n);
      auto errors = onRanks(comms, [&](collComm_t c) {
        return colltest::withDeviceStream([&](collStream_t s) { return colltest::checkDeviceOneSided(c, s); });
      });
      for (const auto& e : errors) CHECK(e == "");
      destroy(comms);
    }
  }
}
