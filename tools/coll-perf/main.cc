// coll-perf: the nccl-tests of coll. Every collective (subcommand or -C), nccl-tests' flags,
// columns, busbw formulas and footers, so that the same scripts parse both; plus JSON/CSV output,
// per-iteration statistics and --compare. Public API only.
//
//   coll-run -n 4 coll-perf all_reduce -b 8 -e 128M -f 2
//   coll-perf all_gather -np 4 -b 1K -e 1M -f 4 -d all -J out.json
//   coll-perf --compare before.json after.json
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives.h"
#include "options.h"
#include "report.h"
#include "tools_common.h"

using namespace collperf;

namespace {

bool reduces(const std::string& c) { return c == "all_reduce" || c == "reduce" || c == "reduce_scatter"; }
bool rooted(const std::string& c) { return c == "broadcast" || c == "reduce"; }

std::vector<size_t> sizesOf(const Options& o) {
  std::vector<size_t> out;
  for (size_t b = o.minBytes;;) {
    out.push_back(b);
    if (b >= o.maxBytes) break;
    size_t next = o.factor > 1 ? static_cast<size_t>(static_cast<double>(b) * o.factor) : b + o.step;
    b = std::min(std::max(next, b + 1), o.maxBytes);
  }
  return out;
}

// Starts `np` local ranks of this program through coll-run (next to this binary), without -np.
int respawn(int argc, char** argv, int np) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return std::perror("coll-perf: readlink /proc/self/exe"), 1;
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  std::string launcher = dir + "/coll-run";
  std::vector<std::string> args = {launcher, "-n", std::to_string(np), self};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-np") == 0 || std::strcmp(argv[i], "--np") == 0) {
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execv(launcher.c_str(), cargs.data());
  std::fprintf(stderr, "coll-perf: -np needs coll-run next to coll-perf (%s): %s\n", launcher.c_str(),
               std::strerror(errno));
  return 1;
}

bool underLauncher() {
  for (const char* v : {"COLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

struct Runner {
  const Options& o;
  collComm_t comm;
  int rank, n;
  Buffers buf;
  std::vector<double> iterTimes;
  bool failed = false;

  collResult_t iteration(const Call& c, bool inPlace) {
    if (o.aggIters == 1) return runOnce(c, buf, inPlace);
    collResult_t rc = collGroupStart();
    for (int k = 0; k < o.aggIters && rc == collSuccess; ++k) rc = runOnce(c, buf, inPlace);
    collResult_t end = collGroupEnd();
    return rc != collSuccess ? rc : end;
  }

  // With --host-stream: waits for what was queued (a failure is reported like a call's).
  collResult_t sync(const Call& c) { return c.stream ? collStreamSynchronize(c.stream) : collSuccess; }

  void fail(collResult_t rc) {
    if (!failed)
      std::fprintf(stderr, "coll-perf: rank %d: %s failed (%s): %s\n", rank, o.collective.c_str(),
                   collGetErrorString(rc), collGetLastError(comm));
    failed = true;
  }

  Measure measure(const Call& c, bool inPlace) {
    Measure m;
    if (o.check > 0) {
      m.wrong = 0;
      for (int k = 0; k < o.check && !failed; ++k) {
        prepare(c, buf, inPlace);
        collResult_t rc = runOnce(c, buf, inPlace);
        if (rc == collSuccess) rc = sync(c);
        if (rc != collSuccess) return fail(rc), m;
        m.wrong += countWrong(c, buf, inPlace);
      }
    }
    for (int k = 0; k < o.warmup && !failed; ++k)
      if (collResult_t rc = iteration(c, inPlace); rc != collSuccess) return fail(rc), m;
    if (collResult_t rc = sync(c); rc != collSuccess) return fail(rc), m;
    int iters = o.iters;
    if (o.maxSeconds > 0) {
      // Every rank must run the same number of iterations: decide from the slowest rank's time.
      double t = colltools::nowUs();
      collResult_t rc = iteration(c, inPlace);
      if (rc == collSuccess) rc = sync(c);
      if (rc != collSuccess) return fail(rc), m;
      double one = colltools::acrossRanks(comm, colltools::nowUs() - t, 3, n);
      iters = static_cast<int>(std::max(1.0, std::min<double>(o.iters, o.maxSeconds * 1e6 / std::max(one, 0.01))));
    }
    iterTimes.assign(o.iterStats ? iters : 0, 0);
    double t0 = colltools::nowUs();
    for (int k = 0; k < iters; ++k) {
      double ts = o.iterStats ? colltools::nowUs() : 0;
      collResult_t rc = iteration(c, inPlace);
      if (rc == collSuccess && (o.blocking || o.iterStats)) rc = sync(c);
      if (rc != collSuccess) return fail(rc), m;
      if (o.iterStats) iterTimes[k] = (colltools::nowUs() - ts) / o.aggIters;
    }
    if (collResult_t rc = sync(c); rc != collSuccess) return fail(rc), m;
    double mine = (colltools::nowUs() - t0) / iters / o.aggIters;
    m.timeUs = colltools::acrossRanks(comm, mine, o.average, n);
    if (o.iterStats) {
      // An iteration lasts as long as its slowest rank.
      std::vector<double> slowest(iters);
      collAllReduce(iterTimes.data(), slowest.data(), iters, collFloat64, collMax, comm, nullptr);
      m.stats = statsOf(slowest);
    }
    if (m.wrong >= 0) {
      int64_t w = m.wrong;
      collAllReduce(&w, &m.wrong, 1, collInt64, collSum, comm, nullptr);
    }
    m.algbw = m.timeUs > 0 ? static_cast<double>(c.shape.bytes) / m.timeUs / 1e3 : 0;
    m.busbw = m.algbw * busFactor(o.collective, n);
    return m;
  }
};

void printHeader(const Options& o, collComm_t comm, int rank, int n, const std::vector<size_t>& sizes) {
  // Every rank's pid and host, as nccl-tests lists its devices.
  struct Who {
    int32_t pid;
    char host[60];
  } me{}, none{};
  me.pid = getpid();
  gethostname(me.host, sizeof(me.host) - 1);
  std::vector<Who> all(n, none);
  collAllGather(&me, all.data(), sizeof(Who), collInt8, comm, nullptr);
  if (rank != 0) return;
  int version = 0;
  collGetVersion(&version);
  char transports[256] = "", algo[64] = "";
  collCommGetTransports(comm, transports, sizeof(transports));
  std::printf("# coll-perf %s: coll %d.%d.%d, %s\n", o.collective.c_str(), version / 10000, version / 100 % 100,
              version % 100, transports);
  std::printf(
      "# minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n",
      o.minBytes, o.maxBytes,
      o.factor > 1 ? (std::to_string(o.factor).substr(0, 4) + "(factor)").c_str()
                   : (std::to_string(o.step) + "(bytes)").c_str(),
      o.warmup, o.iters, o.aggIters, o.check, o.graphs);
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < n; ++r)
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s host memory\n", r, all[r].pid, all[r].host);
  // The algorithm per size range, as the library will choose it (first type).
  size_t elem = colltools::typeBytes(o.types.front());
  std::string ranges, current;
  size_t from = 0, last = 0;
  for (size_t i = 0; i <= sizes.size(); ++i) {
    std::string a;
    if (i < sizes.size()) {
      Shape s = shapeFor(o.collective, sizes[i], elem, n);
      collCommGetAlgorithm(comm, o.collective.c_str(), s.paramCount * elem, algo, sizeof(algo));
      a = algo;
    }
    if (i == sizes.size() || a != current) {
      if (!current.empty())
        ranges += (ranges.empty() ? "" : "; ") + std::to_string(from) + ".." + std::to_string(last) + " B " + current;
      current = a;
      if (i < sizes.size()) from = sizes[i];
    }
    if (i < sizes.size()) last = sizes[i];
  }
  std::printf("# algorithm: %s\n", ranges.c_str());
  const char* algoEnv = std::getenv("COLL_ALGO");
  const char* proto = std::getenv("COLL_PROTO");
  if ((algoEnv && *algoEnv) || (proto && *proto))
    std::printf("# COLL_ALGO=%s COLL_PROTO=%s\n", algoEnv ? algoEnv : "", proto ? proto : "");
}

std::string joinArgs(int argc, char** argv) {
  std::string s;
  for (int i = 1; i < argc; ++i) s += (i > 1 ? " " : "") + std::string(argv[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err;
  Parsed p = parseOptions(argc, argv, &o, &err);
  if (p == Parsed::kHelp) return std::fputs(usage(), stdout), 0;
  if (p == Parsed::kError) return std::fprintf(stderr, "coll-perf: %s\n%s", err.c_str(), usage()), 2;
  if (!o.compare.empty()) {
    RunInfo ia, ib;
    std::vector<Row> a, b;
    if (!readJson(o.compare[0], &ia, &a, &err) || !readJson(o.compare[1], &ib, &b, &err))
      return std::fprintf(stderr, "coll-perf: %s\n", err.c_str()), 2;
    return printComparison(stdout, ia, a, ib, b) > 0 ? 0 : 1;
  }
  if (o.mem == "device") {
    std::fprintf(stderr, "coll-perf: --mem device: this coll has no device (CUDA) data path yet; use --mem host\n");
    return 1;
  }
  if (o.np > 0 && !underLauncher()) return respawn(argc, argv, o.np);
  if (o.timeoutS > 0) setenv("COLL_TIMEOUT_MS", std::to_string(static_cast<long>(o.timeoutS * 1000)).c_str(), 1);
  if (!o.algo.empty()) setenv("COLL_ALGO", o.algo.c_str(), 1);
  if (!o.proto.empty()) setenv("COLL_PROTO", o.proto.c_str(), 1);

  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) {
    std::fprintf(stderr,
                 "coll-perf: init failed: %s\n(run it under a launcher, coll-run -n 4 coll-perf, or with -np 4)\n",
                 collGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 1;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  if (o.root >= n) {
    if (rank == 0) std::fprintf(stderr, "coll-perf: root %d is not a rank of %d\n", o.root, n);
    collCommDestroy(comm);
    return 2;
  }
  std::vector<size_t> sizes = sizesOf(o);
  printHeader(o, comm, rank, n, sizes);

  // Buffers for the largest size and type: send for out-of-place inputs, recv for outputs and
  // in-place runs (which need the larger of the two).
  size_t maxElem = 1;
  for (auto t : o.types) maxElem = std::max(maxElem, colltools::typeBytes(t));
  size_t most = 0;
  for (auto t : o.types) {
    Shape s = shapeFor(o.collective, o.maxBytes, colltools::typeBytes(t), n);
    most = std::max({most, s.sendElems * colltools::typeBytes(t), s.recvElems * colltools::typeBytes(t)});
  }
  std::vector<char> sendBuf(most + maxElem), recvBuf(most + maxElem);
  Runner run{o, comm, rank, n, {sendBuf.data(), recvBuf.data()}, {}, false};
  collStream_t stream = nullptr;
  if (o.hostStream && collHostStreamCreate(&stream) != collSuccess) {
    std::fprintf(stderr, "coll-perf: collHostStreamCreate failed: %s\n", collGetLastError(nullptr));
    collCommDestroy(comm);
    return 1;
  }

  std::vector<collRedOp_t> ops = reduces(o.collective) ? o.ops : std::vector<collRedOp_t>{collSum};
  std::vector<int> roots;
  if (!rooted(o.collective))
    roots = {-1};
  else if (o.root < 0)
    for (int r = 0; r < n; ++r) roots.push_back(r);
  else
    roots = {o.root};

  const Coll kind = collFromName(o.collective);
  std::vector<Row> rows;
  int64_t totalWrong = 0;
  double busSum = 0;
  int busRows = 0;
  if (rank == 0) printTableHeader(stdout);
  for (int cycle = 0; (o.cycles == 0 || cycle < o.cycles) && !run.failed; ++cycle) {
    for (auto type : o.types) {
      for (auto op : ops) {
        for (int root : roots) {
          for (size_t bytes : sizes) {
            Call c{kind,
                   shapeFor(o.collective, bytes, colltools::typeBytes(type), n),
                   type,
                   op,
                   std::max(root, 0),
                   rank,
                   n,
                   comm,
                   stream};
            Row row;
            row.bytes = c.shape.bytes;
            row.count = c.shape.count;
            row.type = colltools::typeName(type);
            row.redop = reduces(o.collective) ? colltools::opName(op) : "none";
            row.root = root;
            char algo[64] = "";
            collCommGetAlgorithm(comm, o.collective.c_str(), c.shape.paramCount * colltools::typeBytes(type), algo,
                                 sizeof(algo));
            row.algorithm = algo;
            row.oop = run.measure(c, false);
            if (!run.failed) row.ip = run.measure(c, true);
            if (run.failed) break;
            totalWrong += std::max<int64_t>(row.oop.wrong, 0) + std::max<int64_t>(row.ip.wrong, 0);
            if (rank == 0) {
              printRow(stdout, row);
              if (o.iterStats)
                for (auto [name, m] :
                     {std::pair<const char*, Measure*>{"out-of-place", &row.oop}, {"in-place", &row.ip}})
                  std::printf("#   %zu B %s per iteration: min %.2f max %.2f p99 %.2f us, cv %.1f%%\n", row.bytes, name,
                              m->stats.min, m->stats.max, m->stats.p99, m->stats.cvPercent);
              std::fflush(stdout);
            }
            busSum += (row.oop.busbw + row.ip.busbw) / 2;
            ++busRows;
            rows.push_back(row);
          }
          if (run.failed) break;
        }
      }
    }
  }
  int status = run.failed || totalWrong > 0 ? 1 : 0;
  if (rank == 0 && !run.failed) {
    std::printf("# Out of bounds values : %" PRId64 " %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n", busRows ? busSum / busRows : 0.0);
    RunInfo info;
    info.collective = o.collective;
    info.nranks = n;
    collGetVersion(&info.version);
    char transports[256] = "";
    collCommGetTransports(comm, transports, sizeof(transports));
    info.transports = transports;
    info.args = joinArgs(argc, argv);
    if (!o.jsonFile.empty() && !writeJson(o.jsonFile, info, rows))
      std::fprintf(stderr, "coll-perf: cannot write %s\n", o.jsonFile.c_str()), status = 1;
    if (!o.csvFile.empty() && !writeCsv(o.csvFile, info, rows))
      std::fprintf(stderr, "coll-perf: cannot write %s\n", o.csvFile.c_str()), status = 1;
  }
  std::fflush(stdout);
  if (stream) collHostStreamDestroy(stream);
  if (run.failed) {
    collCommAbort(comm);
  } else {
    // Every rank exits with the same status, and a launcher stops the others at the first
    // non-zero one: no rank may leave before rank 0 has written its footer and files.
    int32_t done = 0, all = 0;
    collAllReduce(&done, &all, 1, collInt32, collSum, comm, nullptr);
    collCommDestroy(comm);
  }
  return status;
}
