#include "multiproc/windowcheck.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "device/runtime.h"
#include "multiproc/checks.h"

namespace colltest {

namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned char kPoison = 0xA5;

enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };
const char* nameOf(Kind k) {
  static const char* names[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce", "all-to-all"};
  return names[static_cast<int>(k)];
}
bool reduces(Kind k) { return k == Kind::kAllReduce || k == Kind::kReduceScatter || k == Kind::kReduce; }
bool rooted(Kind k) { return k == Kind::kBroadcast || k == Kind::kReduce; }

// Rank r's input element i: a small positive integer, exact in every type used here.
int64_t v(int r, size_t i) { return static_cast<int64_t>((static_cast<size_t>(r) * 131 + i * 7) % 97 + 1); }

// A type and an op, with how to write an input and the expected reduction of the ranks' inputs.
struct Combo {
  collDataType_t type;
  collRedOp_t op;
  size_t elem;
  const char* name;
};
const Combo kReduceCombos[] = {{collFloat32, collSum, 4, "float32 sum"},
                               {collInt32, collMax, 4, "int32 max"},
                               {collUint8, collSum, 1, "uint8 sum"},
                               {collFloat64, collAvg, 8, "float64 avg"},
                               {collInt64, collMin, 8, "int64 min"}};
const Combo kMoveCombos[] = {{collFloat32, collSum, 4, "float32"}, {collInt8, collSum, 1, "int8"}};

// Writes value x as element i of a buffer of the combo's type.
void put(const Combo& c, void* base, size_t i, int64_t x) {
  char* p = static_cast<char*>(base) + i * c.elem;
  switch (c.type) {
    case collFloat32: {
      float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
      break;
    }
    case collFloat64: {
      double d = static_cast<double>(x);
      std::memcpy(p, &d, 8);
      break;
    }
    case collInt32: {
      int32_t y = static_cast<int32_t>(x);
      std::memcpy(p, &y, 4);
      break;
    }
    case collInt64:
      std::memcpy(p, &x, 8);
      break;
    default: {  // int8 and uint8: the low byte
      uint8_t y = static_cast<uint8_t>(x);
      std::memcpy(p, &y, 1);
    }
  }
}

// The input value of rank r at element i for a combo: avg inputs are scaled by nranks, so that
// the average is the exact integer sum of v.
int64_t input(const Combo& c, int r, size_t i, int n) { return c.op == collAvg ? v(r, i) * n : v(r, i); }

// The reduction over ranks of v(r, i), as the combo computes it.
int64_t reduced(const Combo& c, size_t i, int n) {
  int64_t acc = v(0, i);
  for (int r = 1; r < n; ++r) {
    int64_t x = v(r, i);
    if (c.op == collMax)
      acc = std::max(acc, x);
    else if (c.op == collMin)
      acc = std::min(acc, x);
    else
      acc += x;  // sum, and avg (inputs scaled by n, divided back)
  }
  if (c.type == collUint8) acc &= 0xff;
  return acc;
}

unsigned long long windowCalls(collComm_t comm) {
  unsigned long long v = 0;
  collCommMemStats(comm, collStatWindowCollectives, &v);
  return v;
}

collResult_t call(Kind k, const void* in, void* out, size_t count, const Combo& c, int root, collComm_t comm,
                  collStream_t s) {
  return callCollective(static_cast<int>(k), in, out, count, c.type, c.op, root, comm, s);
}

// Where the calls run: host memory (no stream), or the emulated device (a stream waited for).
struct Where {
  bool device = false;
  collStream_t stream = nullptr;
};

// Waits for what w's stream holds, then for the communicator's verdict on it: "" or the failure.
std::string settle(collComm_t comm, const Where& w) {
  if (!w.device) return "";
  coll::device::Runtime* rt = coll::device::runtime();
  if (!rt) return "no device runtime";
  coll::Status s = rt->synchronize(static_cast<coll::device::Stream>(w.stream));
  if (!s.isOk()) return "synchronize: " + s.message();
  collResult_t async = collSuccess;
  if (collCommGetAsyncError(comm, &async) != collSuccess || async != collSuccess)
    return fmt::format("{}: {}", collGetErrorString(async), collGetLastError(comm));
  return "";
}

// One call: fills the input, poisons the output window, runs, checks. "" or what was wrong.
std::string runOne(Kind k, const Combo& c, size_t count, bool inPlace, int root, collComm_t comm, WindowMemory& sendWin,
                   WindowMemory& recvWin, WindowPath path, const Where& where = {}) {
  int me = -1, n = 0;
  collCommUserRank(comm, &me);
  collCommCount(comm, &n);
  size_t nn = static_cast<size_t>(n);
  size_t inElems = (k == Kind::kReduceScatter || k == Kind::kAllToAll) ? count * nn : count;
  size_t outElems = (k == Kind::kAllGather || k == Kind::kAllToAll) ? count * nn : count;
  std::memset(recvWin.data, kPoison, recvWin.bytes);
  std::memset(sendWin.data, kPoison, sendWin.bytes);
  char* out = recvWin.data;
  char* in = sendWin.data;
  if (inPlace) {
    in = out;
    if (k == Kind::kReduceScatter) out = in + static_cast<size_t>(me) * count * c.elem;
    if (k == Kind::kAllGather) in = out + static_cast<size_t>(me) * count * c.elem;
  }
  bool hasInput = !(k == Kind::kBroadcast && me != root);
  if (hasInput)
    for (size_t i = 0; i < inElems; ++i) put(c, in, i, input(c, me, i, n));
  std::string e = barrier(comm);  // no rank poisons a window another rank still writes
  if (!e.empty()) return e;
  unsigned long long before = windowCalls(comm);
  std::string what = fmt::format("{} {} count {} {}{}", nameOf(k), c.name, count, inPlace ? "in place" : "out of place",
                                 rooted(k) ? fmt::format(" root {}", root) : std::string());
  collResult_t rc = call(k, in, out, count, c, root, comm, where.stream);
  if (rc != collSuccess) return fmt::format("{}: {}: {}", what, collGetErrorString(rc), collGetLastError(comm));
  e = settle(comm, where);
  if (!e.empty()) return what + ": " + e;
  bool tookPath = windowCalls(comm) == before + 1;
  bool shouldTake = path == WindowPath::kTaken && count > 0 && n > 1 && !(k == Kind::kAllToAll && inPlace) &&
                    !(where.device && k == Kind::kReduce);
  if (path == WindowPath::kAllReduceOnly) shouldTake = count > 0 && k == Kind::kAllReduce;
  if (path != WindowPath::kEither && tookPath != shouldTake)
    return fmt::format("{}: {} on windows (collStatWindowCollectives {} -> {})", what, tookPath ? "ran" : "did not run",
                       before, windowCalls(comm));
  // The expected output, then every byte of the recv window: output bytes as expected, the rest
  // poisoned (the input's bytes where it lies in the recv window, in place).
  std::vector<char> want(recvWin.bytes, static_cast<char>(kPoison));
  char* w = want.data();
  size_t outAt = static_cast<size_t>(out - recvWin.data);
  if (inPlace && hasInput) {
    size_t inAt = static_cast<size_t>(in - recvWin.data);
    for (size_t i = 0; i < inElems; ++i) put(c, w + inAt, i, input(c, me, i, n));
  }
  bool writesOut = !(k == Kind::kReduce && me != root);
  for (size_t i = 0; writesOut && i < outElems; ++i) {
    int64_t x = 0;
    switch (k) {
      case Kind::kAllReduce:
      case Kind::kReduce:
        x = reduced(c, i, n);
        break;
      case Kind::kReduceScatter:
        x = reduced(c, static_cast<size_t>(me) * count + i, n);
        break;
      case Kind::kAllGather:
        x = v(static_cast<int>(i / count), i % count);
        break;
      case Kind::kBroadcast:
        x = v(root, i);
        break;
      case Kind::kAllToAll:
        x = v(static_cast<int>(i / count), static_cast<size_t>(me) * count + i % count);
        break;
    }
    put(c, w + outAt, i, x);
  }
  for (size_t b = 0; b < recvWin.bytes; ++b)
    if (recvWin.data[b] != want[b])
      return fmt::format(
          "{}: rank {} byte {} of its recv window is 0x{:02x}, expected 0x{:02x} (output at {}, {} bytes)", what, me, b,
          static_cast<unsigned char>(recvWin.data[b]), static_cast<unsigned char>(want[b]), outAt, outElems * c.elem);
  return barrier(comm);  // every rank has checked before the next call poisons
}

// Registers win as a symmetric window on every rank, then waits for all: "" or what failed. The
// window stays until the communicator goes (the checks using it leave it broken).
std::string smallWindow(collComm_t comm, const WindowMemory& win) {
  if (!win.ok) return std::string("collMemAlloc: ") + collGetLastError(nullptr);
  collWindow_t w = nullptr;
  if (collCommWindowRegister(comm, win.data, win.bytes, &w, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
    return std::string("collCommWindowRegister: ") + collGetLastError(comm);
  return barrier(comm);
}

// Broadcasts whose root's input is ordinary memory outside any window, into outputs in the recv
// window: the root copies its input into its output first, so every rank takes the path (when it
// is taken at all) and nobody waits for a root that did not.
std::string rootInputOffWindow(collComm_t comm, WindowMemory& recvWin, WindowPath path) {
  int me = -1, n = 0;
  collCommUserRank(comm, &me);
  collCommCount(comm, &n);
  const size_t count = 1000;
  const Combo& c = kMoveCombos[0];
  for (int root : {0, n - 1}) {
    std::vector<char> input(count * c.elem);
    for (size_t i = 0; i < count; ++i) put(c, input.data(), i, v(root, i));
    std::memset(recvWin.data, kPoison, recvWin.bytes);
    std::string e = barrier(comm);
    if (!e.empty()) return e;
    unsigned long long before = windowCalls(comm);
    std::string what = fmt::format("broadcast root {} from a root input outside the windows", root);
    collResult_t rc =
        collBroadcast(me == root ? input.data() : nullptr, recvWin.data, count, c.type, root, comm, nullptr);
    if (rc != collSuccess) return fmt::format("{}: {}: {}", what, collGetErrorString(rc), collGetLastError(comm));
    bool took = windowCalls(comm) == before + 1;
    if (path != WindowPath::kEither && took != (path == WindowPath::kTaken))
      return fmt::format("{}: {} on windows", what, took ? "ran" : "did not run");
    std::vector<char> want(recvWin.bytes, static_cast<char>(kPoison));
    for (size_t i = 0; i < count; ++i) put(c, want.data(), i, v(root, i));
    if (std::memcmp(want.data(), recvWin.data, recvWin.bytes) != 0)
      return fmt::format("{}: rank {}'s recv window is not the root's input followed by poison", what, me);
    e = barrier(comm);
    if (!e.empty()) return e;
  }
  return "";
}

std::string checkOn(collComm_t comm, bool fromMemAlloc, WindowPath path, const Where& where) {
  int n = 0;
  collCommCount(comm, &n);
  const size_t counts[] = {0, 1, 7, 1000, 65537};
  size_t bytes = 65537 * static_cast<size_t>(n) * 8;
  WindowMemory sendWin(bytes, fromMemAlloc), recvWin(bytes, fromMemAlloc);
  if (!sendWin.ok || !recvWin.ok) return std::string("collMemAlloc: ") + collGetLastError(nullptr);
  collWindow_t ws = nullptr, wr = nullptr;
  if (collCommWindowRegister(comm, sendWin.data, bytes, &ws, COLL_WIN_COLL_SYMMETRIC) != collSuccess ||
      collCommWindowRegister(comm, recvWin.data, bytes, &wr, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
    return std::string("collCommWindowRegister: ") + collGetLastError(comm);
  std::string e;
  for (Kind k :
       {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather, Kind::kBroadcast, Kind::kReduce, Kind::kAllToAll}) {
    std::vector<Combo> combos;
    if (reduces(k))
      combos.assign(std::begin(kReduceCombos), std::end(kReduceCombos));
    else
      combos.assign(std::begin(kMoveCombos), std::end(kMoveCombos));
    std::vector<int> roots = {0};
    if (rooted(k) && n > 1) roots.push_back(n - 1);
    for (const Combo& c : combos)
      for (size_t count : counts)
        for (bool inPlace : {false, true})
          for (int root : roots)
            if (e.empty()) e = runOne(k, c, count, inPlace, root, comm, sendWin, recvWin, path, where);
  }
  if (e.empty() && !where.device && n > 1)
    e = rootInputOffWindow(comm, recvWin, path == WindowPath::kAllReduceOnly ? WindowPath::kNotTaken : path);
  if (collCommWindowDeregister(comm, ws) != collSuccess || collCommWindowDeregister(comm, wr) != collSuccess)
    if (e.empty()) e = std::string("collCommWindowDeregister: ") + collGetLastError(comm);
  return e;
}

// Rank 0 calls an all-reduce on a small window with another count than the others (on where's
// stream, waited for): the call's result and collGetLastError's sentence (or, on the device, the
// failure the launch ended with: "" when none), and the seconds until it was known.
collResult_t mismatchedAllReduce(collComm_t comm, const Where& where, std::string* why, double* took) {
  int me = -1;
  collCommUserRank(comm, &me);
  WindowMemory win(4096, true);
  *why = smallWindow(comm, win);
  if (!why->empty()) return collInternalError;
  size_t count = me == 0 ? 100 : 101;
  auto start = Clock::now();
  collResult_t rc = collAllReduce(win.data, win.data, count, collFloat32, collSum, comm, where.stream);
  *why = rc == collSuccess ? settle(comm, where) : collGetLastError(comm);
  *took = std::chrono::duration<double>(Clock::now() - start).count();
  return rc;
}

}  // namespace

std::string checkWindowCollectives(collComm_t comm, bool fromMemAlloc, WindowPath path) {
  return checkOn(comm, fromMemAlloc, path, Where{});
}

std::string checkDeviceWindowCollectives(collComm_t comm, collStream_t stream, WindowPath path) {
  return checkOn(comm, true, path, Where{true, stream});
}

std::string checkWindowMismatch(collComm_t comm) {
  int me = -1;
  collCommUserRank(comm, &me);
  std::string why;
  double took = 0;
  collResult_t rc = mismatchedAllReduce(comm, Where{}, &why, &took);
  // collRemoteError: a peer saw it first and its notice came before this rank's call (the peer's
  // sentence, checked below as this rank's own would be).
  if (rc != collInvalidUsage && rc != collRemoteError)
    return fmt::format("rank {}: a mismatched all-reduce on windows returned {} ({})", me, collGetErrorString(rc), why);
  if (why.find("on windows: rank ") == std::string::npos || why.find("count 10") == std::string::npos)
    return fmt::format("rank {}: the sentence does not name the rank and counts: {}", me, why);
  if (took > 1) return fmt::format("rank {}: the mismatch took {} s to be seen", me, took);
  return "";  // the communicator is broken now: the caller aborts it
}

std::string checkDeviceWindowMismatch(collComm_t comm, collStream_t stream) {
  int me = -1;
  collCommUserRank(comm, &me);
  std::string why;
  double took = 0;
  collResult_t rc = mismatchedAllReduce(comm, Where{true, stream}, &why, &took);
  // A rank that calls after a peer's kernel has seen the mismatch is refused at enqueue with that
  // peer's notice (collRemoteError, the peer's sentence), as a host call is.
  if (rc != collSuccess && rc != collRemoteError)
    return fmt::format("rank {}: the mismatched all-reduce was not enqueued: {}", me, why);
  // Each rank's launch sees the mismatch itself (collInvalidUsage), unless a peer's notice of it
  // came first (collRemoteError with the peer's sentence): either way the sentence names a rank.
  if (rc == collSuccess && why.find(collGetErrorString(collInvalidUsage)) != 0 &&
      why.find(collGetErrorString(collRemoteError)) != 0)
    return fmt::format("rank {}: a mismatched all-reduce on device windows ended with: {}", me,
                       why.empty() ? "success" : why);
  if (why.find("on windows: rank ") == std::string::npos)
    return fmt::format("rank {}: the sentence does not name the rank: {}", me, why);
  if (took > 1) return fmt::format("rank {}: the mismatch took {} s to be seen", me, took);
  return "";  // the communicator is broken now: the caller aborts it
}

std::string checkWindowPeerDies(collComm_t comm, int victim) {
  int me = -1;
  collCommUserRank(comm, &me);
  WindowMemory win(4096, true);
  std::string e = smallWindow(comm, win);
  if (!e.empty()) return e;
  if (me == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others wait first
    kill(getpid(), SIGKILL);
  }
  auto start = Clock::now();
  collResult_t rc = collAllReduce(win.data, win.data, 1000, collFloat32, collSum, comm, nullptr);
  std::string why = collGetLastError(comm);
  if (rc != collRemoteError)
    return fmt::format("an all-reduce on windows beside a killed rank returned {} ({})", collGetErrorString(rc), why);
  if (why.find(fmt::format("rank {}", victim)) == std::string::npos || why.find("died") == std::string::npos)
    return "the error does not name the dead rank: " + why;
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (took > 5) return fmt::format("the dead rank was seen after {} s", took);
  return "";
}

}  // namespace colltest
