// coll-perf: nccl-tests-style bandwidth measurement (all_reduce on host memory for now).
//
// Run under a launcher: coll-run -n 4 coll-perf -b 8 -e 128M -f 2. Columns, size steps, the
// time-across-ranks rule (-a) and bus bandwidth (algbw x 2(n-1)/n for all-reduce) follow
// nccl-tests' all_reduce_perf, so the same scripts parse both. With -c 1 every size is first run
// with inputs whose exact sum is known in any order, and every output element is compared.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "coll/coll.h"
#include "tools_common.h"

namespace {

struct Options {
  size_t minBytes = 32 << 20, maxBytes = 32 << 20;
  double factor = 1;
  size_t step = 1 << 20;
  bool useFactor = false;
  int iters = 20, warmup = 5, check = 1, average = 1;
  double maxSeconds = 0;  // -T: cap on timed seconds per size (0: none)
  collDataType_t type = collFloat32;
  collRedOp_t op = collSum;
};

const char* kUsage =
    "usage: coll-perf [-b minBytes] [-e maxBytes] [-f factor | -i step] [-n iters] [-w warmup] [-c 0|1]\n"
    "                 [-d type] [-o op] [-a 0|1|2|3]\n"
    "  all_reduce over host memory; run under a launcher: coll-run -n 4 coll-perf -b 8 -e 128M -f 2\n"
    "  sizes take K, M, G suffixes; -d int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16;\n"
    "  -o sum|prod|max|min|avg; -a: time across ranks 0 = rank 0, 1 = average, 2 = min, 3 = max\n"
    "  -T s (extension): fewer iterations for sizes where -n would take longer than s seconds\n";

bool parse(int argc, char** argv, Options* o, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return *err = "", false;
    if (i + 1 >= argc) return *err = "option " + a + " needs a value", false;
    const char* v = argv[++i];
    bool ok = true;
    if (a == "-b")
      ok = colltools::parseSize(v, &o->minBytes);
    else if (a == "-e")
      ok = colltools::parseSize(v, &o->maxBytes);
    else if (a == "-f")
      ok = (o->factor = std::atof(v)) > 1, o->useFactor = true;
    else if (a == "-i")
      ok = colltools::parseSize(v, &o->step) && o->step > 0, o->useFactor = false;
    else if (a == "-n")
      ok = (o->iters = std::atoi(v)) > 0;
    else if (a == "-w")
      ok = (o->warmup = std::atoi(v)) >= 0;
    else if (a == "-c")
      ok = (o->check = std::atoi(v)) >= 0;
    else if (a == "-a")
      ok = (o->average = std::atoi(v)) >= 0 && o->average <= 3;
    else if (a == "-T")
      ok = (o->maxSeconds = std::atof(v)) > 0;
    else if (a == "-d")
      ok = colltools::parseType(v, &o->type);
    else if (a == "-o")
      ok = colltools::parseOp(v, &o->op);
    else
      return *err = "unknown option " + a, false;
    if (!ok) return *err = "bad value for " + a + ": " + v, false;
  }
  if (o->minBytes > o->maxBytes) return *err = "-b is larger than -e", false;
  return true;
}

// Fills rank r's input with small integers: any summation order gives the same bits.
void fill(void* buf, size_t count, collDataType_t t, int rank) {
  for (size_t i = 0; i < count; ++i)
    colltools::storeValue(buf, i, t, static_cast<double>((static_cast<size_t>(rank) * 7 + i * 13) % 16) - 7);
}

// Number of elements that differ from the exact reduction.
int64_t countWrong(const void* out, size_t count, collDataType_t t, collRedOp_t op, int n) {
  int64_t wrong = 0;
  std::vector<char> want(16);
  for (size_t i = 0; i < count; ++i) {
    double acc = op == collProd ? 1 : (op == collMax ? -1e9 : (op == collMin ? 1e9 : 0));
    for (int r = 0; r < n; ++r) {
      double v = static_cast<double>((static_cast<size_t>(r) * 7 + i * 13) % 16) - 7;
      if (op == collProd)
        acc *= v;
      else if (op == collMax)
        acc = std::max(acc, v);
      else if (op == collMin)
        acc = std::min(acc, v);
      else
        acc += v;
    }
    if (op == collAvg) acc = colltools::averageOf(acc, n, t);
    colltools::storeValue(want.data(), 0, t, acc);
    size_t es = colltools::typeBytes(t);
    if (std::memcmp(static_cast<const char*>(out) + i * es, want.data(), es) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err;
  if (!parse(argc, argv, &o, &err)) {
    std::fprintf(err.empty() ? stdout : stderr, "%s%s%s", err.c_str(), err.empty() ? "" : "\n", kUsage);
    return err.empty() ? 0 : 2;
  }
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) {
    std::fprintf(stderr, "coll-perf: init failed: %s\n(run it under a launcher: coll-run -n 4 coll-perf)\n",
                 collGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 1, version = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  collGetVersion(&version);
  size_t es = colltools::typeBytes(o.type);
  std::vector<char> send(std::max(o.maxBytes, es)), recv(std::max(o.maxBytes, es));
  if (rank == 0) {
    std::printf("# coll-perf all_reduce: coll %d, %d ranks, type %s, op %s, iters %d, warmup %d, check %d\n", version,
                n, colltools::typeName(o.type), colltools::opName(o.op), o.iters, o.warmup, o.check);
    std::printf("#\n#%78s%38s\n", "out-of-place", "in-place");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  double busSum = 0;
  int sizes = 0;
  int64_t totalWrong = 0;
  int failed = 0;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    size_t count = bytes / es;
    double timeUs[2];
    int64_t wrong[2] = {0, 0};
    for (int inPlace = 0; inPlace < 2 && !failed; ++inPlace) {
      void* out = recv.data();
      const void* in = inPlace ? out : send.data();
      auto run = [&] { return collAllReduce(in, out, count, o.type, o.op, comm, nullptr); };
      if (o.check) {
        fill(const_cast<void*>(in), count, o.type, rank);
        if (!inPlace) std::memset(out, 0xa5, count * es);
        if (run() != collSuccess)
          failed = 1;
        else
          wrong[inPlace] = countWrong(out, count, o.type, o.op, n);
      }
      for (int i = 0; i < o.warmup && !failed; ++i) failed |= run() != collSuccess;
      int iters = o.iters;
      if (o.maxSeconds > 0 && !failed) {
        // Every rank must run the same number of iterations: decide from the slowest rank's time.
        double t = colltools::nowUs();
        failed |= run() != collSuccess;
        double one = colltools::acrossRanks(comm, colltools::nowUs() - t, 3, n);
        iters = static_cast<int>(std::max(1.0, std::min<double>(o.iters, o.maxSeconds * 1e6 / std::max(one, 0.01))));
      }
      double t0 = colltools::nowUs();
      for (int i = 0; i < iters && !failed; ++i) failed |= run() != collSuccess;
      double mine = (colltools::nowUs() - t0) / iters;
      timeUs[inPlace] = colltools::acrossRanks(comm, mine, o.average, n);
      int64_t w = wrong[inPlace];
      collAllReduce(&w, &wrong[inPlace], 1, collInt64, collSum, comm, nullptr);
    }
    if (failed) {
      std::fprintf(stderr, "coll-perf: rank %d: all_reduce failed: %s\n", rank, collGetLastError(comm));
      break;
    }
    if (rank == 0) {
      double busFactor = 2.0 * (n - 1) / n;
      double alg[2], bus[2];
      for (int k = 0; k < 2; ++k) {
        alg[k] = timeUs[k] > 0 ? static_cast<double>(count * es) / timeUs[k] / 1e3 : 0;
        bus[k] = alg[k] * busFactor;
      }
      std::printf("  %10zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6" PRId64 "  %7s  %6.2f  %6.2f  %6" PRId64 "\n",
                  count * es, count, colltools::typeName(o.type), colltools::opName(o.op), -1,
                  colltools::formatTime(timeUs[0]).c_str(), alg[0], bus[0], wrong[0],
                  colltools::formatTime(timeUs[1]).c_str(), alg[1], bus[1], wrong[1]);
      busSum += (bus[0] + bus[1]) / 2;
      ++sizes;
    }
    totalWrong += wrong[0] + wrong[1];
    if (bytes == o.maxBytes) break;
    bytes = o.useFactor ? static_cast<size_t>(bytes * o.factor) : bytes + o.step;
    if (bytes > o.maxBytes) bytes = o.maxBytes;
    if (bytes < es) bytes = es;
  }
  if (rank == 0 && !failed) {
    std::printf("# Out of bounds values : %" PRId64 " %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n", sizes ? busSum / sizes : 0.0);
  }
  collCommDestroy(comm);
  return failed ? 1 : (totalWrong ? 1 : 0);
}
