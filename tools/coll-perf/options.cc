#include "options.h"

#include <cstdlib>
#include <cstring>

#include "tools_common.h"

namespace collperf {
namespace {

bool parseInt(const char* v, int lo, int hi, int* out) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) return false;
  *out = static_cast<int>(x);
  return true;
}

bool parseDouble(const char* v, double lo, double* out) {
  char* end = nullptr;
  double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(x >= lo)) return false;
  *out = x;
  return true;
}

bool isCollective(const std::string& name) {
  for (const auto& c : collectiveNames())
    if (c == name) return true;
  return false;
}

}  // namespace

const std::vector<std::string>& collectiveNames() {
  // In the order of collperf::Coll.
  static const std::vector<std::string> names = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                                 "reduce",     "alltoall",   "sendrecv"};
  return names;
}

double busFactor(const std::string& c, int n) {
  if (c == "all_reduce") return 2.0 * (n - 1) / n;
  if (c == "all_gather" || c == "reduce_scatter" || c == "alltoall") return static_cast<double>(n - 1) / n;
  return 1.0;  // broadcast, reduce, sendrecv
}

const char* usage() {
  return "usage: coll-perf [collective] [options]        (or -C collective)\n"
         "  collectives: all_reduce (default), all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv\n"
         "  run under a launcher (coll-run -n 4 coll-perf ...), or with -np N to start N local ranks itself\n"
         "nccl-tests flags:\n"
         "  -b minBytes [32M]  -e maxBytes [32M]  -i stepBytes [1M] | -f stepFactor   (K, M, G suffixes)\n"
         "  -n iters [20]  -w warmupIters [5]  -m opsPerGroup [1]  -N cycles [1, 0 = forever]\n"
         "  -c checkIters [1, 0 = no check]  -o sum|prod|min|max|avg|all [sum]\n"
         "  -d int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|all [float]\n"
         "  -r root|all [0]  -z 0|1 blocking [0]  -a 0|1|2|3 time across ranks: rank 0, mean, min, max [1]\n"
         "  -T seconds: operation timeout (sets COLL_TIMEOUT_MS)  -G graphLaunches (device buffers only)\n"
         "extensions:\n"
         "  -I              per-iteration statistics (min, max, p99, cv%) as comment lines and in -J/-F\n"
         "  -J file.json    results as JSON        -F file.csv   results as CSV\n"
         "  --mem host|device [host]   --algo spec (COLL_ALGO)   --proto spec (COLL_PROTO)\n"
         "  --host-stream 0|1  queue the calls on a host stream (collHostStreamCreate) and synchronize\n"
         "                  once per timed loop, as nccl-tests does on a CUDA stream (-z 1: every iteration)\n"
         "  -np N           start N local ranks (through coll-run) when not under a launcher\n"
         "  --max-seconds s fewer iterations for sizes where -n would take longer than s seconds\n"
         "  --compare A.json B.json    print B/A per size (busbw and time) and exit\n";
}

Parsed parseOptions(int argc, const char* const* argv, Options* o, std::string* err) {
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    if (!isCollective(argv[i])) return *err = std::string("unknown collective ") + argv[i], Parsed::kError;
    o->collective = argv[i++];
  }
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return Parsed::kHelp;
    if (a == "-I") {
      o->iterStats = true;
      continue;
    }
    if (a == "--compare") {
      if (i + 2 >= argc) return *err = "--compare needs two result files", Parsed::kError;
      o->compare = {argv[i + 1], argv[i + 2]};
      i += 2;
      continue;
    }
    if (i + 1 >= argc) return *err = "option " + a + " needs a value", Parsed::kError;
    const char* v = argv[++i];
    bool ok = true;
    if (a == "-b" || a == "--minbytes") {
      ok = colltools::parseSize(v, &o->minBytes);
    } else if (a == "-e" || a == "--maxbytes") {
      ok = colltools::parseSize(v, &o->maxBytes);
    } else if (a == "-i" || a == "--stepbytes") {
      ok = colltools::parseSize(v, &o->step) && o->step > 0;
      o->factor = 0;
    } else if (a == "-f" || a == "--stepfactor") {
      ok = parseDouble(v, 1, &o->factor) && o->factor > 1;
    } else if (a == "-n" || a == "--iters") {
      ok = parseInt(v, 1, 1 << 30, &o->iters);
    } else if (a == "-w" || a == "--warmup_iters") {
      ok = parseInt(v, 0, 1 << 30, &o->warmup);
    } else if (a == "-m" || a == "--agg_iters") {
      ok = parseInt(v, 1, 1 << 20, &o->aggIters);
    } else if (a == "-N" || a == "--run_cycles") {
      ok = parseInt(v, 0, 1 << 30, &o->cycles);
    } else if (a == "-c" || a == "--check") {
      ok = parseInt(v, 0, 1 << 30, &o->check);
    } else if (a == "-a" || a == "--average") {
      ok = parseInt(v, 0, 3, &o->average);
    } else if (a == "-r" || a == "--root") {
      if (std::strcmp(v, "all") == 0)
        o->root = -1;
      else
        ok = parseInt(v, 0, 1 << 30, &o->root);
    } else if (a == "-z" || a == "--blocking") {
      ok = parseInt(v, 0, 1, &o->blocking);
    } else if (a == "--host-stream") {
      ok = parseInt(v, 0, 1, &o->hostStream);
    } else if (a == "-G" || a == "--cudagraph") {
      ok = parseInt(v, 0, 1 << 20, &o->graphs);
    } else if (a == "-T" || a == "--timeout") {
      ok = parseDouble(v, 0, &o->timeoutS) && o->timeoutS > 0;
    } else if (a == "-C" || a == "--collective") {
      ok = isCollective(v);
      if (ok) o->collective = v;
    } else if (a == "-d" || a == "--datatype") {
      o->types.clear();
      if (std::strcmp(v, "all") == 0) {
        for (int t = 0; t < collNumTypes; ++t) o->types.push_back(static_cast<collDataType_t>(t));
      } else {
        collDataType_t t = collFloat32;  // pushed even when unknown: the error ends the parse
        ok = colltools::parseType(v, &t);
        o->types.push_back(t);
      }
    } else if (a == "-o" || a == "--op") {
      o->ops.clear();
      if (std::strcmp(v, "all") == 0) {
        for (int op = 0; op < collNumOps; ++op) o->ops.push_back(static_cast<collRedOp_t>(op));
      } else {
        collRedOp_t op = collSum;
        ok = colltools::parseOp(v, &op);
        o->ops.push_back(op);
      }
    } else if (a == "-J" || a == "--json") {
      o->jsonFile = v;
    } else if (a == "-F" || a == "--output_file" || a == "--csv") {
      o->csvFile = v;
    } else if (a == "--mem") {
      ok = std::strcmp(v, "host") == 0 || std::strcmp(v, "device") == 0;
      o->mem = v;
    } else if (a == "--algo") {
      o->algo = v;
    } else if (a == "--proto") {
      o->proto = v;
    } else if (a == "-np" || a == "--np") {
      ok = parseInt(v, 1, 4096, &o->np);
    } else if (a == "--max-seconds") {
      ok = parseDouble(v, 0, &o->maxSeconds) && o->maxSeconds > 0;
    } else {
      return *err = "unknown option " + a, Parsed::kError;
    }
    if (!ok) return *err = "bad value for " + a + ": " + v, Parsed::kError;
  }
  if (o->minBytes > o->maxBytes) return *err = "-b is larger than -e", Parsed::kError;
  if (o->graphs > 0 && o->mem != "device")
    return *err = "-G replays CUDA graphs: it needs --mem device", Parsed::kError;
  return Parsed::kRun;
}

}  // namespace collperf
