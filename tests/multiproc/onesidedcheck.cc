#include "multiproc/onesidedcheck.h"

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
constexpr int32_t kPoison = -7777;

// The value element i of the piece `from` put in round `round` holds.
int32_t value(int from, int round, size_t i) { return static_cast<int32_t>(from * 1000003 + round * 7919 + i * 3 + 1); }

// A window's buffer of n int32 (WindowMemory), poisoned.
struct Buffer {
  explicit Buffer(size_t n, bool fromMemAlloc) : n(n), memory(n * sizeof(int32_t), fromMemAlloc) {
    ok = memory.ok;
    data = reinterpret_cast<int32_t*>(memory.data);
    for (size_t i = 0; ok && i < n; ++i) data[i] = kPoison;
  }
  size_t n;
  WindowMemory memory;
  bool ok = false;
  int32_t* data = nullptr;
};

// Whether a call failed with `want` and a sentence holding `words`; "" if so.
std::string refused(collResult_t got, collResult_t want, collComm_t comm, const std::string& words, const char* what) {
  if (got != want)
    return fmt::format("{}: returned {} ({}), not {}", what, collGetErrorString(got), collGetLastError(comm),
                       collGetErrorString(want));
  std::string why = collGetLastError(comm);
  if (why.find(words) == std::string::npos) return fmt::format("{}: the sentence lacks \"{}\": {}", what, words, why);
  return "";
}

// Waits for `count` signals from each of peers (one descriptor each).
std::string waitFrom(collComm_t comm, const std::vector<int>& peers, int count, const char* what) {
  std::vector<collWaitSignalDesc_t> descs;
  for (int p : peers) descs.push_back(collWaitSignalDesc_t{count, p, 0, 0});
  if (collWaitSignal(static_cast<int>(descs.size()), descs.data(), comm, nullptr) != collSuccess)
    return fmt::format("{}: collWaitSignal: {}", what, collGetLastError(comm));
  return "";
}

}  // namespace

std::string checkOneSided(collComm_t comm, bool fromMemAlloc) {
  int rank = -1, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t K = 33;    // elements per piece: odd, not a multiple of a cache line
  const int kRounds = 6;  // ring rounds, each into its own pieces
  // Layout (elements): [ring: kRounds x n pieces][halo: 2 pieces][grouped halo: 2 pieces]
  // [stream: n pieces][spare piece]
  const size_t ringAt = 0, haloAt = static_cast<size_t>(kRounds) * n * K, groupAt = haloAt + 2 * K,
               streamAt = groupAt + 2 * K;
  const size_t total = streamAt + static_cast<size_t>(n) * K + K;
  Buffer win(total, fromMemAlloc);
  if (!win.ok) return std::string("collMemAlloc: ") + collGetLastError(nullptr);
  std::vector<bool> written(total, false);  // what the peers are expected to have put
  auto mark = [&](size_t at, size_t count) {
    for (size_t i = 0; i < count; ++i) written[at + i] = true;
  };

  collWindow_t w = nullptr;
  if (collCommWindowRegister(comm, win.data, total * sizeof(int32_t), &w, COLL_WIN_DEFAULT) != collSuccess)
    return std::string("collCommWindowRegister: ") + collGetLastError(comm);
  void* user = nullptr;
  if (collWinGetUserPtr(comm, w, &user) != collSuccess || user != win.data) return "collWinGetUserPtr";
  std::string e;
  // The halo at `at` after an exchange: its left piece holds the previous rank's right piece (round
  // rightRound), its right piece the next rank's left one (round leftRound).
  auto haloHolds = [&](size_t at, int leftRound, int rightRound, const char* what) -> std::string {
    for (size_t i = 0; i < K; ++i) {
      if (win.data[at + i] != value(prev, rightRound, i))
        return fmt::format("{}: left element {} is {}, not rank {}'s {}", what, i, win.data[at + i], prev,
                           value(prev, rightRound, i));
      if (win.data[at + K + i] != value(next, leftRound, i))
        return fmt::format("{}: right element {} is {}, not rank {}'s {}", what, i, win.data[at + K + i], next,
                           value(next, leftRound, i));
    }
    return "";
  };

  // A ring of puts: in round r, this rank puts its piece into the next rank's piece slot (r, rank).
  for (int r = 0; r < kRounds && e.empty(); ++r) {
    std::vector<int32_t> piece(K);
    for (size_t i = 0; i < K; ++i) piece[i] = value(rank, r, i);
    size_t at = ringAt + (static_cast<size_t>(r) * n + rank) * K;
    if (collPutSignal(piece.data(), K, collInt32, next, w, at * sizeof(int32_t), 0, 0, 0, comm, nullptr) != collSuccess)
      return fmt::format("ring round {}: collPutSignal: {}", r, collGetLastError(comm));
    piece.assign(K, 0);  // the put has copied it: the source may change at once
    e = waitFrom(comm, {prev}, 1, "ring");
    size_t from = ringAt + (static_cast<size_t>(r) * n + prev) * K;
    for (size_t i = 0; e.empty() && i < K; ++i)
      if (win.data[from + i] != value(prev, r, i))
        e = fmt::format("ring round {}: element {} from rank {} is {}, not {}", r, i, prev, win.data[from + i],
                        value(prev, r, i));
    mark(from, K);
  }
  if (!e.empty()) return e;

  // A halo exchange: this rank's left piece goes to the previous rank's right halo, its right
  // piece to the next rank's left halo; then it waits for one signal from each neighbour (two
  // from one rank where they are the same, which the wait adds up).
  {
    std::vector<int32_t> left(K), right(K);
    for (size_t i = 0; i < K; ++i) left[i] = value(rank, 100, i), right[i] = value(rank, 200, i);
    if (collPutSignal(left.data(), K, collInt32, prev, w, (haloAt + K) * sizeof(int32_t), 0, 0, 0, comm, nullptr) !=
            collSuccess ||
        collPutSignal(right.data(), K, collInt32, next, w, haloAt * sizeof(int32_t), 0, 0, 0, comm, nullptr) !=
            collSuccess)
      return std::string("halo: collPutSignal: ") + collGetLastError(comm);
    e = waitFrom(comm, {prev, next}, 1, "halo");
    if (!e.empty()) return e;
    if (!(e = haloHolds(haloAt, 100, 200, "halo")).empty()) return e;
    mark(haloAt, 2 * K);
  }

  // The halo again inside a group, called in the order that would deadlock if run as called (the
  // wait first), with an all-reduce of the ranks' numbers in the same group: the group runs the
  // puts, then the all-reduce, then the wait.
  {
    std::vector<int32_t> left(K), right(K);
    for (size_t i = 0; i < K; ++i) left[i] = value(rank, 400, i), right[i] = value(rank, 500, i);
    std::vector<collWaitSignalDesc_t> descs = {{1, prev, 0, 0}, {1, next, 0, 0}};
    int32_t mine = rank + 1, sum = 0;
    collGroupStart();
    collResult_t rcs[4] = {
        collWaitSignal(2, descs.data(), comm, nullptr),
        collAllReduce(&mine, &sum, 1, collInt32, collSum, comm, nullptr),
        collPutSignal(left.data(), K, collInt32, prev, w, (groupAt + K) * sizeof(int32_t), 0, 0, 0, comm, nullptr),
        collPutSignal(right.data(), K, collInt32, next, w, groupAt * sizeof(int32_t), 0, 0, 0, comm, nullptr)};
    collResult_t end = collGroupEnd();
    for (collResult_t rc : rcs)
      if (rc != collSuccess) return std::string("grouped halo: a call inside the group: ") + collGetLastError(comm);
    if (end != collSuccess) return std::string("grouped halo: collGroupEnd: ") + collGetLastError(comm);
    if (sum != n * (n + 1) / 2) return fmt::format("grouped halo: the all-reduce gave {}", sum);
    if (!(e = haloHolds(groupAt, 400, 500, "grouped halo")).empty()) return e;
    mark(groupAt, 2 * K);
  }

  // Puts on a host stream: to every rank (this one included), in the stream's order, then a bare
  // signal to each; every rank then waits for two signals from every rank.
  {
    collStream_t stream = nullptr;
    if (collHostStreamCreate(&stream) != collSuccess) return std::string("host stream: ") + collGetLastError(nullptr);
    std::vector<int32_t> piece(K);
    for (size_t i = 0; i < K; ++i) piece[i] = value(rank, 300, i);
    for (int p = 0; p < n && e.empty(); ++p)
      if (collPutSignal(piece.data(), K, collInt32, p, w, (streamAt + static_cast<size_t>(rank) * K) * sizeof(int32_t),
                        0, 0, 0, comm, stream) != collSuccess)
        e = std::string("stream: collPutSignal: ") + collGetLastError(comm);
    for (int p = 0; p < n && e.empty(); ++p)
      if (collSignal(p, 0, 0, 0, comm, stream) != collSuccess)
        e = std::string("stream: collSignal: ") + collGetLastError(comm);
    if (e.empty() && collStreamSynchronize(stream) != collSuccess)
      e = std::string("stream: synchronize: ") + collGetLastError(comm);
    collHostStreamDestroy(stream);
    if (!e.empty()) return e;
    std::vector<int> all;
    for (int p = 0; p < n; ++p) all.push_back(p);
    e = waitFrom(comm, all, 2, "stream");
    for (int p = 0; e.empty() && p < n; ++p)
      for (size_t i = 0; e.empty() && i < K; ++i)
        if (win.data[streamAt + static_cast<size_t>(p) * K + i] != value(p, 300, i))
          e = fmt::format("stream: element {} from rank {} is {}", i, p,
                          win.data[streamAt + static_cast<size_t>(p) * K + i]);
    mark(streamAt, static_cast<size_t>(n) * K);
    if (!e.empty()) return e;
  }

  // Bad arguments: refused with a sentence, nothing moved (the spare piece stays poisoned).
  {
    int32_t one = 1;
    size_t spare = (total - K) * sizeof(int32_t);
    std::vector<std::function<std::string()>> bad = {
        [&] {
          return refused(collPutSignal(&one, 1, collInt32, n, w, spare, 0, 0, 0, comm, nullptr), collInvalidArgument,
                         comm, "not a rank", "peer n");
        },
        [&] {
          return refused(collPutSignal(&one, 1, collInt32, -1, w, spare, 0, 0, 0, comm, nullptr), collInvalidArgument,
                         comm, "not a rank", "peer -1");
        },
        [&] {
          return refused(
              collPutSignal(&one, 2, collInt32, next, w, total * sizeof(int32_t) - 4, 0, 0, 0, comm, nullptr),
              collInvalidArgument, comm, "pass the end", "past the end");
        },
        [&] {
          return refused(collPutSignal(&one, 1, collInt32, next, w, SIZE_MAX, 0, 0, 0, comm, nullptr),
                         collInvalidArgument, comm, "pass the end", "offset SIZE_MAX");
        },
        [&] {
          return refused(collPutSignal(nullptr, 1, collInt32, next, w, spare, 0, 0, 0, comm, nullptr),
                         collInvalidArgument, comm, "localbuff is NULL", "NULL localbuff");
        },
        [&] {
          return refused(collPutSignal(&one, 1, collInt32, next, w, spare, 1, 0, 0, comm, nullptr), collInvalidArgument,
                         comm, "must all be 0", "sigIdx 1");
        },
        [&] {
          return refused(
              collPutSignal(&one, 1, static_cast<collDataType_t>(99), next, w, spare, 0, 0, 0, comm, nullptr),
              collInvalidArgument, comm, "99", "type 99");
        },
        [&] {
          return refused(collPutSignal(&one, 1, collInt32, next, reinterpret_cast<collWindow_t>(&one), spare, 0, 0, 0,
                                       comm, nullptr),
                         collInvalidArgument, comm, "not registered", "foreign window");
        },
        [&] {
          return refused(
              collPutSignal(&one, 1, collInt32, next, w, spare, 0, 0, 0, comm, reinterpret_cast<collStream_t>(&one)),
              collInvalidArgument, comm, "host stream", "bad stream");
        },
        [&] {
          return refused(collSignal(n, 0, 0, 0, comm, nullptr), collInvalidArgument, comm, "not a rank",
                         "signal peer n");
        },
        [&] {
          return refused(collSignal(next, 0, 0, 4, comm, nullptr), collInvalidArgument, comm, "must all be 0",
                         "signal flags 4");
        },
        [&] {
          return refused(collWaitSignal(-1, nullptr, comm, nullptr), collInvalidArgument, comm, "negative", "nDesc -1");
        },
        [&] {
          return refused(collWaitSignal(1, nullptr, comm, nullptr), collInvalidArgument, comm, "NULL", "NULL descs");
        },
        [&] {
          collWaitSignalDesc_t d{-1, next, 0, 0};
          return refused(collWaitSignal(1, &d, comm, nullptr), collInvalidArgument, comm, "negative", "opCnt -1");
        },
        [&] {
          collWaitSignalDesc_t d{1, n + 3, 0, 0};
          return refused(collWaitSignal(1, &d, comm, nullptr), collInvalidArgument, comm, "not a rank", "desc peer");
        },
        [&] {
          // A refused call drops its group: the valid put before it moves nothing either.
          collGroupStart();
          collResult_t valid = collPutSignal(&one, 1, collInt32, next, w, spare, 0, 0, 0, comm, nullptr);
          std::string r = refused(collPutSignal(&one, 1, collInt32, n, w, spare, 0, 0, 0, comm, nullptr),
                                  collInvalidArgument, comm, "not a rank", "peer n in a group");
          collResult_t end = collGroupEnd();
          if (r.empty() && valid != collSuccess) r = "in a group: the valid put was refused";
          if (r.empty()) r = refused(end, collInvalidArgument, nullptr, "none of its 1 queued", "the group's end");
          return r;
        },
    };
    for (auto& b : bad)
      if (!(e = b()).empty()) return e;
    // Zero descriptors, and a descriptor of zero signals, return at once.
    collWaitSignalDesc_t zero{0, next, 0, 0};
    if (collWaitSignal(0, nullptr, comm, nullptr) != collSuccess ||
        collWaitSignal(1, &zero, comm, nullptr) != collSuccess)
      return std::string("an empty wait: ") + collGetLastError(comm);
  }

  // A wait's deadline: a signal that never comes ends the wait naming the rank.
  {
    collCommSetTimeout(comm, 300);
    collWaitSignalDesc_t d{1, next, 0, 0};
    auto start = Clock::now();
    collResult_t rc = collWaitSignal(1, &d, comm, nullptr);
    double took = std::chrono::duration<double>(Clock::now() - start).count();
    collCommSetTimeout(comm, 300000);
    if (rc != collTimeout) return fmt::format("a wait for a signal never raised returned {}", collGetErrorString(rc));
    std::string why = collGetLastError(comm);
    if (why.find(fmt::format("rank {} (0 of 1)", next)) == std::string::npos)
      return "the timeout does not name the awaited rank: " + why;
    if (took < 0.29 || took > 5) return fmt::format("the wait's deadline of 300 ms ended it after {} s", took);
  }

  // Nothing but the pieces above was written: everything else is still poisoned.
  if (!(e = barrier(comm)).empty()) return e;
  for (size_t i = 0; i < total; ++i)
    if (!written[i] && win.data[i] != kPoison)
      return fmt::format("element {} of the window was written ({}) though no put was for it", i, win.data[i]);
  if (collCommWindowDeregister(comm, w) != collSuccess)
    return std::string("collCommWindowDeregister: ") + collGetLastError(comm);
  int32_t one = 1;
  if (!(e = refused(collPutSignal(&one, 1, collInt32, next, w, 0, 0, 0, 0, comm, nullptr), collInvalidArgument, comm,
                    "not registered", "a deregistered window"))
           .empty())
    return e;
  return "";
}

std::string checkDeviceOneSided(collComm_t comm, collStream_t stream) {
  int me = -1, n = 0;
  collCommUserRank(comm, &me);
  collCommCount(comm, &n);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const size_t sizes[] = {1, 1000, 65537};
  const int rounds = 3;
  const size_t slot = 65537, elems = slot * rounds * 2;  // two slots a round: one per neighbour
  Buffer win(elems, true), src(slot, true);
  if (!win.ok || !src.ok) return std::string("collMemAlloc: ") + collGetLastError(nullptr);
  collWindow_t w = nullptr;
  if (collCommWindowRegister(comm, win.data, elems * sizeof(int32_t), &w, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
    return std::string("collCommWindowRegister: ") + collGetLastError(comm);
  auto sync = [&]() -> std::string {
    coll::Status s = coll::device::runtime()->synchronize(static_cast<coll::device::Stream>(stream));
    collResult_t async = collSuccess;
    if (!s.isOk()) return "synchronize: " + s.message();
    if (collCommGetAsyncError(comm, &async) != collSuccess || async != collSuccess)
      return fmt::format("{}: {}", collGetErrorString(async), collGetLastError(comm));
    return "";
  };
  std::string e;
  for (size_t count : sizes) {
    for (int k = 0; k < rounds && e.empty(); ++k) {
      // A ring: this rank's piece into next's slot 2k (halo: also into prev's slot 2k + 1).
      for (size_t i = 0; i < count; ++i) src.data[i] = value(me, k, i);
      const size_t at = static_cast<size_t>(2 * k) * slot * sizeof(int32_t);
      // Round 1 inside a group, the wait called first: the group enqueues the puts first.
      bool grouped = k == 1;
      collWaitSignalDesc_t d[2] = {{1, prev, 0, 0}, {1, next, 0, 0}};
      if (grouped) collGroupStart();
      if (grouped && collWaitSignal(2, d, comm, stream) != collSuccess)
        return fmt::format("collWaitSignal in a group on a device stream: {}", collGetLastError(comm));
      if (collPutSignal(src.data, count, collInt32, next, w, at, 0, 0, 0, comm, stream) != collSuccess ||
          collPutSignal(src.data, count, collInt32, prev, w, at + slot * sizeof(int32_t), 0, 0, 0, comm, stream) !=
              collSuccess)
        return fmt::format("collPutSignal of {} on a device stream: {}", count, collGetLastError(comm));
      if (!grouped && collWaitSignal(2, d, comm, stream) != collSuccess)
        return fmt::format("collWaitSignal on a device stream: {}", collGetLastError(comm));
      if (grouped && collGroupEnd() != collSuccess)
        return fmt::format("collGroupEnd of device one-sided calls: {}", collGetLastError(comm));
      e = sync();
      for (size_t i = 0; e.empty() && i < slot; ++i) {
        int32_t fromPrev = win.data[2 * static_cast<size_t>(k) * slot + i];
        int32_t fromNext = win.data[(2 * static_cast<size_t>(k) + 1) * slot + i];
        int32_t wantPrev = i < count ? value(prev, k, i) : kPoison, wantNext = i < count ? value(next, k, i) : kPoison;
        if (fromPrev != wantPrev || fromNext != wantNext)
          e = fmt::format("rank {} round {} count {}: element {} is {} and {}, expected {} and {}", me, k, count, i,
                          fromPrev, fromNext, wantPrev, wantNext);
      }
    }
    if (e.empty()) e = barrier(comm);  // every rank has checked before the next size overwrites
    for (size_t i = 0; i < elems; ++i) win.data[i] = kPoison;
    if (e.empty()) e = barrier(comm);
    if (!e.empty()) break;
  }
  // Bare signals: two from each neighbour, taken by one wait of 2 and then none left over.
  if (e.empty()) {
    if (collSignal(next, 0, 0, 0, comm, stream) != collSuccess ||
        collSignal(prev, 0, 0, 0, comm, stream) != collSuccess ||
        collSignal(next, 0, 0, 0, comm, stream) != collSuccess ||
        collSignal(prev, 0, 0, 0, comm, stream) != collSuccess)
      e = std::string("collSignal on a device stream: ") + collGetLastError(comm);
    collWaitSignalDesc_t d[2] = {{2, prev, 0, 0}, {2, next, 0, 0}};
    if (e.empty() && n > 1 && collWaitSignal(2, d, comm, stream) != collSuccess)
      e = std::string("collWaitSignal of bare signals: ") + collGetLastError(comm);
    if (e.empty()) e = sync();
  }
  // Refusals, nothing moved: host memory on a device stream; a device window from a NULL stream.
  if (e.empty()) {
    std::vector<int32_t> host(4, 1);
    e = refused(collPutSignal(host.data(), 4, collInt32, next, w, 0, 0, 0, 0, comm, stream), collInvalidUsage, comm,
                "localbuff is host memory", "a host buffer on a device stream");
  }
  if (e.empty())
    e = refused(collPutSignal(src.data, 4, collInt32, next, w, 0, 0, 0, 0, comm, nullptr), collInvalidUsage, comm,
                "device stream", "a device window from a NULL stream");
  if (e.empty()) e = barrier(comm);
  if (collCommWindowDeregister(comm, w) != collSuccess && e.empty())
    e = std::string("collCommWindowDeregister: ") + collGetLastError(comm);
  return e;
}

std::string checkOneSidedPeerDies(collComm_t comm, int victim, bool midPut) {
  int rank = -1;
  collCommUserRank(comm, &rank);
  // Mid-put: 64 MiB windows, which the victim fills with puts into rank 0's until it is killed in
  // the middle of one (a put of this size takes tens of milliseconds).
  const size_t elems = midPut ? (size_t(64) << 20) / sizeof(int32_t) : 64;
  Buffer win(elems, true);
  if (!win.ok) return std::string("collMemAlloc: ") + collGetLastError(nullptr);
  collWindow_t w = nullptr;
  if (collCommWindowRegister(comm, win.data, elems * sizeof(int32_t), &w, COLL_WIN_DEFAULT) != collSuccess)
    return std::string("collCommWindowRegister: ") + collGetLastError(comm);
  std::string e = barrier(comm);
  if (!e.empty()) return e;
  if (rank == victim && midPut) {
    std::vector<int32_t> src(elems, 7);
    std::thread killer([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // rank 0 waits first, puts run
      kill(getpid(), SIGKILL);
    });
    for (;;) collPutSignal(src.data(), elems, collInt32, 0, w, 0, 0, 0, 0, comm, nullptr);
  }
  if (rank == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 waits first
    kill(getpid(), SIGKILL);
  }
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return "";
  }
  // Mid-put: more signals than the victim can raise before it dies, so the wait sees the death.
  collWaitSignalDesc_t d{midPut ? 1 << 30 : 1, victim, 0, 0};
  auto start = Clock::now();
  if (collWaitSignal(1, &d, comm, nullptr) != collRemoteError) return "a wait for a killed rank's signal did not fail";
  std::string why = collGetLastError(comm);
  if (why.find(fmt::format("rank {}", victim)) == std::string::npos || why.find("died") == std::string::npos)
    return "the error does not name the dead rank: " + why;
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (took > 5) return fmt::format("the dead rank was seen after {} s", took);
  // The victim was putting when it died: its puts had reached this window.
  if (midPut && win.data[0] != 7) return "the killed rank's puts never reached the window";
  return "";
}

}  // namespace colltest
