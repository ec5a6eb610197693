// coll-perf: the nccl-tests of coll. Every collective (first argument or --coll), nccl-tests'
// command line, header, columns, busbw formulas, footers and -J JSON layout, so that the same
// command lines and scripts work with both; plus CSV output, --compare and progress lines on stderr.
// Public API only.
//
//   coll-perf all_reduce -b 8 -e 128M -f 2 -t 4      (4 ranks as threads of this process)
//   coll-run -n 4 coll-perf all_reduce -b 8 -e 128M -f 2 -g 1
//   coll-perf all_gather -np 4 -b 1K -e 1M -f 4 -d all -J out.json
//   coll-perf --compare before.json after.json
#include <unistd.h>

#include <memory>
#include <thread>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives.h"
#include "compare.h"
#include "device_memory.h"
#include "json_report.h"
#include "measure.h"
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
    if (std::strncmp(argv[i], "--np=", 5) == 0) continue;
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

// The launcher's local rank (coll-run, torchrun, Open MPI, Slurm), for the GPU of --mem device.
int localRank() {
  for (const char* v :
       {"COLL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* x = std::getenv(v)) return std::atoi(x);
  return 0;
}

bool underLauncher() {
  for (const char* v : {"COLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

// nccl-tests' name of the program that runs the same test ("all_reduce_perf"), for the lines that
// carry it ("# Collective test starting/concluded:").
std::string programName(const Options& o) { return o.collective + "_perf"; }

// nccl-tests' header (writeDeviceReport): the run's parameters and every rank, then coll's own lines
// (transports, algorithm per size range). Every rank takes part (the ranks' pids and hosts are
// gathered); rank 0 prints. Returns the ranks, for the JSON file.
std::vector<Device> printHeader(const Options& o, collComm_t comm, int rank, int n, const std::vector<size_t>& sizes,
                                int device, bool threads) {
  struct Who {
    int32_t pid;
    int32_t device;  // -1: host memory
    char host[56];
  } me{}, none{};
  me.pid = getpid();
  me.device = device;
  gethostname(me.host, sizeof(me.host) - 1);
  std::vector<Who> all(n, none);
  collAllGather(&me, all.data(), sizeof(Who), collInt8, comm, nullptr);
  std::vector<Device> devices;
  for (int r = 0; r < n; ++r) devices.push_back({r, all[r].pid, all[r].host, all[r].device});
  if (rank != 0) return devices;
  int version = 0;
  collGetVersion(&version);
  char transports[256] = "", algo[64] = "";
  collCommGetTransports(comm, transports, sizeof(transports));
  if (!o.jsonFile.empty()) std::printf("# Writing JSON output to %s\n", o.jsonFile.c_str());
  std::printf("# coll-perf (nccl-tests 2.19 layout) coll-library=%d.%d.%d\n", version / 10000, version / 100 % 100,
              version % 100);
  std::printf("# Collective test starting: %s\n", programName(o).c_str());
  char step[64];
  if (o.factor > 1)
    std::snprintf(step, sizeof(step), "%g(factor)", o.factor);
  else
    std::snprintf(step, sizeof(step), "%zu(bytes)", o.step);
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: %d validation: "
      "%d "
      "graph: %d unalign: %d\n",
      threads ? o.nthreads : 1, threads ? o.ngpus : 1, o.minBytes, o.maxBytes, step, o.warmup, o.iters, o.aggIters,
      o.check, o.graphs, o.unalign);
  if (o.blocking == 1) std::printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
  if (o.blocking == 2) std::printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
  if (o.blocking == 3)
    std::printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
  if (o.iterStats) {
    std::printf("# Per-Iteration Report: host clock, each rank's statistics combined as -a %d", o.average);
    if (o.iterSkip) std::printf("; summary skips first %d iterations", o.iterSkip);
    std::printf(" \n");
  }
  std::printf("#\n# Using devices\n");
  if (threads)
    std::printf("#  %d rank%s as threads of process %d (-t %d -g %d)\n", n, n == 1 ? "" : "s",
                static_cast<int>(getpid()), o.nthreads, o.ngpus);
  else
    std::printf("#  %d rank%s as processes, one rank each\n", n, n == 1 ? "" : "s");
  for (int r = 0; r < n; ++r) {
    if (all[r].device < 0)
      std::printf("#  Rank %2d Group  0 Pid %6d on %10s host memory\n", r, all[r].pid, all[r].host);
    else
      std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d\n", r, all[r].pid, all[r].host, all[r].device);
  }
  std::printf("#\n# coll transports: %s\n", transports);
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
  std::printf("# coll algorithm: %s\n", ranges.c_str());
  const char* algoEnv = std::getenv("COLL_ALGO");
  const char* proto = std::getenv("COLL_PROTO");
  if ((algoEnv && *algoEnv) || (proto && *proto))
    std::printf("# COLL_ALGO=%s COLL_PROTO=%s\n", algoEnv ? algoEnv : "", proto ? proto : "");
  return devices;
}

// The progress line (stderr, rank 0): after a size that took at least --progress seconds, so that a
// long sweep shows it is alive without touching stdout.
void progress(const Options& o, const Row& row, double tookUs, double sinceStartUs, int done, int perCycle) {
  if (o.progressS < 0 || tookUs < o.progressS * 1e6) return;
  std::fprintf(stderr, "# coll-perf: %zu B %s %s done in %.1f s (row %d of %d; %.0f s so far)\n", row.bytes,
               row.type.c_str(), row.redop.c_str(), tookUs / 1e6, (done - 1) % perCycle + 1, perCycle,
               sinceStartUs / 1e6);
}

// The host buffers of a run: from the heap, or (-R 2) from collMemAlloc, whose host memory the
// other processes of the host can map, as the windows' one-copy path needs.
struct HostBuffers {
  char* send = nullptr;
  char* recv = nullptr;
  bool memAlloc = false;
  std::vector<char> heapSend, heapRecv;
  bool allocate(size_t bytes, bool fromMemAlloc, std::string* err) {
    memAlloc = fromMemAlloc;
    if (!memAlloc) {
      heapSend.resize(bytes);
      heapRecv.resize(bytes);
      send = heapSend.data(), recv = heapRecv.data();
      return true;
    }
    void* s = nullptr;
    void* r = nullptr;
    if (collMemAlloc(&s, bytes) != collSuccess || collMemAlloc(&r, bytes) != collSuccess) {
      *err = std::string("collMemAlloc: ") + collGetLastError(nullptr);
      if (s) collMemFree(s);
      return false;
    }
    send = static_cast<char*>(s), recv = static_cast<char*>(r);
    return true;
  }
  ~HostBuffers() {
    if (memAlloc && send) collMemFree(send);
    if (memAlloc && recv) collMemFree(recv);
  }
};

// -R 1 (collCommRegister) or -R 2 (symmetric windows) over the run's two buffers; released
// before the communicator is destroyed (window deregistration is collective).
struct Registered {
  int mode = 0;
  void* handles[2] = {nullptr, nullptr};
  collWindow_t windows[2] = {nullptr, nullptr};
  bool add(collComm_t comm, int m, const Buffers& b, size_t bytes) {
    mode = m;
    char* bufs[2] = {b.send, b.recv};
    for (int i = 0; i < 2; ++i) {
      collResult_t rc = mode == 1 ? collCommRegister(comm, bufs[i], bytes, &handles[i])
                                  : collCommWindowRegister(comm, bufs[i], bytes, &windows[i], COLL_WIN_COLL_SYMMETRIC);
      if (rc != collSuccess) return false;
    }
    return true;
  }
  bool release(collComm_t comm) {
    bool ok = true;
    for (int i = 0; i < 2; ++i) {
      if (handles[i]) ok = collCommDeregister(comm, handles[i]) == collSuccess && ok;
      if (windows[i]) ok = collCommWindowDeregister(comm, windows[i]) == collSuccess && ok;
      handles[i] = nullptr, windows[i] = nullptr;
    }
    return ok;
  }
};

// One rank's whole run on comm (which it destroys): header (rank 0 prints), every size measured
// and checked, footer and files (rank 0). device is this rank's GPU for --mem device, else null;
// threads: the ranks are threads of this process (-t/-g). Returns the exit status.
int runRank(const Options& o, collComm_t comm, DeviceMemory* device, RunInfo info, bool threads) {
  const bool onDevice = device != nullptr;
  info.threads = threads;
  int rank = 0, n = 1;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  if (o.root >= n) {
    if (rank == 0) std::fprintf(stderr, "coll-perf: root %d is not a rank of %d\n", o.root, n);
    collCommDestroy(comm);
    return 2;
  }
  if (rank == 0)
    for (const auto& w : o.warnings) std::fprintf(stderr, "coll-perf: %s\n", w.c_str());
  std::vector<size_t> sizes = sizesOf(o);
  info.devices = printHeader(o, comm, rank, n, sizes, device ? device->device() : -1, threads);

  // Buffers for the largest size and type: send for out-of-place inputs, recv for outputs and
  // in-place runs (which need the larger of the two), plus -u's offset.
  size_t maxElem = 1;
  for (auto t : o.types) maxElem = std::max(maxElem, colltools::typeBytes(t));
  size_t most = 0;
  for (auto t : o.types) {
    Shape s = shapeFor(o.collective, o.maxBytes, colltools::typeBytes(t), n);
    most = std::max({most, s.sendElems * colltools::typeBytes(t), s.recvElems * colltools::typeBytes(t)});
  }
  const size_t pad = maxElem * (static_cast<size_t>(o.unalign) + 1);
  HostBuffers host;
  std::string hostErr;
  if (!host.allocate(most + pad, o.registerMode == 2 && !device, &hostErr)) {
    std::fprintf(stderr, "coll-perf: rank %d: %s\n", rank, hostErr.c_str());
    collCommDestroy(comm);
    return 1;
  }
  const Buffers hostBuf{host.send, host.recv};
  Runner run{o, comm, rank, n, hostBuf, false, nullptr, {}, hostBuf};
  collStream_t stream = nullptr;
  Buffers deviceBuf;  // --mem device: the device allocations; sendBuf and recvBuf mirror them
  if (onDevice) {
    std::string err;
    if (threads && !device->makeCurrent(&err)) {
      std::fprintf(stderr, "coll-perf: rank %d: %s\n", rank, err.c_str());
      collCommDestroy(comm);
      return 1;
    }
    deviceBuf.send = static_cast<char*>(device->alloc(most + pad, &err));
    if (deviceBuf.send) deviceBuf.recv = static_cast<char*>(device->alloc(most + pad, &err));
    if (!deviceBuf.recv) {
      std::fprintf(stderr, "coll-perf: rank %d: %zu bytes of device memory: %s\n", rank, most + pad, err.c_str());
      device->free(deviceBuf.send);
      collCommDestroy(comm);
      return 1;
    }
    run.device = device;
    run.deviceStart = deviceBuf;
    stream = device->stream();
  }
  // -R: the buffers the calls use (device ones with --mem device) registered with comm.
  Registered reg;
  if (o.registerMode > 0) {
    const Buffers& b = onDevice ? deviceBuf : hostBuf;
    if (!reg.add(comm, o.registerMode, b, most + pad)) {
      std::fprintf(stderr, "coll-perf: rank %d: -R %d: %s\n", rank, o.registerMode, collGetLastError(comm));
      collCommDestroy(comm);
      return 1;
    }
  }
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
  const int perCycle = static_cast<int>(o.types.size() * ops.size() * roots.size() * sizes.size());
  std::vector<Row> rows;
  int64_t totalWrong = 0;
  double busSum = 0;
  int busRows = 0;
  const double startUs = colltools::nowUs();
  if (rank == 0) printTableHeader(stdout, o.reportCputime, o.reportTimestamps, o.iterStats);
  for (int cycle = 0; (o.cycles == 0 || cycle < o.cycles) && !run.failed; ++cycle) {
    for (auto type : o.types) {
      const size_t elem = colltools::typeBytes(type);
      const Buffers& base = onDevice ? deviceBuf : hostBuf;
      run.buf = {base.send + o.unalign * elem, base.recv + o.unalign * elem};
      for (auto op : ops) {
        for (int root : roots) {
          for (size_t bytes : sizes) {
            Call c{kind, shapeFor(o.collective, bytes, elem, n), type, op, std::max(root, 0), rank, n, comm, stream};
            Row row;
            row.bytes = c.shape.bytes;
            row.count = c.shape.count;
            row.type = colltools::typeName(type);
            row.redop = reduces(o.collective) ? colltools::opName(op) : "none";
            row.root = root;
            char algo[64] = "";
            collCommGetAlgorithm(comm, o.collective.c_str(), c.shape.paramCount * elem, algo, sizeof(algo));
            row.algorithm = algo;
            const double sizeStartUs = colltools::nowUs();
            int ipIters = 0;
            unsigned long long onWindows = 0, onWindowsAfter = 0;
            collCommMemStats(comm, collStatWindowCollectives, &onWindows);
            row.oop = run.measure(c, false, &row.iters);
            if (!run.failed) row.ip = run.measure(c, true, &ipIters);
            if (run.failed) break;
            // The tuner's choice for plain buffers above; calls on windows may take the one-copy
            // path instead, which only the count of such calls tells.
            collCommMemStats(comm, collStatWindowCollectives, &onWindowsAfter);
            if (onWindowsAfter > onWindows) row.algorithm = "window";
            if (o.reportTimestamps) row.timestamp = nowString();
            totalWrong += std::max<int64_t>(row.oop.wrong, 0) + std::max<int64_t>(row.ip.wrong, 0);
            if (rank == 0) {
              printRow(stdout, row, o.iterStats);
              std::fflush(stdout);
              double now = colltools::nowUs();
              progress(o, row, now - sizeStartUs, now - startUs, static_cast<int>(rows.size()) + 1, perCycle);
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
    info.avgBusbw = busRows ? busSum / busRows : 0.0;
    info.wrong = totalWrong;
    std::printf("#\n# %-20s : %" PRId64 " %s\n", "Out of bounds values", totalWrong, totalWrong ? "FAILED" : "OK");
    std::printf("# %-20s : %g \n#\n", "Avg bus bandwidth", info.avgBusbw);
    std::printf("# Collective test concluded: %s\n", programName(o).c_str());
    info.collective = o.collective;
    info.nranks = n;
    collGetVersion(&info.version);
    char transports[256] = "";
    collCommGetTransports(comm, transports, sizeof(transports));
    info.transports = transports;
    info.endTime = nowString();
    if (!o.jsonFile.empty() && !writeJson(o.jsonFile, o, info, rows))
      std::fprintf(stderr, "coll-perf: cannot write %s\n", o.jsonFile.c_str()), status = 1;
    if (!o.csvFile.empty() && !writeCsv(o.csvFile, o.collective, n, rows))
      std::fprintf(stderr, "coll-perf: cannot write %s\n", o.csvFile.c_str()), status = 1;
  }
  std::fflush(stdout);
  if (stream && !onDevice) collHostStreamDestroy(stream);
  if (run.failed) {
    collCommAbort(comm);
  } else {
    if (!reg.release(comm)) {
      std::fprintf(stderr, "coll-perf: rank %d: deregistration: %s\n", rank, collGetLastError(comm));
      status = 1;
    }
    // Every rank exits with the same status, and a launcher stops the others at the first
    // non-zero one: no rank may leave before rank 0 has written its footer and files.
    int32_t done = 0, all = 0;
    collAllReduce(&done, &all, 1, collInt32, collSum, comm, nullptr);
    collCommDestroy(comm);
  }
  if (device) {
    device->free(deviceBuf.send);
    device->free(deviceBuf.recv);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err;
  Parsed p = parseOptions(argc, argv, &o, &err);
  if (p == Parsed::kHelp) return std::fputs(usage(), stdout), 0;
  if (p == Parsed::kError) return std::fprintf(stderr, "coll-perf: %s\n%s", err.c_str(), usage()), 2;
  if (!o.compare.empty()) {
    Result a, b;
    if (!readJson(o.compare[0], &a, &err) || !readJson(o.compare[1], &b, &err))
      return std::fprintf(stderr, "coll-perf: %s\n", err.c_str()), 2;
    return printComparison(stdout, a, b) > 0 ? 0 : 1;
  }
  if (o.np > 0 && !underLauncher()) return respawn(argc, argv, o.np);
  // --mem device: the GPU is chosen before the communicator, which takes the current device.
  const bool onDevice = o.mem == "device";
  if (o.timeoutS > 0) setenv("COLL_TIMEOUT_MS", std::to_string(static_cast<long>(o.timeoutS * 1000)).c_str(), 1);
  if (!o.algo.empty()) setenv("COLL_ALGO", o.algo.c_str(), 1);
  if (!o.proto.empty()) setenv("COLL_PROTO", o.proto.c_str(), 1);

  RunInfo info;
  info.startTime = nowString();
  info.args.assign(argv, argv + argc);
  info.env = relevantEnv();
  const int perProcess = o.nthreads * o.ngpus;
  if (underLauncher()) {
    if (perProcess > 1)
      return std::fprintf(stderr,
                          "coll-perf: -t/-g run ranks as threads of one process, and a launcher started this one as "
                          "a rank: use one or the other\n"),
             2;
    DeviceMemory device;
    if (onDevice && !device.open(localRank(), &err)) return std::fprintf(stderr, "coll-perf: %s\n", err.c_str()), 1;
    collComm_t comm = nullptr;
    if (collCommInitFromEnv(&comm) != collSuccess)
      return std::fprintf(stderr, "coll-perf: init failed: %s\n", collGetLastError(nullptr)), 1;
    return runRank(o, comm, onDevice ? &device : nullptr, info, false);
  }
  // Alone, as nccl-tests: t x g ranks as threads of this process (1 by default), one
  // communicator each from collCommInitAll; --mem device gives rank i the GPU i mod GPUs.
  std::vector<std::unique_ptr<DeviceMemory>> devices;
  std::vector<int> devlist;
  for (int r = 0; onDevice && r < perProcess; ++r) {
    devices.push_back(std::make_unique<DeviceMemory>());
    if (!devices.back()->open(r, &err)) return std::fprintf(stderr, "coll-perf: %s\n", err.c_str()), 1;
    devlist.push_back(devices.back()->device());
  }
  std::vector<collComm_t> comms(perProcess, nullptr);
  if (collCommInitAll(comms.data(), perProcess, onDevice ? devlist.data() : nullptr) != collSuccess)
    return std::fprintf(stderr, "coll-perf: init of %d rank(s) failed: %s\n", perProcess, collGetLastError(nullptr)), 1;
  std::vector<int> status(perProcess, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < perProcess; ++r)
    ranks.emplace_back([&, r] { status[r] = runRank(o, comms[r], onDevice ? devices[r].get() : nullptr, info, true); });
  for (auto& t : ranks) t.join();
  return *std::max_element(status.begin(), status.end());
}
