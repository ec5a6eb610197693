#include "topo/paths.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <tuple>

namespace coll::topo {
namespace {

// Figures for links whose speed the machine does not report. PCIe: Gen4 x16's 32 GB/s less
// protocol overhead. Inter-socket: what one direction of a UPI/Infinity Fabric link pair
// commonly sustains for device traffic. Latencies are NCCL's LL per-hop constants for NVLink
// and PCI (src/graph/tuning.cc), plus a hop per bridge crossed.
constexpr double kPciDefaultGBs = 24;
constexpr double kSocketGBs = 20;
constexpr double kLocalGBs = 1000;  // within one device or NUMA node: not a link
constexpr double kNvlLatencyUs = 0.5, kPciLatencyUs = 1.0, kBridgeLatencyUs = 0.5, kSocketLatencyUs = 1.5;

bool isVirtual(const Nic& n) { return n.kind == "virtual" || n.kind == "loopback"; }

const PciPlace* placeOf(const System& s, Endpoint e) {
  if (e.kind == Endpoint::kGpu) return &s.gpus.at(e.index).pci;
  if (e.kind == Endpoint::kNic) return &s.nics.at(e.index).pci;
  return nullptr;
}

int numaOfEndpoint(const System& s, Endpoint e) {
  const PciPlace* p = placeOf(s, e);
  return p ? numaOf(s, *p) : e.index;
}

double linkOf(const PciPlace* p) { return p && p->linkGBs > 0 ? p->linkGBs : kPciDefaultGBs; }

Path pciPath(const System& s, Endpoint a, Endpoint b) {
  const PciPlace *pa = placeOf(s, a), *pb = placeOf(s, b);
  double bw = std::min(pa ? linkOf(pa) : kLocalGBs, pb ? linkOf(pb) : kLocalGBs);
  bool samePackage = packageOf(s, numaOfEndpoint(s, a)) == packageOf(s, numaOfEndpoint(s, b));
  // A device with no chain (virtual, or a NUMA node) meets everything at its host bridge.
  size_t common = 0;
  if (pa && pb)
    while (common < pa->chain.size() && common < pb->chain.size() && pa->chain[common] == pb->chain[common]) ++common;
  if (common == 0) {
    if (samePackage) return {PathType::kPhb, bw, kPciLatencyUs + kBridgeLatencyUs};
    return {PathType::kSys, std::min(bw, kSocketGBs), kPciLatencyUs + kSocketLatencyUs};
  }
  if (common == 1) return {PathType::kPhb, bw, kPciLatencyUs + kBridgeLatencyUs};
  if (common == pa->chain.size() && common == pb->chain.size()) return {PathType::kPix, bw, kPciLatencyUs};
  return {PathType::kPxb, bw, kPciLatencyUs + kBridgeLatencyUs * static_cast<double>(pa->chain.size() - common)};
}

}  // namespace

const char* pathName(PathType t) {
  static const char* const names[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET"};
  return names[static_cast<int>(t)];
}

namespace {

// "00000000:18:00.0" and "0000:18:00.0" alike: lower case, the domain without its leading zeros.
std::string normalBusId(const std::string& id) {
  std::string out;
  for (char c : id) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t colon = out.find(':');
  if (colon == std::string::npos || out.find(':', colon + 1) == std::string::npos) return out;
  size_t first = out.find_first_not_of('0');
  if (first >= colon) first = colon - 1;  // domain 0
  return out.substr(first);
}

}  // namespace

int nicIndexOf(const System& s, const std::string& busId) {
  std::string want = normalBusId(busId);
  for (size_t i = 0; i < s.nics.size(); ++i)
    if (!want.empty() && !s.nics[i].pci.busId.empty() && normalBusId(s.nics[i].pci.busId) == want)
      return static_cast<int>(i);
  for (size_t i = 0; i < s.nics.size(); ++i)
    if (!busId.empty() && (s.nics[i].name == busId || s.nics[i].netdev == busId)) return static_cast<int>(i);
  return -1;
}

namespace {

int gpuIndexOf(const System& s, const std::string& busId) {
  std::string want = normalBusId(busId);
  for (size_t i = 0; i < s.gpus.size(); ++i)
    if (!want.empty() && normalBusId(s.gpus[i].pci.busId) == want) return static_cast<int>(i);
  return -1;
}

}  // namespace

bool gpuPath(const System& s, const std::string& busA, const std::string& busB, PathType* out) {
  int a = gpuIndexOf(s, busA), b = gpuIndexOf(s, busB);
  if (a < 0 || b < 0) return false;
  *out = pathBetween(s, {Endpoint::kGpu, a}, {Endpoint::kGpu, b}).type;
  return true;
}

bool parsePathType(const std::string& name, PathType* out) {
  for (int t = 0; t <= static_cast<int>(PathType::kNet); ++t) {
    const char* n = pathName(static_cast<PathType>(t));
    if (name.size() == std::strlen(n) && strncasecmp(name.c_str(), n, name.size()) == 0)
      return *out = static_cast<PathType>(t), true;
  }
  return false;
}

Path pathBetween(const System& s, Endpoint a, Endpoint b) {
  if (a.kind == b.kind && a.index == b.index) return {PathType::kLoc, kLocalGBs, 0};
  if (a.kind == Endpoint::kGpu && b.kind == Endpoint::kGpu) {
    const Gpu &ga = s.gpus.at(a.index), &gb = s.gpus.at(b.index);
    int links = 0;
    for (const Gpu::Link& l : ga.nvlinks)
      if (l.peerBusId == gb.pci.busId) links += l.count;
    if (links == 0 && ga.nvswitchLinks > 0 && gb.nvswitchLinks > 0)
      links = std::min(ga.nvswitchLinks, gb.nvswitchLinks);
    if (links > 0) return {PathType::kNvl, links * std::min(ga.nvlinkGBsPerLink, gb.nvlinkGBsPerLink), kNvlLatencyUs};
  }
  if (a.kind == Endpoint::kNuma && b.kind == Endpoint::kNuma) {
    if (packageOf(s, a.index) == packageOf(s, b.index)) return {PathType::kPhb, kSocketGBs * 2, kBridgeLatencyUs};
    return {PathType::kSys, kSocketGBs, kSocketLatencyUs};
  }
  return pciPath(s, a, b);
}

std::vector<int> assignNics(const System& s, const std::vector<Endpoint>& endpoints) {
  std::vector<int> out(endpoints.size(), -1);
  bool anyReal = std::any_of(s.nics.begin(), s.nics.end(), [](const Nic& n) { return !isVirtual(n); });
  std::vector<int> load(s.nics.size(), 0);
  for (size_t e = 0; e < endpoints.size(); ++e) {
    // (path type, -speed, load, index): the smallest wins.
    std::tuple<int, double, int, int> best{1 << 30, 0, 0, -1};
    for (size_t i = 0; i < s.nics.size(); ++i) {
      const Nic& n = s.nics[i];
      if (anyReal && isVirtual(n)) continue;
      Path p = pathBetween(s, endpoints[e], Endpoint{Endpoint::kNic, static_cast<int>(i)});
      std::tuple<int, double, int, int> key{static_cast<int>(p.type), -n.speedGBs, load[i], static_cast<int>(i)};
      if (key < best) best = key;
    }
    int pick = std::get<3>(best);
    out[e] = pick;
    if (pick >= 0) ++load[pick];
  }
  return out;
}

std::vector<int> ringOrder(const std::vector<RankPlace>& ranks) {
  std::map<std::string, int> hostOrder;  // host -> its lowest rank
  for (size_t r = 0; r < ranks.size(); ++r) hostOrder.emplace(ranks[r].hostId, static_cast<int>(r));
  std::vector<int> order(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const RankPlace &a = ranks[x], &b = ranks[y];
    return std::make_tuple(hostOrder[a.hostId], a.package, a.numa, a.gpu, x) <
           std::make_tuple(hostOrder[b.hostId], b.package, b.numa, b.gpu, y);
  });
  return order;
}

}  // namespace coll::topo
