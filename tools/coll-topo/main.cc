// coll-topo: shows the machine as coll sees it (a tree of packages, NUMA nodes, the PCI bridges
// with the GPUs and NICs under them, and the virtual interfaces), the path matrix between GPUs,
// NICs and NUMA nodes (nvidia-smi topo -m's names), and which NIC each GPU or NUMA node uses.
//
//   coll-topo                      this host (or COLL_TOPO_FILE's)
//   coll-topo --load dgx.json      a topology file instead
//   coll-topo --dump out.json      also write the topology file (as COLL_TOPO_DUMP_FILE does)
//   coll-topo --json               print the file's JSON instead of the tables
#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../common/option_error.h"
#include "base/params.h"
#include "topo/host_system.h"
#include "topo/paths.h"
#include "topo/topo_file.h"

namespace {

using coll::topo::Endpoint;
using coll::topo::System;

std::string bytes(uint64_t b) { return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1 << 30)); }

std::string speed(double GBs) { return GBs > 0 ? fmt::format("{:g} GB/s", GBs) : "speed unknown"; }

std::string nicLine(const coll::topo::Nic& n) {
  std::string s = fmt::format("NIC {} ({}", n.name, n.kind);
  if (!n.netdev.empty() && n.netdev != n.name) s += ", " + n.netdev;
  if (!n.pci.busId.empty()) s += ", " + n.pci.busId;
  s += ", " + speed(n.speedGBs);
  if (n.kind == "ib" || n.kind == "roce") s += fmt::format(", port {}", n.port);
  return s + ")";
}

std::string gpuLine(const coll::topo::Gpu& g) {
  std::string s = fmt::format("GPU {} {} ({}", g.index, g.name, g.pci.busId);
  if (g.nvswitchLinks) s += fmt::format(", {} NVLinks to NVSwitch", g.nvswitchLinks);
  for (const auto& l : g.nvlinks) s += fmt::format(", {} NVLinks to {}", l.count, l.peerBusId);
  return s + ")";
}

// Devices hang under their bridge chain, grouped by NUMA node.
void printTree(const System& s) {
  std::printf("%s: %d package(s), %zu NUMA node(s), %zu GPU(s), %zu NIC(s)  [%s]\n", s.host.c_str(), s.packages,
              s.numa.size(), s.gpus.size(), s.nics.size(), s.source.c_str());
  for (int p = 0; p < s.packages; ++p) {
    std::printf("  Package %d\n", p);
    for (const auto& n : s.numa) {
      if (n.package != p) continue;
      std::printf("    NUMA %d: %d cores, %s\n", n.id, n.cores, bytes(n.memoryBytes).c_str());
      // chain -> devices under it
      std::map<std::vector<std::string>, std::vector<std::string>> under;
      for (const auto& g : s.gpus)
        if (coll::topo::numaOf(s, g.pci) == n.id && !g.pci.chain.empty()) under[g.pci.chain].push_back(gpuLine(g));
      for (const auto& nic : s.nics)
        if (coll::topo::numaOf(s, nic.pci) == n.id && !nic.pci.chain.empty())
          under[nic.pci.chain].push_back(nicLine(nic));
      std::vector<std::string> printed;
      for (const auto& [chain, devices] : under) {
        for (size_t d = 0; d < chain.size(); ++d) {
          std::vector<std::string> prefix(chain.begin(), chain.begin() + d + 1);
          std::string key = fmt::format("{}", fmt::join(prefix, "/"));
          if (std::find(printed.begin(), printed.end(), key) != printed.end()) continue;
          printed.push_back(key);
          std::printf("%*s%s\n", static_cast<int>(6 + 2 * d), "", chain[d].c_str());
        }
        for (const auto& line : devices)
          std::printf("%*s%s\n", static_cast<int>(6 + 2 * chain.size()), "", line.c_str());
      }
    }
  }
  for (const auto& g : s.gpus)
    if (g.pci.chain.empty()) std::printf("  Not in the PCI tree: %s\n", gpuLine(g).c_str());
  bool header = false;
  for (const auto& nic : s.nics)
    if (nic.pci.chain.empty()) {
      if (!header) std::printf("  Virtual (no PCI device):\n"), header = true;
      std::printf("    %s\n", nicLine(nic).c_str());
    }
  if (!s.error.empty()) std::printf("  Note: %s\n", s.error.c_str());
}

void printPaths(const System& s) {
  std::vector<std::pair<std::string, Endpoint>> eps;
  for (size_t i = 0; i < s.gpus.size(); ++i)
    eps.push_back({fmt::format("GPU{}", s.gpus[i].index), {Endpoint::kGpu, static_cast<int>(i)}});
  for (size_t i = 0; i < s.nics.size(); ++i)
    if (s.nics[i].kind != "loopback") eps.push_back({s.nics[i].name, {Endpoint::kNic, static_cast<int>(i)}});
  for (const auto& n : s.numa) eps.push_back({fmt::format("NUMA{}", n.id), {Endpoint::kNuma, n.id}});
  size_t w = 6;
  for (const auto& e : eps) w = std::max(w, e.first.size() + 1);
  std::printf(
      "\nPaths (LOC same device, NVL NVLink, PIX one PCIe switch, PXB several switches, PHB host bridge,\n"
      "SYS across sockets):\n%*s",
      static_cast<int>(w), "");
  for (const auto& e : eps) std::printf("%*s", static_cast<int>(w), e.first.c_str());
  std::printf("\n");
  for (const auto& a : eps) {
    std::printf("%-*s", static_cast<int>(w), a.first.c_str());
    for (const auto& b : eps)
      std::printf("%*s", static_cast<int>(w),
                  coll::topo::pathName(coll::topo::pathBetween(s, a.second, b.second).type));
    std::printf("\n");
  }
  std::vector<Endpoint> users;
  std::vector<std::string> names;
  for (size_t i = 0; i < s.gpus.size(); ++i)
    users.push_back({Endpoint::kGpu, static_cast<int>(i)}), names.push_back(fmt::format("GPU{}", s.gpus[i].index));
  for (const auto& n : s.numa) users.push_back({Endpoint::kNuma, n.id}), names.push_back(fmt::format("NUMA{}", n.id));
  std::vector<int> nic = coll::topo::assignNics(s, users);
  std::printf("\nNIC by locality:\n");
  for (size_t i = 0; i < users.size(); ++i) {
    if (nic[i] < 0) {
      std::printf("  %s -> none\n", names[i].c_str());
      continue;
    }
    auto p = coll::topo::pathBetween(s, users[i], {Endpoint::kNic, nic[i]});
    std::printf("  %s -> %s (%s)\n", names[i].c_str(), s.nics[nic[i]].name.c_str(), coll::topo::pathName(p.type));
  }
}

const char kUsage[] =
    "usage: coll-topo [--load FILE] [--dump FILE] [--json]\n"
    "  (none)        this host's topology (or COLL_TOPO_FILE's): tree, path matrix, NIC by locality\n"
    "  --load FILE   a topology file instead of this host's\n"
    "  --dump FILE   also write the topology file (as COLL_TOPO_DUMP_FILE does)\n"
    "  --json        print the topology file's JSON instead of the tables\n"
    "  -h, --help    this text\n";

enum : int { kLoad = 256, kDump, kJson };

const struct option kLongOptions[] = {
    {"load", required_argument, nullptr, kLoad},
    {"dump", required_argument, nullptr, kDump},
    {"json", no_argument, nullptr, kJson},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

int usageError(const std::string& why) {
  std::fprintf(stderr, "coll-topo: %s\n\n%s", why.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string load, dump;
  bool json = false;
  opterr = 0;  // our errors name the option
  for (;;) {
    int c = getopt_long(argc, argv, ":h", kLongOptions, nullptr);
    if (c == -1) break;
    switch (c) {
      case 'h':
        std::fputs(kUsage, stdout);
        return 0;
      case kLoad:
        load = optarg;
        break;
      case kDump:
        dump = optarg;
        break;
      case kJson:
        json = true;
        break;
      default:  // '?' or ':'
        return usageError(colltools::optionError(c, argv, kLongOptions));
    }
  }
  if (optind < argc) return usageError(std::string("unexpected argument ") + argv[optind]);
  System s;
  std::string error;
  if (!load.empty()) {
    if (!coll::topo::loadSystemFile(load, &s, &error)) return std::fprintf(stderr, "coll-topo: %s\n", error.c_str()), 1;
  } else {
    auto r = coll::localSystem();
    if (!r.isOk()) return std::fprintf(stderr, "coll-topo: %s\n", r.status().message().c_str()), 1;
    s = *r;
  }
  if (dump.empty()) dump = coll::params::kTopoDumpFile.get();
  if (!dump.empty() && !coll::topo::saveSystemFile(dump, s, &error))
    return std::fprintf(stderr, "coll-topo: %s\n", error.c_str()), 1;
  if (json) return std::fputs(coll::topo::systemToJson(s).c_str(), stdout), 0;
  printTree(s);
  printPaths(s);
  return 0;
}
