// coll-info: what this build of coll is, what it finds on this machine, and every parameter with
// its value and where the value came from. --check runs a bootstrap self-check under a launcher.
#include <getopt.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "base/ifaddr.h"
#include "base/param.h"
#include "coll-info/selfcheck.h"
#include "coll-info/tuning.h"
#include "coll/coll.h"
#include "common/option_error.h"
#include "topo/cpu_place.h"
#include "topo/cuda_probe.h"
#include "topo/host_system.h"
#include "topo/ib_probe.h"
#include "transport/transport.h"

namespace {

const char* kUsage =
    "usage: coll-info [--params | --check | --tuning [options] | -h, --help]\n"
    "  (none)    build, machine, interfaces and every COLL_* parameter\n"
    "  --params  only the parameters: name, value, source, description\n"
    "  --check   bootstrap self-check; run under a launcher: coll-run -n 4 coll-info --check\n"
    "  --tuning [-n ranks-per-host] [--hosts H] [--cores C] [--shared] [-c collective]\n"
    "            the tuner's predicted time per algorithm and its plan (algorithm, protocol,\n"
    "            chunk), 8 B to 256 MiB; each host has C cores (default: this process's), or\n"
    "            with --shared all hosts share one machine of C cores (network namespaces)\n";

void printParams() {
  std::printf("Parameters (value [source]):\n");
  for (const auto* p : coll::param::all()) {
    bool fromEnv = p->source() == coll::param::Source::kEnv;
    std::string value = p->text().empty() ? "(unset)" : p->text();
    std::printf("  %-26s = %-12s [%s]\n      %s\n", p->name(), value.c_str(), fromEnv ? "env" : "default", p->doc());
  }
  auto unknown = coll::param::unknownEnvNames();
  for (const auto& n : unknown) std::printf("  %-26s is set but is not a coll parameter (typo?)\n", n.c_str());
}

void printMachine() {
  int version = 0;
  (void)collGetVersion(&version);
  std::printf("coll %d.%d.%d (version code %d)\n", version / 10000, (version / 100) % 100, version % 100, version);

  const auto& cuda = coll::topo::cudaInfo();
  std::printf("CUDA:        %s\n",
              cuda.deviceCount > 0
                  ? fmt::format("{} device(s), driver {}", cuda.deviceCount, cuda.driverVersion).c_str()
                  : fmt::format("none ({})", cuda.why).c_str());
  const auto& ib = coll::topo::ibInfo();
  std::string ibText = ib.devices.empty() ? fmt::format("none ({})", ib.why) : fmt::format("{}", ib.devices.size());
  for (const auto& d : ib.devices) ibText += " " + d;
  std::printf("InfiniBand:  %s\n", ibText.c_str());

  auto sys = coll::localSystem();  // what the runtime sees (COLL_TOPO_FILE included); coll-topo shows all of it
  if (sys.isOk()) {
    int cores = 0;
    uint64_t memory = 0;
    for (const auto& n : sys->numa) cores += n.cores, memory += n.memoryBytes;
    std::printf("Machine:     %d package(s), %zu NUMA node(s), %d core(s), %.1f GiB [%s]\n", sys->packages,
                sys->numa.size(), cores, memory / 1073741824.0, sys->source.c_str());
  } else {
    std::printf("Machine:     unknown (%s)\n", sys.status().message().c_str());
  }

  // The interface this process would use as a rank, chosen as the runtime chooses it.
  bool byLocality = false;
  auto chosen = coll::socketInterface(coll::topo::cpuPlace().numa, &byLocality);
  std::printf("Interfaces:\n");
  for (const auto& i : coll::net::listInterfaces()) {
    bool sel = chosen.isOk() && chosen->name == i.name && chosen->address.hostString() == i.address.hostString();
    std::printf("  %c %-12s %s%s\n", sel ? '*' : ' ', i.name.c_str(), i.address.hostString().c_str(),
                i.loopback ? " (loopback)" : "");
  }
  if (!chosen.isOk())
    std::printf("  no interface selected: %s\n", chosen.status().message().c_str());
  else
    std::printf("  (* = used for bootstrap and TCP traffic%s; COLL_SOCKET_IFNAME selects)\n",
                byLocality ? ", the closest to this process's NUMA node" : "");
  // The network between hosts (COLL_NET, COLL_NET_PLUGIN), as a communicator would choose it.
  auto network = coll::transport::describeNetwork();
  std::printf("Network:     %s\n",
              network.isOk() ? network->c_str() : ("unusable: " + network.status().message()).c_str());
  for (const std::string& line : coll::transport::describeNetworkDevices()) std::printf("  %s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // --tuning has options of its own: it comes first and parses the rest.
  if (argc >= 2 && std::strcmp(argv[1], "--tuning") == 0) return collinfo::printTuning(argc, argv);
  enum : int { kParams = 256, kCheck, kTuning };
  static const struct option kLongOptions[] = {
      {"params", no_argument, nullptr, kParams},
      {"check", no_argument, nullptr, kCheck},
      {"tuning", no_argument, nullptr, kTuning},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  auto usageError = [](const std::string& why) {
    std::fprintf(stderr, "coll-info: %s\n\n%s", why.c_str(), kUsage);
    return 2;
  };
  opterr = 0;  // our errors name the option
  int mode = 0;
  std::string modeName;
  for (;;) {
    int longIndex = -1;
    int c = getopt_long(argc, argv, ":h", kLongOptions, &longIndex);
    if (c == -1) break;
    if (c == 'h') {
      std::printf("%s", kUsage);
      return 0;
    }
    if (c == '?' || c == ':') return usageError(colltools::optionError(c, argv, kLongOptions));
    std::string name = std::string("--") + kLongOptions[longIndex].name;
    if (c == kTuning) return usageError("--tuning comes first: coll-info --tuning [options]");
    if (mode != 0 && mode != c) return usageError(modeName + " and " + name + ": one at a time");
    mode = c, modeName = name;
  }
  if (optind < argc) return usageError(std::string("unexpected argument ") + argv[optind]);
  if (mode == kCheck) return collinfo::runSelfCheck();
  if (mode == kParams) {
    printParams();
    return 0;
  }
  printMachine();
  std::printf("\n");
  printParams();
  auto valid = coll::param::validateAll();
  if (!valid.isOk()) {
    std::fprintf(stderr, "coll-info: %s\n", valid.message().c_str());
    return 1;
  }
  return 0;
}
