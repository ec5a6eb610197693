// coll-sim: the nccl-tests table a machine would give, predicted by running the runtime's own
// schedules (algorithms/catalog.h) through a network model (network.h) of a described machine
// (topology.h), one column per algorithm, with the crossover sizes between them.
//
//   coll-sim all_reduce -t dgx-h100 -b 8 -e 8G -f 4
//   coll-sim all_reduce -t dgx-h100 --nodes 4 --algo ring,hier
//   coll-sim -t my-cluster.topo          (a file in the format --print-topo writes)
#include <fmt/format.h>
#include <getopt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/option_error.h"
#include "algorithms/catalog.h"
#include "algorithms/tuner.h"
#include "network.h"
#include "options.h"
#include "tools_common.h"
#include "topology.h"

namespace {

using coll::algorithms::Algorithm;
using coll::algorithms::Collective;

const char* kUsage =
    "usage: coll-sim [collective] [options]\n"
    "  collectives: all_reduce (default), all_gather, reduce_scatter, broadcast, reduce, alltoall\n"
    "  -t, --topo NAME|FILE  a preset (%s) or a description file [dgx-h100]\n"
    "  --nodes N             nodes of the topology\n"
    "  --set key=value       change one setting of the topology (repeatable; --print-topo lists them)\n"
    "  --print-topo          print the topology as a description file and exit\n"
    "  -b minBytes [8]  -e maxBytes [1G]  -f stepFactor [2]   (K, M, G suffixes; nccl-tests' sizes)\n"
    "  -d type [float]       element type (its size sets counts and chunking)\n"
    "  --algo spec           algorithms to simulate, in COLL_ALGO's syntax (ring,tree or ^rd) [all]\n"
    "  -h, --help            this text\n";

struct Options {
  std::string collective = "all_reduce";
  std::string topo = "dgx-h100";
  int nodes = 0;
  std::vector<std::string> settings;
  bool printTopo = false;
  size_t minBytes = 8, maxBytes = size_t(1) << 30;
  double factor = 2;
  collDataType_t type = collFloat32;
  std::string algos;
};

enum : int { kNodes = 256, kSet, kPrintTopo, kAlgo };

const struct option kLongOptions[] = {
    {"topo", required_argument, nullptr, 't'},
    {"nodes", required_argument, nullptr, kNodes},
    {"set", required_argument, nullptr, kSet},
    {"print-topo", no_argument, nullptr, kPrintTopo},
    {"algo", required_argument, nullptr, kAlgo},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};
// '-': the collective, wherever it stands, comes back as code 1 (in order, with POSIXLY_CORRECT set
// too); ':': a missing value is ':' rather than '?'.
const char kShortOptions[] = "-:ht:b:e:f:d:";

// False with *err set on a usage error, or with *err empty for --help.
bool parseArgs(int argc, char** argv, Options* o, std::string* err) {
  opterr = 0;  // our errors name the option
  bool haveCollective = false;
  for (;;) {
    int c = getopt_long(argc, argv, kShortOptions, kLongOptions, nullptr);
    if (c == -1) break;
    const char* v = optarg;
    switch (c) {
      case 1:
        if (haveCollective) return *err = "more than one collective: " + o->collective + ", " + v, false;
        o->collective = v, haveCollective = true;
        break;
      case 'h':
        return *err = "", false;
      case 't':
        o->topo = v;
        break;
      case kNodes: {
        char* end = nullptr;
        long n = std::strtol(v, &end, 10);
        if (end == v || *end || n < 1 || n > 65536) return *err = "--nodes: not a node count: " + std::string(v), false;
        o->nodes = static_cast<int>(n);
        break;
      }
      case kSet:
        o->settings.push_back(v);
        break;
      case kPrintTopo:
        o->printTopo = true;
        break;
      case 'b':
      case 'e':
        if (!colltools::parseSize(v, c == 'b' ? &o->minBytes : &o->maxBytes))
          return *err = std::string(c == 'b' ? "-b" : "-e") + ": not a size: " + v, false;
        break;
      case 'f': {
        char* end = nullptr;
        o->factor = std::strtod(v, &end);
        if (end == v || *end || !(o->factor > 1)) return *err = "-f: the step factor must be above 1", false;
        break;
      }
      case 'd':
        if (!colltools::parseType(v, &o->type)) return *err = std::string("-d: unknown type ") + v, false;
        break;
      case kAlgo:
        o->algos = v;
        break;
      default:  // '?' or ':'
        return *err = colltools::optionError(c, argv, kLongOptions), false;
    }
  }
  // After "--", the collective is what is left.
  for (; optind < argc; ++optind) {
    if (haveCollective) return *err = "more than one collective: " + o->collective + ", " + argv[optind], false;
    o->collective = argv[optind], haveCollective = true;
  }
  return true;
}

// coll-perf's (nccl-tests') names, in the order of algorithms::Collective.
const char* const kPerfNames[coll::algorithms::kNumCollectives] = {"all_reduce", "reduce_scatter", "all_gather",
                                                                   "broadcast",  "reduce",         "alltoall"};

const char* perfName(Collective c) { return kPerfNames[static_cast<int>(c)]; }

bool collectiveOf(const std::string& name, Collective* c) {
  for (int i = 0; i < coll::algorithms::kNumCollectives; ++i)
    if (name == kPerfNames[i]) return *c = static_cast<Collective>(i), true;
  return coll::algorithms::collectiveFromName(name, c);
}

struct Column {
  Algorithm algo;
  std::vector<double> timeUs;  // per size; negative: the simulation failed
};

// Where the faster of two algorithms changes between consecutive sizes.
void printCrossovers(const std::vector<Column>& cols, const std::vector<size_t>& sizes) {
  bool any = false;
  for (size_t a = 0; a < cols.size(); ++a)
    for (size_t b = a + 1; b < cols.size(); ++b)
      for (size_t i = 1; i < sizes.size(); ++i) {
        // Relative differences; within 1% counts as a tie, not as a side.
        auto diff = [&](size_t k) {
          double x = cols[a].timeUs[k], y = cols[b].timeUs[k];
          if (x < 0 || y < 0) return 0.0;  // a failed simulation
          double d = (x - y) / std::min(x, y);
          return std::abs(d) < 0.01 ? 0.0 : d;
        };
        double p0 = diff(i - 1), p1 = diff(i);
        if ((p0 < 0) == (p1 < 0) || p0 == 0 || p1 == 0) continue;
        const Column& before = p0 < 0 ? cols[a] : cols[b];
        const Column& after = p0 < 0 ? cols[b] : cols[a];
        std::printf("#   %s overtakes %s between %zu and %zu bytes\n", coll::algorithms::algorithmName(after.algo),
                    coll::algorithms::algorithmName(before.algo), sizes[i - 1], sizes[i]);
        any = true;
      }
  if (!any) std::printf("#   none in this range\n");
}

int run(const Options& o, const coll::sim::Topology& topo, Collective c) {
  int n = topo.ranks();
  size_t elem = colltools::typeBytes(o.type);
  coll::algorithms::AlgoFilter filter;
  std::string err;
  // A plain list applies to the simulated collective only (COLL_ALGO's would have to leave every
  // collective an algorithm).
  std::string spec = o.algos.find(':') == std::string::npos && !o.algos.empty()
                         ? std::string(coll::algorithms::collectiveName(c)) + ":" + o.algos
                         : o.algos;
  if (!coll::algorithms::parseAlgoSpec(spec, &filter, &err))
    return std::fprintf(stderr, "coll-sim: --algo: %s\n", err.c_str()), 2;
  std::vector<Column> cols;
  for (Algorithm a : coll::algorithms::algorithmsFor(c)) {
    if (a == Algorithm::kHier && topo.nodes < 2) continue;  // one node: it is the ring
    if (filter.permits(c, a)) cols.push_back({a, {}});
  }
  if (cols.empty()) return std::fprintf(stderr, "coll-sim: no algorithm selected for %s\n", perfName(c)), 2;
  std::vector<size_t> sizes;
  for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) * 1.0001; b *= o.factor)
    sizes.push_back(static_cast<size_t>(b));

  std::printf(
      "# coll-sim: %s on %s: %d node(s) x %d ranks; intra %.0f GB/s x %.2f, %.2f us; %d NIC(s)/node at %.0f "
      "GB/s x %.2f, %.2f us; launch %.2f us; FIFO %zu B in %d slots\n",
      perfName(c), topo.name.c_str(), topo.nodes, topo.ranksPerNode, topo.intraGBs, topo.intraEfficiency,
      topo.intraLatencyUs, topo.nicsPerNode, topo.nicGBs, topo.netEfficiency, topo.netLatencyUs, topo.launchUs,
      topo.fifoBytes, topo.slots);
  std::printf("# Predicted, not measured: the runtime's schedules through the model of tools/coll-sim/network.h.\n");
  std::string head = fmt::format("#{:>12} {:>12} {:>6}", "size", "count", "type");
  for (const Column& col : cols)
    head += fmt::format("  {:>9}{:>8}", std::string(coll::algorithms::algorithmName(col.algo)) + " us", "busbw");
  std::printf("%s  best\n", head.c_str());

  bool split = c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll;
  double factor = collperf::busFactor(perfName(c), n);
  int failures = 0;
  for (size_t size : sizes) {
    size_t count = size / elem;
    if (split) count = count / static_cast<size_t>(n) * static_cast<size_t>(n);
    size_t param = split ? count / static_cast<size_t>(n) : count;
    double bytes = static_cast<double>(count * elem);
    std::string line = fmt::format(" {:>12} {:>12} {:>6}", count * elem, count, colltools::typeName(o.type));
    double best = -1;
    const char* bestName = "-";
    for (Column& col : cols) {
      coll::algorithms::ScheduleArgs args;
      args.collective = c;
      args.nranks = n;
      args.count = param;
      args.chunkElems = std::max<size_t>(1, topo.fifoBytes / 2 / elem);
      args.ranksPerHost = topo.nodes > 1 ? topo.ranksPerNode : 0;
      coll::sim::SimResult r = coll::sim::simulate(topo, elem, [&](int rank) {
        coll::algorithms::ScheduleArgs x = args;
        x.rank = rank;
        return coll::algorithms::buildSchedule(col.algo, x);
      });
      if (!r.ok) {
        std::fprintf(stderr, "coll-sim: %s at %zu bytes: %s\n", coll::algorithms::algorithmName(col.algo), size,
                     r.error.c_str());
        col.timeUs.push_back(-1);
        line += fmt::format("  {:>9}{:>8}", "failed", "-");
        ++failures;
        continue;
      }
      col.timeUs.push_back(r.timeUs);
      double busbw = r.timeUs > 0 ? bytes / r.timeUs / 1e3 * factor : 0;
      line += fmt::format("  {:>9}{:>8.2f}", colltools::formatTime(r.timeUs), busbw);
      if (best < 0 || r.timeUs < best) best = r.timeUs, bestName = coll::algorithms::algorithmName(col.algo);
    }
    std::printf("%s  %s\n", line.c_str(), bestName);
    std::fflush(stdout);
  }
  std::printf("# Crossovers (the faster algorithm changes between two sizes):\n");
  printCrossovers(cols, sizes);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err;
  if (!parseArgs(argc, argv, &o, &err)) {
    if (!err.empty()) std::fprintf(stderr, "coll-sim: %s\n", err.c_str());
    std::fprintf(err.empty() ? stdout : stderr, kUsage, coll::sim::presetNames());
    return err.empty() ? 0 : 2;
  }
  coll::sim::Topology topo;
  if (!coll::sim::presetTopology(o.topo, &topo) && !coll::sim::loadTopology(o.topo, &topo, &err)) {
    std::fprintf(stderr, "coll-sim: %s is neither a preset (%s) nor a readable description: %s\n", o.topo.c_str(),
                 coll::sim::presetNames(), err.c_str());
    return 2;
  }
  if (o.nodes) topo.nodes = o.nodes;
  for (const std::string& s : o.settings)
    if (!coll::sim::applySetting(s, &topo, &err)) return std::fprintf(stderr, "coll-sim: --set %s\n", err.c_str()), 2;
  if (topo.ranks() > 4096)
    return std::fprintf(stderr, "coll-sim: %d ranks: at most 4096 are simulated\n", topo.ranks()), 2;
  if (o.printTopo) return std::fputs(coll::sim::describeTopology(topo).c_str(), stdout), 0;
  Collective c;
  if (!collectiveOf(o.collective, &c)) {
    std::fprintf(stderr, "coll-sim: unknown collective '%s'\n", o.collective.c_str());
    return 2;
  }
  return run(o, topo, c);
}
