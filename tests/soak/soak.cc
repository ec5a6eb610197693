// Soak: many mixed collectives with random sizes, types and ops on 2 communicators of each
// process, each driven by its own thread, every result checked exactly; the process's resident
// memory and descriptor count must stay flat (compared between 10% and 100% of the run).
// Run under a launcher: coll-run -n 2 coll_soak [ops per thread, default 50000] [seed]
// Prints one line per rank; exits non-zero on a wrong element, a failed call or growth.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"

namespace {

long rssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

int fdCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// Small integers in every type: sums over up to 8 ranks stay exact (uint8 included).
double value(int rank, size_t i, int salt) { return static_cast<double>((rank * 3 + i * 7 + salt) % 13 + 1); }

struct Type {
  collDataType_t dt;
  size_t size;
};
const Type kTypes[] = {{collInt8, 1},  {collUint8, 1},   {collInt32, 4},   {collUint32, 4},
                       {collInt64, 8}, {collFloat32, 4}, {collFloat64, 8}, {collFloat16, 2}};

void put(void* buf, size_t i, collDataType_t dt, double v) {
  switch (dt) {
    case collInt8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v);
      break;
    case collUint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
    case collInt32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case collUint32:
      static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v);
      break;
    case collInt64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      break;
    case collFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case collFloat64:
      static_cast<double*>(buf)[i] = v;
      break;
    default: {  // float16: small integers are exact; build the bits by hand
      uint16_t h = 0;
      if (v != 0) {
        int e = 0;
        double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
        h = static_cast<uint16_t>(((e - 1 + 15) << 10) | (static_cast<int>((m * 2 - 1) * 1024) & 0x3ff));
      }
      static_cast<uint16_t*>(buf)[i] = h;
    }
  }
}

double get(const void* buf, size_t i, collDataType_t dt) {
  switch (dt) {
    case collInt8:
      return static_cast<const int8_t*>(buf)[i];
    case collUint8:
      return static_cast<const uint8_t*>(buf)[i];
    case collInt32:
      return static_cast<const int32_t*>(buf)[i];
    case collUint32:
      return static_cast<const uint32_t*>(buf)[i];
    case collInt64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case collFloat32:
      return static_cast<const float*>(buf)[i];
    case collFloat64:
      return static_cast<const double*>(buf)[i];
    default: {
      uint16_t h = static_cast<const uint16_t*>(buf)[i];
      if (h == 0) return 0;
      return std::ldexp(1.0 + (h & 0x3ff) / 1024.0, ((h >> 10) & 0x1f) - 15);
    }
  }
}

struct Result {
  long ops = 0, wrong = 0, failed = 0;
  std::string firstError;
};

void drive(collComm_t comm, int rank, int n, long ops, uint64_t seed, Result* res, long* rss10, int* fd10) {
  std::mt19937_64 rng(seed);  // the same on every rank: they must issue the same calls
  std::vector<unsigned char> send, recv;
  for (long k = 0; k < ops; ++k) {
    if (k == ops / 10 && rss10) {
      *rss10 = rssKiB();
      *fd10 = fdCount();
    }
    int kind = static_cast<int>(rng() % 5);
    const Type& t = kTypes[rng() % 8];
    size_t count = (rng() % 4 == 0) ? rng() % 70000 : rng() % 300;  // mostly small, some large
    int root = static_cast<int>(rng() % n);
    int salt = static_cast<int>(rng() % 1000);
    collRedOp_t op = static_cast<collRedOp_t>(rng() % 3 == 0 ? collMax : (rng() % 2 ? collSum : collMin));
    size_t in = count, out = count;
    if (kind == 1) out = count * n;       // all-gather
    if (kind == 2) in = count * n;        // reduce-scatter
    if (kind == 4) in = out = count * n;  // all-to-all
    send.assign(in * t.size, 0);
    recv.assign(out * t.size, 0xA5);  // poisoned
    for (size_t i = 0; i < in; ++i) put(send.data(), i, t.dt, value(rank, i, salt));
    collResult_t rc;
    switch (kind) {
      case 0:
        rc = collAllReduce(send.data(), recv.data(), count, t.dt, op, comm, nullptr);
        break;
      case 1:
        rc = collAllGather(send.data(), recv.data(), count, t.dt, comm, nullptr);
        break;
      case 2:
        rc = collReduceScatter(send.data(), recv.data(), count, t.dt, op, comm, nullptr);
        break;
      case 3:
        rc = collBroadcast(send.data(), recv.data(), count, t.dt, root, comm, nullptr);
        break;
      default:
        rc = collAllToAll(send.data(), recv.data(), count, t.dt, comm, nullptr);
        break;
    }
    ++res->ops;
    if (rc != collSuccess) {
      ++res->failed;
      if (res->firstError.empty()) res->firstError = collGetLastError(comm);
      return;  // the peers' next call would not match
    }
    for (size_t i = 0; i < out; ++i) {
      double want = 0;
      if (kind == 0 || kind == 2) {
        size_t idx = kind == 0 ? i : rank * count + i;
        for (int r = 0; r < n; ++r) {
          double v = value(r, idx, salt);
          want = r == 0 ? v : op == collSum ? want + v : op == collMax ? std::max(want, v) : std::min(want, v);
        }
      } else if (kind == 1) {
        want = value(static_cast<int>(i / count), i % count, salt);
      } else if (kind == 3) {
        want = value(root, i, salt);
      } else {
        int from = static_cast<int>(i / count);
        want = value(from, rank * count + i % count, salt);
      }
      if (get(recv.data(), i, t.dt) != want) ++res->wrong;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long ops = argc > 1 ? std::atol(argv[1]) : 50000;
  uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 12345;
  collComm_t a = nullptr, b = nullptr;
  if (collCommInitFromEnv(&a) != collSuccess) return std::fprintf(stderr, "soak: %s\n", collGetLastError(nullptr)), 1;
  int rank = 0, n = 1;
  collCommUserRank(a, &rank);
  collCommCount(a, &n);
  if (collCommSplit(a, 0, rank, &b, nullptr) != collSuccess)
    return std::fprintf(stderr, "soak: split: %s\n", collGetLastError(a)), 1;
  long rss0 = rssKiB();
  int fd0 = fdCount();
  Result ra, rb;
  long rss10 = 0;
  int fd10 = 0;
  std::thread other([&] { drive(b, rank, n, ops, seed + 1, &rb, nullptr, nullptr); });
  drive(a, rank, n, ops, seed, &ra, &rss10, &fd10);
  other.join();
  long rss1 = rssKiB();
  int fd1 = fdCount();
  // Flat: no more than 8 MiB of growth after the first 10% (allocator noise), the same descriptors.
  bool grew = rss1 - rss10 > 8192 || fd1 != fd10;
  std::printf(
      "soak rank %d: %ld + %ld ops on 2 communicators, %ld wrong, %ld failed; RSS %ld -> %ld -> %ld KiB, "
      "fds %d -> %d -> %d%s\n",
      rank, ra.ops, rb.ops, ra.wrong + rb.wrong, ra.failed + rb.failed, rss0, rss10, rss1, fd0, fd10, fd1,
      grew ? " GREW" : "");
  if (!ra.firstError.empty()) std::printf("soak rank %d: %s\n", rank, ra.firstError.c_str());
  if (!rb.firstError.empty()) std::printf("soak rank %d: %s\n", rank, rb.firstError.c_str());
  collCommDestroy(b);
  collCommDestroy(a);
  return (ra.wrong + rb.wrong + ra.failed + rb.failed) != 0 || grew;
}
