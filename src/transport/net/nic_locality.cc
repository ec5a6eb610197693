#include "transport/net/nic_locality.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>

#include "base/log.h"
#include "topo/host_system.h"
#include "topo/paths.h"

namespace coll::transport::net {

std::vector<int> nearestDevices(const std::vector<DeviceSpot>& devices, const Config& config, std::string* why) {
  std::vector<int> all(devices.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  if (devices.size() <= 1) return all;
  Result<topo::System> sys = localSystem();
  if (!sys.isOk()) {
    if (why) *why = "no topology (" + sys.status().message() + ")";
    return all;
  }
  // This rank's place: its GPU when it has one the topology knows, else its NUMA node.
  topo::Endpoint me{topo::Endpoint::kNuma, config.numa >= 0 ? config.numa : (sys->numa.empty() ? 0 : sys->numa[0].id)};
  std::string from = "NUMA node " + std::to_string(me.index);
  for (size_t g = 0; g < sys->gpus.size(); ++g)
    if (config.cudaDev >= 0 && sys->gpus[g].index == config.cudaDev) {
      me = {topo::Endpoint::kGpu, static_cast<int>(g)};
      from = "GPU " + std::to_string(config.cudaDev);
    }
  struct Rank {
    int type;
    double gbs;
  };
  std::vector<Rank> rank(devices.size(), Rank{static_cast<int>(topo::PathType::kNet) + 1, 0});
  bool placed = false;
  for (size_t i = 0; i < devices.size(); ++i) {
    // pciPath ends in the device's bus id ("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0").
    const std::string& path = devices[i].pciPath;
    std::string bus = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    int nic = topo::nicIndexOf(*sys, bus);
    if (nic < 0) nic = topo::nicIndexOf(*sys, devices[i].name);
    if (nic < 0) continue;
    topo::Path p = topo::pathBetween(*sys, me, {topo::Endpoint::kNic, nic});
    rank[i] = {static_cast<int>(p.type), p.GBs};
    placed = true;
  }
  if (!placed) {
    if (why) *why = "the topology places none of the devices (" + sys->source + ")";
    return all;
  }
  Rank best = rank[0];
  for (const Rank& r : rank)
    if (r.type < best.type || (r.type == best.type && r.gbs > best.gbs)) best = r;
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i)
    if (rank[i].type == best.type && std::abs(rank[i].gbs - best.gbs) <= 1e-9 * std::max(1.0, best.gbs))
      out.push_back(static_cast<int>(i));
  if (why) {
    std::string names;
    for (int i : out) names += (names.empty() ? "" : ",") + devices[static_cast<size_t>(i)].name;
    *why = fmt::format("{} ({} from {})", names, topo::pathName(static_cast<topo::PathType>(best.type)), from);
  }
  return out;
}

std::string ucxNetDevices(const std::vector<topo::IbPort>& ports, const Config& config,
                          const std::function<std::string(const std::string&)>& pciPathOf, std::string* why) {
  std::vector<const topo::IbPort*> active;
  for (const topo::IbPort& p : ports)
    if (p.active) active.push_back(&p);
  if (active.size() < 2) {
    if (why) *why = active.empty() ? "no active RDMA port" : "one active RDMA port";
    return "";
  }
  std::vector<DeviceSpot> spots;
  for (const topo::IbPort* p : active) spots.push_back({p->device, pciPathOf(p->device)});
  std::vector<int> near = nearestDevices(spots, config, why);
  if (near.size() == active.size()) return "";
  std::string list;
  for (int i : near) {
    const topo::IbPort& p = *active[static_cast<size_t>(i)];
    list += fmt::format("{}{}:{}", list.empty() ? "" : ",", p.device, p.port);
  }
  return list;
}

std::string sysfsPciPath(const std::string& device) {
  char resolved[PATH_MAX];
  std::string link = "/sys/class/infiniband/" + device + "/device";
  return realpath(link.c_str(), resolved) ? std::string(resolved) : std::string();
}

}  // namespace coll::transport::net
