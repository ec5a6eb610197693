#include "coll-info/tuning.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "algorithms/catalog.h"
#include "algorithms/tuner.h"
#include "base/host_id.h"
#include "base/params.h"
#include "common/option_error.h"
#include "core/tuning.h"

namespace collinfo {
namespace {

using namespace coll::algorithms;

const char kTuningUsage[] =
    "usage: coll-info --tuning [-n ranks-per-host] [--hosts H] [--cores C] [--shared] [-c collective]\n"
    "  -n N         ranks per host (default: COLL_LOCAL_SIZE under a launcher, else 8)\n"
    "  --hosts H    hosts (default 1)\n"
    "  --cores C    cores of each host (default: this process's)\n"
    "  --shared     all hosts share one machine of C cores (network namespaces)\n"
    "  -c name      only this collective\n"
    "  -h, --help   this text\n";

int usage(const std::string& why) {
  std::fprintf(stderr, "coll-info --tuning: %s\n\n%s", why.c_str(), kTuningUsage);
  return 2;
}

enum : int { kHosts = 256, kCores, kShared };

const struct option kLongOptions[] = {
    {"hosts", required_argument, nullptr, kHosts},
    {"cores", required_argument, nullptr, kCores},
    {"shared", no_argument, nullptr, kShared},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

bool parsePositive(const char* text, int* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end || v < 1 || v > 1 << 20) return false;
  *out = static_cast<int>(v);
  return true;
}

void printTable(Collective c, int perHost, int hosts, const CostModel& m, const AlgoFilter& f, const ProtoSet& proto) {
  int n = perHost * hosts;
  std::vector<Algorithm> algos = algorithmsFor(c);
  std::printf("# %s on %d rank(s): %d per host, %d host(s)%s; %.2f ranks per core\n", collectiveName(c), n, perHost,
              hosts, m.hostsPerMachine > 1 ? " sharing one machine" : "", m.oversubscription);
  std::printf("# %12s  %-9s %-13s %9s", "size (B)", "choice", "protocol", "chunk");
  for (Algorithm a : algos) std::printf(" %12s", (std::string(algorithmName(a)) + " (us)").c_str());
  // The one-copy path over symmetric windows, for calls whose buffers lie in them (one host only).
  bool windows = f.permitsWindow(c) && hosts == 1;
  std::printf(" %12s\n", "window (us)");
  std::string ranges, current, onWindows;
  size_t from = 0, last = 0, windowFrom = 0;
  bool wasWindow = false;
  for (size_t bytes = 8; bytes <= (size_t(256) << 20); bytes *= 2) {
    Plan plan;
    choosePlan(c, n, bytes, m, f, proto, &plan);
    Algorithm choice = plan.algorithm;
    bool chunked = choice == Algorithm::kRing || choice == Algorithm::kTree || choice == Algorithm::kHier;
    std::printf("  %12zu  %-9s %-13s %9s", bytes, algorithmName(choice), protocolName(plan),
                chunked ? (std::to_string(plan.chunkBytes >> 10) + "K").c_str() : "-");
    for (Algorithm a : algos) {
      if (f.permits(c, a))
        std::printf(" %12.2f", predictUs(a, c, n, bytes, m));
      else
        std::printf(" %12s", "-");
    }
    double windowUs = predictWindowUs(c, n, bytes, m);
    if (windows)
      std::printf(" %12.2f\n", windowUs);
    else
      std::printf(" %12s\n", "-");
    bool isWindow = windows && (f.forcesWindow(c) || windowUs < predictUs(choice, c, n, bytes, m));
    if (isWindow != wasWindow || bytes == 8) {
      if (bytes != 8)
        onWindows += std::to_string(windowFrom) + ".." + std::to_string(bytes / 2) +
                     (wasWindow ? " B window; " : " B as above; ");
      windowFrom = bytes;
      wasWindow = isWindow;
    }
    if (current != algorithmName(choice)) {
      if (!current.empty()) ranges += std::to_string(from) + ".." + std::to_string(last) + " B " + current + "; ";
      current = algorithmName(choice);
      from = bytes;
    }
    last = bytes;
  }
  ranges += std::to_string(from) + ".." + std::to_string(last) + " B " + current;
  onWindows += std::to_string(windowFrom) + ".." + std::to_string(last) + (wasWindow ? " B window" : " B as above");
  std::printf("# decision: %s\n", ranges.c_str());
  std::printf("# buffers in symmetric windows: %s\n\n",
              windows ? onWindows.c_str() : "the windows path is off (COLL_ALGO) or the ranks span hosts");
}

}  // namespace

int printTuning(int argc, char** argv) {
  int perHost = 0, hosts = 1, cores = coll::usableCores();
  bool shared = false;
  std::string only;
  // argv[1] is --tuning: parse what follows it, as if it were the program's name.
  std::vector<char*> args(argv + 1, argv + argc);
  args.push_back(nullptr);
  const int n = argc - 1;
  optind = 0;  // start over (glibc), and print no errors of getopt's own: ours name the option
  opterr = 0;
  for (;;) {
    int c = getopt_long(n, args.data(), ":hn:c:", kLongOptions, nullptr);
    if (c == -1) break;
    const char* v = optarg;
    switch (c) {
      case 'h':
        std::fputs(kTuningUsage, stdout);
        return 0;
      case 'n':
        if (!parsePositive(v, &perHost)) return usage(std::string("-n ") + v + ": not a rank count");
        break;
      case kHosts:
        if (!parsePositive(v, &hosts)) return usage(std::string("--hosts ") + v + ": not a host count");
        break;
      case kCores:
        if (!parsePositive(v, &cores)) return usage(std::string("--cores ") + v + ": not a core count");
        break;
      case kShared:
        shared = true;
        break;
      case 'c':
        only = v;
        break;
      default:  // '?' or ':'
        return usage(colltools::optionError(c, args.data(), kLongOptions));
    }
  }
  if (optind < n) return usage(std::string("unexpected argument ") + args[optind]);
  if (perHost == 0) {
    int64_t local = coll::params::kLocalSize.get();
    perHost = local > 0 ? static_cast<int>(local) : 8;
  }
  AlgoFilter filter;
  std::string error, notes, spec = coll::params::kAlgo.get();
  if (!parseAlgoSpec(spec, &filter, &error, &notes)) {
    std::fprintf(stderr, "coll-info --tuning: COLL_ALGO=%s: %s\n", spec.c_str(), error.c_str());
    return 1;
  }
  if (!notes.empty()) std::printf("# COLL_ALGO=%s: %s\n", spec.c_str(), notes.c_str());
  ProtoSet proto;
  spec = coll::params::kProto.get();
  if (!parseProtoSpec(spec, &proto, &error, &notes)) {
    std::fprintf(stderr, "coll-info --tuning: COLL_PROTO=%s: %s\n", spec.c_str(), error.c_str());
    return 1;
  }
  if (!notes.empty()) std::printf("# COLL_PROTO=%s: %s\n", spec.c_str(), notes.c_str());
  spec = coll::params::kAlgo.get();
  // Each host a machine of `cores` cores, or (--shared) all hosts on one such machine.
  coll::CoreSharing sharing;
  sharing.hostsPerMachine = shared ? hosts : 1;
  sharing.ranksPerCore = static_cast<double>(perHost * sharing.hostsPerMachine) / cores;
  auto model = coll::costModelFor(perHost, hosts, sharing);  // ranks numbered host by host
  if (!model.isOk()) {
    std::fprintf(stderr, "coll-info --tuning: %s\n", model.status().message().c_str());
    return 1;
  }
  CostModel m = *model;
  std::printf("# coll tuner: alpha %.3f us, switch %.3f us, beta %.2f GB/s, gamma %.2f GB/s, contention %.2f\n",
              m.alphaUs, m.switchUs, m.betaGBs, m.gammaGBs, m.contention);
  std::printf("# step weights when oversubscribed:");
  for (int a = 0; a < kNumAlgorithms; ++a)
    std::printf(" %s %.2f", algorithmName(static_cast<Algorithm>(a)), m.stepWeight[a]);
  std::printf("\n# bandwidth weights:");
  for (int a = 0; a < kNumAlgorithms; ++a)
    std::printf(" %s %.2f", algorithmName(static_cast<Algorithm>(a)), m.bwWeight[a]);
  std::printf("\n# COLL_ALGO=%s\n\n", spec.c_str());
  bool any = false;
  for (int c = 0; c < 6; ++c) {
    auto coll = static_cast<Collective>(c);
    if (!only.empty() && only != collectiveName(coll)) continue;
    printTable(coll, perHost, hosts, m, filter, proto);
    any = true;
  }
  if (!any) return usage(("unknown collective " + only).c_str());
  return 0;
}

}  // namespace collinfo
