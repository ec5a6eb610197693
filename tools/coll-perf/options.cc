#include "options.h"

#include <getopt.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "size_arg.h"
#include "tools_common.h"

namespace collperf {
namespace {

// Long options without a short letter get codes above any character.
enum : int {
  kColl = 256,
  kMem,
  kAlgo,
  kProto,
  kHostStream,
  kNp,
  kMaxSeconds,
  kProgress,
  kCompare,
};

// nccl-tests' table (src/common.cu), in its order, then coll's extensions.
const struct option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"help", no_argument, nullptr, 'h'},
    // coll's extensions.
    {"coll", required_argument, nullptr, kColl},
    {"collective", required_argument, nullptr, kColl},
    {"json", required_argument, nullptr, 'J'},
    {"csv", required_argument, nullptr, 'F'},
    {"mem", required_argument, nullptr, kMem},
    {"algo", required_argument, nullptr, kAlgo},
    {"proto", required_argument, nullptr, kProto},
    {"host-stream", required_argument, nullptr, kHostStream},
    {"np", required_argument, nullptr, kNp},
    {"max-seconds", required_argument, nullptr, kMaxSeconds},
    {"progress", optional_argument, nullptr, kProgress},
    {"compare", required_argument, nullptr, kCompare},
    {nullptr, 0, nullptr, 0},
};
// nccl-tests' short options, plus F (CSV file).
const char kShortOptions[] = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:F:";

bool parseInt(const char* v, int lo, int hi, int* out) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 0);  // base 0 as nccl-tests: 0x10 works too
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

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// A collective by its nccl-tests name, or by its nccl-tests binary's (all_reduce_perf).
bool setCollective(std::string name, Options* o) {
  const std::string suffix = "_perf";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  for (const auto& c : collectiveNames())
    if (c == name) return o->collective = name, true;
  return false;
}

std::vector<std::string> typeNames() {
  std::vector<std::string> out;
  for (int t = 0; t < collNumTypes; ++t) out.push_back(colltools::typeName(static_cast<collDataType_t>(t)));
  out.push_back("all");
  return out;
}

std::vector<std::string> opNames() {
  std::vector<std::string> out;
  for (int op = 0; op < collNumOps; ++op) out.push_back(colltools::opName(static_cast<collRedOp_t>(op)));
  out.push_back("all");
  return out;
}

// getopt cannot take "-np 4" (it reads -n with the value "p") nor "--compare A B" (two values), and
// coll-perf's -I used to be a bare flag where nccl-tests' takes 0/1: rewrite those before getopt sees
// them, so that old command lines keep working.
std::vector<std::string> normalize(int argc, const char* const* argv, Options* o, std::string* err) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a == "-np") {
      out.push_back("--np");
    } else if (i > 0 && a == "--compare") {
      if (i + 2 >= argc) {
        *err = "--compare needs two result files: --compare A.json B.json";
        return {};
      }
      o->compare = {argv[i + 1], argv[i + 2]};
      i += 2;
    } else if (i > 0 && (a == "-I" || a == "--per_iter_timing") &&
               (i + 1 >= argc || std::strspn(argv[i + 1], "0123456789") != std::strlen(argv[i + 1]) ||
                argv[i + 1][0] == '\0')) {
      out.push_back(a);
      out.push_back("1");
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// What a GPU-only nccl-tests option with a value other than its default is refused with.
std::string gpuOnly(const char* flag, const char* what) {
  return std::string(flag) + " (" + what +
         ") is an NCCL option coll-perf does not implement; only its default is "
         "accepted";
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
  return "usage: coll-perf [collective] [options]        (or --coll collective)\n"
         "  collectives: all_reduce (default), all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv\n"
         "               (nccl-tests' binary names, all_reduce_perf..., work too)\n"
         "  alone: -t N runs N ranks as threads of this process (default 1 rank); -np N starts N processes;\n"
         "  or under a launcher (coll-run -n 4 coll-perf ..., mpirun, torchrun, srun): one rank per process\n"
         "nccl-tests options (sizes take K, M, G suffixes; values may be attached: -b8, --minbytes=8):\n"
         "  -t,--nthreads [1]  -g,--ngpus [1]  ranks as threads of this process: t x g of them (not under a launcher)\n"
         "  -b,--minbytes [32M]  -e,--maxbytes [32M]  -i,--stepbytes [1M]  -f,--stepfactor (replaces -i)\n"
         "  -n,--iters [20]  -w,--warmup_iters [5]  -m,--agg_iters [1]  -N,--run_cycles [1, 0 = forever]\n"
         "  -p,--parallel_init 0|1  -c,--check [1, 0 = no check]\n"
         "  -o,--op sum|prod|max|min|avg|all [sum]\n"
         "  -d,--datatype int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|all [float]\n"
         "  -r,--root root|all [0]  -a,--average 0|1|2|3 time across ranks: rank 0, mean, min, max [1]\n"
         "  -z,--blocking 0|1|2|3  1: wait and barrier after each iteration, 2: wait only, 3: wait and barrier,\n"
         "                  barrier not timed [0]   -y,--stream_null 0|1 (no effect)\n"
         "  -T,--timeout seconds (COLL_TIMEOUT_MS; 0 = none)  -G,--cudagraph launches: capture the timed loop once, "
         "launch it\n"
         "                  this many times (--mem device)\n"
         "  -C,--report_cputime 0|1  -S,--report_timestamps 0|1  -u,--unalign elements [0]\n"
         "  -I,--per_iter_timing 0|1 (bare -I = 1)  -K,--per_iter_skip count  -J,--output_file file.json\n"
         "  -R,--local_register 0|1|2  1: buffers registered (collCommRegister); 2: buffers from collMemAlloc in\n"
         "                  symmetric windows (collCommWindowRegister), where collectives may take the one-copy\n"
         "                  path (the -J rows' algorithm then says \"window\") [0]\n"
         "  -x,--cta_policy  -D,--device_implementation  -V,--device_cta_count  -M,--memory 0\n"
         "                  (NCCL's CTA and memory options: only their defaults are accepted)\n"
         "  -h,--help\n"
         "coll extensions:\n"
         "  --coll name     the collective (instead of the first argument)\n"
         "  -F,--csv file   results as CSV\n"
         "  --mem host|device [host]  device: buffers in CUDA memory on GPU (local rank mod GPUs), calls on a CUDA\n"
         "                  stream of coll-perf's own, filled and checked through host copies\n"
         "  --algo spec (COLL_ALGO)   --proto spec (COLL_PROTO)\n"
         "  --host-stream 0|1  queue the calls on a host stream (collHostStreamCreate) and synchronize\n"
         "                  once per timed loop, as nccl-tests does on a CUDA stream\n"
         "  -np,--np N      start N local ranks (through coll-run) when not under a launcher\n"
         "  --max-seconds s fewer iterations for sizes where -n would take longer than s seconds\n"
         "  --progress[=s]  a line on stderr after every size slower than s seconds [2; bare: every size]\n"
         "  --compare A.json B.json    print B/A per size (busbw and time) and exit\n";
}

Parsed parseOptions(int argc, const char* const* argv, Options* o, std::string* err) {
  std::vector<std::string> args = normalize(argc, argv, o, err);
  if (args.empty()) return Parsed::kError;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  // optind = 0 makes glibc start over (parseOptions runs many times in the tests); opterr = 0: the
  // errors are ours, with the option's name and what it accepts.
  optind = 0;
  opterr = 0;
  std::vector<std::string> positional;
  for (;;) {
    int longIndex = -1;
    int c = getopt_long(static_cast<int>(cargs.size() - 1), cargs.data(), kShortOptions, kLongOptions, &longIndex);
    if (c == -1) break;
    std::string name = longIndex >= 0 ? std::string("--") + kLongOptions[longIndex].name : std::string("-") + char(c);
    const char* v = optarg;
    bool ok = true;
    std::string why;  // the error when !ok, if more than "bad value"
    switch (c) {
      case 'h':
        return Parsed::kHelp;
      case '?':
      case ':': {
        // optopt: the option's letter (or long code) when its value is missing, or an unknown short
        // letter; 0 for an unknown long option.
        std::string bad = cargs[optind - 1];
        bad = bad.substr(0, bad.find('='));
        bool missing = optopt >= 256 || (optopt > 0 && std::strchr(kShortOptions, optopt) != nullptr);
        if (optopt > 0 && optopt < 256 && !missing) bad = std::string("-") + char(optopt);
        *err = missing ? "option " + bad + " needs a value" : "unknown option " + bad;
        return Parsed::kError;
      }
      case 't':
      case 'g': {
        // Ranks as threads of this one process, t x g of them (nccl-tests: threads x GPUs per
        // thread; coll has one rank per thread, so both multiply the rank count).
        int count = 0;
        ok = parseInt(v, 1, 4096, &count);
        (c == 't' ? o->nthreads : o->ngpus) = count;
        why = name + " " + v + ": a count of ranks from 1 to 4096";
        break;
      }
      case 'b':
        ok = colltools::parseSize(v, &o->minBytes);
        break;
      case 'e':
        ok = colltools::parseSize(v, &o->maxBytes);
        break;
      case 'i':
        ok = colltools::parseSize(v, &o->step) && o->step > 0;
        break;
      case 'f':
        // As in nccl-tests, a factor above 1 wins over -i wherever it stands; 0 or 1 means "use -i".
        ok = parseDouble(v, 0, &o->factor);
        if (o->factor <= 1) o->factor = 0;
        break;
      case 'n':
        ok = parseInt(v, 1, 1 << 30, &o->iters);
        break;
      case 'w':
        ok = parseInt(v, 0, 1 << 30, &o->warmup);
        break;
      case 'm':
        ok = parseInt(v, 1, 1 << 20, &o->aggIters);
        break;
      case 'N':
        ok = parseInt(v, 0, 1 << 30, &o->cycles);
        break;
      case 'p':
        ok = parseInt(v, 0, 1, &o->parallelInit);
        break;
      case 'c':
        ok = parseInt(v, 0, 1 << 30, &o->check);
        break;
      case 'a':
        ok = parseInt(v, 0, 3, &o->average);
        break;
      case 'r':
        if (std::strcmp(v, "all") == 0)
          o->root = -1;
        else
          ok = parseInt(v, 0, 1 << 30, &o->root);
        break;
      case 'z':
        ok = parseInt(v, 0, 3, &o->blocking);
        break;
      case 'y':
        ok = parseInt(v, 0, 1, &o->streamNull);
        break;
      case 'T':
        ok = parseDouble(v, 0, &o->timeoutS);
        break;
      case 'G':
        ok = parseInt(v, 0, 1 << 20, &o->graphs);
        break;
      case 'C':
        ok = parseInt(v, 0, 1, &o->reportCputime);
        break;
      case 'S':
        ok = parseInt(v, 0, 1, &o->reportTimestamps);
        break;
      case 'u':
        ok = parseInt(v, 0, 1 << 20, &o->unalign);
        break;
      case 'I':
        ok = parseInt(v, 0, 1, &o->iterStats);
        break;
      case 'K':
        ok = parseInt(v, 0, 1 << 30, &o->iterSkip);
        break;
      case 'J':
        o->jsonFile = v;
        break;
      case 'F':
        o->csvFile = v;
        break;
      case 'd':
        o->types.clear();
        if (std::strcmp(v, "all") == 0) {
          for (int t = 0; t < collNumTypes; ++t) o->types.push_back(static_cast<collDataType_t>(t));
        } else {
          collDataType_t t{};
          ok = colltools::parseType(v, &t);
          if (ok) o->types.push_back(t);
          why = std::string("unknown type ") + v + " for " + name + "; valid: " + joined(typeNames());
        }
        break;
      case 'o':
        o->ops.clear();
        if (std::strcmp(v, "all") == 0) {
          for (int op = 0; op < collNumOps; ++op) o->ops.push_back(static_cast<collRedOp_t>(op));
        } else {
          // No default: an unknown name must never leave an op to be read (it was read uninitialised).
          collRedOp_t op{};
          ok = colltools::parseOp(v, &op);
          if (ok) o->ops.push_back(op);
          why = std::string("unknown op ") + v + " for " + name + "; valid: " + joined(opNames()) +
                (std::strcmp(v, "mulsum") == 0 ? " (coll has no pre-multiplied sum)" : "");
        }
        break;
      case 'R':
        ok = parseInt(v, 0, 2, &o->registerMode);
        why = std::string("-R takes 0 (plain buffers), 1 (collCommRegister) or 2 (symmetric windows), not ") + v;
        break;
      case 'x':
        ok = false, why = gpuOnly("-x", "NCCL's CTA policy");
        break;
      case 'D':
        ok = false, why = gpuOnly("-D", "device implementation");
        break;
      case 'V':
        ok = false, why = gpuOnly("-V", "device CTA count");
        break;
      case 'M': {
        int mem = 0;
        ok = parseInt(v, 0, 1, &mem) && mem == 0;
        if (!ok) why = gpuOnly("-M", "GPU memory report") + "; only -M 0";
        break;
      }
      case kColl:
        ok = setCollective(v, o);
        why = std::string("unknown collective ") + v + "; valid: " + joined(collectiveNames());
        break;
      case kMem:
        ok = std::strcmp(v, "host") == 0 || std::strcmp(v, "device") == 0;
        o->mem = v;
        break;
      case kAlgo:
        o->algo = v;
        break;
      case kProto:
        o->proto = v;
        break;
      case kHostStream:
        ok = parseInt(v, 0, 1, &o->hostStream);
        break;
      case kNp:
        ok = parseInt(v, 1, 4096, &o->np);
        break;
      case kMaxSeconds:
        ok = parseDouble(v, 0, &o->maxSeconds) && o->maxSeconds > 0;
        break;
      case kProgress:
        if (v == nullptr)
          o->progressS = 0;
        else if (std::strcmp(v, "off") == 0)
          o->progressS = -1;
        else
          ok = parseDouble(v, 0, &o->progressS);
        break;
      default:
        *err = "unknown option " + name;
        return Parsed::kError;
    }
    if (!ok) return *err = why.empty() ? "bad value for " + name + ": " + (v ? v : "") : why, Parsed::kError;
  }
  for (int i = optind; i < static_cast<int>(cargs.size()) - 1; ++i) positional.push_back(cargs[i]);
  if (positional.size() > 1) return *err = "more than one collective: " + joined(positional), Parsed::kError;
  if (positional.size() == 1 && !setCollective(positional[0], o))
    return *err = "unknown collective " + positional[0] + "; valid: " + joined(collectiveNames()), Parsed::kError;
  if (o->minBytes > o->maxBytes)
    return *err = "-b (minbytes) " + std::to_string(o->minBytes) + " is larger than -e (maxbytes) " +
                  std::to_string(o->maxBytes),
           Parsed::kError;
  if (o->graphs > 0 && o->mem != "device")
    return *err = "-G replays CUDA graphs: it needs --mem device", Parsed::kError;
  if (o->graphs > 0 && (o->blocking != 0 || o->iterStats))
    return *err = "-G replays the whole timed loop as one graph: it cannot wait per iteration (-z, -I)", Parsed::kError;
  if (o->hostStream && o->mem == "device")
    return *err = "--host-stream queues host-memory calls; --mem device runs on a CUDA stream of its own",
           Parsed::kError;
  if (static_cast<long>(o->nthreads) * o->ngpus > 4096) return *err = "-t x -g is more than 4096 ranks", Parsed::kError;
  if (o->np > 0 && o->nthreads * o->ngpus > 1)
    return *err = "-np N starts N processes of one rank each; -t/-g run ranks as threads of one: use one or the other",
           Parsed::kError;
  // nccl-tests disables -K with a warning rather than failing: so does coll-perf.
  if (o->iterSkip < 0 || o->iterSkip >= o->iters) {
    o->warnings.push_back("per-iteration skip (-K) must be between 0 and " + std::to_string(o->iters - 1) +
                          ". Disabling.");
    o->iterSkip = 0;
  }
  if (o->iterSkip > 0 && !o->iterStats) {
    o->warnings.push_back("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.");
    o->iterSkip = 0;
  }
  return Parsed::kRun;
}

}  // namespace collperf
